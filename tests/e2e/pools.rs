//! Part 4: header-based routing pools. An upstream made of endpoints per region: calls land on
//! the endpoint their validated `region` selects (which sees the right `Mcp-Param-Region`), a
//! mismatching client header is refused before any upstream is reached, a pool without a
//! matching rule or default answers with a tool error, and `mcpgate check` reports endpoints
//! that do not serve the same tools.

use crate::harness::*;
use serde_json::json;
use std::process::Command;

async fn calls_served(url: &str) -> u64 {
    text_of(&call(url, "calls", json!({})).await).parse().expect("a count")
}

async fn sql(url: &str, region: &str, header: &str) -> Resp {
    rpc_with(
        url,
        "tools/call",
        json!({ "name": "sql__execute_sql", "arguments": { "region": region, "query": "select 1" } }),
        &[("Mcp-Param-Region", header)],
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_land_on_the_endpoint_their_region_selects() {
    let (_west, west_url) = py_http("us-west1", &[]);
    let (_rest, rest_url) = py_http("default", &[]);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"sql\"\n[[upstream.endpoint]]\nurl = \"{west_url}\"\nwhen = {{ Region = \"us-west1\" }}     # matches the decoded Mcp-Param-Region value\n[[upstream.endpoint]]\nurl = \"{rest_url}\"  # no `when`: the default endpoint\n"
    );
    let gw = gateway(&config);
    let r = sql(&gw.url, "us-west1", "us-west1").await;
    assert_eq!(text_of(&r.message()), "region=us-west1 header=us-west1 at=us-west1");
    let r = sql(&gw.url, "eu-central1", "eu-central1").await;
    assert_eq!(text_of(&r.message()), "region=eu-central1 header=eu-central1 at=default");
    // Base64-encoded header values are decoded before they are compared and routed.
    let r = sql(&gw.url, "us-west1", "=?base64?dXMtd2VzdDE=?=").await;
    assert_eq!(text_of(&r.message()), "region=us-west1 header=us-west1 at=us-west1");

    // A mismatching header is refused and reaches no upstream.
    let (before_west, before_rest) = (calls_served(&west_url).await, calls_served(&rest_url).await);
    let refused = sql(&gw.url, "us-west1", "eu-central1").await;
    assert_eq!(refused.status, 400);
    let e = refused.json();
    assert_eq!(e["error"]["code"], -32020);
    let msg = e["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("Mcp-Param-Region") && msg.contains("'eu-central1'") && msg.contains("'us-west1'"), "{msg}");
    let missing =
        rpc(&gw.url, "tools/call", json!({ "name": "sql__execute_sql", "arguments": { "region": "us-west1", "query": "q" } })).await;
    assert_eq!((missing.status, missing.json()["error"]["code"].clone()), (400, json!(-32020)));
    // `calls` itself counts one call on each server.
    assert_eq!(calls_served(&west_url).await, before_west + 1, "the west endpoint was not reached");
    assert_eq!(calls_served(&rest_url).await, before_rest + 1, "the default endpoint was not reached");

    // Legacy clients send no validated headers: routing reads the body.
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let init = post_raw(&gw.url, &[("Content-Type", "application/json")], body.to_string()).await;
    let sid = init.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("session").to_string();
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "sql__execute_sql", "arguments": { "region": "us-west1", "query": "q" } } });
    let r = post_raw(
        &gw.url,
        &[
            ("Content-Type", "application/json"),
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Mcp-Param-Region", "eu-central1"),
        ],
        call.to_string(),
    )
    .await;
    // The upstream speaks the client's era too, so it is asked in it, in a session of the client's
    // own: no `Mcp-Param-*` headers, as when the client reaches it directly.
    assert_eq!(text_of(&r.message()), "region=us-west1 header=none at=us-west1", "routed on the body, not the unvalidated header");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_without_a_match_or_default_answers_with_a_tool_error() {
    let (_west, west_url) = py_http("us-west1", &[]);
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"sql\"\n[[upstream.endpoint]]\nurl = \"{west_url}\"\nwhen = {{ Region = \"us-west1\" }}\n[[upstream.endpoint]]\nurl = \"{west_url}\"\nwhen = {{ Region = \"us-east1\" }}\n"
    ));
    let r = sql(&gw.url, "eu-central1", "eu-central1").await.message();
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = text_of(&r);
    assert!(text.contains("'sql'") && text.contains("region=eu-central1") && text.contains("no default"), "{text}");
}

#[test]
fn check_reports_pool_endpoints_that_differ() {
    let (_west, west_url) = py_http("us-west1", &[]);
    let (_demo, demo_url) = demo_http("calc");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gateway.toml");
    std::fs::write(
        &path,
        format!("[[upstream]]\nid = \"sql\"\n[[upstream.endpoint]]\nurl = \"{west_url}\"\n[[upstream.endpoint]]\nurl = \"{demo_url}\"\nwhen = {{ Region = \"x\" }}\n"),
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate")).arg("check").arg("-c").arg(&path).output().expect("check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a disagreeing pool fails the check: {text}");
    assert!(text.contains("Warnings:") && text.contains("endpoint 2") && text.contains("differs from the default"), "{text}");
    assert!(text.contains("missing [\"big\""), "{text}");
}
