//! The one reading of a JSON message that every decider consumes: the rules' `args`, the guards at
//! every point, `[secrets]` and the built-in detectors, pins and argument validation all read
//! through [`value`]. It is stricter than JSON's grammar, because a decider and the program the
//! message goes on to must see the same thing: text that is not UTF-8 or not JSON, a lone UTF-16
//! surrogate (`"\ud800"`), a number no `f64` holds (`1e400`), nesting deeper than [`MAX_DEPTH`]
//! levels, or a key twice in one object (parsers disagree on which one counts) is
//! [`Unreadable`], a typed answer each decider turns into a refusal of its own (a call refused, a
//! result withheld, a definition held), never `null` or `{}`. Messages no decider reads are not
//! read at all, and pass as they came.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::Cell;
use std::fmt;

/// The deepest nesting a decider reads (serde_json's own limit is 128).
pub const MAX_DEPTH: usize = 127;

/// Why a message cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// Bytes that are not UTF-8.
    NotUtf8,
    /// A `\u` escape of half a surrogate pair, which no string can hold.
    LoneSurrogate,
    /// A number beyond what a 64-bit float holds.
    NumberOutOfRange,
    /// Arrays and objects nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// A key given twice in one object.
    DuplicateKey(String),
    /// Not JSON (serde_json's words).
    NotJson(String),
}

impl Unreadable {
    /// A short label for logs, metrics and the audit.
    pub fn label(&self) -> &'static str {
        match self {
            Unreadable::NotUtf8 => "not-utf8",
            Unreadable::LoneSurrogate => "lone-surrogate",
            Unreadable::NumberOutOfRange => "number-out-of-range",
            Unreadable::TooDeep => "too-deep",
            Unreadable::DuplicateKey(_) => "duplicate-key",
            Unreadable::NotJson(_) => "not-json",
        }
    }
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreadable::NotUtf8 => f.write_str("it is not UTF-8"),
            Unreadable::LoneSurrogate => f.write_str("it holds a lone UTF-16 surrogate (\\ud800-\\udfff without its pair)"),
            Unreadable::NumberOutOfRange => f.write_str("it holds a number too large for a 64-bit float"),
            Unreadable::TooDeep => write!(f, "it nests deeper than {MAX_DEPTH} levels"),
            Unreadable::DuplicateKey(k) => write!(f, "it gives the key {k:?} twice in one object"),
            Unreadable::NotJson(why) => write!(f, "it is not JSON ({why})"),
        }
    }
}

impl std::error::Error for Unreadable {}

/// Reads `bytes` as one JSON value, strictly (see the module's comment).
pub fn value(bytes: &[u8]) -> Result<Value, Unreadable> {
    let text = std::str::from_utf8(bytes).map_err(|_| Unreadable::NotUtf8)?;
    text_value(text)
}

/// [`value`] of a text.
pub fn text_value(text: &str) -> Result<Value, Unreadable> {
    let failed = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let read = Strict { depth: 0, failed: &failed }.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    read.map_err(|e| failed.take().unwrap_or_else(|| classify(text, &e)))
}

/// serde_json's own refusals by kind (found again in the text, as its error kinds are not public;
/// only on the way out of a failed read, so a readable message costs nothing more).
fn classify(text: &str, e: &serde_json::Error) -> Unreadable {
    let message = e.to_string();
    if has_lone_surrogate(text) {
        Unreadable::LoneSurrogate
    } else if message.contains("number out of range") {
        Unreadable::NumberOutOfRange
    } else if message.contains("recursion limit") {
        Unreadable::TooDeep
    } else {
        Unreadable::NotJson(message)
    }
}

/// Whether a `\u` escape in `text` is half of a surrogate pair without its other half.
fn has_lone_surrogate(text: &str) -> bool {
    let b = text.as_bytes();
    let unit = |at: usize| -> Option<u16> {
        let hex = b.get(at..at + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    };
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        match unit(i) {
            Some(0xD800..=0xDBFF) if unit(i + 6).is_some_and(|n| (0xDC00..=0xDFFF).contains(&n)) => i += 12,
            Some(0xD800..=0xDFFF) => return true,
            Some(_) => i += 6,
            None => i += 2,
        }
    }
    false
}

/// Builds a `Value` as serde_json would, but refusing what the module's comment names; `failed`
/// keeps the typed reason across serde's error type.
#[derive(Clone, Copy)]
struct Strict<'f> {
    depth: usize,
    failed: &'f Cell<Option<Unreadable>>,
}

impl Strict<'_> {
    fn fail<E: de::Error>(&self, why: Unreadable) -> E {
        let e = E::custom(&why);
        self.failed.set(Some(why));
        e
    }

    fn deeper<E: de::Error>(self) -> Result<Self, E> {
        if self.depth >= MAX_DEPTH {
            return Err(self.fail(Unreadable::TooDeep));
        }
        Ok(Strict { depth: self.depth + 1, failed: self.failed })
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(n).map(Value::Number).ok_or_else(|| self.fail(Unreadable::NumberOutOfRange))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.deeper()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.deeper()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(self.fail(Unreadable::DuplicateKey(key)));
            }
            let item = map.next_value_seed(inner)?;
            out.insert(key, item);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn what_cannot_be_read_says_why() {
        assert_eq!(text_value(r#"{"a":"\ud800"}"#), Err(Unreadable::LoneSurrogate));
        assert_eq!(text_value(r#"{"\udc00":1}"#), Err(Unreadable::LoneSurrogate));
        assert_eq!(text_value(r#"{"a":1e400}"#), Err(Unreadable::NumberOutOfRange));
        assert_eq!(text_value(r#"[-1e400]"#), Err(Unreadable::NumberOutOfRange));
        assert_eq!(text_value(&format!("1{}", "0".repeat(400))), Err(Unreadable::NumberOutOfRange));
        assert_eq!(text_value(&nested(MAX_DEPTH + 1)), Err(Unreadable::TooDeep));
        assert_eq!(text_value(&nested(200)), Err(Unreadable::TooDeep));
        assert_eq!(text_value(r#"{"a":1,"b":{"c":1,"c":2}}"#), Err(Unreadable::DuplicateKey("c".into())));
        assert_eq!(value(b"{\"a\":\"\xff\"}"), Err(Unreadable::NotUtf8));
        assert!(matches!(text_value("{\"a\":1"), Err(Unreadable::NotJson(_))));
        assert!(matches!(text_value("{} {}"), Err(Unreadable::NotJson(_))));
    }

    #[test]
    fn what_can_be_read_is_what_serde_json_reads() {
        for text in [
            r#"{"a":[1,-2,3.5,"\ud83d\ude00",null,true],"b":{"c":"\u00e9"}}"#,
            "18446744073709551615",
            "-9223372036854775808",
            "1e308",
            "1e-400",
            "\"\"",
        ] {
            assert_eq!(text_value(text), Ok(serde_json::from_str::<Value>(text).expect("json")), "{text}");
        }
        assert!(text_value(&nested(MAX_DEPTH)).is_ok());
    }

    /// A JSON document as text, with one place (`@`) where a piece is put.
    fn doc() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![Just("1".to_string()), Just("\"s\"".to_string()), Just("null".to_string()), Just("@".to_string())];
        leaf.prop_recursive(5, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(inner, 0..4).prop_map(|v| {
                    let members: Vec<String> = v.iter().enumerate().map(|(i, x)| format!("\"k{i}\":{x}")).collect();
                    format!("{{{}}}", members.join(","))
                }),
            ]
        })
    }

    proptest! {
        /// Wherever one unreadable piece sits in an otherwise plain message, the whole message
        /// is unreadable; with a plain piece there, it reads as serde_json reads it.
        #[test]
        fn one_unreadable_piece_anywhere_makes_the_message_unreadable(d in doc().prop_filter("has a place", |d| d.contains('@'))) {
            let poisons: [(&str, Unreadable); 5] = [
                ("\"\\ud800\"", Unreadable::LoneSurrogate),
                ("1e400", Unreadable::NumberOutOfRange),
                (&nested(200), Unreadable::TooDeep),
                ("{\"x\":1,\"x\":2}", Unreadable::DuplicateKey("x".into())),
                ("\"\u{0}\"", Unreadable::NotJson(String::new())),
            ];
            for (poison, why) in poisons.iter() {
                let text = d.replacen('@', poison, 1).replace('@', "0");
                let got = text_value(&text);
                match why {
                    Unreadable::NotJson(_) => prop_assert!(matches!(got, Err(Unreadable::NotJson(_))), "{text}: {got:?}"),
                    _ => prop_assert_eq!(&got, &Err(why.clone()), "{}", text),
                }
            }
            let mut bytes = d.replacen('@', "\"a\u{e9}\"", 1).replace('@', "0").into_bytes();
            if let Some(at) = bytes.iter().position(|b| *b == 0xc3) {
                bytes[at] = 0xff;
            }
            prop_assert_eq!(value(&bytes), Err(Unreadable::NotUtf8));
            let plain = d.replace('@', "\"ok\"");
            prop_assert_eq!(text_value(&plain).ok(), serde_json::from_str::<Value>(&plain).ok());
        }
    }
}
