//! A tool call's arguments written back as the HTTP request its operation describes: path
//! parameters percent-escaped into the template, query, header and cookie parameters serialised as
//! their `style` and `explode` say (OpenAPI 3 §4.8.12.4: `simple`, `label`, `matrix`, `form`,
//! `spaceDelimited`, `pipeDelimited`, `deepObject`), and the body as JSON, a form or text. Nothing
//! a model sends can leave the path (every `/`, `?` and `#` of a value is escaped, and a segment
//! that is `.` or `..` is written `%2E` / `%2E%2E`) or add a header line. Arguments that make no
//! request are a [`CallError`] naming the one at fault.

use super::ops::{BodyKind, In, Operation, Param, Style};
use serde_json::{Map, Value};

/// The request, relative to the API's base URL.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpCall {
    pub method: String,
    /// The path (from the template) and query, to append to the base URL's path.
    pub path_and_query: String,
    pub headers: Vec<(String, String)>,
    /// Content type and bytes.
    pub body: Option<(String, Vec<u8>)>,
}

/// Why a call's arguments make no request: a missing or unusable argument, named.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// A required parameter left out (or `null`).
    #[error("the {} parameter {name:?} is required", place(*.location))]
    Missing { location: In, name: String },
    #[error("the path parameter {0:?} is empty")]
    EmptyPath(String),
    #[error("the header parameter {0:?} contains a line break")]
    LineBreak(String),
    /// The required body left out (its argument named).
    #[error("the request body ({0}) is required")]
    NoBody(String),
    #[error("the body cannot be written as JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("a form body is an object of fields")]
    FormNotObject,
}

/// The request `op` makes with `args`; `Err` names a missing or unusable argument.
pub fn request(op: &Operation, args: &Map<String, Value>) -> Result<HttpCall, CallError> {
    let mut path = String::new();
    let mut rest = op.path.as_str();
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { break };
        path.push_str(&rest[..open]);
        let var = &rest[open + 1..open + close];
        let param = op.params.iter().find(|p| p.location == In::Path && p.name == var);
        let value = param.and_then(|p| args.get(&p.key)).filter(|v| !v.is_null());
        match (param, value) {
            (Some(p), Some(v)) => path.push_str(&path_value(p, v)?),
            _ => return Err(CallError::Missing { location: In::Path, name: var.to_string() }),
        }
        rest = &rest[open + close + 1..];
    }
    path.push_str(rest);
    let path = dot_segments_escaped(&path);
    let mut query: Vec<String> = Vec::new();
    let mut headers = Vec::new();
    let mut cookies = Vec::new();
    for p in op.params.iter().filter(|p| p.location != In::Path) {
        let Some(v) = args.get(&p.key).filter(|v| !v.is_null()) else {
            if p.required {
                return Err(CallError::Missing { location: p.location, name: p.name.clone() });
            }
            continue;
        };
        match p.location {
            In::Query => query.extend(query_pairs(p, v)),
            In::Header => {
                let text = simple(v, p.explode, &|s| s.to_string());
                if text.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                    return Err(CallError::LineBreak(p.name.clone()));
                }
                headers.push((p.name.clone(), text));
            }
            In::Cookie => cookies.push(format!("{}={}", p.name, simple(v, false, &|s| escape(s, false)))),
            In::Path => {}
        }
    }
    if !cookies.is_empty() {
        headers.push(("cookie".into(), cookies.join("; ")));
    }
    let body = match &op.body {
        None => None,
        Some(b) => match args.get(&b.key).filter(|v| !v.is_null()) {
            None if b.required => return Err(CallError::NoBody(b.key.clone())),
            None => None,
            Some(v) => Some((b.content_type.clone(), body_bytes(b.kind, v)?)),
        },
    };
    let path_and_query = if query.is_empty() { path } else { format!("{path}?{}", query.join("&")) };
    Ok(HttpCall { method: op.method.clone(), path_and_query, headers, body })
}

/// The path with every segment that is exactly `.` or `..` (a value such as `".."`, or a label
/// `"."` written as `..`) escaped as `%2E` / `%2E%2E`: RFC 3986 §5.2.4 removes dot-segments, so a
/// server or proxy that normalises the path would otherwise read another operation (`/files/..`
/// is `/`), with the upstream's credentials.
fn dot_segments_escaped(path: &str) -> String {
    path.split('/')
        .map(|segment| match segment {
            "." => "%2E",
            ".." => "%2E%2E",
            other => other,
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn place(location: In) -> &'static str {
    match location {
        In::Path => "path",
        In::Query => "query",
        In::Header => "header",
        In::Cookie => "cookie",
    }
}

/// A value as text: strings as they are, numbers and booleans as JSON writes them.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// RFC 3986 escaping: everything but the unreserved characters (and, with `reserved`, the
/// reserved ones, `allowReserved`).
fn escape(s: &str, reserved: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        let keep = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') || (reserved && b"!$&'()*+,;=:@/?#[]".contains(&b));
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `simple` style: arrays joined with `,`; objects as `k,v,k,v` or, exploded, `k=v,k=v`.
fn simple(v: &Value, explode: bool, enc: &dyn Fn(&str) -> String) -> String {
    match v {
        Value::Array(items) => items.iter().map(|i| enc(&text(i))).collect::<Vec<_>>().join(","),
        Value::Object(map) if explode => map.iter().map(|(k, v)| format!("{}={}", enc(k), enc(&text(v)))).collect::<Vec<_>>().join(","),
        Value::Object(map) => map.iter().flat_map(|(k, v)| [enc(k), enc(&text(v))]).collect::<Vec<_>>().join(","),
        other => enc(&text(other)),
    }
}

/// A path parameter in its style, escaped: a value can never add a segment.
fn path_value(p: &Param, v: &Value) -> Result<String, CallError> {
    let enc = |s: &str| escape(s, false);
    let body = simple(v, p.explode, &enc);
    let written = match p.style {
        Style::Label if p.explode && v.is_array() => format!(".{}", body.replace(',', ".")),
        Style::Label => format!(".{body}"),
        Style::Matrix => match v {
            Value::Array(items) if p.explode => items.iter().map(|i| format!(";{}={}", p.name, enc(&text(i)))).collect(),
            Value::Object(map) if p.explode => map.iter().map(|(k, v)| format!(";{}={}", enc(k), enc(&text(v)))).collect(),
            _ => format!(";{}={body}", p.name),
        },
        _ => body,
    };
    if written.is_empty() {
        return Err(CallError::EmptyPath(p.name.clone()));
    }
    Ok(written)
}

/// A query parameter as `name=value` pairs (already escaped).
fn query_pairs(p: &Param, v: &Value) -> Vec<String> {
    let enc = |s: &str| escape(s, p.allow_reserved);
    let name = escape(&p.name, false);
    match (p.style, v) {
        (Style::DeepObject, Value::Object(map)) => {
            map.iter().map(|(k, v)| format!("{name}%5B{}%5D={}", escape(k, false), enc(&text(v)))).collect()
        }
        (Style::SpaceDelimited, Value::Array(items)) if !p.explode => {
            vec![format!("{name}={}", items.iter().map(|i| enc(&text(i))).collect::<Vec<_>>().join("%20"))]
        }
        (Style::PipeDelimited, Value::Array(items)) if !p.explode => {
            vec![format!("{name}={}", items.iter().map(|i| enc(&text(i))).collect::<Vec<_>>().join("%7C"))]
        }
        (_, Value::Array(items)) if p.explode => items.iter().map(|i| format!("{name}={}", enc(&text(i)))).collect(),
        (_, Value::Object(map)) if p.explode => map.iter().map(|(k, v)| format!("{}={}", escape(k, false), enc(&text(v)))).collect(),
        (_, other) => vec![format!("{name}={}", simple(other, false, &enc))],
    }
}

/// The body's bytes for its kind.
fn body_bytes(kind: BodyKind, v: &Value) -> Result<Vec<u8>, CallError> {
    match kind {
        BodyKind::Json => serde_json::to_vec(v).map_err(CallError::Json),
        BodyKind::Text => Ok(text(v).into_bytes()),
        BodyKind::Form => {
            let Value::Object(map) = v else { return Err(CallError::FormNotObject) };
            let pairs: Vec<String> = map
                .iter()
                .flat_map(|(k, v)| match v {
                    Value::Array(items) => {
                        items.iter().map(|i| format!("{}={}", escape(k, false), escape(&text(i), false))).collect::<Vec<_>>()
                    }
                    other => vec![format!("{}={}", escape(k, false), escape(&text(other), false))],
                })
                .collect();
            Ok(pairs.join("&").into_bytes())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ops::{Body, Operation};
    use super::*;
    use serde_json::json;

    fn param(name: &str, location: In, style: Style, explode: bool) -> Param {
        Param { name: name.into(), key: name.into(), location, required: false, style, explode, allow_reserved: false }
    }

    fn op(path: &str, params: Vec<Param>, body: Option<Body>) -> Operation {
        Operation { name: "t".into(), method: "GET".into(), path: path.into(), params, body, tool: json!({}), wrapped: false }
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn path_values_cannot_leave_their_segment() {
        let o = op("/files/{name}/raw", vec![param("name", In::Path, Style::Simple, false)], None);
        let c = request(&o, &args(json!({ "name": "../../admin?x=1#y" }))).unwrap();
        assert_eq!(c.path_and_query, "/files/..%2F..%2Fadmin%3Fx%3D1%23y/raw");
        assert_eq!(request(&o, &args(json!({}))).unwrap_err().to_string(), r#"the path parameter "name" is required"#);
        let label = op("/c/{v}", vec![param("v", In::Path, Style::Label, false)], None);
        assert_eq!(request(&label, &args(json!({ "v": ["a", "b"] }))).unwrap().path_and_query, "/c/.a,b");
        let matrix = op("/c/{v}", vec![param("v", In::Path, Style::Matrix, true)], None);
        assert_eq!(request(&matrix, &args(json!({ "v": ["a", "b"] }))).unwrap().path_and_query, "/c/;v=a;v=b");
    }

    /// A value that is `.` or `..` (or makes a segment that is) is not a dot-segment a server or
    /// proxy would remove: `/files/..` must not become `/`, another operation.
    #[test]
    fn dot_segments_are_escaped_so_no_server_removes_them() {
        let o = op("/files/{name}/image", vec![param("name", In::Path, Style::Simple, false)], None);
        for (name, path) in
            [("..", "/files/%2E%2E/image"), (".", "/files/%2E/image"), ("...", "/files/.../image"), ("..a", "/files/..a/image")]
        {
            assert_eq!(request(&o, &args(json!({ "name": name }))).unwrap().path_and_query, path, "{name:?}");
        }
        let last = op("/public/{id}", vec![param("id", In::Path, Style::Simple, false)], None);
        assert_eq!(request(&last, &args(json!({ "id": ".." }))).unwrap().path_and_query, "/public/%2E%2E");
        // Two values that make one segment, and a label value that does.
        let two = op("/x/{a}{b}/y", vec![param("a", In::Path, Style::Simple, false), param("b", In::Path, Style::Simple, false)], None);
        assert_eq!(request(&two, &args(json!({ "a": ".", "b": "." }))).unwrap().path_and_query, "/x/%2E%2E/y");
        let label = op("/c/{v}", vec![param("v", In::Path, Style::Label, false)], None);
        assert_eq!(request(&label, &args(json!({ "v": "." }))).unwrap().path_and_query, "/c/%2E%2E");
        // An array's items stay in their segment.
        let list = op("/c/{v}", vec![param("v", In::Path, Style::Simple, false)], None);
        assert_eq!(request(&list, &args(json!({ "v": ["..", "."] }))).unwrap().path_and_query, "/c/..,.");
    }

    #[test]
    fn query_styles_follow_the_specification() {
        let cases = [
            (Style::Form, true, json!(["a", "b"]), "ids=a&ids=b"),
            (Style::Form, false, json!(["a", "b"]), "ids=a,b"),
            (Style::SpaceDelimited, false, json!(["a", "b"]), "ids=a%20b"),
            (Style::PipeDelimited, false, json!(["a", "b"]), "ids=a%7Cb"),
            (Style::DeepObject, true, json!({ "role": "admin" }), "ids%5Brole%5D=admin"),
            (Style::Form, true, json!({ "r": 1, "g": 2 }), "g=2&r=1"),
            (Style::Form, false, json!({ "r": 1, "g": 2 }), "ids=g,2,r,1"),
            (Style::Form, true, json!("a b&c=d"), "ids=a%20b%26c%3Dd"),
        ];
        for (style, explode, value, want) in cases {
            let o = op("/x", vec![param("ids", In::Query, style, explode)], None);
            assert_eq!(request(&o, &args(json!({ "ids": value }))).unwrap().path_and_query, format!("/x?{want}"), "{style:?} {explode}");
        }
    }

    #[test]
    fn headers_cookies_and_bodies() {
        let o = op(
            "/x",
            vec![param("X-Trace", In::Header, Style::Simple, false), param("session", In::Cookie, Style::Form, true)],
            Some(Body { key: "body".into(), content_type: "application/json".into(), kind: BodyKind::Json, required: true }),
        );
        let c = request(&o, &args(json!({ "X-Trace": [1, 2], "session": "a;b", "body": { "n": 1 } }))).unwrap();
        assert_eq!(c.headers, vec![("X-Trace".into(), "1,2".into()), ("cookie".into(), "session=a%3Bb".into())]);
        assert_eq!(c.body, Some(("application/json".into(), br#"{"n":1}"#.to_vec())));
        let refused = |a: Value| request(&o, &args(a)).unwrap_err().to_string();
        assert_eq!(refused(json!({ "X-Trace": "a\r\nEvil: 1", "body": {} })), r#"the header parameter "X-Trace" contains a line break"#);
        assert_eq!(refused(json!({})), "the request body (body) is required");
        let form = op(
            "/f",
            vec![],
            Some(Body {
                key: "body".into(),
                content_type: "application/x-www-form-urlencoded".into(),
                kind: BodyKind::Form,
                required: false,
            }),
        );
        assert_eq!(
            request(&form, &args(json!({ "body": { "a": "1 2", "b": [1, 2] } }))).unwrap().body.unwrap().1,
            b"a=1%202&b=1&b=2".to_vec()
        );
    }
}
