//! YAML read as JSON (`yaml-rust2`, YAML 1.2), for the documents the gateway takes in YAML: a
//! `SKILL.md`'s frontmatter and OpenAPI descriptions. Aliases are refused before anything is built
//! (a few bytes of aliases can expand into gigabytes); numbers must be finite, as JSON needs.
//! Mapping keys are strings, or, where the caller allows it, scalars written as their text
//! (OpenAPI's `200:` response codes are integers to YAML).

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;
use yaml_rust2::{Yaml, YamlLoader};

/// Which mapping keys are taken.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Strings only.
    Strings,
    /// Strings, and integers and booleans as their text.
    Scalars,
}

/// The first document of `text` as JSON; `what` names it in errors.
pub fn to_json(text: &str, keys: Keys, what: &str) -> Result<Value, String> {
    let mut aliases = NoAliases(false);
    Parser::new_from_str(text).load(&mut aliases, false).map_err(|e| format!("{what} is not YAML: {e}"))?;
    if aliases.0 {
        return Err(format!("{what} uses YAML aliases"));
    }
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("{what} is not YAML: {e}"))?;
    match docs.into_iter().next() {
        Some(doc) => convert(doc, keys, what),
        None => Err(format!("{what} is empty")),
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

fn convert(y: Yaml, keys: Keys, what: &str) -> Result<Value, String> {
    Ok(match y {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Integer(i) => Value::Number(i.into()),
        Yaml::Real(s) => {
            let f: f64 = s.parse().map_err(|_| format!("{what} has a number JSON cannot hold: {s}"))?;
            Value::Number(Number::from_f64(f).ok_or_else(|| format!("{what} has a number JSON cannot hold: {s}"))?)
        }
        Yaml::String(s) => Value::String(s),
        Yaml::Array(items) => Value::Array(items.into_iter().map(|i| convert(i, keys, what)).collect::<Result<_, _>>()?),
        Yaml::Hash(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match (k, keys) {
                    (Yaml::String(s), _) => s,
                    (Yaml::Integer(i), Keys::Scalars) => i.to_string(),
                    (Yaml::Boolean(b), Keys::Scalars) => b.to_string(),
                    _ => return Err(format!("{what} has a mapping key that is not a string")),
                };
                out.insert(key, convert(v, keys, what)?);
            }
            Value::Object(out)
        }
        Yaml::Alias(_) | Yaml::BadValue => return Err(format!("{what} uses YAML aliases")),
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
        assert!(to_json(text, Keys::Strings, "the document").unwrap_err().contains("not a string"));
        assert!(to_json("a: &x [1]\nb: *x\n", Keys::Scalars, "the document").unwrap_err().contains("aliases"));
        assert!(to_json("a: .nan\n", Keys::Scalars, "the document").unwrap_err().contains("cannot hold"));
    }
}
