//! [`Json`], the text of one JSON value held in a shared [`Bytes`] buffer, and [`Rope`], a
//! message made of such pieces. A received message is parsed without copying: its `id`,
//! `params`, `result` and `error` (and the members of an object that is rewritten) are slices
//! of the buffer the bytes arrived in. A reply is rendered without copying either: the client's
//! id and the envelope around a relayed result are separate pieces of a [`Rope`], which becomes a
//! response body of several frames. So a body crossing the gateway is copied at most once (when
//! a rewritten request is written out for its upstream), however large it is. The text is a
//! [`ByteString`]: `Bytes` checked to be UTF-8 once, when made (free for a slice of another `Json`
//! or a `String`), so [`Json::get`] hands out a `str` without checking it again.

use bytes::Bytes;
use bytestring::ByteString;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::fmt;

/// The text of one JSON value (validated when it was made), cheap to clone and to slice.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Json(ByteString);

impl Json {
    pub const NULL: Json = Json(ByteString::from_static("null"));
    pub const EMPTY_OBJECT: Json = Json(ByteString::from_static("{}"));

    /// The text (a `str` already: no check, no copy).
    pub fn get(&self) -> &str {
        &self.0
    }

    pub fn as_bytes(&self) -> &Bytes {
        self.0.as_bytes()
    }

    pub fn into_bytes(self) -> Bytes {
        self.0.into_bytes()
    }

    /// Takes over a parsed raw value's text without copying it.
    pub fn from_raw(raw: Box<RawValue>) -> Json {
        Json(ByteString::from(Box::<str>::from(raw)))
    }

    /// The piece of `text` that `raw` was parsed from (no copy, no check).
    ///
    /// invariant: `raw` borrows from `text` (it was deserialised from it with `from_str`).
    pub fn slice_of(text: &ByteString, raw: &RawValue) -> Json {
        Json(text.slice_ref(raw.get()))
    }

    /// The piece of this value that `raw`, a value inside it, was parsed from (no copy, no check).
    ///
    /// invariant: `raw` borrows from `self.get()` (it was deserialised from it with `from_str`).
    pub fn slice(&self, raw: &RawValue) -> Json {
        Json::slice_of(&self.0, raw)
    }

    /// The same text in a buffer of its own. A slice keeps the whole buffer it came from alive
    /// (for a received message: the connection's read buffer, which hyper then cannot reuse), so
    /// what outlives the request (a stream's id) is detached first.
    pub fn detached(&self) -> Json {
        Json(ByteString::from(self.get()))
    }

    /// Checks that `text` is one JSON value.
    pub fn from_string(text: String) -> Result<Json, serde_json::Error> {
        serde_json::from_str::<&RawValue>(&text)?;
        Ok(Json(ByteString::from(text)))
    }

    /// Text the gateway wrote as JSON itself (checked to be UTF-8 only).
    pub fn from_utf8(text: Vec<u8>) -> Option<Json> {
        ByteString::try_from(text).ok().map(Json)
    }

    /// The serialisation of `value`.
    pub fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<Json, serde_json::Error> {
        // serde_json writes valid UTF-8 JSON as a `String`, so the text needs no second check.
        serde_json::to_string(value).map(|s| Json(ByteString::from(s)))
    }

    /// Parses the value as `T`.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.get())
    }

    /// The items of an array, as slices of this value's buffer (no copy).
    pub fn items(&self) -> Result<Vec<Json>, serde_json::Error> {
        let raws: Vec<&RawValue> = serde_json::from_str(self.get())?;
        Ok(raws.into_iter().map(|r| self.slice(r)).collect())
    }

    /// The array of `items`, written verbatim.
    pub fn array(items: &[Json]) -> Json {
        let mut out = String::with_capacity(2 + items.iter().map(|i| i.0.len() + 1).sum::<usize>());
        out.push('[');
        for (n, item) in items.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(item.get());
        }
        out.push(']');
        Json(ByteString::from(out))
    }

    /// Whether the text holds a line break (JSON whitespace that one-line framings must replace).
    pub fn has_line_break(&self) -> bool {
        self.0.as_bytes().iter().any(|b| *b == b'\n' || *b == b'\r')
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Only a `RawValue` serialises verbatim; borrowing one re-reads the text (no copy).
        let raw: &RawValue = serde_json::from_str(self.get()).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(d).map(Json::from_raw)
    }
}

impl From<Box<RawValue>> for Json {
    fn from(raw: Box<RawValue>) -> Json {
        Json::from_raw(raw)
    }
}

/// A message as a list of pieces, written out in order: the envelope the gateway makes and the
/// payloads it relays, none of them copied into one buffer.
#[derive(Debug, Default, Clone)]
pub struct Rope(Vec<Bytes>);

impl Rope {
    pub fn new() -> Rope {
        Rope(Vec::with_capacity(3))
    }

    pub fn push(&mut self, piece: impl Into<Bytes>) {
        let piece = piece.into();
        if !piece.is_empty() {
            self.0.push(piece);
        }
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn pieces(&self) -> &[Bytes] {
        &self.0
    }

    pub fn into_pieces(self) -> Vec<Bytes> {
        self.0
    }

    /// The message in one buffer (one copy), e.g. for a line on stdio.
    pub fn into_vec(self) -> Vec<u8> {
        if let [one] = self.0.as_slice() {
            return one.to_vec();
        }
        let mut out = Vec::with_capacity(self.len());
        for p in &self.0 {
            out.extend_from_slice(p);
        }
        out
    }

    /// The same message with JSON's line breaks (whitespace only, as JSON strings cannot hold
    /// raw ones) replaced by spaces, so it fits one line or one SSE `data:` field. Only the
    /// pieces that hold one are copied.
    pub fn one_line(self) -> Rope {
        Rope(
            self.0
                .into_iter()
                .map(|p| {
                    if p.iter().any(|b| *b == b'\n' || *b == b'\r') {
                        Bytes::from(p.iter().map(|b| if *b == b'\n' || *b == b'\r' { b' ' } else { *b }).collect::<Vec<u8>>())
                    } else {
                        p
                    }
                })
                .collect(),
        )
    }
}

impl From<Vec<u8>> for Rope {
    fn from(v: Vec<u8>) -> Rope {
        let mut r = Rope::new();
        r.push(v);
        r
    }
}

/// `s` as a JSON string literal (quoted and escaped).
pub fn json_string(s: &str) -> String {
    // Writing a string cannot fail; the fallback is never taken.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_share_the_buffer_they_came_from() {
        let buf = ByteString::from_static(r#"{"a":[1, 2],"b":"x"}"#);
        #[derive(Deserialize)]
        struct Two<'a> {
            #[serde(borrow)]
            a: &'a RawValue,
        }
        let two: Two = serde_json::from_str(&buf).unwrap();
        let a = Json::slice_of(&buf, two.a);
        assert_eq!(a.get(), "[1, 2]");
        assert_eq!(a.as_bytes().as_ptr(), buf.as_bytes()[5..].as_ptr(), "a slice, not a copy");
        let whole = Json::from_string(r#"{"a":[1, 2]}"#.into()).unwrap();
        let members: std::collections::BTreeMap<&str, &RawValue> = whole.parse().unwrap();
        let items = whole.slice(members["a"]).items().unwrap();
        assert_eq!(items.iter().map(Json::get).collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(items[1].as_bytes().as_ptr(), whole.as_bytes()[9..].as_ptr(), "items are slices too");
        assert_eq!(Json::array(&items).get(), "[1,2]");
    }

    #[test]
    fn converts_from_raw_values_and_validates_strings() {
        let raw = RawValue::from_string("{\"k\": 1}".into()).unwrap();
        assert_eq!(Json::from_raw(raw).get(), "{\"k\": 1}");
        assert!(Json::from_string("{nope".into()).is_err());
        assert_eq!(Json::to_json(&serde_json::json!({"a": 1})).unwrap().get(), r#"{"a":1}"#);
        assert_eq!(serde_json::to_string(&Json::from_string("[1,  2]".into()).unwrap()).unwrap(), "[1,  2]");
    }

    #[test]
    fn ropes_flatten_and_lose_line_breaks_only_where_they_are() {
        let mut r = Rope::new();
        r.push(Bytes::from_static(b"{\"r\":"));
        let clean = Bytes::from_static(b"[1,2]");
        r.push(clean.clone());
        r.push(Bytes::from_static(b"\n}"));
        let one = r.one_line();
        assert_eq!(one.pieces()[1].as_ptr(), clean.as_ptr(), "a piece without a line break is not copied");
        assert_eq!(one.len(), 12);
        assert_eq!(one.into_vec(), b"{\"r\":[1,2] }");
    }
}
