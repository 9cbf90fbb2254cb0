//! [`RawObject`]: a JSON object kept as an ordered list of `(key, raw value)` pairs. The gateway
//! uses it to rewrite one or two members of a message (a tool's `name`, a request's `_meta`)
//! while every other member, schemas and arguments included, passes through byte for byte.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;

#[derive(Debug, Default, Clone)]
pub struct RawObject(pub Vec<(String, Box<RawValue>)>);

impl RawObject {
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_ref())
    }

    /// Replaces `key` in place (keeping its position) or appends it.
    pub fn set(&mut self, key: &str, value: Box<RawValue>) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key.to_string(), value)),
        }
    }

    /// Replaces `key` with the JSON serialisation of `value`.
    pub fn set_json<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), serde_json::Error> {
        let raw = serde_json::value::to_raw_value(value)?;
        self.set(key, raw);
        Ok(())
    }

    pub fn remove(&mut self, key: &str) -> Option<Box<RawValue>> {
        let pos = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(pos).1)
    }

    /// Parses the member `key` as `T`, `None` when absent.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self, key: &str) -> Option<Result<T, serde_json::Error>> {
        self.get(key).map(|raw| serde_json::from_str(raw.get()))
    }

    pub fn to_raw(&self) -> Result<Box<RawValue>, serde_json::Error> {
        serde_json::value::to_raw_value(self)
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
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawObject;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawObject, A::Error> {
                let mut out: Vec<(String, Box<RawValue>)> = Vec::with_capacity(map.size_hint().unwrap_or(4));
                let mut seen = std::collections::HashSet::new();
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    // Parsers disagree on which duplicate wins; a message that could be routed
                    // by one member and executed by another is refused.
                    if !seen.insert(k.clone()) {
                        return Err(serde::de::Error::custom(format!("duplicate member \"{}\"", k.escape_debug())));
                    }
                    out.push((k, v));
                }
                Ok(RawObject(out))
            }
        }
        d.deserialize_map(V)
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
    }

    #[test]
    fn rejects_non_objects() {
        assert!(serde_json::from_str::<RawObject>("[1]").is_err());
    }
}
