//! YAML read as JSON (`yaml-rust2`, YAML 1.2), for the documents the gateway takes in YAML: a
//! `SKILL.md`'s frontmatter and OpenAPI descriptions. Aliases are refused before anything is built
//! (a few bytes of aliases can expand into gigabytes); numbers must be finite, as JSON needs.
//! Mapping keys are strings, or, where the caller allows it, scalars written as their text
//! (OpenAPI's `200:` response codes are integers to YAML). Why a document is refused is a
//! [`YamlError`], which names it.

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, ScanError};
use yaml_rust2::{Yaml, YamlLoader};

/// Which mapping keys are taken.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Strings only.
    Strings,
    /// Strings, and integers and booleans as their text.
    Scalars,
}

/// Why a document is not taken; `what` names the document (`the frontmatter`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlError {
    #[error("{what} is not YAML: {source}")]
    NotYaml {
        what: &'static str,
        #[source]
        source: ScanError,
    },
    #[error("{what} uses YAML aliases")]
    Aliases { what: &'static str },
    #[error("{what} is empty")]
    Empty { what: &'static str },
    /// A number JSON cannot hold (not finite), as written.
    #[error("{what} has a number JSON cannot hold: {number}")]
    Number { what: &'static str, number: String },
    #[error("{what} has a mapping key that is not a string")]
    Key { what: &'static str },
}

/// The first document of `text` as JSON; `what` names it in errors.
pub fn to_json(text: &str, keys: Keys, what: &'static str) -> Result<Value, YamlError> {
    let not_yaml = |source| YamlError::NotYaml { what, source };
    let mut aliases = NoAliases(false);
    Parser::new_from_str(text).load(&mut aliases, false).map_err(not_yaml)?;
    if aliases.0 {
        return Err(YamlError::Aliases { what });
    }
    let docs = YamlLoader::load_from_str(text).map_err(not_yaml)?;
    match docs.into_iter().next() {
        Some(doc) => convert(doc, keys, what),
        None => Err(YamlError::Empty { what }),
    }
}

/// Notes whether any alias is used.
struct NoAliases(bool);

impl MarkedEventReceiver for NoAliases {
    fn on_event(&mut self, ev: Event, _mark: Marker) {
        if matches!(ev, Event::Alias(_)) {
            self.0 = true;
        }
    }
}

fn convert(y: Yaml, keys: Keys, what: &'static str) -> Result<Value, YamlError> {
    Ok(match y {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Integer(i) => Value::Number(i.into()),
        Yaml::Real(s) => match s.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(n) => Value::Number(n),
            None => return Err(YamlError::Number { what, number: s }),
        },
        Yaml::String(s) => Value::String(s),
        Yaml::Array(items) => Value::Array(items.into_iter().map(|i| convert(i, keys, what)).collect::<Result<_, _>>()?),
        Yaml::Hash(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match (k, keys) {
                    (Yaml::String(s), _) => s,
                    (Yaml::Integer(i), Keys::Scalars) => i.to_string(),
                    (Yaml::Boolean(b), Keys::Scalars) => b.to_string(),
                    _ => return Err(YamlError::Key { what }),
                };
                out.insert(key, convert(v, keys, what)?);
            }
            Value::Object(out)
        }
        Yaml::Alias(_) | Yaml::BadValue => return Err(YamlError::Aliases { what }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_yaml_as_json_with_the_keys_allowed() {
        let text = "paths:\n  /a:\n    get:\n      responses:\n        200:\n          description: ok\n";
        let v = to_json(text, Keys::Scalars, "the document").unwrap();
        assert_eq!(v["paths"]["/a"]["get"]["responses"]["200"], json!({ "description": "ok" }));
        let err = |text: &str, keys| to_json(text, keys, "the document").map_err(|e| e.to_string()).unwrap_err();
        assert_eq!(err(text, Keys::Strings), "the document has a mapping key that is not a string");
        assert_eq!(err("a: &x [1]\nb: *x\n", Keys::Scalars), "the document uses YAML aliases");
        assert_eq!(err("a: .nan\n", Keys::Scalars), "the document has a number JSON cannot hold: .nan");
    }
}
