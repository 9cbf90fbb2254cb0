//! The operations of an OpenAPI description that become tools, and why the others do not (an
//! [`OpError`] for one that was selected but cannot be a tool). Each
//! selected operation gets a name (its `operationId`, or a stable one from method and path), a
//! description, an `inputSchema` (one property per path, query, header and cookie parameter, and
//! `body` for the request body), an `outputSchema` from its first JSON success response, and
//! annotations from its method. What an operation needs at call time (where each argument goes,
//! how it is serialised) is kept beside the tool.
//!
//! Headers that carry the gateway's own business are never parameters a model may set:
//! `Authorization`, `Cookie`, `Host`, `Content-Type`, `Accept`, `Content-Length` and the hop-by-hop
//! ones are left out (OpenAPI itself ignores the first three).

use super::doc::{Dialect, DocError, Inlined, RefError, Resolver};
use crate::policy::glob;
use serde_json::{Map, Value, json};

/// Methods an operation may have, in the order paths list them.
const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/// Headers a parameter may not name.
const RESERVED_HEADERS: [&str; 11] = [
    "authorization",
    "cookie",
    "host",
    "content-type",
    "accept",
    "content-length",
    "connection",
    "transfer-encoding",
    "proxy-authorization",
    "te",
    "upgrade",
];

/// Which operations become tools.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Upper-case methods (default: `GET` only).
    pub methods: Vec<String>,
    pub include_tags: Vec<String>,
    pub exclude_tags: Vec<String>,
    /// Globs over the path template (`/pets/*`).
    pub include_paths: Vec<String>,
    pub exclude_paths: Vec<String>,
    /// Globs over the operation's name (its `operationId`, or the name made for it).
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            methods: vec!["GET".into()],
            include_tags: Vec::new(),
            exclude_tags: Vec::new(),
            include_paths: Vec::new(),
            exclude_paths: Vec::new(),
            include: Vec::new(),
            exclude: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum In {
    Path,
    Query,
    Header,
    Cookie,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Simple,
    Label,
    Matrix,
    Form,
    SpaceDelimited,
    PipeDelimited,
    DeepObject,
}

/// One parameter: its name on the wire, the argument that carries it, and how it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub key: String,
    pub location: In,
    pub required: bool,
    pub style: Style,
    pub explode: bool,
    pub allow_reserved: bool,
}

/// How a request body is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    Json,
    Form,
    Text,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Body {
    pub key: String,
    pub content_type: String,
    pub kind: BodyKind,
    pub required: bool,
}

/// An operation that became a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub name: String,
    /// Upper case.
    pub method: String,
    /// The path template, `{name}` for each path parameter.
    pub path: String,
    pub params: Vec<Param>,
    pub body: Option<Body>,
    /// The tool definition (`name`, `title`, `description`, `inputSchema`, `outputSchema`,
    /// `annotations`).
    pub tool: Value,
    /// Its JSON result is not an object: `structuredContent` is `{"result": …}`.
    pub wrapped: bool,
}

/// An operation that did not become a tool, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    /// `GET /pets/{id}`.
    pub operation: String,
    pub reason: String,
}

/// What a description yields.
#[derive(Debug, Clone, Default)]
pub struct Api {
    pub dialect: Option<Dialect>,
    pub title: String,
    pub version: String,
    pub description: Option<String>,
    /// The first server URL the document names (may be relative, or absent).
    pub server: Option<String>,
    pub operations: Vec<Operation>,
    pub skipped: Vec<Skipped>,
    /// Notes about operations that did become tools (a remote `$ref` not fetched, a cycle).
    pub notes: Vec<String>,
}

/// Why a selected operation does not become a tool (the reason its [`Skipped`] gives).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    #[error(transparent)]
    Ref(#[from] RefError),
    #[error("a parameter without name or in")]
    Unnamed,
    #[error("Swagger 2.0 formData parameters are not supported")]
    FormData,
    /// A parameter's `in` that is none of path, query, header, cookie, body.
    #[error("a parameter in {0:?}")]
    Place(String),
    #[error("a request body without content")]
    NoContent,
    /// A request body in none of the media types supported (those it offers).
    #[error("its request body is {0:?}; JSON, form and text bodies are supported")]
    BodyKinds(Vec<String>),
}

/// The operations of `doc` that `sel` selects, as tools.
pub fn build(doc: &Value, sel: &Selection) -> Result<Api, DocError> {
    let dialect = super::doc::dialect(doc)?;
    let info = doc.get("info");
    let text = |k: &str| info.and_then(|i| i.get(k)).and_then(Value::as_str).map(str::to_string);
    let mut api = Api {
        dialect: Some(dialect),
        title: text("title").unwrap_or_else(|| "OpenAPI".into()),
        version: text("version").unwrap_or_default(),
        description: text("description"),
        server: super::doc::server_url(doc, dialect),
        ..Api::default()
    };
    let r = Resolver { root: doc, dialect };
    let Some(paths) = doc.get("paths").and_then(Value::as_object) else { return Ok(api) };
    let mut taken = std::collections::BTreeSet::new();
    for (path, item) in paths {
        let item = match r.deref(item) {
            Ok(i) => i,
            Err(e) => {
                api.skipped.push(Skipped { operation: path.clone(), reason: e.to_string() });
                continue;
            }
        };
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let label = format!("{} {path}", method.to_uppercase());
            let name = unique(&mut taken, &base_name(op, method, path));
            if let Some(reason) = unselected(sel, op, method, path, &name) {
                taken.remove(&name);
                api.skipped.push(Skipped { operation: label, reason });
                continue;
            }
            match operation(&r, item, op, method, path, name.clone()) {
                Ok((o, notes)) => {
                    api.notes.extend(notes.into_iter().map(|n| format!("{label}: {n}")));
                    api.operations.push(o);
                }
                Err(reason) => {
                    taken.remove(&name);
                    api.skipped.push(Skipped { operation: label, reason: reason.to_string() });
                }
            }
        }
    }
    Ok(api)
}

/// The operation's name before uniqueness: its `operationId` made safe, or method and path.
fn base_name(op: &Value, method: &str, path: &str) -> String {
    let raw = match op.get("operationId").and_then(Value::as_str) {
        Some(id) if !id.trim().is_empty() => id.to_string(),
        _ => format!("{method}_{path}"),
    };
    let mut out = String::new();
    for c in raw.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' };
        if c == '_' && (out.is_empty() || out.ends_with('_')) {
            continue;
        }
        out.push(c);
    }
    let mut out = out.trim_end_matches('_').to_string();
    out.truncate(64);
    if out.is_empty() { method.to_string() } else { out }
}

/// `name`, or `name_2`, `name_3`… when taken.
fn unique(taken: &mut std::collections::BTreeSet<String>, name: &str) -> String {
    let mut candidate = name.to_string();
    let mut n = 2;
    while taken.contains(&candidate) {
        candidate = format!("{name}_{n}");
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// Why `sel` leaves the operation out, if it does.
fn unselected(sel: &Selection, op: &Value, method: &str, path: &str, name: &str) -> Option<String> {
    let upper = method.to_uppercase();
    if !sel.methods.iter().any(|m| m.eq_ignore_ascii_case(&upper)) {
        return Some(format!("method {upper} is not selected (methods = {:?})", sel.methods));
    }
    let tags: Vec<&str> =
        op.get("tags").and_then(Value::as_array).map(|t| t.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    if !sel.include_tags.is_empty() && !tags.iter().any(|t| sel.include_tags.iter().any(|i| i == t)) {
        return Some(format!("none of its tags {tags:?} is in include_tags"));
    }
    if let Some(t) = tags.iter().find(|t| sel.exclude_tags.iter().any(|e| e == *t)) {
        return Some(format!("tag {t:?} is in exclude_tags"));
    }
    if !sel.include_paths.is_empty() && !sel.include_paths.iter().any(|g| glob::matches(g, path)) {
        return Some("its path matches no include_paths glob".into());
    }
    if let Some(g) = sel.exclude_paths.iter().find(|g| glob::matches(g, path)) {
        return Some(format!("its path matches exclude_paths {g:?}"));
    }
    if !sel.include.is_empty() && !sel.include.iter().any(|g| glob::matches(g, name)) {
        return Some(format!("{name} matches no include glob"));
    }
    if let Some(g) = sel.exclude.iter().find(|g| glob::matches(g, name)) {
        return Some(format!("{name} matches exclude {g:?}"));
    }
    if op.get("deprecated").and_then(Value::as_bool) == Some(true) && sel.include.is_empty() {
        return Some("deprecated (name it in include to keep it)".into());
    }
    None
}

/// One selected operation as a tool, with notes on what could not be followed.
fn operation(
    r: &Resolver<'_>,
    item: &Value,
    op: &Value,
    method: &str,
    path: &str,
    name: String,
) -> Result<(Operation, Vec<String>), OpError> {
    let mut inlined = Inlined::default();
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut params: Vec<Param> = Vec::new();
    // Path-level parameters, overridden by the operation's own of the same name and place.
    let mut declared: Vec<&Value> = Vec::new();
    for list in [item.get("parameters"), op.get("parameters")].into_iter().flatten() {
        for p in list.as_array().into_iter().flatten() {
            let p = r.deref(p)?;
            let key = (p.get("name").and_then(Value::as_str), p.get("in").and_then(Value::as_str));
            declared.retain(|q| (q.get("name").and_then(Value::as_str), q.get("in").and_then(Value::as_str)) != key);
            declared.push(p);
        }
    }
    let mut body = None;
    for p in declared {
        let (Some(wire), Some(place)) = (p.get("name").and_then(Value::as_str), p.get("in").and_then(Value::as_str)) else {
            return Err(OpError::Unnamed);
        };
        let location = match place {
            "path" => In::Path,
            "query" => In::Query,
            "header" if RESERVED_HEADERS.contains(&wire.to_ascii_lowercase().as_str()) => continue,
            "header" => In::Header,
            "cookie" => In::Cookie,
            "body" => {
                let schema = r.schema(p.get("schema").unwrap_or(&json!({})), &mut inlined);
                body = Some((
                    schema,
                    "application/json".to_string(),
                    BodyKind::Json,
                    p.get("required").and_then(Value::as_bool).unwrap_or(false),
                ));
                continue;
            }
            "formData" => return Err(OpError::FormData),
            other => return Err(OpError::Place(other.to_string())),
        };
        let key = if properties.contains_key(wire) || wire == "body" { format!("{place}_{wire}") } else { wire.to_string() };
        let mut schema = match p.get("schema") {
            Some(s) => r.schema(s, &mut inlined),
            // 2.0 (and a 3.x `content` parameter is taken as a string).
            None => r.schema(&swagger2_schema(p), &mut inlined),
        };
        if let (Some(d), Value::Object(s)) = (p.get("description").and_then(Value::as_str), &mut schema) {
            s.entry("description").or_insert_with(|| d.into());
        }
        let required_here = location == In::Path || p.get("required").and_then(Value::as_bool).unwrap_or(false);
        if required_here {
            required.push(Value::String(key.clone()));
        }
        properties.insert(key.clone(), schema);
        let (style, explode) = style_of(p, location, r.dialect);
        let allow_reserved = p.get("allowReserved").and_then(Value::as_bool).unwrap_or(false);
        params.push(Param { name: wire.to_string(), key, location, required: required_here, style, explode, allow_reserved });
    }
    // A `{name}` in the template that no parameter declares is still a path parameter.
    for var in template_vars(path) {
        if !params.iter().any(|p| p.location == In::Path && p.name == var) {
            let key = if properties.contains_key(&var) { format!("path_{var}") } else { var.clone() };
            properties.insert(key.clone(), json!({ "type": "string" }));
            required.push(Value::String(key.clone()));
            params.push(Param {
                name: var,
                key,
                location: In::Path,
                required: true,
                style: Style::Simple,
                explode: false,
                allow_reserved: false,
            });
        }
    }
    if let Some(rb) = op.get("requestBody") {
        let rb = r.deref(rb)?;
        body = Some(request_body(r, rb, &mut inlined)?);
    }
    let body = body.map(|(mut schema, content_type, kind, required_body)| {
        let key = if properties.contains_key("body") { "requestBody".to_string() } else { "body".to_string() };
        if let Value::Object(s) = &mut schema {
            s.entry("description").or_insert_with(|| format!("The request body ({content_type}).").into());
        }
        properties.insert(key.clone(), schema);
        if required_body {
            required.push(Value::String(key.clone()));
        }
        Body { key, content_type, kind, required: required_body }
    });
    let mut tool = Map::new();
    tool.insert("name".into(), name.clone().into());
    let summary = op.get("summary").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let details = op.get("description").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    if let Some(s) = summary {
        tool.insert("title".into(), s.into());
    }
    let mut description = match (summary, details) {
        (Some(s), Some(d)) if d != s => format!("{s}\n\n{d}"),
        (Some(s), _) => s.to_string(),
        (None, Some(d)) => d.to_string(),
        (None, None) => format!("{} {path}", method.to_uppercase()),
    };
    if description.len() > 8192 {
        let mut cut = 8192;
        while !description.is_char_boundary(cut) {
            cut -= 1;
        }
        description.truncate(cut);
    }
    tool.insert("description".into(), description.into());
    let mut input = json!({ "type": "object", "properties": properties, "additionalProperties": false });
    if !required.is_empty() {
        input["required"] = Value::Array(required);
    }
    tool.insert("inputSchema".into(), input);
    let mut wrapped = false;
    if let Some(out) = success_schema(r, op, &mut inlined) {
        if object_like(&out) {
            tool.insert("outputSchema".into(), out);
        } else {
            wrapped = true;
            tool.insert("outputSchema".into(), json!({ "type": "object", "properties": { "result": out }, "required": ["result"] }));
        }
    }
    tool.insert("annotations".into(), annotations(method));
    let op = Operation { name, method: method.to_uppercase(), path: path.to_string(), params, body, tool: Value::Object(tool), wrapped };
    Ok((op, inlined.notes))
}

/// Whether a schema describes only objects: `type: object`, object keywords without a type, all
/// of an `allOf` that says so, or every branch of an `anyOf`/`oneOf`.
fn object_like(s: &Value) -> bool {
    match s.get("type") {
        Some(Value::String(t)) => return t == "object",
        Some(_) => return false,
        None => {}
    }
    if ["properties", "additionalProperties", "patternProperties", "required"].iter().any(|k| s.get(*k).is_some()) {
        return true;
    }
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        return all.iter().any(object_like);
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(branches) = s.get(k).and_then(Value::as_array) {
            return !branches.is_empty() && branches.iter().all(object_like);
        }
    }
    false
}

/// A 2.0 parameter's type fields (`type`, `format`, `items`, `enum`, `default`, bounds) as a schema.
fn swagger2_schema(p: &Value) -> Value {
    let mut s = Map::new();
    for k in
        ["type", "format", "items", "enum", "default", "minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "maxItems"]
    {
        if let Some(v) = p.get(k) {
            s.insert(k.into(), v.clone());
        }
    }
    if !s.contains_key("type") {
        s.insert("type".into(), "string".into());
    }
    Value::Object(s)
}

/// The serialisation a parameter declares, or its place's default (2.0: `collectionFormat`).
fn style_of(p: &Value, location: In, dialect: Dialect) -> (Style, bool) {
    // A 2.0 description with 3.x `style`/`explode` (httpbin's) means them.
    if dialect == Dialect::Swagger2 && p.get("style").is_none() && p.get("explode").is_none() {
        let style = match p.get("collectionFormat").and_then(Value::as_str) {
            Some("ssv") => Style::SpaceDelimited,
            Some("pipes") => Style::PipeDelimited,
            _ if matches!(location, In::Query | In::Cookie) => Style::Form,
            _ => Style::Simple,
        };
        return (style, p.get("collectionFormat").and_then(Value::as_str) == Some("multi"));
    }
    let style = match p.get("style").and_then(Value::as_str) {
        Some("label") => Style::Label,
        Some("matrix") => Style::Matrix,
        Some("form") => Style::Form,
        Some("spaceDelimited") => Style::SpaceDelimited,
        Some("pipeDelimited") => Style::PipeDelimited,
        Some("deepObject") => Style::DeepObject,
        Some("simple") => Style::Simple,
        _ if matches!(location, In::Query | In::Cookie) => Style::Form,
        _ => Style::Simple,
    };
    let explode = p.get("explode").and_then(Value::as_bool).unwrap_or(style == Style::Form);
    (style, explode)
}

/// The `{name}`s of a path template.
pub fn template_vars(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { break };
        out.push(rest[open + 1..open + close].to_string());
        rest = &rest[open + close + 1..];
    }
    out
}

/// A 3.x request body: its schema, content type, how it is sent and whether it is required.
fn request_body(r: &Resolver<'_>, rb: &Value, inlined: &mut Inlined) -> Result<(Value, String, BodyKind, bool), OpError> {
    let required = rb.get("required").and_then(Value::as_bool).unwrap_or(false);
    let Some(content) = rb.get("content").and_then(Value::as_object) else { return Err(OpError::NoContent) };
    let pick = |want: &dyn Fn(&str) -> bool| content.iter().find(|(ct, _)| want(&ct.to_ascii_lowercase()));
    let json_like = |ct: &str| ct.starts_with("application/json") || (ct.starts_with("application/") && ct.contains("+json"));
    let (ct, media, kind) = if let Some((ct, m)) = pick(&json_like) {
        (ct, m, BodyKind::Json)
    } else if let Some((ct, m)) = pick(&|ct: &str| ct.starts_with("application/x-www-form-urlencoded")) {
        (ct, m, BodyKind::Form)
    } else if let Some((ct, m)) = pick(&|ct: &str| ct.starts_with("text/")) {
        (ct, m, BodyKind::Text)
    } else {
        return Err(OpError::BodyKinds(content.keys().cloned().collect()));
    };
    let schema = match media.get("schema") {
        Some(s) => r.schema(s, inlined),
        None if kind == BodyKind::Text => json!({ "type": "string" }),
        None => json!({}),
    };
    Ok((schema, ct.clone(), kind, required))
}

/// The schema of the first 2xx response with a JSON body, inlined.
fn success_schema(r: &Resolver<'_>, op: &Value, inlined: &mut Inlined) -> Option<Value> {
    let responses = op.get("responses")?.as_object()?;
    let mut codes: Vec<&String> = responses.keys().filter(|c| c.starts_with('2')).collect();
    codes.sort();
    for code in codes {
        let resp = r.deref(&responses[code.as_str()]).ok()?;
        let schema = match r.dialect {
            Dialect::Swagger2 => resp.get("schema"),
            _ => resp.get("content").and_then(Value::as_object).and_then(|c| {
                c.iter()
                    .find(|(ct, _)| {
                        let ct = ct.to_ascii_lowercase();
                        ct.starts_with("application/json") || (ct.starts_with("application/") && ct.contains("+json"))
                    })
                    .and_then(|(_, m)| m.get("schema"))
            }),
        };
        if let Some(s) = schema {
            return Some(r.schema(s, inlined));
        }
    }
    None
}

/// What the method says about the operation (MCP tool annotations): `GET`, `HEAD` and `OPTIONS`
/// read only; `DELETE` destructive; `PUT` and `DELETE` idempotent. `POST` and `PATCH` say nothing
/// more, so a client assumes the worst (MCP's defaults).
fn annotations(method: &str) -> Value {
    let read_only = matches!(method, "get" | "head" | "options");
    let mut a = json!({ "readOnlyHint": read_only, "openWorldHint": true });
    if method == "delete" {
        a["destructiveHint"] = json!(true);
    }
    if matches!(method, "put" | "delete") {
        a["idempotentHint"] = json!(true);
    }
    a
}

#[cfg(test)]
mod tests;
