//! JSON-RPC 2.0 envelopes. Incoming messages are read into [`Message`], whose `id`, `params`,
//! `result` and `error` stay raw JSON slices of the buffer they arrived in; outgoing messages are
//! [`Rope`]s with the caller's id spliced in front of a raw payload, so tool results are never
//! parsed, rebuilt or copied on their way through.

use super::errors::RpcError;
use super::json::{Json, Rope, json_string};
use bytes::Bytes;
use bytestring::ByteString;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// Any JSON-RPC message: request, notification or response.
#[derive(Debug)]
pub struct Message {
    pub jsonrpc: Option<String>,
    pub id: Option<Json>,
    pub method: Option<String>,
    pub params: Option<Json>,
    pub result: Option<Json>,
    pub error: Option<Json>,
}

/// The message as parsed, its raw members borrowed from the buffer.
#[derive(Deserialize)]
struct Parsed<'a> {
    #[serde(default)]
    jsonrpc: Option<String>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// Keeps a member that is present, even when it is `null` (plain `Option` would turn it into None).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

/// What kind of message a parsed [`Message`] is.
#[derive(Debug, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    Response,
}

impl Message {
    /// Parses a message from a buffer of its own (copied once, then sliced).
    pub fn parse(bytes: &[u8]) -> Result<Message, RpcError> {
        Message::parse_bytes(&Bytes::copy_from_slice(bytes))
    }

    /// Parses a message whose raw members become slices of `bytes` (no copy).
    pub fn parse_bytes(bytes: &Bytes) -> Result<Message, RpcError> {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        match first {
            None => return Err(RpcError::parse_error("empty body")),
            Some(b'[') => {
                // Still check that it is JSON, so that garbage is reported as a parse error.
                serde_json::from_slice::<&RawValue>(bytes).map_err(RpcError::parse_error)?;
                return Err(RpcError::invalid_request("JSON-RPC batches are not supported"));
            }
            Some(b'{') => {}
            Some(_) => {
                serde_json::from_slice::<&RawValue>(bytes).map_err(RpcError::parse_error)?;
                return Err(RpcError::invalid_request("a JSON-RPC message must be a JSON object"));
            }
        }
        // Checked to be UTF-8 once, here: the parts are then slices of it, handed out as text with
        // no second check.
        let text = ByteString::try_from(bytes.clone()).ok();
        let parsed: Result<Parsed, serde_json::Error> = match &text {
            Some(text) => serde_json::from_str(text),
            // Not UTF-8 throughout (the bytes in a member the envelope does not read): what
            // serde_json makes of the bytes, as for any message, with the parts copied.
            None => serde_json::from_slice(bytes),
        };
        let parsed = parsed.map_err(|e| {
            if e.is_data() { RpcError::invalid_request(format!("not a valid JSON-RPC message: {e}")) } else { RpcError::parse_error(e) }
        })?;
        let own = |raw: Option<&RawValue>| {
            raw.map(|r| match &text {
                Some(text) => Json::slice_of(text, r),
                None => Json::from_raw(r.to_owned()),
            })
        };
        Ok(Message {
            id: own(parsed.id),
            params: own(parsed.params),
            result: own(parsed.result),
            error: own(parsed.error),
            jsonrpc: parsed.jsonrpc,
            method: parsed.method,
        })
    }

    /// Classifies the message and checks the envelope rules every message must follow.
    pub fn kind(&self) -> Result<Kind, RpcError> {
        if self.jsonrpc.as_deref() != Some("2.0") {
            return Err(RpcError::invalid_request("\"jsonrpc\" must be \"2.0\""));
        }
        match (&self.method, &self.id) {
            (Some(_), Some(id)) => {
                valid_id(id)?;
                Ok(Kind::Request)
            }
            (Some(_), None) => Ok(Kind::Notification),
            (None, Some(_)) if self.result.is_some() || self.error.is_some() => Ok(Kind::Response),
            _ => Err(RpcError::invalid_request("a JSON-RPC message needs a \"method\" or a \"result\"/\"error\"")),
        }
    }
}

/// A request id must be a string or an integer (never null, never fractional).
pub fn valid_id(id: &Json) -> Result<(), RpcError> {
    let text = id.get();
    let ok = match text.as_bytes().first() {
        Some(b'"') => true,
        Some(b'-' | b'0'..=b'9') => text.bytes().skip(1).all(|b| b.is_ascii_digit()),
        _ => false,
    };
    if ok { Ok(()) } else { Err(RpcError::invalid_request("the request id must be a string or an integer")) }
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<raw>}`
pub fn result_message(id: &Json, result: &Json) -> Rope {
    envelope(Some(id), "result", result.as_bytes().clone())
}

/// `{"jsonrpc":"2.0","id":<id>,"error":<raw>}`; without an id when the request's id was unreadable.
pub fn error_message_raw(id: Option<&Json>, error: &Json) -> Rope {
    envelope(id, "error", error.as_bytes().clone())
}

pub fn error_message(id: Option<&Json>, error: &RpcError) -> Vec<u8> {
    envelope(id, "error", Bytes::from(error.to_value().to_string())).into_vec()
}

/// A notification without params (`{"jsonrpc":"2.0","method":...}`).
pub fn bare_notification(method: &str) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","method":{}}}"#, json_string(method)).into_bytes()
}

/// `{"jsonrpc":"2.0","method":<method>,"params":<raw>}`
pub fn notification_message(method: &str, params: &Json) -> Vec<u8> {
    method_message(None, method, params)
}

/// `{"jsonrpc":"2.0","id":<id>,"method":<method>,"params":<raw>}`
pub fn request_message(id: &str, method: &str, params: &Json) -> Vec<u8> {
    method_message(Some(id), method, params)
}

/// A request line with numeric `id` whose params object is written straight into the message
/// (the one copy its members make on their way to the upstream), with `_meta` set to `meta`
/// when given: the same text as setting it on a copy first, written in one pass without the copy.
pub fn request_message_obj(
    id: u64,
    method: &str,
    params: &super::rawobj::RawObject,
    meta: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<Vec<u8>, serde_json::Error> {
    use std::io::Write;
    let mut out = Vec::with_capacity(params.written_len() + method.len() + if meta.is_some() { 256 } else { 48 });
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    write!(out, "{id}").map_err(serde_json::Error::io)?;
    out.extend_from_slice(b",\"method\":");
    out.extend_from_slice(json_string(method).as_bytes());
    out.extend_from_slice(b",\"params\":");
    match meta {
        Some(meta) => params.write_setting(&mut out, "_meta", meta)?,
        None => params.write_to(&mut out),
    }
    out.push(b'}');
    Ok(out)
}

fn method_message(id: Option<&str>, method: &str, params: &Json) -> Vec<u8> {
    let mut out = Vec::with_capacity(params.get().len() + method.len() + 48);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",");
    if let Some(id) = id {
        out.extend_from_slice(b"\"id\":");
        out.extend_from_slice(id.as_bytes());
        out.push(b',');
    }
    out.extend_from_slice(b"\"method\":");
    out.extend_from_slice(json_string(method).as_bytes());
    out.extend_from_slice(b",\"params\":");
    out.extend_from_slice(params.get().as_bytes());
    out.push(b'}');
    out
}

/// The envelope in two small pieces around the payload, which is not copied.
fn envelope(id: Option<&Json>, member: &str, payload: Bytes) -> Rope {
    let id = id.map(Json::get).unwrap_or("null");
    let mut head = Vec::with_capacity(id.len() + member.len() + 28);
    head.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    head.extend_from_slice(id.as_bytes());
    head.extend_from_slice(b",\"");
    head.extend_from_slice(member.as_bytes());
    head.extend_from_slice(b"\":");
    let mut out = Rope::new();
    out.push(head);
    out.push(payload);
    out.push(Bytes::from_static(b"}"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::{INVALID_REQUEST, PARSE_ERROR};

    #[test]
    fn classifies_messages() {
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#).unwrap();
        assert_eq!(m.kind().unwrap(), Kind::Request);
        let m = Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#).unwrap();
        assert_eq!(m.kind().unwrap(), Kind::Notification);
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert_eq!(m.kind().unwrap(), Kind::Response);
    }

    #[test]
    fn rejects_bad_envelopes() {
        assert_eq!(Message::parse(b"{nope").unwrap_err().code, PARSE_ERROR);
        assert_eq!(Message::parse(b"").unwrap_err().code, PARSE_ERROR);
        assert_eq!(Message::parse(b"[{}]").unwrap_err().code, INVALID_REQUEST);
        assert_eq!(Message::parse(b"[oops").unwrap_err().code, PARSE_ERROR);
        assert_eq!(Message::parse(b"42").unwrap_err().code, INVALID_REQUEST);
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#).unwrap();
        assert_eq!(m.kind().unwrap_err().code, INVALID_REQUEST);
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#).unwrap();
        assert_eq!(m.kind().unwrap_err().code, INVALID_REQUEST);
        let m = Message::parse(br#"{"id":1,"method":"x"}"#).unwrap();
        assert_eq!(m.kind().unwrap_err().code, INVALID_REQUEST);
    }

    /// The parts of a message are slices of its bytes; a message whose bytes are not all UTF-8
    /// is read as it always was (serde_json does not check a member the envelope skips), its
    /// parts copied, and one whose envelope holds such a byte is a parse error.
    #[test]
    fn parts_are_slices_and_a_stray_byte_reads_as_before() {
        let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":7,"result":{"a":1}}"#);
        let msg = Message::parse_bytes(&body).unwrap();
        assert_eq!(msg.result.as_ref().map(|r| r.as_bytes().as_ptr()), Some(body[33..].as_ptr()), "a slice, not a copy");
        let mut skipped = br#"{"jsonrpc":"2.0","id":1,"x":"?","result":{"a":1}}"#.to_vec();
        let at = skipped.iter().position(|b| *b == b'?').unwrap();
        skipped[at] = 0xff;
        let msg = Message::parse_bytes(&Bytes::from(skipped)).unwrap();
        assert_eq!(msg.result.unwrap().get(), r#"{"a":1}"#);
        let mut read = br#"{"jsonrpc":"2.0","id":1,"result":{"a":"?"}}"#.to_vec();
        let at = read.iter().position(|b| *b == b'?').unwrap();
        read[at] = 0xff;
        assert_eq!(Message::parse_bytes(&Bytes::from(read)).unwrap_err().code, PARSE_ERROR);
    }

    #[test]
    fn splices_raw_payloads_verbatim() {
        let msg = Message::parse_bytes(&Bytes::from_static(br#"{"jsonrpc":"2.0","id":"abc","result":{"content":[ ]}}"#)).unwrap();
        let (id, res) = (msg.id.unwrap(), msg.result.unwrap());
        let out = result_message(&id, &res);
        assert_eq!(out.pieces()[1].as_ptr(), res.as_bytes().as_ptr(), "the result is relayed, not copied");
        assert_eq!(out.into_vec(), br#"{"jsonrpc":"2.0","id":"abc","result":{"content":[ ]}}"#.to_vec());
    }
}
