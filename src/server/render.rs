//! Rendering replies for clients: the final JSON-RPC message with the client's id spliced in
//! front of the raw payload, as one `application/json` response or as an SSE stream (one event
//! per message, `X-Accel-Buffering: no`). Upstream error objects are relayed verbatim, except that
//! release-candidate error codes are renumbered to the final ones (never emitted as is).

use crate::protocol::errors::{self, RpcError};
use crate::protocol::jsonrpc;
use crate::protocol::rawobj::RawObject;
use crate::reply::{Event, EventStream, Outcome, Reply};
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use serde_json::value::RawValue;
use std::convert::Infallible;

pub type Body = BoxBody<Bytes, Infallible>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

pub fn json(status: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(full(bytes));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

pub fn error(id: Option<&RawValue>, e: &RpcError) -> Response<Body> {
    with_headers(json(e.status, jsonrpc::error_message(id, e)), e)
}

fn with_headers(mut r: Response<Body>, e: &RpcError) -> Response<Body> {
    for (name, value) in &e.headers {
        if let Ok(v) = http::HeaderValue::from_str(value) {
            r.headers_mut().insert(*name, v);
        }
    }
    r
}

pub fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(full(text));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// The final message for `id`, with the HTTP status it travels with.
pub fn outcome_message(id: &RawValue, outcome: &Outcome) -> (StatusCode, Vec<u8>) {
    match outcome {
        Outcome::Result(raw) => (StatusCode::OK, jsonrpc::result_message(id, raw)),
        Outcome::Error(e) => (e.status, jsonrpc::error_message(Some(id), e)),
        Outcome::UpstreamError(raw) => {
            let (code, fixed) = normalise_upstream_error(raw);
            let status = errors::status_for(code);
            (status, jsonrpc::error_message_raw(Some(id), fixed.as_deref().unwrap_or(raw)))
        }
    }
}

/// Reads an upstream error's code; rewrites release-candidate codes to the final numbers.
fn normalise_upstream_error(raw: &RawValue) -> (i64, Option<Box<RawValue>>) {
    let Ok(mut obj) = serde_json::from_str::<RawObject>(raw.get()) else {
        return (errors::INTERNAL_ERROR, None);
    };
    let code = obj.parse::<i64>("code").and_then(Result::ok).unwrap_or(errors::INTERNAL_ERROR);
    let modern = errors::modernise_rc_code(code);
    if modern == code {
        return (code, None);
    }
    let fixed = obj.set_json("code", &modern).ok().and_then(|_| obj.to_raw().ok());
    (modern, fixed)
}

/// Replaces the line breaks JSON allows as whitespace, so a message fits one line or SSE field.
pub fn one_line(mut msg: Vec<u8>) -> Vec<u8> {
    for b in msg.iter_mut() {
        if *b == b'\n' || *b == b'\r' {
            *b = b' ';
        }
    }
    msg
}

pub fn sse_event(msg: Vec<u8>) -> Bytes {
    let msg = one_line(msg);
    let mut out = Vec::with_capacity(msg.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(&msg);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

pub fn reply(id: Box<RawValue>, reply: Reply) -> Response<Body> {
    match reply {
        Reply::Single(o) => {
            let (status, bytes) = outcome_message(&id, &o);
            match &o {
                Outcome::Error(e) => with_headers(json(status, bytes), e),
                _ => json(status, bytes),
            }
        }
        Reply::Stream(s) => sse(id, s),
    }
}

/// How often an SSE stream that has nothing to say sends a comment, so that proxies and clients
/// keep it open.
pub const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(15);

fn sse(id: Box<RawValue>, stream: EventStream) -> Response<Body> {
    let events = futures_util::stream::unfold(Some((stream, id)), |state| async move {
        let (mut stream, id) = state?;
        let next = tokio::select! {
            ev = stream.next() => ev,
            _ = tokio::time::sleep(KEEPALIVE) => {
                return Some((Ok(Frame::data(Bytes::from_static(b": keepalive\n\n"))), Some((stream, id))));
            }
        };
        match next {
            Some(Event::Notification(n)) => Some((Ok::<_, Infallible>(Frame::data(sse_event(n))), Some((stream, id)))),
            Some(Event::Done(o)) => {
                let (_, bytes) = outcome_message(&id, &o);
                Some((Ok(Frame::data(sse_event(bytes))), None))
            }
            // Never yielded to a client's stream (see `EventStream::with_asks`).
            Some(Event::Ask(_)) => Some((Ok(Frame::data(Bytes::new())), Some((stream, id)))),
            None => None,
        }
    });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(events)));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, http::HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc_codes_are_renumbered_when_relayed() {
        let id = RawValue::from_string("7".into()).unwrap();
        let raw = RawValue::from_string(r#"{"code":-32001,"message":"m"}"#.into()).unwrap();
        let (status, bytes) = outcome_message(&id, &Outcome::UpstreamError(raw));
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(String::from_utf8(bytes).unwrap(), r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32020,"message":"m"}}"#);
        let raw = RawValue::from_string(r#"{"code":-32602,"message":"Unknown tool"}"#.into()).unwrap();
        let (status, bytes) = outcome_message(&id, &Outcome::UpstreamError(raw));
        assert_eq!(status, StatusCode::OK);
        assert!(String::from_utf8(bytes).unwrap().contains("-32602"));
    }

    #[test]
    fn sse_events_are_single_line() {
        let ev = sse_event(b"{\n  \"a\": 1\r\n}".to_vec());
        assert_eq!(&ev[..], b"event: message\ndata: {   \"a\": 1  }\n\n");
    }
}
