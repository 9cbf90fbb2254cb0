//! `x-mcp-header` tool annotations (MCP 2026-07-28 `basic/transports.mdx` and
//! `server/tools.mdx#x-mcp-header`): validating a tool's `inputSchema` annotations into a
//! [`HeaderPlan`] (or an [`AnnotationError`] naming the one at fault), checking a client's
//! `Mcp-Param-*` headers against the body arguments, and building the headers an upstream expects
//! from its own schema.

use super::errors::RpcError;
use super::headers::{self, describe};
use serde_json::Value;

pub const ANNOTATION: &str = "x-mcp-header";
pub const HEADER_PREFIX: &str = "mcp-param-";
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    String,
    Integer,
    Boolean,
}

/// One mirrored argument: `Mcp-Param-{header}` carries the value at `path` in `arguments`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderParam {
    pub header: String,
    pub path: Vec<String>,
    pub ty: ParamType,
}

impl HeaderParam {
    pub fn header_name(&self) -> String {
        format!("Mcp-Param-{}", self.header)
    }

    pub fn argument(&self) -> String {
        self.path.join(".")
    }
}

/// All mirrored arguments of one tool.
pub type HeaderPlan = Vec<HeaderParam>;

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// Why a tool's `x-mcp-header` annotations are invalid: the annotation and the argument it is on
/// (`a.b`), named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnotationError {
    /// Not reached through `properties` alone (the JSON pointer of the schema it is on).
    #[error(
        "{ANNOTATION} at '{0}' is not statically reachable through 'properties' (items, oneOf/anyOf/allOf, $ref and the like \
            are not allowed)"
    )]
    Unreachable(String),
    /// Two annotations name the same header, case aside.
    #[error("{ANNOTATION} value '{0}' is used twice (names are compared case-insensitively)")]
    Twice(String),
    #[error("{ANNOTATION} on the schema root is not allowed")]
    OnRoot,
    #[error("{ANNOTATION} on '{arg}' must be a string")]
    NotString { arg: String },
    #[error("{ANNOTATION} on '{arg}' is empty")]
    Empty { arg: String },
    #[error("{ANNOTATION} '{}' on '{arg}' is not an HTTP token (RFC 9110 tchar only)", .name.escape_default())]
    NotToken { name: String, arg: String },
    /// A type other than string, integer and boolean (`ty`).
    #[error("{ANNOTATION} '{name}' on '{arg}' has type '{ty}': only string, integer and boolean may be mirrored")]
    Type { name: String, arg: String, ty: String },
    #[error("{ANNOTATION} '{name}' on '{arg}' needs a single type: string, integer or boolean")]
    NoType { name: String, arg: String },
}

/// Validates every `x-mcp-header` annotation of an `inputSchema`; the error names the reason.
pub fn plan(input_schema: &Value) -> Result<HeaderPlan, AnnotationError> {
    let mut out = Vec::new();
    let mut reached = Vec::new();
    walk_static(input_schema, &mut Vec::new(), "", &mut out, &mut reached)?;
    let mut all = Vec::new();
    walk_all(input_schema, String::new(), &mut all);
    if let Some(stray) = all.iter().find(|p| !reached.contains(p)) {
        return Err(AnnotationError::Unreachable(if stray.is_empty() { "/".to_string() } else { stray.clone() }));
    }
    for (i, a) in out.iter().enumerate() {
        if out[..i].iter().any(|b| b.header.eq_ignore_ascii_case(&a.header)) {
            return Err(AnnotationError::Twice(a.header.clone()));
        }
    }
    Ok(out)
}

fn walk_static(
    schema: &Value,
    path: &mut Vec<String>,
    ptr: &str,
    out: &mut HeaderPlan,
    reached: &mut Vec<String>,
) -> Result<(), AnnotationError> {
    if let Some(ann) = schema.get(ANNOTATION) {
        reached.push(ptr.to_string());
        let arg = path.join(".");
        if path.is_empty() {
            return Err(AnnotationError::OnRoot);
        }
        let Some(name) = ann.as_str() else { return Err(AnnotationError::NotString { arg }) };
        if name.is_empty() {
            return Err(AnnotationError::Empty { arg });
        }
        if !name.chars().all(is_tchar) {
            return Err(AnnotationError::NotToken { name: name.to_string(), arg });
        }
        let ty = match schema.get("type").and_then(Value::as_str) {
            Some("string") => ParamType::String,
            Some("integer") => ParamType::Integer,
            Some("boolean") => ParamType::Boolean,
            Some(other) => return Err(AnnotationError::Type { name: name.to_string(), arg, ty: other.to_string() }),
            None => return Err(AnnotationError::NoType { name: name.to_string(), arg }),
        };
        out.push(HeaderParam { header: name.to_string(), path: path.clone(), ty });
    }
    if let Some(Value::Object(props)) = schema.get("properties") {
        for (key, sub) in props {
            path.push(key.clone());
            walk_static(sub, path, &format!("{ptr}/properties/{key}"), out, reached)?;
            path.pop();
        }
    }
    Ok(())
}

/// Every place an annotation appears, as JSON pointers; data keywords are not schemas.
fn walk_all(v: &Value, ptr: String, found: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, sub) in map {
                match k.as_str() {
                    ANNOTATION => found.push(ptr.clone()),
                    "const" | "enum" | "default" | "examples" | "example" => {}
                    "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                        if let Value::Object(named) = sub {
                            for (name, s) in named {
                                walk_all(s, format!("{ptr}/{k}/{name}"), found);
                            }
                        }
                    }
                    _ => walk_all(sub, format!("{ptr}/{k}"), found),
                }
            }
        }
        Value::Array(items) => {
            for (i, s) in items.iter().enumerate() {
                walk_all(s, format!("{ptr}/{i}"), found);
            }
        }
        _ => {}
    }
}

/// The value at `path` inside the call's arguments; `None` when absent or null.
pub fn lookup<'a>(args: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = args;
    for key in path {
        cur = cur.get(key)?;
    }
    (!cur.is_null()).then_some(cur)
}

/// Checks the client's `Mcp-Param-*` headers against the body arguments (MCP 2026-07-28 `basic/transports.mdx`, request metadata headers).
/// `received` holds `(lower-cased header name, raw value)` for every `Mcp-Param-*` header.
pub fn check_inbound(plan: &HeaderPlan, args: &Value, received: &[(String, Vec<u8>)]) -> Result<(), RpcError> {
    for p in plan {
        let wanted = format!("{HEADER_PREFIX}{}", p.header.to_ascii_lowercase());
        let header = received.iter().find(|(n, _)| *n == wanted).map(|(_, v)| v.as_slice());
        let Some(body) = lookup(args, &p.path) else {
            continue;
        };
        if let (ParamType::Integer, Some(f)) = (p.ty, body.as_f64())
            && f.abs() > MAX_SAFE_INTEGER
        {
            return Err(RpcError::invalid_params(format!("argument '{}' is outside the safe integer range ±(2^53−1)", p.argument())));
        }
        let Some(raw) = header else {
            return Err(RpcError::header_mismatch(format!(
                "missing {} header for argument '{}' (body value {})",
                p.header_name(),
                p.argument(),
                describe(&headers::value_to_header_string(body).unwrap_or_else(|| body.to_string()))
            )));
        };
        let decoded = headers::decode(raw).map_err(|e| {
            RpcError::header_mismatch(format!(
                "{} header value {} is invalid: {e}",
                p.header_name(),
                describe(&String::from_utf8_lossy(raw))
            ))
        })?;
        if !headers::matches_body(&decoded, body) {
            return Err(RpcError::header_mismatch(format!(
                "{} header value {} does not match body value {}",
                p.header_name(),
                describe(&decoded),
                describe(&headers::value_to_header_string(body).unwrap_or_else(|| body.to_string()))
            )));
        }
    }
    for (name, raw) in received {
        if let Err(e) = headers::decode(raw) {
            return Err(RpcError::header_mismatch(format!(
                "{name} header value {} is invalid: {e}",
                describe(&String::from_utf8_lossy(raw))
            )));
        }
    }
    Ok(())
}

/// The mirrored values of a call, decoded, as `(lower-cased header name, value)`: what routing
/// rules match on. They come from the body, which the headers were checked against.
pub fn mirrored_values(plan: &HeaderPlan, args: &Value) -> Vec<(String, String)> {
    plan.iter().filter_map(|p| Some((p.header.to_ascii_lowercase(), headers::value_to_header_string(lookup(args, &p.path)?)?))).collect()
}

/// The `Mcp-Param-*` headers an upstream expects, built from its own schema's plan.
pub fn outbound(plan: &HeaderPlan, args: &Value) -> Vec<(String, String)> {
    plan.iter()
        .filter_map(|p| {
            let v = lookup(args, &p.path)?;
            Some((p.header_name(), headers::encode(&headers::value_to_header_string(v)?)))
        })
        .collect()
}

#[cfg(test)]
mod cases;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sql_schema() -> Value {
        json!({"type":"object","properties":{
            "region":{"type":"string","x-mcp-header":"Region"},
            "query":{"type":"string"},
            "opts":{"type":"object","properties":{"shard":{"type":"integer","x-mcp-header":"Shard"}}}}})
    }

    #[test]
    fn plans_reachable_annotations() {
        let p = plan(&sql_schema()).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1], HeaderParam { header: "Region".into(), path: vec!["region".into()], ty: ParamType::String });
        assert_eq!(p[0].path, vec!["opts".to_string(), "shard".to_string()]);
    }

    #[test]
    fn rejects_invalid_annotations() {
        let cases = [
            (json!({"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}), "only string"),
            (json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}), "empty"),
            (json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A B"}}}), "token"),
            (json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A\r\n"}}}), "token"),
            (
                json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Dup"},"b":{"type":"string","x-mcp-header":"dup"}}}),
                "twice",
            ),
            (json!({"type":"object","properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}), "reachable"),
            (json!({"type":"object","oneOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}), "reachable"),
            (
                json!({"type":"object","$defs":{"d":{"type":"string","x-mcp-header":"A"}},"properties":{"a":{"$ref":"#/$defs/d"}}}),
                "reachable",
            ),
            (json!({"type":"object","properties":{"a":{"x-mcp-header":"A"}}}), "single type"),
            (json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":7}}}), "must be a string"),
        ];
        for (schema, why) in cases {
            let err = plan(&schema).expect_err(&schema.to_string()).to_string();
            assert!(err.contains(why), "{err} should mention {why}");
        }
    }

    #[test]
    fn a_property_named_like_the_annotation_is_not_an_annotation() {
        let s = json!({"type":"object","properties":{"x-mcp-header":{"type":"string"}},"default":{"x-mcp-header":1}});
        assert_eq!(plan(&s).unwrap(), vec![]);
    }

    fn hdr(n: &str, v: &str) -> (String, Vec<u8>) {
        (n.to_ascii_lowercase(), v.as_bytes().to_vec())
    }

    #[test]
    fn checks_inbound_headers() {
        let p = plan(&sql_schema()).unwrap();
        let args = json!({"region":"us-west1","query":"select 1","opts":{"shard":42}});
        assert!(check_inbound(&p, &args, &[hdr("Mcp-Param-Region", "us-west1"), hdr("mcp-param-shard", "42.0")]).is_ok());
        let e = check_inbound(&p, &args, &[hdr("Mcp-Param-Shard", "42")]).unwrap_err();
        assert_eq!(e.code, -32020);
        assert!(e.message.contains("Mcp-Param-Region"), "{}", e.message);
        let e = check_inbound(&p, &args, &[hdr("Mcp-Param-Region", "eu"), hdr("Mcp-Param-Shard", "42")]).unwrap_err();
        assert!(e.message.contains("'eu'") && e.message.contains("'us-west1'"), "{}", e.message);
        let e = check_inbound(&p, &args, &[hdr("Mcp-Param-Region", "=?base64?!!?="), hdr("Mcp-Param-Shard", "42")]).unwrap_err();
        assert!(e.message.contains("invalid"), "{}", e.message);
        // Absent or null arguments expect no header.
        assert!(check_inbound(&p, &json!({"region":null}), &[]).is_ok());
        // An unrecognised Mcp-Param header is ignored unless it is malformed.
        assert!(check_inbound(&p, &json!({}), &[hdr("Mcp-Param-Other", "x")]).is_ok());
        assert!(check_inbound(&p, &json!({}), &[hdr("Mcp-Param-Other", "=?base64?***?=")]).is_err());
        let enc = json!({"region":"héllo"});
        assert!(check_inbound(&p, &enc, &[hdr("Mcp-Param-Region", "=?base64?aMOpbGxv?=")]).is_ok());
    }

    #[test]
    fn builds_outbound_headers() {
        let p = plan(&sql_schema()).unwrap();
        let h = outbound(&p, &json!({"region":" spaced","opts":{"shard":7}}));
        assert_eq!(h, vec![("Mcp-Param-Shard".into(), "7".into()), ("Mcp-Param-Region".into(), "=?base64?IHNwYWNlZA==?=".into())]);
        assert!(outbound(&p, &json!({})).is_empty());
    }
}
