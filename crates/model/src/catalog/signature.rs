//! Code mode's typed signatures: a tool's definition (name, description, `inputSchema`,
//! `outputSchema`) written as one compact TypeScript member of the `tools` object a program sees
//! (crates/coderun/src/prelude.js), e.g. `/** Adds. */ calc__add(args: { a: number; b: number }):
//! Promise<{ result: number }>;`, and the `declare const tools: { … }` that holds them. A name
//! that is not an identifier is a quoted member (`"a-b"(args: …)`, called `tools["a-b"](…)`); the
//! tool named `call` is an overload of `tools.call`. JSON Schema maps to the types it can say
//! (objects, arrays, literal unions, `oneOf`/`anyOf`/`allOf`, local `$ref`s inlined with a depth
//! cap), anything else to `unknown`. Descriptions become JSDoc that cannot be closed early, and
//! every declaration stays within [`MAX_DECLARATION`] bytes, shortened with a visible `…`. Pure:
//! no I/O, never panics on any input.

use serde_json::{Map, Value};
use std::borrow::Cow;

/// The most bytes one tool's declaration takes.
pub const MAX_DECLARATION: usize = 4096;
/// How deep a schema is followed (nested objects, arrays, unions, references); deeper is `unknown`.
pub const MAX_DEPTH: usize = 6;
/// The most bytes of a tool's description kept (then `…`).
const MAX_DESCRIPTION: usize = 1024;
/// The most bytes of a property's description kept (then `…`).
const MAX_PROPERTY_DOC: usize = 160;
/// What a truncated type says.
const CUT: &str = "unknown /* … */";

/// `name` as a member of an object type: itself when it is an identifier, else a quoted string.
pub fn member(name: &str) -> Cow<'_, str> {
    let mut chars = name.chars();
    let ident = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if ident { Cow::Borrowed(name) } else { Cow::Owned(quote(name)) }
}

/// A JavaScript string literal of `s` (JSON's escapes are JavaScript's), with `*/` written
/// `*\/` so that no declaration closes a comment it is quoted in.
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string()).replace("*/", "*\\/")
}

/// `text` made safe inside a `/** … */` comment: whitespace collapsed to single spaces, `*/`
/// broken, and at most `max` bytes (then `…`).
pub fn doc_text(text: &str, max: usize) -> String {
    let mut out = String::new();
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    let mut out = out.replace("*/", "*\\/");
    if out.len() > max {
        let mut end = max.saturating_sub('…'.len_utf8());
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        // At a word's end when one is near.
        if let Some(space) = out.rfind(' ').filter(|s| end - s < 32) {
            out.truncate(space);
        }
        // A cut may leave a `*` that would close the comment with the space-`*/` after it.
        while out.ends_with('*') || out.ends_with('\\') {
            out.pop();
        }
        out.push('…');
    }
    out
}

/// The declaration of one tool, as a member of `tools`, shown under `shown_name`. `tool_json` is
/// the tool's definition as the catalogue holds it; one that is not a JSON object still gets a
/// declaration (of `unknown` arguments).
pub fn declaration(tool_json: &str, shown_name: &str) -> String {
    let tool: Value = serde_json::from_str(tool_json).unwrap_or(Value::Null);
    let description = tool.get("description").and_then(Value::as_str).map(|d| doc_text(d, MAX_DESCRIPTION));
    let head = match description.as_deref() {
        Some(d) if !d.is_empty() => format!("/** {d} */ "),
        _ => String::new(),
    };
    let name = if shown_name == "call" { "call(name: \"call\", ".to_string() } else { format!("{}(", member(shown_name)) };
    let budget = MAX_DECLARATION.saturating_sub(head.len() + name.len());
    // Ever shorter until it fits: full, without property docs, then shallower and marked.
    // (levels rendered, property docs, mark the cut types); 0 levels: no type at all.
    let full = MAX_DEPTH + 1;
    let tries = [(full, true, false), (full, false, false), (4, false, true), (2, false, true), (1, false, true), (0, false, true)];
    for (depth, docs, cut) in tries {
        if let Some(rest) = signature(&tool, depth, docs, cut, budget) {
            return format!("{head}{name}{rest}");
        }
    }
    let short = format!("{head}{name}args?: {CUT}): Promise<{CUT}>;");
    if short.len() <= MAX_DECLARATION {
        return short;
    }
    "/* … (a declaration too long to show) */".to_string()
}

/// `declare const tools: { … }` over the tools' declarations, with `tools.call` last.
pub fn tools_declaration<S: AsRef<str>>(members: &[S]) -> String {
    let mut out = String::from("declare const tools: {\n");
    for m in members {
        out.push_str("  ");
        out.push_str(m.as_ref());
        out.push('\n');
    }
    out.push_str("  call(name: string, args?: { [k: string]: unknown }): Promise<unknown>;\n};");
    out
}

/// `args…): Promise<…>;` within `budget` bytes, or `None` when it does not fit.
fn signature(tool: &Value, depth: usize, docs: bool, cut: bool, budget: usize) -> Option<String> {
    let input = tool.get("inputSchema");
    let output = tool.get("outputSchema");
    let optional = match input {
        Some(s) => s.get("required").and_then(Value::as_array).is_none_or(|r| r.is_empty()),
        None => true,
    };
    let mut r = Render { out: String::new(), root: &Value::Null, budget, docs, cut, limit: depth, refs: Vec::new(), over: false };
    r.out.push_str(if optional { "args?: " } else { "args: " });
    match input {
        Some(s) => r.schema_root(s),
        None => r.out.push_str("{ [k: string]: unknown }"),
    }
    r.out.push_str("): Promise<");
    match output {
        Some(s) => r.schema_root(s),
        None => r.out.push_str("ToolResult"),
    }
    r.out.push_str(">;");
    (!r.over && r.out.len() <= budget).then_some(r.out)
}

/// One rendering: the text so far, the schema `$ref`s resolve in, and the limits.
struct Render<'a> {
    out: String,
    root: &'a Value,
    budget: usize,
    docs: bool,
    /// Mark types cut by the depth as `unknown /* … */` (a retry that had to shorten).
    cut: bool,
    /// How many levels are rendered: a type at depth `limit` is `unknown`.
    limit: usize,
    /// The references being expanded (a reference inside itself is `unknown`).
    refs: Vec<&'a str>,
    over: bool,
}

impl<'a> Render<'a> {
    fn schema_root(&mut self, schema: &'a Value) {
        self.root = schema;
        self.refs.clear();
        self.refs.push("#");
        self.ts_type(schema, 0);
    }

    fn push(&mut self, s: &str) {
        self.out.push_str(s);
        if self.out.len() > self.budget {
            self.over = true;
        }
    }

    fn ts_type(&mut self, schema: &'a Value, depth: usize) {
        if self.over {
            return;
        }
        let Value::Object(s) = schema else {
            return self.push(if schema == &Value::Bool(false) { "never" } else { "unknown" });
        };
        if depth >= self.limit {
            return self.push(if self.cut { CUT } else { "unknown" });
        }
        if let Some(r) = s.get("$ref") {
            return self.reference(r, depth);
        }
        let nullable = s.get("nullable").and_then(Value::as_bool) == Some(true);
        let mut parts: Vec<String> = Vec::new();
        if let Some(c) = s.get("const") {
            parts.push(literal(c));
        } else if let Some(Value::Array(values)) = s.get("enum").filter(|e| e.as_array().is_some_and(|a| !a.is_empty())) {
            let mut lits: Vec<String> = values.iter().map(literal).collect();
            if nullable {
                lits.push("null".to_string());
            }
            lits.dedup();
            parts.push(lits.join(" | "));
        } else if let Some(base) = self.sub(|r| r.base(s, depth)) {
            let base = if nullable && base != "unknown" { format!("{base} | null") } else { base };
            parts.push(base);
        }
        for (key, joint) in [("oneOf", " | "), ("anyOf", " | "), ("allOf", " & ")] {
            if let Some(Value::Array(items)) = s.get(key).filter(|v| v.as_array().is_some_and(|a| !a.is_empty())) {
                let mut each: Vec<String> = Vec::new();
                for item in items {
                    match self.sub(|r| r.ts_type(item, depth + 1)) {
                        Some(t) => each.push(t),
                        None => return,
                    }
                }
                // `unknown` absorbs a union and drops out of an intersection.
                if joint == " & " {
                    each.retain(|t| t != "unknown");
                } else if each.iter().any(|t| t == "unknown") {
                    each.clear();
                }
                each.dedup();
                match each.len() {
                    0 => parts.push("unknown".to_string()),
                    1 => parts.push(each.remove(0)),
                    _ => parts.push(format!("({})", each.join(joint))),
                }
            }
        }
        let joined = match parts.len() {
            0 => "unknown".to_string(),
            1 => parts.remove(0),
            _ => {
                parts.retain(|p| p != "unknown");
                let many = parts.len() > 1;
                let wrap = |p: &String| if many && p.contains(" | ") && !p.starts_with('(') { format!("({p})") } else { p.clone() };
                parts.iter().map(wrap).collect::<Vec<_>>().join(" & ")
            }
        };
        self.push(if joined.is_empty() { "unknown" } else { &joined });
    }

    /// What `f` renders, taken out of the output (`None` once over the budget).
    fn sub(&mut self, f: impl FnOnce(&mut Self)) -> Option<String> {
        let start = self.out.len();
        f(self);
        if self.over {
            return None;
        }
        let text = self.out[start..].to_string();
        self.out.truncate(start);
        Some(text)
    }

    fn reference(&mut self, r: &'a Value, depth: usize) {
        let Some(path) = r.as_str() else { return self.push("unknown") };
        let local = path.starts_with("#/$defs/") || path.starts_with("#/definitions/");
        let target = if local { self.root.pointer(&path[1..]) } else { None };
        match target {
            Some(t) if !self.refs.contains(&path) => {
                self.refs.push(path);
                self.ts_type(t, depth + 1);
                self.refs.pop();
            }
            _ => self.push("unknown"),
        }
    }

    /// The type from `type` (a word or a list of words), or from `properties` / `items` alone.
    fn base(&mut self, s: &'a Map<String, Value>, depth: usize) {
        let words: Vec<&str> = match s.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if s.contains_key("properties") || s.contains_key("additionalProperties") => vec!["object"],
            _ if s.contains_key("items") => vec!["array"],
            _ => vec![],
        };
        if words.is_empty() {
            return self.push("unknown");
        }
        for (i, word) in words.iter().enumerate() {
            if self.over {
                return;
            }
            if i > 0 {
                self.push(" | ");
            }
            match *word {
                "string" => self.push("string"),
                "number" | "integer" => self.push("number"),
                "boolean" => self.push("boolean"),
                "null" => self.push("null"),
                "array" => self.array(s, depth),
                "object" => self.object(s, depth),
                _ => self.push("unknown"),
            }
        }
    }

    fn array(&mut self, s: &'a Map<String, Value>, depth: usize) {
        let Some(items) = s.get("items").filter(|i| i.is_object()) else { return self.push("unknown[]") };
        let Some(item) = self.sub(|r| r.ts_type(items, depth + 1)) else { return };
        if item.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            self.push(&format!("{item}[]"));
        } else {
            self.push(&format!("Array<{item}>"));
        }
    }

    fn object(&mut self, s: &'a Map<String, Value>, depth: usize) {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        let props = s.get("properties").and_then(Value::as_object).unwrap_or_else(|| EMPTY.get_or_init(Map::new));
        let required: Vec<&str> =
            s.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let extra = s.get("additionalProperties");
        if props.is_empty() {
            return match extra {
                Some(Value::Bool(false)) => self.push("Record<string, never>"),
                Some(e @ Value::Object(_)) => {
                    self.push("{ [k: string]: ");
                    self.ts_type(e, depth + 1);
                    self.push(" }");
                }
                _ => self.push("{ [k: string]: unknown }"),
            };
        }
        self.push("{ ");
        for (name, prop) in props {
            if self.over {
                return;
            }
            if self.docs
                && let Some(d) = prop.get("description").and_then(Value::as_str)
            {
                let d = doc_text(d, MAX_PROPERTY_DOC);
                if !d.is_empty() {
                    self.push(&format!("/** {d} */ "));
                }
            }
            let optional = if required.contains(&name.as_str()) { "" } else { "?" };
            self.push(&format!("{}{optional}: ", member(name)));
            self.ts_type(prop, depth + 1);
            self.push("; ");
        }
        self.push("}");
        if let Some(e @ Value::Object(_)) = extra {
            self.push(" & { [k: string]: ");
            self.ts_type(e, depth + 1);
            self.push(" }");
        }
    }
}

/// A JSON value as a TypeScript literal type (objects and arrays are `unknown`).
fn literal(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Number(_) | Value::Bool(_) | Value::Null => v.to_string(),
        _ => "unknown".to_string(),
    }
}

#[cfg(test)]
mod tests;
