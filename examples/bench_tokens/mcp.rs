//! MCP over HTTP to the gateway, as a 2026-07-28 client speaks it: stateless JSON-RPC POSTs with
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers and the protocol `_meta` in every
//! request's params, no `initialize`. A reply is JSON or an event stream whose last message is
//! the answer. `tools/list` follows cursors and keeps the list's JSON as written (key order and
//! all); a JSON-RPC error is an error here.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::time::Duration;

const VERSION: &str = "2026-07-28";

/// One MCP endpoint of the gateway (`http://127.0.0.1:<port><path>`).
pub struct Endpoint {
    pub url: String,
    client: mcpgate_net::http::HttpClient,
}

impl Endpoint {
    pub fn new(base: &str, path: &str) -> Endpoint {
        Endpoint { url: format!("{base}{path}"), client: mcpgate_net::http::new_http_client() }
    }

    /// The `result` of `method` with `params` (the protocol `_meta` added).
    pub async fn rpc(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let message: Value = serde_json::from_str(&self.message(method, params).await?)?;
        if let Some(error) = message.get("error") {
            anyhow::bail!("{method} on {}: {error}", self.url);
        }
        message.get("result").cloned().ok_or_else(|| anyhow::anyhow!("{method} on {}: no result in {message}", self.url))
    }

    /// The JSON text of the message that answers `method` with `params` (the protocol `_meta`
    /// added), as the gateway wrote it.
    async fn message(&self, method: &str, mut params: Value) -> anyhow::Result<String> {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": { "name": "mcpgate-bench-tokens", "version": "0" }
        });
        let mut req = http::Request::post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", VERSION)
            .header("mcp-method", method);
        if let Some(name) = params["name"].as_str().filter(|_| method == "tools/call") {
            req = req.header("mcp-name", mcpgate_protocol::headers::encode(name));
        }
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }).to_string();
        let resp = tokio::time::timeout(Duration::from_secs(120), self.client.request(req.body(Full::new(Bytes::from(body)))?))
            .await
            .map_err(|_| anyhow::anyhow!("{method} on {}: no answer in 120 s", self.url))??;
        let status = resp.status();
        let sse = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|t| t.starts_with("text/event-stream"));
        let bytes = resp.into_body().collect().await?.to_bytes();
        let text = String::from_utf8_lossy(&bytes);
        anyhow::ensure!(status.is_success(), "{method} on {}: HTTP {status}: {text}", self.url);
        if sse {
            last_event(&text).ok_or_else(|| anyhow::anyhow!("{method} on {}: no answer in the stream: {text}", self.url))
        } else {
            Ok(text.into_owned())
        }
    }

    /// The JSON text of the `tools` the endpoint lists, as the gateway wrote it (the items of
    /// every page, in one array), and how many there are.
    pub async fn tools_json(&self) -> anyhow::Result<(String, usize)> {
        let mut items: Vec<String> = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let text = self.message("tools/list", params).await?;
            let page: Page = serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("tools/list on {}: {e}: {text}", self.url))?;
            let tools: Vec<&RawValue> = serde_json::from_str(page.result.tools.get())?;
            items.extend(tools.iter().map(|t| t.get().to_string()));
            match page.result.next_cursor {
                Some(c) => cursor = Some(c),
                None => return Ok((format!("[{}]", items.join(",")), items.len())),
            }
        }
    }

    /// The result of calling `name` with `arguments`; a tool error (`isError`) is an error here.
    pub async fn call(&self, name: &str, arguments: &Value) -> anyhow::Result<Value> {
        let result = self.rpc("tools/call", json!({ "name": name, "arguments": arguments })).await?;
        anyhow::ensure!(result["isError"] != true, "{name} on {} failed: {}", self.url, text(&result));
        Ok(result)
    }
}

/// A `tools/list` answer, its list kept as written.
#[derive(Deserialize)]
struct Page<'a> {
    #[serde(borrow)]
    result: ListResult<'a>,
}

#[derive(Deserialize)]
struct ListResult<'a> {
    #[serde(borrow)]
    tools: &'a RawValue,
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
}

/// The text of the last JSON-RPC message of an event stream that answers a request (has an `id`).
fn last_event(stream: &str) -> Option<String> {
    stream
        .split("\n\n")
        .map(|event| event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect::<Vec<_>>().join("\n"))
        .filter(|data| serde_json::from_str::<Value>(data).is_ok_and(|m| m.get("id").is_some()))
        .last()
}

/// The text a model reads of a tool result: its text content blocks, one per line.
pub fn text(result: &Value) -> String {
    result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n")
}
