//! [`RawObject`]: a JSON object kept as an ordered list of `(key, raw value)` pairs. The gateway
//! uses it to rewrite one or two members of a message (a tool's `name`, a request's `_meta`)
//! while every other member, schemas and arguments included, passes through byte for byte.

use super::json::Json;
use bytes::Bytes;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;
use std::marker::PhantomData;

#[derive(Debug, Default, Clone)]
pub struct RawObject(pub Vec<(String, Json)>);

impl RawObject {
    /// Reads the object `json` holds; the members are slices of its buffer (no copy).
    pub fn from_json(json: &Json) -> Result<RawObject, serde_json::Error> {
        let buf: &Bytes = json.as_bytes();
        let members: Members<&RawValue> = serde_json::from_slice(buf)?;
        Ok(RawObject(members.0.into_iter().map(|(k, v)| (k, Json::slice_of(buf, v))).collect()))
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Replaces `key` in place (keeping its position) or appends it.
    pub fn set(&mut self, key: &str, value: Json) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key.to_string(), value)),
        }
    }

    /// Replaces `key` with the JSON serialisation of `value`.
    pub fn set_json<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), serde_json::Error> {
        self.set(key, Json::to_json(value)?);
        Ok(())
    }

    pub fn remove(&mut self, key: &str) -> Option<Json> {
        let pos = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(pos).1)
    }

    /// Parses the member `key` as `T`, `None` when absent.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self, key: &str) -> Option<Result<T, serde_json::Error>> {
        self.get(key).map(Json::parse)
    }

    /// Writes the object (the one copy its members make on their way out).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(super::jsonrpc::json_string(k).as_bytes());
            out.push(b':');
            out.extend_from_slice(v.as_bytes());
        }
        out.push(b'}');
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
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let members = Members::<Box<RawValue>>::deserialize(d)?;
        Ok(RawObject(members.0.into_iter().map(|(k, v)| (k, Json::from_raw(v))).collect()))
    }
}

/// An object's members in order, duplicates refused; `V` is owned or borrowed raw JSON.
struct Members<V>(Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Members<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Vis<V> {
            type Value = Members<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<V>, A::Error> {
                let mut out: Vec<(String, V)> = Vec::with_capacity(map.size_hint().unwrap_or(4));
                let mut seen = std::collections::HashSet::new();
                while let Some((k, v)) = map.next_entry::<String, V>()? {
                    // Parsers disagree on which duplicate wins; a message that could be routed
                    // by one member and executed by another is refused.
                    if !seen.insert(k.clone()) {
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
    fn rejects_non_objects() {
        assert!(serde_json::from_str::<RawObject>("[1]").is_err());
    }
}
