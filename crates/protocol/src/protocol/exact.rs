//! JSON text in a canonical form that keeps every number exactly as it was written. Parsing into
//! `serde_json::Value` turns a number that does not fit 64 bits into an `f64`, so two different
//! numbers (`18446744073709551617` and `18446744073709551616`) become one: whatever binds a
//! person's decision to arguments (the confirmation digest) or shows them the arguments must read
//! the text instead. The canonical form sorts object keys (the last of duplicate keys wins, as it
//! does for the parsers upstreams use), writes strings with serde's escaping and no spacing, and
//! copies each number's text byte for byte; the pretty form is the same with indentation.

use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// The canonical text of the JSON text `text` (sorted keys, no spacing, numbers as written).
pub fn canonical(text: &str) -> Result<String, serde_json::Error> {
    let raw: &RawValue = serde_json::from_str(text)?;
    let mut out = String::with_capacity(text.len());
    write(raw, None, 0, &mut out)?;
    Ok(out)
}

/// The canonical form of `text`, indented by two spaces per level, for showing to a person.
pub fn pretty(text: &str) -> Result<String, serde_json::Error> {
    let raw: &RawValue = serde_json::from_str(text)?;
    let mut out = String::with_capacity(text.len() * 2);
    write(raw, Some(2), 0, &mut out)?;
    Ok(out)
}

fn newline(indent: Option<usize>, depth: usize, out: &mut String) {
    if let Some(step) = indent {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', step * depth));
    }
}

fn write(raw: &RawValue, indent: Option<usize>, depth: usize, out: &mut String) -> Result<(), serde_json::Error> {
    let text = raw.get().trim();
    match text.as_bytes().first() {
        Some(b'{') => {
            let map: BTreeMap<String, &RawValue> = serde_json::from_str(text)?;
            out.push('{');
            for (i, (key, value)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(indent, depth + 1, out);
                out.push_str(&serde_json::to_string(key)?);
                out.push_str(if indent.is_some() { ": " } else { ":" });
                write(value, indent, depth + 1, out)?;
            }
            if !map.is_empty() {
                newline(indent, depth, out);
            }
            out.push('}');
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(text)?;
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(indent, depth + 1, out);
                write(item, indent, depth + 1, out)?;
            }
            if !items.is_empty() {
                newline(indent, depth, out);
            }
            out.push(']');
        }
        Some(b'"') => {
            let s: String = serde_json::from_str(text)?;
            out.push_str(&serde_json::to_string(&s)?);
        }
        // A number, `true`, `false` or `null`: the parser has checked it is one; its text stays.
        _ => out.push_str(text),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_text_and_keys_are_sorted() {
        let a = canonical(r#"{ "b": [1, 2.50, 18446744073709551617], "a": "x\u0041" }"#).expect("canonical");
        assert_eq!(a, r#"{"a":"xA","b":[1,2.50,18446744073709551617]}"#);
        let b = canonical(r#"{"b":[1,2.50,18446744073709551616],"a":"xA"}"#).expect("canonical");
        assert_ne!(a, b, "numbers that round to the same f64 stay apart");
        assert_eq!(canonical(r#"{"a":1,"a":2}"#).expect("canonical"), r#"{"a":2}"#, "the last duplicate wins");
    }

    #[test]
    fn the_pretty_form_shows_the_exact_numbers() {
        let p = pretty(r#"{"n":0.10000000000000001,"e":{},"l":[]}"#).expect("pretty");
        assert_eq!(p, "{\n  \"e\": {},\n  \"l\": [],\n  \"n\": 0.10000000000000001\n}");
    }

    #[test]
    fn broken_text_is_an_error() {
        assert!(canonical("{\"a\":").is_err());
        assert!(canonical("[1,").is_err());
    }
}
