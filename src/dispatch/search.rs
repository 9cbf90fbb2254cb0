//! Tool-search mode (`[catalog] tool_search`, or `[[caller]] tool_search` for one caller): instead
//! of the whole catalogue, `tools/list` offers two meta-tools — `search_tools`, which ranks the
//! tools the caller may use against a query, and `call_tool`, which calls one of them by name —
//! so an agent in front of hundreds of tools keeps its context small. Both go through the same
//! policy view as the plain list and call: a hidden tool is never found and cannot be called.
//! Tools may still be called directly by name.
//!
//! A query is refused over [`MAX_QUERY_BYTES`] bytes or [`MAX_QUERY_WORDS`] distinct words, with
//! a tool error that says the limit. Indexing a snapshot and ranking run on tokio's blocking
//! pool, a few at a time (`Gateway::ranking`), never on the workers that serve every other request.

use super::Served;
use super::{Request, chain};
use crate::auth::Principal;
use mcpgate_model::catalog::Catalog;
use mcpgate_model::catalog::Kind;
use mcpgate_model::catalog::search::{MAX_QUERY_BYTES, MAX_QUERY_WORDS, Query, ToolIndex};
use mcpgate_model::catalog::view;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::keys;
use mcpgate_protocol::reply::{Outcome, Reply};
use serde_json::{Value, json};
use std::sync::Arc;

pub const SEARCH: &str = "search_tools";
pub const CALL: &str = "call_tool";
const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 50;

/// Whether `caller` is served in tool-search mode: its `[[caller]]` entry decides, else
/// `[catalog] tool_search`.
pub fn active(gw: &Served<'_>, caller: &Principal) -> bool {
    let cfg = gw.config.clone();
    if !cfg.tool_search_anywhere {
        return false;
    }
    cfg.callers.iter().filter(|c| caller.rules.contains(&c.id)).find_map(|c| c.tool_search).unwrap_or(cfg.catalog.tool_search)
}

fn meta_tools() -> Value {
    json!([
        {
            "name": SEARCH,
            "title": "Search tools",
            "description": "Find the tools for a task among everything this gateway offers. Describe what you want to do in a \
                few words; the best matches come back with their input schemas. Then call one with call_tool.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": format!("What you want to do, e.g. \"refund a card payment\" (at \
                        most {MAX_QUERY_BYTES} bytes and {MAX_QUERY_WORDS} different words).") },
                    "limit": {
                        "type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
                        "description": "How many tools to return."
                    }
                },
                "required": ["query"]
            },
            "annotations": { "readOnlyHint": true, "openWorldHint": false }
        },
        {
            "name": CALL,
            "title": "Call a tool",
            "description": "Call a tool found with search_tools: its exact name, and its arguments as its input schema describes them.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": { "type": "string", "description": "The tool's name, as search_tools returned it." },
                    "arguments": { "type": "object", "description": "The tool's arguments." }
                },
                "required": ["name"]
            }
        }
    ])
}

/// `tools/list` in tool-search mode: the two meta-tools.
pub fn list(gw: &Served<'_>, req: &Request) -> Reply {
    listed(gw, req, meta_tools())
}

/// A `tools/list` result the gateway answers itself (tool-search and code mode): `tools`, private
/// to the caller, for as long as the catalogue's tools are.
pub(super) fn listed(gw: &Served<'_>, req: &Request, tools: Value) -> Reply {
    let body = json!({
        "resultType": "complete",
        "tools": tools,
        "ttlMs": gw.catalog().ttl_ms(Kind::Tool, std::time::Instant::now()),
        "cacheScope": "private",
        "_meta": { keys::SERVER_INFO: super::discover::server_info(gw, req) },
    });
    match Json::to_json(&body) {
        Ok(j) => Reply::Single(Outcome::Result(j)),
        Err(e) => Reply::error(RpcError::internal(format!("cannot render tools: {e}"))),
    }
}

/// `tools/call` in tool-search mode: the meta-tools are answered here, any other name is a
/// direct call.
pub async fn call(gw: &Served<'_>, req: Request) -> Reply {
    let name = req.params.parse::<String>("name").and_then(Result::ok);
    match name.as_deref() {
        Some(SEARCH) => search(gw, &req).await,
        Some(CALL) => call_found(gw, req).await,
        _ => chain::serve(gw, req).await,
    }
}

pub(super) fn arguments(req: &Request) -> Result<serde_json::Map<String, Value>, RpcError> {
    match req.params.parse::<Option<Value>>("arguments") {
        None | Some(Ok(None)) => Ok(Default::default()),
        Some(Ok(Some(Value::Object(m)))) => Ok(m),
        _ => Err(RpcError::invalid_params("tools/call arguments must be an object")),
    }
}

async fn search(gw: &Served<'_>, req: &Request) -> Reply {
    let (query, text, limit) = match query_of(req) {
        Ok(q) => q,
        Err(reply) => return *reply,
    };
    let found = ranked(gw, req, query, limit, move |_, index, positions| found(index, positions, &text)).await;
    match found {
        Ok(v) => result(v),
        Err(reply) => *reply,
    }
}

/// The query of a `search_tools` call (as parsed, as written) and how many tools it wants, or the
/// answer that refuses it.
pub(super) fn query_of(req: &Request) -> Result<(Query, String, usize), Box<Reply>> {
    let args = arguments(req).map_err(|e| Box::new(Reply::error(e)))?;
    let Some(text) = args.get("query").and_then(Value::as_str).filter(|q| !q.trim().is_empty()) else {
        return Err(Box::new(tool_error("search_tools needs a non-empty query: describe what you want to do.")));
    };
    let query = match Query::parse(text) {
        Ok(q) => q,
        Err(e) => {
            return Err(Box::new(tool_error(&format!(
                "search_tools refused the query: {e}. Describe what you want to do in a few words."
            ))));
        }
    };
    let limit = args.get("limit").and_then(Value::as_u64).map(|l| (l as usize).clamp(1, MAX_LIMIT)).unwrap_or(DEFAULT_LIMIT);
    Ok((query, text.to_string(), limit))
}

/// The best `limit` tools of the caller's view for `query`, ranked, then rendered by `render`
/// (the view, its index, the found tools' positions in its tool section, best first): both on
/// the blocking pool, a few at a time (`Gateway::ranking`).
pub(super) async fn ranked<T: Send + 'static>(
    gw: &Served<'_>,
    req: &Request,
    query: Query,
    limit: usize,
    render: impl FnOnce(&Catalog, &ToolIndex, Vec<usize>) -> T + Send + 'static,
) -> Result<T, Box<Reply>> {
    let cat = gw.view.clone();
    let id_of = |i: usize| gw.upstream_id(i);
    let section = cat.section(Kind::Tool);
    let visible: Vec<usize> =
        view::visible(&cat, Kind::Tool, &req.caller.grants, &id_of).iter().filter_map(|e| section.position(&e.name)).collect();
    // The permit goes with the work: a caller that gives up does not free a place for another
    // search while its own still runs.
    let Ok(permit) = Arc::clone(&gw.ranking).acquire_owned().await else {
        return Err(Box::new(Reply::error(RpcError::internal("tool search is shut down"))));
    };
    let ranked = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        // The snapshot's tools are parsed and indexed once; each search ranks what the caller sees.
        let section = cat.section(Kind::Tool);
        let index = cat.search.get_or_init(|| Arc::new(ToolIndex::build(section.entries.iter().map(|e| e.json.get()))));
        let positions = index.rank(&visible, &query, limit).into_iter().map(|(p, _)| p).collect();
        render(&cat, index, positions)
    })
    .await;
    ranked.map_err(|e| Box::new(Reply::error(RpcError::internal(format!("tool search failed: {e}")))))
}

/// The `search_tools` result: the tools at `positions` of `index` (found for the query the caller
/// wrote: `text`), with their input schemas. CPU-bound: off the async workers.
fn found(index: &ToolIndex, positions: Vec<usize>, text: &str) -> Value {
    let found: Vec<Value> = positions
        .into_iter()
        .filter_map(|p| index.items.get(p))
        .map(|v| {
            json!({
                "name": v.get("name"),
                "title": v.get("title"),
                "description": v.get("description"),
                "inputSchema": v.get("inputSchema"),
            })
        })
        .collect();
    let summary = if found.is_empty() {
        format!("No tool matches \"{text}\". Try other words.")
    } else {
        let lines: Vec<String> = found
            .iter()
            .map(|t| {
                format!(
                    "- {}: {}\n  input: {}",
                    t["name"].as_str().unwrap_or(""),
                    t["description"].as_str().unwrap_or(""),
                    t["inputSchema"]
                )
            })
            .collect();
        let match_ = if found.len() == 1 { "1 tool matches".to_string() } else { format!("{} tools match", found.len()) };
        format!("{match_} \"{text}\" (call one with call_tool):\n{}", lines.join("\n"))
    };
    json!({
        "resultType": "complete",
        "content": [{ "type": "text", "text": summary }],
        "structuredContent": { "tools": found },
    })
}

async fn call_found(gw: &Served<'_>, mut req: Request) -> Reply {
    let args = match arguments(&req) {
        Ok(a) => a,
        Err(e) => return Reply::error(e),
    };
    let Some(name) = args.get("name").and_then(Value::as_str) else {
        return tool_error("call_tool needs the name of a tool (find one with search_tools).");
    };
    let inner = args.get("arguments").cloned().unwrap_or_else(|| json!({}));
    if !inner.is_object() {
        return tool_error("call_tool's arguments must be an object.");
    }
    // The found tool is called exactly as a direct tools/call would be: same policy, limits,
    // routing and audit, under the tool's own name.
    let set = req.params.set_json("name", name).and_then(|()| req.params.set_json("arguments", &inner));
    if let Err(e) = set {
        return Reply::error(RpcError::internal(format!("cannot build the call: {e}")));
    }
    chain::serve(gw, req).await
}

pub(super) fn tool_error(message: &str) -> Reply {
    Reply::Single(super::tool_text(message, true))
}

pub(super) fn result(v: Value) -> Reply {
    match Json::to_json(&v) {
        Ok(j) => Reply::Single(Outcome::Result(j)),
        Err(e) => Reply::error(RpcError::internal(format!("cannot render the result: {e}"))),
    }
}
