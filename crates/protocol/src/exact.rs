//! JSON text in a canonical form that keeps every number exactly as it was written. Parsing into
//! `serde_json::Value` turns a number that does not fit 64 bits into an `f64`, so two different
//! numbers (`18446744073709551617` and `18446744073709551616`) become one: whatever binds a
//! person's decision to arguments (the confirmation digest) or shows them the arguments must read
//! the text instead. Only text `protocol::read` can read is taken (a key given twice, a lone
//! surrogate or an overlong number is refused, as every decider refuses it). The canonical form
//! sorts object keys, writes strings with serde's escaping and no spacing, and
//! copies each number's text byte for byte; the pretty form is the same with indentation. The
//! text is read in one pass, so the work is linear in it however deeply it nests.

use std::collections::BTreeMap;

/// The canonical text of the JSON text `text` (sorted keys, no spacing, numbers as written).
pub fn canonical(text: &str) -> Result<String, serde_json::Error> {
    let tree = read(text)?;
    let mut out = String::with_capacity(text.len());
    write(&tree, None, 0, &mut out)?;
    Ok(out)
}

/// The canonical form of `text`, indented by two spaces per level, for showing to a person.
pub fn pretty(text: &str) -> Result<String, serde_json::Error> {
    let tree = read(text)?;
    let mut out = String::with_capacity(text.len() * 2);
    write(&tree, Some(2), 0, &mut out)?;
    Ok(out)
}

/// A JSON value as spans of the text it was read from (scalars keep their text).
enum Node<'a> {
    Object(BTreeMap<String, Node<'a>>),
    Array(Vec<Node<'a>>),
    /// A string, with its quotes and escapes as written.
    Str(&'a str),
    /// A number, `true`, `false` or `null`, as written.
    Literal(&'a str),
}

/// Reads `text` in one pass (after serde_json has checked that it is JSON, within its nesting
/// limit), so the work is linear in the text whatever its nesting.
fn read(text: &str) -> Result<Node<'_>, serde_json::Error> {
    super::read::text_value(text).map_err(<serde_json::Error as serde::de::Error>::custom)?;
    let mut r = Reader { text, at: 0 };
    r.value()
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
}

fn broken() -> serde_json::Error {
    <serde_json::Error as serde::de::Error>::custom("unexpected JSON text")
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), serde_json::Error> {
        self.skip_space();
        if self.peek() != Some(byte) {
            return Err(broken());
        }
        self.at += 1;
        Ok(())
    }

    fn string(&mut self) -> Result<&'a str, serde_json::Error> {
        self.skip_space();
        let start = self.at;
        self.expect(b'"')?;
        loop {
            match self.peek().ok_or_else(broken)? {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    return self.text.get(start..self.at).ok_or_else(broken);
                }
                _ => self.at += 1,
            }
        }
    }

    fn value(&mut self) -> Result<Node<'a>, serde_json::Error> {
        self.skip_space();
        match self.peek().ok_or_else(broken)? {
            b'{' => {
                self.at += 1;
                let mut members = BTreeMap::new();
                self.skip_space();
                if self.peek() == Some(b'}') {
                    self.at += 1;
                    return Ok(Node::Object(members));
                }
                loop {
                    let key: String = serde_json::from_str(self.string()?)?;
                    self.expect(b':')?;
                    // The last of duplicate keys wins.
                    members.insert(key, self.value()?);
                    self.skip_space();
                    match self.peek() {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            return Ok(Node::Object(members));
                        }
                        _ => return Err(broken()),
                    }
                }
            }
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                self.skip_space();
                if self.peek() == Some(b']') {
                    self.at += 1;
                    return Ok(Node::Array(items));
                }
                loop {
                    items.push(self.value()?);
                    self.skip_space();
                    match self.peek() {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(Node::Array(items));
                        }
                        _ => return Err(broken()),
                    }
                }
            }
            b'"' => Ok(Node::Str(self.string()?)),
            _ => {
                let start = self.at;
                while !matches!(self.peek(), None | Some(b',' | b']' | b'}' | b' ' | b'\n' | b'\r' | b'\t')) {
                    self.at += 1;
                }
                self.text.get(start..self.at).filter(|t| !t.is_empty()).map(Node::Literal).ok_or_else(broken)
            }
        }
    }
}

fn newline(indent: Option<usize>, depth: usize, out: &mut String) {
    if let Some(step) = indent {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', step * depth));
    }
}

fn write(node: &Node<'_>, indent: Option<usize>, depth: usize, out: &mut String) -> Result<(), serde_json::Error> {
    match node {
        Node::Object(members) => {
            out.push('{');
            for (i, (key, value)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(indent, depth + 1, out);
                out.push_str(&serde_json::to_string(key)?);
                out.push_str(if indent.is_some() { ": " } else { ":" });
                write(value, indent, depth + 1, out)?;
            }
            if !members.is_empty() {
                newline(indent, depth, out);
            }
            out.push('}');
        }
        Node::Array(items) => {
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
        // Escapes are written one way (serde's), whatever way the client chose.
        Node::Str(token) => out.push_str(&serde_json::to_string(&serde_json::from_str::<String>(token)?)?),
        Node::Literal(text) => out.push_str(text),
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
        assert!(canonical(r#"{"a":1,"a":2}"#).is_err(), "a key given twice is refused");
        assert!(canonical(r#"{"a":"\ud800"}"#).is_err() && canonical("[1e400]").is_err());
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

    #[test]
    fn deep_nesting_is_read_once() {
        let big = "x".repeat(100_000);
        let text = format!("{}\"{big}\"{}", "[".repeat(100), "]".repeat(100));
        let out = canonical(&text).expect("canonical");
        assert_eq!(out.len(), text.len());
        assert_eq!(
            canonical(r#"{"a":"\u00e9\"","b":[ true , null, -0.0e+1 ]}"#).expect("canonical"),
            r#"{"a":"é\"","b":[true,null,-0.0e+1]}"#
        );
    }
}
