//! [`RawObject`]: a JSON object kept as an ordered list of `(key, raw value)` pairs. The gateway
//! uses it to rewrite one or two members of a message (a tool's `name`, a request's `_meta`)
//! while every other member, schemas and arguments included, passes through byte for byte. Read
//! from a buffer, its keys and values are slices of that buffer: splitting a message allocates
//! only the list (every request's params are split, so this is on the hot path).

use super::json::Json;
use bytes::Bytes;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// A member's name: a slice of the buffer it was read from when it needed no unescaping, else
/// its own copy. invariant: UTF-8 (it comes from a `str`).
#[derive(Clone, PartialEq, Eq)]
pub struct Key(Bytes);

impl Key {
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The name as JSON text, appended to `out` (quoted, escaped only where it must be).
    fn write_to(&self, out: &mut Vec<u8>) {
        if self.0.iter().all(|b| *b >= 0x20 && *b != b'"' && *b != b'\\') {
            out.push(b'"');
            out.extend_from_slice(&self.0);
            out.push(b'"');
        } else {
            out.extend_from_slice(super::json::json_string(self.as_str()).as_bytes());
        }
    }
}

impl From<String> for Key {
    fn from(s: String) -> Key {
        Key(Bytes::from(s))
    }
}

impl From<&str> for Key {
    fn from(s: &str) -> Key {
        Key(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl std::ops::Deref for Key {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for Key {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for Key {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[derive(Debug, Default, Clone)]
pub struct RawObject(pub Vec<(Key, Json)>);

impl RawObject {
    /// Reads the object `json` holds; the members, keys and values, are slices of its buffer.
    pub fn from_json(json: &Json) -> Result<RawObject, serde_json::Error> {
        let buf: &Bytes = json.as_bytes();
        let members: Members<'_, &RawValue> = serde_json::from_str(json.get())?;
        Ok(RawObject(
            members
                .0
                .into_iter()
                .map(|(k, v)| {
                    let key = match k {
                        Cow::Borrowed(k) => Key(buf.slice_ref(k.as_bytes())),
                        Cow::Owned(k) => Key::from(k),
                    };
                    (key, json.slice(v))
                })
                .collect(),
        ))
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Replaces `key` in place (keeping its position) or appends it.
    pub fn set(&mut self, key: &str, value: Json) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((Key::from(key), value)),
        }
    }

    /// Replaces `key` with the JSON serialisation of `value`.
    pub fn set_json<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), serde_json::Error> {
        self.set(key, Json::to_json(value)?);
        Ok(())
    }

    pub fn remove(&mut self, key: &str) -> Option<Json> {
        let pos = self.0.iter().position(|(k, _)| *k == key)?;
        Some(self.0.remove(pos).1)
    }

    /// Parses the member `key` as `T`, `None` when absent.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self, key: &str) -> Option<Result<T, serde_json::Error>> {
        self.get(key).map(Json::parse)
    }

    /// Writes the object (the one copy its members make on their way out).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        // Nothing is serialised, so nothing can fail.
        let _ = self.write_members::<()>(out, None);
    }

    /// Writes the object as [`RawObject::set_json`]`(key, value)` then [`RawObject::write_to`]
    /// would, without changing it: `value` in place of member `key`, or last when absent.
    pub fn write_setting<T: Serialize + ?Sized>(&self, out: &mut Vec<u8>, key: &str, value: &T) -> Result<(), serde_json::Error> {
        self.write_members(out, Some((key, value)))
    }

    fn write_members<T: Serialize + ?Sized>(&self, out: &mut Vec<u8>, setting: Option<(&str, &T)>) -> Result<(), serde_json::Error> {
        out.push(b'{');
        let mut pending = setting;
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            k.write_to(out);
            out.push(b':');
            match pending {
                Some((key, value)) if *k == *key => {
                    serde_json::to_writer(&mut *out, value)?;
                    pending = None;
                }
                _ => out.extend_from_slice(v.as_bytes()),
            }
        }
        if let Some((key, value)) = pending {
            if !self.0.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(super::json::json_string(key).as_bytes());
            out.push(b':');
            serde_json::to_writer(&mut *out, value)?;
        }
        out.push(b'}');
        Ok(())
    }

    /// The written size, for reserving a buffer.
    pub fn written_len(&self) -> usize {
        (1 + self.0.iter().map(|(k, v)| k.len() + 4 + v.as_bytes().len()).sum::<usize>()).max(2)
    }

    pub fn to_json(&self) -> Json {
        let mut out = Vec::with_capacity(self.written_len());
        self.write_to(&mut out);
        // invariant: keys are written as JSON strings and the values were JSON when stored, so
        // the text is UTF-8 (the fallback is never taken).
        Json::from_utf8(out).unwrap_or(Json::NULL)
    }
}

impl Serialize for RawObject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k.as_str(), v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let members = Members::<Box<RawValue>>::deserialize(d)?;
        Ok(RawObject(members.0.into_iter().map(|(k, v)| (Key::from(k.into_owned()), Json::from_raw(v))).collect()))
    }
}

/// A member's name as read: borrowed from the input when it needed no unescaping.
struct KeyIn<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for KeyIn<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis;
        impl<'de> Visitor<'de> for Vis {
            type Value = KeyIn<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<KeyIn<'de>, E> {
                Ok(KeyIn(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<KeyIn<'de>, E> {
                Ok(KeyIn(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<KeyIn<'de>, E> {
                Ok(KeyIn(Cow::Owned(v)))
            }
        }
        d.deserialize_str(Vis)
    }
}

/// Up to this many members, duplicates are found by comparing with each one before (no
/// allocation); past it, through a set (a message with many members stays linear).
const SCANNED: usize = 32;

/// An object's members in order, duplicates refused; `V` is owned or borrowed raw JSON.
struct Members<'de, V>(Vec<(Cow<'de, str>, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Members<'de, V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis<'de, V>(PhantomData<(&'de (), V)>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Vis<'de, V> {
            type Value = Members<'de, V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de, V>, A::Error> {
                let mut out: Vec<(Cow<'de, str>, V)> = Vec::with_capacity(map.size_hint().unwrap_or(4));
                let mut seen: Option<std::collections::HashSet<String>> = None;
                while let Some((KeyIn(k), v)) = map.next_entry::<KeyIn<'de>, V>()? {
                    // Parsers disagree on which duplicate wins; a message that could be routed
                    // by one member and executed by another is refused.
                    let duplicate = if out.len() < SCANNED {
                        out.iter().any(|(x, _)| *x == k)
                    } else {
                        let set = seen.get_or_insert_with(|| out.iter().map(|(x, _)| x.to_string()).collect());
                        !set.insert(k.to_string())
                    };
                    if duplicate {
                        return Err(serde::de::Error::custom(format!("duplicate member \"{}\"", k.escape_debug())));
                    }
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(Vis(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writing_with_a_member_set_is_setting_it_then_writing() {
        for text in [r#"{}"#, r#"{"a":1}"#, r#"{"a":1,"_meta":{"x":2},"b":[3]}"#, r#"{"b":"\u0041","_meta":null}"#] {
            let obj = RawObject::from_json(&Json::from_string(text.to_string()).expect("json")).expect("object");
            let value = serde_json::json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28" });
            let mut set = obj.clone();
            set.set_json("_meta", &value).expect("set");
            let mut expected = Vec::new();
            set.write_to(&mut expected);
            let mut written = Vec::new();
            obj.write_setting(&mut written, "_meta", &value).expect("write");
            assert_eq!(String::from_utf8_lossy(&written), String::from_utf8_lossy(&expected), "{text}");
        }
    }

    #[test]
    fn rewrites_one_member_and_keeps_the_rest_verbatim() {
        let src = r#"{"name":"calc__add","inputSchema":{"type":"object",  "$defs":{"a":1}},"x":[1, 2]}"#;
        let mut o: RawObject = serde_json::from_str(src).unwrap();
        o.set_json("name", "add").unwrap();
        let out = serde_json::to_string(&o).unwrap();
        assert_eq!(out, r#"{"name":"add","inputSchema":{"type":"object",  "$defs":{"a":1}},"x":[1, 2]}"#);
    }

    #[test]
    fn rejects_duplicate_members() {
        assert!(serde_json::from_str::<RawObject>(r#"{"name":"a","name":"b"}"#).is_err());
        assert!(RawObject::from_json(&Json::from_string(r#"{"name":"a","name":"b"}"#.into()).unwrap()).is_err());
    }

    #[test]
    fn members_read_from_a_buffer_are_slices_of_it_and_write_back_verbatim() {
        let src = Json::from_string(r#"{"name":"x", "arguments":{"big":[1, 2, 3]}}"#.into()).unwrap();
        let mut o = RawObject::from_json(&src).unwrap();
        let args = o.get("arguments").unwrap().clone();
        assert_eq!(args.as_bytes().as_ptr(), src.as_bytes()[25..].as_ptr());
        o.set_json("name", "y").unwrap();
        assert_eq!(o.to_json().get(), r#"{"name":"y","arguments":{"big":[1, 2, 3]}}"#);
        assert_eq!(o.written_len(), o.to_json().get().len());
    }

    #[test]
    fn keys_are_slices_too_and_escaped_ones_are_written_back_as_json() {
        let src = Json::from_string(r#"{"name":"x","a\"b":1}"#.into()).unwrap();
        let o = RawObject::from_json(&src).unwrap();
        assert_eq!(o.0[0].0.as_str().as_ptr(), src.get()[2..].as_ptr(), "an unescaped key is a slice of the message");
        assert_eq!(o.0[1].0.as_str(), "a\"b");
        assert_eq!(o.to_json().get(), r#"{"name":"x","a\"b":1}"#);
    }

    #[test]
    fn duplicates_are_refused_past_the_scanned_members_too() {
        let mut many: Vec<String> = (0..SCANNED + 5).map(|i| format!("\"k{i}\":{i}")).collect();
        assert!(RawObject::from_json(&Json::from_string(format!("{{{}}}", many.join(","))).unwrap()).is_ok());
        many.push("\"k3\":0".into());
        assert!(RawObject::from_json(&Json::from_string(format!("{{{}}}", many.join(","))).unwrap()).is_err());
    }

    #[test]
    fn rejects_non_objects() {
        assert!(serde_json::from_str::<RawObject>("[1]").is_err());
    }
}
