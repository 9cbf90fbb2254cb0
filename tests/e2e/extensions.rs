//! Extensions as a rule (docs/protocol.md#extensions): the gateway advertises and declares only
//! the extensions of its one table, each in the eras it relays it in. The upstream
//! (tests/py/extensions_server.py, official Python SDK) declares an extension no gateway knows
//! (`com.example/unknown`), the tasks extension and MCP Apps, and tells which client extensions
//! it was told about. Clients of both eras declare all three.

use crate::harness::*;
use crate::streams::legacy_request;
use serde_json::{Value, json};

const UNKNOWN: &str = "com.example/unknown";
const TASKS: &str = "io.modelcontextprotocol/tasks";
const UI: &str = "io.modelcontextprotocol/ui";

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
    k.sort_unstable();
    k
}

fn client_extensions() -> Value {
    json!({ "extensions": { UNKNOWN: {}, TASKS: {}, UI: { "mimeTypes": ["text/html;profile=mcp-app"] } } })
}

/// What the upstream was told, from its `client_extensions` tool's answer.
fn told(r: &Value) -> Value {
    serde_json::from_str(&text_of(r)).unwrap_or_else(|e| panic!("{e}: {r}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_extensions_are_never_advertised_nor_declared_in_either_era() {
    let (_upstream, url) = py_script_http("tests/py/extensions_server.py", &[]);
    let (_plain, plain) = py_http("plain", &[]);
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"ext\"\nurl = \"{url}\"\n\n\
         [[upstream]]\nid = \"plain\"\nurl = \"{plain}\"\n\n[[endpoint]]\npath = \"/mcp/plain\"\ninclude = [\"upstream:plain\"]\n"
    ));

    // 2026-07-28: discover advertises what the gateway relays, and a call tells the upstream
    // only of those the client declared that the table lets through.
    let discovered = rpc(&gw.url, "server/discover", json!({})).await.message();
    assert_eq!(keys(&discovered["result"]["capabilities"]["extensions"]), [TASKS, UI], "{discovered}");
    let mut m = meta();
    m["io.modelcontextprotocol/clientCapabilities"] = client_extensions();
    let r = rpc(&gw.url, "tools/call", json!({ "name": "ext__client_extensions", "arguments": {}, "_meta": m })).await.message();
    assert_eq!(keys(&told(&r)), [TASKS, UI], "modern: {r}");
    // Per caller view: an endpoint that selects only the plain upstream advertises nothing.
    let on_plain = rpc(&format!("{}/mcp/plain", gw.base), "server/discover", json!({})).await.message();
    assert!(on_plain["result"]["capabilities"].get("extensions").is_none(), "{on_plain}");

    // 2025-11-25: initialize advertises what the gateway relays to legacy clients (not tasks),
    // and the client's own upstream session declares no more than that.
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": client_extensions(), "clientInfo": { "name": "t", "version": "1" } } });
    let h = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    let opened = post_raw(&gw.url, &h, init.to_string()).await;
    let session = opened.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("Mcp-Session-Id").to_string();
    let hello = opened.message();
    assert_eq!(keys(&hello["result"]["capabilities"]["extensions"]), [UI], "legacy initialize: {hello}");
    let r = legacy_request(&gw.url, &session, "tools/call", json!({ "name": "ext__client_extensions", "arguments": {} }), &[]).await;
    assert_eq!(keys(&told(&r)), [UI], "legacy: {r}");
    let r = legacy_request(&gw.url, &session, "tasks/get", json!({ "taskId": "t-1" }), &[]).await;
    assert_eq!(r["error"]["code"], -32021, "a legacy client cannot use tasks: {r}");
}

/// The same rule on `mcpgate stdio`: its legacy `initialize` advertises no unknown extension and
/// no tasks, and the legacy client's upstream session hears only of MCP Apps.
#[test]
fn mcpgate_stdio_legacy_clients_get_only_what_the_table_relays() {
    use std::io::{BufRead, BufReader, Write};
    let (_upstream, url) = py_script_http("tests/py/extensions_server.py", &[]);
    let (mut child, _dir) = mcpgate_stdio(&format!("[[upstream]]\nid = \"ext\"\nurl = \"{url}\"\n"));
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    // Writes a message; for a request, reads up to its answer.
    let mut exchange = |msg: Value| -> Value {
        writeln!(stdin, "{msg}").expect("write");
        if msg.get("id").is_none() {
            return Value::Null;
        }
        loop {
            let line = lines.next().and_then(Result::ok).unwrap_or_else(|| panic!("no answer to {msg}"));
            let v: Value = serde_json::from_str(&line).unwrap_or_default();
            if v["id"] == msg["id"] {
                return v;
            }
        }
    };
    // A modern request first: the catalogue is ready once it is answered.
    let listed = exchange(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "_meta": meta() } }));
    assert!(listed["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{listed}");
    let hello = exchange(json!({ "jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": client_extensions(), "clientInfo": { "name": "t", "version": "1" } } }));
    assert_eq!(keys(&hello["result"]["capabilities"]["extensions"]), [UI], "{hello}");
    exchange(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    let r = exchange(
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": "ext__client_extensions", "arguments": {} } }),
    );
    assert_eq!(keys(&told(&r)), [UI], "{r}");
    drop(stdin);
    let _ = child.wait();
}
