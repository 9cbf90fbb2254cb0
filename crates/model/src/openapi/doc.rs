//! An OpenAPI description as plain JSON: parsed from JSON or YAML, its dialect (Swagger 2.0,
//! OpenAPI 3.0 or 3.1), the server URL it names, and `$ref`s resolved within the document only. A
//! `$ref` to another document is never fetched: it reads as an unresolved reference ([`RefError`]),
//! which the caller turns into a note (a schema then accepts anything) or a skipped operation.
//! Schemas are inlined with a guard on cycles and on size (references can multiply a schema
//! exponentially), and the 3.0 and 2.0 spellings JSON Schema does not share (`nullable`, boolean
//! `exclusiveMaximum`, `x-nullable`, `example`) are rewritten, so the result is a 2020-12 schema a
//! validator takes. A text that is no description of a dialect read here is a [`DocError`].

use crate::yaml::YamlError;
use serde_json::{Map, Value, json};

/// The largest schema (in nodes) one tool's input or output may inline to.
const MAX_NODES: usize = 20_000;
/// How deep inlined references may nest.
const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Swagger2,
    OpenApi30,
    OpenApi31,
}

/// Why a description cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    #[error("the OpenAPI document is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error(transparent)]
    NotYaml(#[from] YamlError),
    /// An `openapi` version other than 3.0, 3.1 or 3.2.
    #[error("OpenAPI {0} is not supported (3.0, 3.1 and Swagger 2.0 are)")]
    OpenApiVersion(String),
    /// A `swagger` version other than 2.0.
    #[error("Swagger {0} is not supported (2.0 is)")]
    SwaggerVersion(String),
    #[error("the document has neither `openapi` nor `swagger`: not an OpenAPI description")]
    NotOpenApi,
}

/// Why a `$ref` does not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    /// More references in a row than inlining follows (`MAX_DEPTH`).
    #[error("a chain of $refs too long")]
    ChainTooLong,
    #[error("$ref {0:?} points into another document, which is never fetched")]
    Remote(String),
    #[error("$ref {0:?} names nothing in the document")]
    Dangling(String),
}

/// The document's text as JSON (JSON when it starts with `{`, YAML otherwise).
pub fn parse(text: &str) -> Result<Value, DocError> {
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') {
        serde_json::from_str(trimmed).map_err(DocError::NotJson)
    } else {
        Ok(crate::yaml::to_json(trimmed, crate::yaml::Keys::Scalars, "the OpenAPI document")?)
    }
}

/// Which dialect the document is written in.
pub fn dialect(doc: &Value) -> Result<Dialect, DocError> {
    if let Some(v) = doc.get("openapi").and_then(Value::as_str) {
        return match v {
            v if v.starts_with("3.0") => Ok(Dialect::OpenApi30),
            v if v.starts_with("3.1") || v.starts_with("3.2") => Ok(Dialect::OpenApi31),
            other => Err(DocError::OpenApiVersion(other.to_string())),
        };
    }
    match doc.get("swagger").and_then(Value::as_str) {
        Some("2.0") => Ok(Dialect::Swagger2),
        Some(other) => Err(DocError::SwaggerVersion(other.to_string())),
        None => Err(DocError::NotOpenApi),
    }
}

/// The first server URL the document names, its variables set to their defaults (2.0: `schemes`,
/// `host` and `basePath`; without `host`, the `basePath` alone, on the host serving the
/// description, as Swagger 2.0 says); `None` when it names none. May be relative.
pub fn server_url(doc: &Value, dialect: Dialect) -> Option<String> {
    if dialect == Dialect::Swagger2 {
        let base = doc.get("basePath").and_then(Value::as_str).unwrap_or("");
        let Some(host) = doc.get("host").and_then(Value::as_str) else {
            return Some(base.to_string()).filter(|b| b.starts_with('/') && b.len() > 1);
        };
        let scheme = doc.get("schemes").and_then(|s| s.get(0)).and_then(Value::as_str).unwrap_or("https");
        return Some(format!("{scheme}://{host}{base}"));
    }
    let server = doc.get("servers")?.get(0)?;
    let mut url = server.get("url")?.as_str()?.to_string();
    if let Some(vars) = server.get("variables").and_then(Value::as_object) {
        for (name, v) in vars {
            let default = v.get("default").and_then(Value::as_str).unwrap_or("");
            url = url.replace(&format!("{{{name}}}"), default);
        }
    }
    Some(url)
}

/// Resolves `$ref`s against one document.
pub struct Resolver<'a> {
    pub root: &'a Value,
    pub dialect: Dialect,
}

/// A schema inlined, with what could not be: remote references, cycles, size.
#[derive(Debug, Default)]
pub struct Inlined {
    pub notes: Vec<String>,
}

impl<'a> Resolver<'a> {
    /// The object a `$ref` names (following chains), or the value itself; `Err` for a reference
    /// that is remote or names nothing.
    pub fn deref(&self, mut v: &'a Value) -> Result<&'a Value, RefError> {
        for _ in 0..MAX_DEPTH {
            let Some(r) = v.get("$ref").and_then(Value::as_str) else { return Ok(v) };
            v = self.target(r)?;
        }
        Err(RefError::ChainTooLong)
    }

    /// What a local reference (`#/…`, a JSON pointer) names.
    fn target(&self, r: &str) -> Result<&'a Value, RefError> {
        let Some(pointer) = r.strip_prefix('#') else {
            return Err(RefError::Remote(r.to_string()));
        };
        let decoded = crate::toolbox::percent_decode(pointer);
        self.root.pointer(&decoded).ok_or_else(|| RefError::Dangling(r.to_string()))
    }

    /// `schema` with every local reference inlined and the dialect's spellings made JSON Schema
    /// 2020-12; what could not be inlined accepts anything and is noted in `out`.
    pub fn schema(&self, schema: &Value, out: &mut Inlined) -> Value {
        let mut budget = MAX_NODES;
        let mut stack = Vec::new();
        self.inline(schema, &mut stack, &mut budget, out)
    }

    fn inline(&self, v: &Value, stack: &mut Vec<String>, budget: &mut usize, out: &mut Inlined) -> Value {
        if *budget == 0 {
            if !out.notes.iter().any(|n| n.contains("too large")) {
                out.notes.push("a schema too large to inline was cut short (it accepts anything there)".into());
            }
            return json!({});
        }
        *budget -= 1;
        match v {
            Value::Object(map) => {
                if let Some(r) = map.get("$ref").and_then(Value::as_str) {
                    if stack.iter().any(|s| s == r) || stack.len() >= MAX_DEPTH {
                        return json!({ "description": format!("(recursive: {r})") });
                    }
                    let target = match self.target(r) {
                        Ok(t) => t,
                        Err(e) => {
                            out.notes.push(e.to_string());
                            return json!({});
                        }
                    };
                    stack.push(r.to_string());
                    let mut inlined = self.inline(target, stack, budget, out);
                    stack.pop();
                    // 3.1 allows keywords beside `$ref` (a description, mostly): they win.
                    if let Value::Object(res) = &mut inlined {
                        for (k, val) in map.iter().filter(|(k, _)| k.as_str() != "$ref") {
                            res.insert(k.clone(), self.inline(val, stack, budget, out));
                        }
                    }
                    return inlined;
                }
                let mut res = Map::new();
                for (k, val) in map {
                    res.insert(k.clone(), self.inline(val, stack, budget, out));
                }
                if self.dialect != Dialect::OpenApi31 {
                    older_spellings(&mut res);
                }
                known_types(&mut res);
                if let Some(example) = res.remove("example") {
                    res.entry("examples").or_insert_with(|| Value::Array(vec![example]));
                }
                Value::Object(res)
            }
            Value::Array(items) => Value::Array(items.iter().map(|i| self.inline(i, stack, budget, out)).collect()),
            other => other.clone(),
        }
    }
}

/// 3.0 and 2.0 keywords JSON Schema 2020-12 spells otherwise.
fn older_spellings(res: &mut Map<String, Value>) {
    let nullable = res.remove("nullable").or_else(|| res.remove("x-nullable")).and_then(|v| v.as_bool()).unwrap_or(false);
    if nullable && let Some(Value::String(t)) = res.get("type").cloned() {
        res.insert("type".into(), json!([t, "null"]));
    }
    for (flag, bound) in [("exclusiveMaximum", "maximum"), ("exclusiveMinimum", "minimum")] {
        match res.get(flag) {
            Some(Value::Bool(true)) => {
                if let Some(b) = res.remove(bound) {
                    res.insert(flag.into(), b);
                } else {
                    res.remove(flag);
                }
            }
            Some(Value::Bool(false)) => {
                res.remove(flag);
            }
            _ => {}
        }
    }
    // A 2.0 `type: file` has no JSON Schema form.
    if res.get("type").and_then(Value::as_str) == Some("file") {
        res.insert("type".into(), json!("string"));
    }
}

/// A `type` JSON Schema does not know: the usual slips (`int`, `bool`, `str`, `float`…) are
/// read as meant, anything else is dropped (the schema then accepts any type there), so one bad
/// word in a public description does not make a validator refuse the whole tool.
fn known_types(res: &mut Map<String, Value>) {
    fn fix(t: &str) -> Option<&'static str> {
        Some(match t {
            "string" | "str" | "text" => "string",
            "integer" | "int" | "long" | "int32" | "int64" => "integer",
            "number" | "float" | "double" | "decimal" => "number",
            "boolean" | "bool" => "boolean",
            "object" | "dict" | "map" => "object",
            "array" | "list" => "array",
            "null" => "null",
            _ => return None,
        })
    }
    match res.get("type") {
        Some(Value::String(t)) => match fix(t) {
            Some(known) => {
                res.insert("type".into(), known.into());
            }
            None => {
                res.remove("type");
            }
        },
        Some(Value::Array(ts)) => {
            let fixed: Vec<Value> = ts.iter().filter_map(Value::as_str).filter_map(fix).map(Value::from).collect();
            if fixed.is_empty() {
                res.remove("type");
            } else {
                res.insert("type".into(), Value::Array(fixed));
            }
        }
        Some(_) => {
            res.remove("type");
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_dialect_and_its_server() {
        let v3 = parse(
            "openapi: 3.1.0\nservers:\n  - url: https://{region}.example.com/v1\n    variables:\n      region:\n        default: eu\n",
        )
        .unwrap();
        assert_eq!(dialect(&v3).unwrap(), Dialect::OpenApi31);
        assert_eq!(server_url(&v3, Dialect::OpenApi31).as_deref(), Some("https://eu.example.com/v1"));
        let v2 = parse(r#"{"swagger":"2.0","host":"httpbin.org","basePath":"/","schemes":["https"]}"#).unwrap();
        assert_eq!(dialect(&v2).unwrap(), Dialect::Swagger2);
        assert_eq!(server_url(&v2, Dialect::Swagger2).as_deref(), Some("https://httpbin.org/"));
        // Without `host`, the host serving the description, under `basePath` (Swagger 2.0).
        let hostless = parse(r#"{"swagger":"2.0","basePath":"/v2"}"#).unwrap();
        assert_eq!(server_url(&hostless, Dialect::Swagger2).as_deref(), Some("/v2"));
        assert_eq!(server_url(&json!({ "swagger": "2.0", "basePath": "/" }), Dialect::Swagger2), None);
        assert_eq!(server_url(&json!({ "openapi": "3.0.3" }), Dialect::OpenApi30), None);
        assert!(dialect(&json!({ "openapi": "4.0" })).is_err());
        assert!(dialect(&json!({ "info": {} })).unwrap_err().to_string().contains("not an OpenAPI"));
    }

    #[test]
    fn inlines_local_refs_never_remote_ones_and_survives_cycles_and_blowups() {
        let doc = json!({
            "components": { "schemas": {
                "Pet": { "type": "object", "properties": { "name": { "type": "string", "nullable": true }, "owner": { "$ref": "#/components/schemas/Person" } } },
                "Person": { "type": "object", "properties": { "pets": { "type": "array", "items": { "$ref": "#/components/schemas/Pet" } } } },
                "Far": { "$ref": "https://evil.example/schema.json" }
            } }
        });
        let r = Resolver { root: &doc, dialect: Dialect::OpenApi30 };
        let mut notes = Inlined::default();
        let s = r.schema(&json!({ "$ref": "#/components/schemas/Pet" }), &mut notes);
        assert_eq!(s["properties"]["name"]["type"], json!(["string", "null"]));
        assert_eq!(s["properties"]["owner"]["properties"]["pets"]["items"]["description"], "(recursive: #/components/schemas/Pet)");
        assert!(notes.notes.is_empty());
        let far = r.schema(&json!({ "$ref": "#/components/schemas/Far" }), &mut notes);
        assert_eq!(far, json!({}));
        assert!(notes.notes[0].contains("never fetched"), "{notes:?}");
        // Each level doubles: 2^40 nodes if inlined naively.
        let mut schemas = Map::new();
        for i in 0..40 {
            let next = format!("#/components/schemas/S{}", i + 1);
            schemas.insert(format!("S{i}"), json!({ "type": "object", "properties": { "a": { "$ref": next }, "b": { "$ref": next } } }));
        }
        schemas.insert("S40".into(), json!({ "type": "string" }));
        let doc = json!({ "components": { "schemas": schemas } });
        let r = Resolver { root: &doc, dialect: Dialect::OpenApi31 };
        let mut notes = Inlined::default();
        r.schema(&json!({ "$ref": "#/components/schemas/S0" }), &mut notes);
        assert!(notes.notes.iter().any(|n| n.contains("too large")), "{notes:?}");
    }

    #[test]
    fn older_spellings_become_json_schema() {
        let doc = json!({});
        let r = Resolver { root: &doc, dialect: Dialect::Swagger2 };
        let s = r.schema(
            &json!({ "type": "integer", "maximum": 5, "exclusiveMaximum": true, "x-nullable": true, "example": 3 }),
            &mut Inlined::default(),
        );
        assert_eq!(s, json!({ "type": ["integer", "null"], "exclusiveMaximum": 5, "examples": [3] }));
        // httpbin's `/bytes/{n}` says `type: int`.
        assert_eq!(r.schema(&json!({ "type": "int" }), &mut Inlined::default()), json!({ "type": "integer" }));
        assert_eq!(r.schema(&json!({ "type": "whatever" }), &mut Inlined::default()), json!({}));
    }
}
