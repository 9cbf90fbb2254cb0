//! Two upstreams (HTTP and stdio) with the same tool names: prefixed names, correct routing, and
//! byte-for-byte pass-through of arguments, results and schemas.

use crate::harness::*;
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct RawReply<'a> {
    #[serde(borrow)]
    result: &'a RawValue,
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_names_are_prefixed_and_calls_reach_the_owner() {
    let (_alpha, alpha_url, gw) = crate::two_upstreams("10s");
    let names = tool_names(&gw.url).await;
    for tool in ["echo", "whoami", "big", "fail", "structured", "schema_zoo", "execute_sql", "slow", "progress"] {
        assert!(names.contains(&format!("alpha__{tool}")), "alpha__{tool} missing from {names:?}");
        assert!(names.contains(&format!("beta__{tool}")), "beta__{tool} missing from {names:?}");
    }
    assert_eq!(names.iter().position(|n| n == "alpha__echo"), Some(0), "config order, then upstream order: {names:?}");
    assert_eq!(text_of(&call(&gw.url, "alpha__whoami", json!({})).await), "alpha");
    assert_eq!(text_of(&call(&gw.url, "beta__whoami", json!({})).await), "beta");

    // Results are relayed byte for byte: compare with the same call made directly.
    for (name, args) in [
        ("echo", json!({ "text": "héllo wörld ✓ 日本 \"quoted\" \\ back" })),
        ("big", json!({ "size": 1024 * 1024 })),
        ("fail", json!({})),
        ("structured", json!({ "a": 2, "b": 3 })),
    ] {
        let direct = rpc(&alpha_url, "tools/call", json!({ "name": name, "arguments": args })).await;
        let via = rpc(&gw.url, "tools/call", json!({ "name": format!("alpha__{name}"), "arguments": args })).await;
        assert_eq!(via.status, 200, "{name}: {}", String::from_utf8_lossy(&via.body));
        let d: RawReply = serde_json::from_slice(&direct.body).expect("direct reply");
        let v: RawReply = serde_json::from_slice(&via.body).expect("gateway reply");
        assert_eq!(v.result.get(), d.result.get(), "{name}: the result must be relayed unchanged");
    }
    let big = call(&gw.url, "beta__big", json!({ "size": 1024 * 1024 })).await;
    assert_eq!(text_of(&big).len(), 1024 * 1024);
    let echoed = call(&gw.url, "beta__echo", json!({ "text": "héllo wörld ✓ 日本" })).await;
    assert_eq!(text_of(&echoed), "héllo wörld ✓ 日本");
    let failed = call(&gw.url, "beta__fail", json!({})).await;
    assert_eq!(failed["result"]["isError"], true);
    let structured = call(&gw.url, "beta__structured", json!({ "a": 20, "b": 22 })).await;
    assert_eq!(structured["result"]["structuredContent"], json!({ "sum": 42 }));
}

#[tokio::test(flavor = "multi_thread")]
async fn schemas_reach_the_client_unchanged() {
    let (_alpha, alpha_url, gw) = crate::two_upstreams("10s");
    let direct = rpc(&alpha_url, "tools/list", json!({})).await;
    let via = rpc(&gw.url, "tools/list", json!({})).await;
    #[derive(Deserialize)]
    struct Page<'a> {
        #[serde(borrow)]
        tools: Vec<std::collections::BTreeMap<String, &'a RawValue>>,
    }
    #[derive(Deserialize)]
    struct Reply<'a> {
        #[serde(borrow)]
        result: Page<'a>,
    }
    let d: Reply = serde_json::from_slice(&direct.body).expect("direct list");
    let v: Reply = serde_json::from_slice(&via.body).expect("gateway list");
    for tool in &d.result.tools {
        let name: String = serde_json::from_str(tool["name"].get()).expect("name");
        let mine = v
            .result
            .tools
            .iter()
            .find(|t| t["name"].get() == format!("\"alpha__{name}\""))
            .unwrap_or_else(|| panic!("alpha__{name} not listed"));
        for (key, raw) in tool {
            if key != "name" {
                assert_eq!(mine[key].get(), raw.get(), "{name}.{key} must be byte-identical");
            }
        }
    }
    let zoo = d.result.tools.iter().find(|t| t["name"].get() == "\"schema_zoo\"").expect("schema_zoo");
    let schema: serde_json::Value = serde_json::from_str(zoo["inputSchema"].get()).expect("schema");
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(schema["$defs"]["point"]["$anchor"], "pt");
    let listed = rpc(&gw.url, "tools/list", json!({})).await.json();
    let structured = listed["result"]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "beta__structured"))
        .cloned()
        .expect("beta__structured");
    assert_eq!(structured["outputSchema"]["properties"]["sum"]["type"], "integer");
    assert_eq!(listed["result"]["resultType"], "complete");
    assert!(listed["result"]["ttlMs"].is_u64());
    assert_eq!(listed["result"]["cacheScope"], "private", "the Python SDK marks its lists private, so the merge is private");
}

#[tokio::test(flavor = "multi_thread")]
async fn x_mcp_header_tools_and_progress_go_through() {
    let (_alpha, _url, gw) = crate::two_upstreams("10s");
    // The client mirrors `region` into Mcp-Param-Region; the gateway checks it and rebuilds it
    // for the upstream, which itself rejects calls without it.
    let r = rpc_with(
        &gw.url,
        "tools/call",
        json!({ "name": "alpha__execute_sql", "arguments": { "region": "us-west1", "query": "select 1" } }),
        &[("Mcp-Param-Region", "us-west1")],
    )
    .await;
    assert_eq!(text_of(&r.message()), "region=us-west1 header=us-west1 at=alpha");
    let r = rpc_with(
        &gw.url,
        "tools/call",
        json!({ "name": "alpha__execute_sql", "arguments": { "region": "zürich", "query": "q" } }),
        &[("Mcp-Param-Region", "=?base64?esO8cmljaA==?=")],
    )
    .await;
    assert_eq!(text_of(&r.message()), "region=zürich header==?base64?esO8cmljaA==?= at=alpha");
    let r = rpc_with(
        &gw.url,
        "tools/call",
        json!({ "name": "beta__execute_sql", "arguments": { "region": "eu", "query": "q" } }),
        &[("Mcp-Param-Region", "eu")],
    )
    .await;
    assert_eq!(text_of(&r.message()), "region=eu header=none at=beta", "stdio carries no headers");

    for tool in ["alpha__progress", "beta__progress"] {
        let mut m = meta();
        m["progressToken"] = json!("tok-7");
        let r = rpc(&gw.url, "tools/call", json!({ "name": tool, "arguments": { "steps": 3 }, "_meta": m })).await;
        assert!(r.content_type().starts_with("text/event-stream"), "{tool}: {}", r.content_type());
        assert_eq!(r.headers.get("x-accel-buffering").map(|v| v.as_bytes()), Some(&b"no"[..]));
        let msgs = r.sse();
        let progress: Vec<_> = msgs.iter().filter(|m| m["method"] == "notifications/progress").collect();
        assert_eq!(progress.len(), 3, "{tool}: {msgs:?}");
        assert!(
            progress.iter().all(|p| p["params"]["progressToken"] == "tok-7"),
            "{tool}: the caller's own token comes back: {progress:?}"
        );
        let last = msgs.last().expect("final message");
        assert_eq!(last["id"], 1);
        assert_eq!(text_of(last), "done");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_callers_meta_goes_upstream_not_the_gateways() {
    // The per-request `_meta` exists in the modern era only: the stdio upstream (which would get
    // the legacy handshake by default, docs/protocol.md) is spoken to in it.
    let (_alpha, _url, gw) = crate::two_upstreams_with("10s", "era = \"modern\"");
    for tool in ["alpha__meta", "beta__meta"] {
        let mut m = meta();
        m["io.modelcontextprotocol/clientCapabilities"] = json!({ "elicitation": { "form": {} }, "experimental": { "x": {} } });
        m["io.modelcontextprotocol/logLevel"] = json!("warning");
        m["io.modelcontextprotocol/clientInfo"] = json!({ "name": "the-caller", "version": "9" });
        m["traceparent"] = json!("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        m["com.example/custom"] = json!({ "k": 1 });
        let r = rpc(&gw.url, "tools/call", json!({ "name": tool, "arguments": {}, "_meta": m })).await.message();
        let seen: serde_json::Value = serde_json::from_str(&text_of(&r)).expect("meta JSON");
        let caps = &seen["io.modelcontextprotocol/clientCapabilities"];
        assert_eq!(caps["elicitation"], json!({ "form": {} }), "{tool}: the caller's capabilities: {seen}");
        assert_eq!(seen["io.modelcontextprotocol/logLevel"], "warning", "{tool}: {seen}");
        assert_eq!(seen["io.modelcontextprotocol/clientInfo"]["name"], "the-caller", "{tool}: {seen}");
        assert_eq!(seen["io.modelcontextprotocol/protocolVersion"], VERSION, "{tool}: {seen}");
        assert_eq!(seen["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "{tool}: {seen}");
        assert_eq!(seen["com.example/custom"], json!({ "k": 1 }), "{tool}: {seen}");
    }
}
