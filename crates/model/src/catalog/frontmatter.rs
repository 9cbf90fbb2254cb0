//! A `SKILL.md`'s YAML frontmatter, read as JSON, to compare with the frontmatter its skill's
//! listing carries (SEP-2640: the entry's `frontmatter` is the file's, rendered verbatim as a JSON
//! object). The block is the text between a first line `---` and the next `---` line; a block over
//! [`MAX_BYTES`] is refused, the rest is read by `crate::yaml` (no aliases, string keys, finite
//! numbers); why there is none is a [`FrontmatterError`]. Comparing is field by field over both
//! sides' keys, numbers by value.

use crate::yaml::YamlError;
use serde_json::{Map, Value};

/// The largest frontmatter block read.
pub const MAX_BYTES: usize = 64 * 1024;

/// Why a `SKILL.md` has no frontmatter to compare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontmatterError {
    #[error("SKILL.md does not begin with a --- delimited frontmatter block")]
    NoBlock,
    #[error("the frontmatter is larger than {MAX_BYTES} bytes")]
    TooLarge,
    /// Not a mapping (an empty block included).
    #[error("the frontmatter is not a mapping")]
    NotMapping,
    #[error(transparent)]
    Yaml(#[from] YamlError),
}

/// The frontmatter of a `SKILL.md`'s text as a JSON object, or why there is none.
pub fn parse(text: &str) -> Result<Map<String, Value>, FrontmatterError> {
    let block = block(text).ok_or(FrontmatterError::NoBlock)?;
    if block.len() > MAX_BYTES {
        return Err(FrontmatterError::TooLarge);
    }
    match crate::yaml::to_json(block, crate::yaml::Keys::Strings, "the frontmatter") {
        Ok(Value::Object(map)) => Ok(map),
        Err(YamlError::Empty { .. }) | Ok(_) => Err(FrontmatterError::NotMapping),
        Err(e) => Err(e.into()),
    }
}

/// Whether two frontmatter objects say the same, field by field (a missing field is `null`);
/// the first field that differs otherwise.
pub fn differs(file: &Map<String, Value>, entry: &Map<String, Value>) -> Option<String> {
    file.keys().chain(entry.keys()).find(|k| !same(file.get(*k).unwrap_or(&Value::Null), entry.get(*k).unwrap_or(&Value::Null))).cloned()
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w))),
        _ => a == b,
    }
}

/// The text between the opening `---` line and the closing one (a byte-order mark first is
/// skipped).
fn block(text: &str) -> Option<&str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let body = text.strip_prefix("---\r\n").or_else(|| text.strip_prefix("---\n"))?;
    let mut at = 0;
    for line in body.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']).trim_end_matches([' ', '\t']) == "---" {
            return Some(body[..at].trim_end_matches(['\r', '\n']));
        }
        at += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_frontmatter_as_json() {
        let text = "---\nname: pdf-processing\ndescription: \"Extract, fill\"\nmetadata:\n  version: '2'\nn: 3\nf: 1.5\nlist: [a, b]\n---\nBody.\n";
        let fm = parse(text).unwrap();
        assert_eq!(
            Value::Object(fm),
            json!({ "name": "pdf-processing", "description": "Extract, fill", "metadata": { "version": "2" }, "n": 3, "f": 1.5, "list": ["a", "b"] })
        );
        assert!(parse("\u{feff}---\r\nname: x\r\n---\r\n").is_ok(), "a BOM and CRLF lines");
        assert!(parse("---\nname: x\n---").is_ok(), "the closing line may end the file");
    }

    #[test]
    fn refuses_what_is_no_json_object_or_expands() {
        assert!(parse("no frontmatter").is_err());
        assert!(parse("---\nname: x\n").is_err(), "unclosed");
        assert!(parse("---\n- a\n---\n").is_err(), "not a mapping");
        assert!(parse("---\n? [a]\n: b\n---\n").is_err(), "a key that is no string");
        assert_eq!(
            parse("---\na: &x [1, 2]\nb: [*x, *x]\n---\n").map_err(|e| e.to_string()),
            Err("the frontmatter uses YAML aliases".into())
        );
        assert_eq!(parse("---\n---\n").map_err(|e| e.to_string()), Err("the frontmatter is not a mapping".into()), "empty");
        assert!(parse(&format!("---\nname: {}\n---\n", "x".repeat(MAX_BYTES))).is_err());
    }

    #[test]
    fn compares_field_by_field() {
        let file = parse("---\nname: p\ndescription: Exfiltrate credentials\nn: 1\n---\n").unwrap();
        let entry = |v: Value| v.as_object().cloned().unwrap();
        assert_eq!(differs(&file, &entry(json!({ "name": "p", "description": "Exfiltrate credentials", "n": 1.0 }))), None);
        assert_eq!(differs(&file, &entry(json!({ "name": "p", "description": "Extract", "n": 1 }))).as_deref(), Some("description"));
        assert_eq!(differs(&file, &entry(json!({ "name": "p", "description": "Exfiltrate credentials" }))).as_deref(), Some("n"));
        assert_eq!(differs(&file, &entry(json!({ "name": "p", "description": "Exfiltrate credentials", "n": 1, "x": null }))), None);
    }
}
