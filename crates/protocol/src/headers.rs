//! The `Mcp-Name` / `Mcp-Param-*` header value codec (MCP 2026-07-28 `basic/transports.mdx`,
//! request metadata headers): how a value becomes a header
//! (plain, or `=?base64?…?=` when it is not header-safe) and how a received header is decoded and
//! compared with the body value (integers numerically, markers lowercase only, strict Base64).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

const PREFIX: &str = "=?base64?";
const SUFFIX: &str = "?=";

/// Why a received header value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    InvalidBase64,
    NotUtf8,
    InvalidCharacters,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DecodeError::InvalidBase64 => "invalid Base64 inside =?base64?...?=",
            DecodeError::NotUtf8 => "Base64 payload is not UTF-8",
            DecodeError::InvalidCharacters => "value contains characters not allowed in a header",
        })
    }
}

fn looks_encoded(s: &str) -> bool {
    s.len() >= PREFIX.len() + SUFFIX.len() && s.starts_with(PREFIX) && s.ends_with(SUFFIX)
}

fn needs_base64(s: &str) -> bool {
    s.bytes().any(|b| !(0x20..0x7f).contains(&b)) || s.starts_with([' ', '\t']) || s.ends_with([' ', '\t']) || looks_encoded(s)
}

/// The header value for a string: as is when header-safe, otherwise `=?base64?…?=`.
pub fn encode(s: &str) -> String {
    encoded(s).into_owned()
}

/// [`encode`], borrowing `s` when it is header-safe as it is (the usual case).
pub fn encoded(s: &str) -> std::borrow::Cow<'_, str> {
    if needs_base64(s) { format!("{PREFIX}{}{SUFFIX}", STANDARD.encode(s.as_bytes())).into() } else { s.into() }
}

/// Decodes a received header value (surrounding whitespace is not part of the value).
pub fn decode(raw: &[u8]) -> Result<String, DecodeError> {
    decode_borrowed(raw).map(std::borrow::Cow::into_owned)
}

/// [`decode`], borrowing the header's own text when it was not base64-encoded (the usual case).
pub fn decode_borrowed(raw: &[u8]) -> Result<std::borrow::Cow<'_, str>, DecodeError> {
    let text = std::str::from_utf8(raw).map_err(|_| DecodeError::InvalidCharacters)?;
    let text = text.trim_matches([' ', '\t']);
    if looks_encoded(text) {
        let inner = &text[PREFIX.len()..text.len() - SUFFIX.len()];
        let bytes = STANDARD.decode(inner).map_err(|_| DecodeError::InvalidBase64)?;
        return String::from_utf8(bytes).map(std::borrow::Cow::Owned).map_err(|_| DecodeError::NotUtf8);
    }
    if text.bytes().any(|b| !(0x20..0x7f).contains(&b) && b != b'\t') {
        return Err(DecodeError::InvalidCharacters);
    }
    Ok(std::borrow::Cow::Borrowed(text))
}

/// The string form of an argument value that a header mirrors; `None` for null/absent, objects,
/// arrays and non-integral numbers (which cannot be mirrored).
pub fn value_to_header_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i.to_string())
            } else if let Some(u) = n.as_u64() {
                Some(u.to_string())
            } else {
                n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15).map(|f| (f as i64).to_string())
            }
        }
        _ => None,
    }
}

/// Does a decoded header value equal the body value? Integers compare numerically.
pub fn matches_body(decoded: &str, body: &Value) -> bool {
    match body {
        Value::String(s) => s == decoded,
        Value::Bool(b) => decoded == if *b { "true" } else { "false" },
        Value::Number(n) => match (decoded.parse::<f64>(), n.as_f64()) {
            (Ok(h), Some(b)) => decoded.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'-' | b'.' | b'+' | b'e' | b'E')) && h == b,
            _ => false,
        },
        _ => false,
    }
}

/// A header value suitable for the body's string, for messages (decoded, quoted, truncated).
pub fn describe(s: &str) -> String {
    let mut out: String = s.chars().take(80).collect();
    if s.chars().count() > 80 {
        out.push('…');
    }
    format!("'{out}'")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_only_when_needed() {
        assert_eq!(encode("us-west1"), "us-west1");
        assert_eq!(encode("a b"), "a b");
        assert_eq!(encode(""), "");
        assert_eq!(encode("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(encode(" lead"), "=?base64?IGxlYWQ=?=");
        assert_eq!(encode("trail\t"), "=?base64?dHJhaWwJ?=");
        assert_eq!(encode("a\nb"), "=?base64?YQpi?=");
        assert_eq!(encode("=?base64?abc?="), "=?base64?PT9iYXNlNjQ/YWJjPz0=?=");
        assert_eq!(encode("=?BASE64?abc?="), "=?BASE64?abc?=");
    }

    #[test]
    fn decodes_per_the_sentinel_rules() {
        assert_eq!(decode(b"=?base64?aMOpbGxv?=").unwrap(), "héllo");
        assert_eq!(decode(b"  foo ").unwrap(), "foo");
        assert_eq!(decode(b"=?BASE64?aMOpbGxv?=").unwrap(), "=?BASE64?aMOpbGxv?=");
        assert_eq!(decode(b"=?base64?aMOpbGxv").unwrap(), "=?base64?aMOpbGxv");
        assert_eq!(decode(b"base64?aMOpbGxv?=").unwrap(), "base64?aMOpbGxv?=");
        assert_eq!(decode(b"=?base64?aMOpbGx?=").unwrap_err(), DecodeError::InvalidBase64);
        assert_eq!(decode(b"=?base64?a*b=?=").unwrap_err(), DecodeError::InvalidBase64);
        assert_eq!(decode(b"=?base64?/w==?=").unwrap_err(), DecodeError::NotUtf8);
        assert_eq!(decode("héllo".as_bytes()).unwrap_err(), DecodeError::InvalidCharacters);
        assert_eq!(decode(b"a\x01b").unwrap_err(), DecodeError::InvalidCharacters);
        assert_eq!(decode(b"").unwrap(), "");
    }

    #[test]
    fn compares_integers_numerically() {
        assert!(matches_body("42", &json!(42)));
        assert!(matches_body("42", &json!(42.0)));
        assert!(matches_body("42.0", &json!(42)));
        assert!(!matches_body("43", &json!(42)));
        assert!(!matches_body("0x2a", &json!(42)));
        assert!(matches_body("true", &json!(true)));
        assert!(!matches_body("True", &json!(true)));
        assert!(matches_body("x", &json!("x")));
        assert_eq!(value_to_header_string(&json!(42.0)).as_deref(), Some("42"));
        assert_eq!(value_to_header_string(&json!(4.5)), None);
        assert_eq!(value_to_header_string(&json!(null)), None);
    }
}
