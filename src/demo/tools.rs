//! The demo server's tools, as plain functions from arguments to a `CallToolResult` value.
//! `calc`: add, multiply, divide (an `isError` result on division by zero), echo.
//! `text`: echo, upper, word_count, now (the clock), greet (its `lang` argument is mirrored into
//! the `Mcp-Param-Lang` header), countdown (streams progress when asked to).
//! `dynamic`: toggle_bonus, which adds or removes the tool bonus (a changing list).

use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    Calc,
    Text,
    /// A tool list that changes: `toggle_bonus` adds or removes the tool `bonus`.
    Dynamic,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Calc => "calc",
            Profile::Text => "text",
            Profile::Dynamic => "dynamic",
        }
    }

    pub fn instructions(self) -> &'static str {
        match self {
            Profile::Calc => "Arithmetic on numbers. Use add, multiply and divide; echo returns its text.",
            Profile::Text => "Text utilities and a clock. greet says hello in a language (en, fr, de, es, ja).",
            Profile::Dynamic => "toggle_bonus adds or removes the bonus tool, so the tool list changes.",
        }
    }
}

pub struct Tool {
    pub def: Value,
    pub run: fn(&Value) -> Value,
}

fn text(s: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": s.into() }] })
}

fn tool_error(s: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": s.into() }], "isError": true })
}

fn number(args: &Value, key: &str) -> Result<f64, Value> {
    args[key].as_f64().ok_or_else(|| tool_error(format!("argument '{key}' must be a number")))
}

/// A two-number tool: `op` answers the result, or the text of the tool error it is.
fn arith(args: &Value, op: fn(f64, f64) -> Result<f64, &'static str>) -> Value {
    let (a, b) = match (number(args, "a"), number(args, "b")) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    match op(a, b) {
        Ok(r) => {
            let n = if r.fract() == 0.0 && r.abs() < 9.0e15 { json!(r as i64) } else { json!(r) };
            json!({ "content": [{ "type": "text", "text": n.to_string() }], "structuredContent": { "result": n } })
        }
        Err(e) => tool_error(e),
    }
}

fn binary(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": { "a": { "type": "number" }, "b": { "type": "number" } },
            "required": ["a", "b"],
            "additionalProperties": false
        },
        "outputSchema": { "type": "object", "properties": { "result": { "type": "number" } }, "required": ["result"] },
        "annotations": { "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false },
    })
}

fn text_tool(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } }, "required": ["text"] },
        "annotations": { "readOnlyHint": true, "openWorldHint": false },
    })
}

fn echo(args: &Value) -> Value {
    text(args["text"].as_str().unwrap_or_default())
}

/// The tool that `toggle_bonus` adds to the dynamic profile.
pub fn bonus() -> Tool {
    Tool {
        def: json!({ "name": "bonus", "description": "Here while toggled on.", "inputSchema": { "type": "object" } }),
        run: |_| text("bonus!"),
    }
}

pub fn for_profile(p: Profile) -> Vec<Tool> {
    match p {
        Profile::Dynamic => vec![Tool {
            def: json!({ "name": "toggle_bonus", "description": "Adds or removes the bonus tool.", "inputSchema": { "type": "object" } }),
            run: |_| text("toggled"),
        }],
        Profile::Calc => vec![
            Tool { def: binary("add", "Adds two numbers."), run: |a| arith(a, |x, y| Ok(x + y)) },
            Tool { def: binary("multiply", "Multiplies two numbers."), run: |a| arith(a, |x, y| Ok(x * y)) },
            Tool {
                def: binary("divide", "Divides a by b."),
                run: |a| arith(a, |x, y| if y == 0.0 { Err("division by zero") } else { Ok(x / y) }),
            },
            Tool { def: text_tool("echo", "Returns its text unchanged."), run: echo },
        ],
        Profile::Text => vec![
            Tool { def: text_tool("echo", "Returns its text unchanged."), run: echo },
            Tool { def: text_tool("upper", "Upper-cases the text."), run: |a| text(a["text"].as_str().unwrap_or_default().to_uppercase()) },
            Tool {
                def: text_tool("word_count", "Counts the words in the text."),
                run: |a| {
                    let n = a["text"].as_str().unwrap_or_default().split_whitespace().count();
                    json!({ "content": [{ "type": "text", "text": n.to_string() }], "structuredContent": { "words": n } })
                },
            },
            Tool {
                def: json!({ "name": "now", "description": "The current time (UTC, RFC \
                    3339).", "inputSchema": { "type": "object", "additionalProperties": false } }),
                run: |_| text(humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()),
            },
            Tool {
                def: json!({
                    "name": "greet",
                    "description": "Says hello to someone in a language (en, fr, de, es, ja).",
                    "inputSchema": { "type": "object", "properties": {
                        "name": { "type": "string" },
                        "lang": { "type": "string", "x-mcp-header": "Lang", "enum": ["en", "fr", "de", "es", "ja"] } },
                        "required": ["name"] },
                }),
                run: |a| {
                    let name = a["name"].as_str().unwrap_or("you");
                    let hello = match a["lang"].as_str().unwrap_or("en") {
                        "fr" => "Bonjour",
                        "de" => "Hallo",
                        "es" => "Hola",
                        "ja" => "こんにちは",
                        "en" => "Hello",
                        other => return tool_error(format!("unknown language '{other}'")),
                    };
                    text(format!("{hello}, {name}!"))
                },
            },
            Tool {
                def: json!({ "name": "countdown", "description": "Counts down, reporting progress when the request carries a \
                    progressToken.",
                    "inputSchema": { "type": "object", "properties": { "steps": { "type": "integer", "minimum": 1, "maximum": 20 } } } }),
                run: |a| text(format!("counted down from {}", a["steps"].as_u64().unwrap_or(3).min(20))),
            },
        ],
    }
}
