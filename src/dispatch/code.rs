//! Code mode (`[code_mode] enabled` for the root, `[[endpoint]] code_mode` for a virtual server):
//! instead of the catalogue, `tools/list` offers two tools. `search_tools` ranks the tools the
//! caller may use against a query (the ranking of tool-search mode) and answers them as TypeScript
//! declarations of the `tools` object a program sees (`catalog::signature`); `run_code` runs a
//! JavaScript program over them in a confined child process (`run.rs`, `upstream::program`), where
//! every call the program makes is a `tools/call` of the caller who sent it, through the whole
//! call chain, audited with the program's id; a call that needs a person's answer pauses the
//! program and relays the question (`paused.rs`). Neither tool is in the catalogue, so a program
//! cannot call them, and any other name called directly is a plain call, as in tool-search mode.

mod paused;
mod run;

use super::{Request, Served, search};
use crate::auth::Principal;
use mcpgate_model::catalog::{Catalog, Kind, signature};
use mcpgate_protocol::reply::Reply;
use serde_json::{Value, json};

pub const SEARCH: &str = "search_tools";
pub const RUN: &str = "run_code";
/// Where a result names the program that made it.
pub const PROGRAM_META: &str = "io.mcpgate/program";

/// Whether the endpoint `caller` came through serves code mode.
pub fn active(gw: &Served<'_>, caller: &Principal) -> bool {
    match caller.endpoint.as_deref() {
        None => gw.config.code_mode.enabled,
        Some(path) => gw.config.endpoints.iter().any(|e| e.path == path && e.code_mode),
    }
}

/// What a program sees and may do, as `run_code`'s description tells the model.
fn run_description(gw: &Served<'_>) -> String {
    let c = &gw.config.code_mode;
    format!(
        "Run a JavaScript program that calls tools, and get only its result. `code` is the body of an async function: \
         call tools with `await tools.<name>(args)` (or `tools[\"a-b\"](args)`, `tools.call(name, args)`) using the \
         declarations search_tools gives, combine what they return, and `return` a JSON value. A tool returns its \
         structuredContent when it has one, else a ToolResult; a failed or refused call throws a ToolError you can catch.\n\
         type ToolResult = {{ content: unknown[]; text: string; isError: false }};\n\
         class ToolError extends Error {{ reason: string; code: number | null; tool: string; result: unknown }}\n\
         Limits: {} of CPU, {} in all, {} tool calls, {} of memory, a result of {}. There are no files, network, \
         timers or modules; console.log lines come back with the result.",
        humantime::format_duration(c.cpu),
        humantime::format_duration(c.wall_clock),
        c.calls,
        size(c.heap),
        size(c.output),
    )
}

fn tools(gw: &Served<'_>) -> Value {
    json!([
        {
            "name": SEARCH,
            "title": "Search tools",
            "description": "Find the tools for a task among everything this gateway offers. Describe what you want to do in a \
                few words; the best matches come back as TypeScript declarations of `tools` members, with their descriptions. \
                Then call them from a program with run_code.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "What you want to do, e.g. \"read a file and summarise it\"." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 50, "default": 10, "description": "How many tools to return." }
                },
                "required": ["query"]
            },
            "annotations": { "readOnlyHint": true, "openWorldHint": false }
        },
        {
            "name": RUN,
            "title": "Run a program",
            "description": run_description(gw),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "code": { "type": "string", "description": "The body of an async JavaScript function; `return` the result." }
                },
                "required": ["code"]
            }
        }
    ])
}

/// `tools/list` in code mode: the two tools.
pub fn list(gw: &Served<'_>, req: &Request) -> Reply {
    search::listed(gw, req, tools(gw))
}

/// `tools/call` in code mode: the two tools are answered here, any other name is a plain call.
pub async fn call(gw: &Served<'_>, req: Request) -> Reply {
    let name = req.params.parse::<String>("name").and_then(Result::ok);
    match name.as_deref() {
        Some(SEARCH) => search_signatures(gw, &req).await,
        Some(RUN) if req.params.get("requestState").is_some_and(|s| s.get().trim() != "null") => paused::resume(gw, req).await,
        Some(RUN) => paused::settle(gw, &req, run::run(gw, &req).await),
        _ => super::chain::serve(gw, req).await,
    }
}

/// `search_tools` in code mode: the found tools as declarations of `tools` members.
async fn search_signatures(gw: &Served<'_>, req: &Request) -> Reply {
    let (query, text, limit) = match search::query_of(req) {
        Ok(q) => q,
        Err(reply) => return *reply,
    };
    match search::ranked(gw, req, query, limit, move |cat, _, positions| declared(cat, &positions, &text)).await {
        Ok(v) => search::result(v),
        Err(reply) => *reply,
    }
}

/// The `search_tools` result of code mode: the tools at `positions` of `cat`'s tool section (found
/// for the query the caller wrote: `text`), as one `declare const tools` block. CPU-bound.
fn declared(cat: &Catalog, positions: &[usize], text: &str) -> Value {
    let section = cat.section(Kind::Tool);
    let found: Vec<(&str, String)> = positions
        .iter()
        .filter_map(|p| section.entries.get(*p))
        .map(|e| (e.name.as_str(), signature::declaration(e.json.get(), &e.name)))
        .collect();
    let summary = if found.is_empty() {
        format!("No tool matches \"{text}\". Try other words.")
    } else {
        let members: Vec<&str> = found.iter().map(|(_, d)| d.as_str()).collect();
        format!("{} for \"{text}\" (call them from run_code):\n{}", count(found.len()), signature::tools_declaration(&members))
    };
    let structured: Vec<Value> = found.iter().map(|(name, d)| json!({ "name": name, "declaration": d })).collect();
    json!({
        "resultType": "complete",
        "content": [{ "type": "text", "text": summary }],
        "structuredContent": { "tools": structured },
    })
}

/// A size as the description says it (`64 MiB`, `512 KiB`, `100 bytes`).
fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

fn count(n: usize) -> String {
    if n == 1 { "1 tool".to_string() } else { format!("{n} tools") }
}
