//! Part 2, both eras both ways: legacy clients (the official Python SDK client in legacy mode,
//! over HTTP and over `mcpgate stdio`) use the gateway; legacy upstreams (server-everything over
//! stdio and HTTP, a legacy-only Python SDK server) sit beside a modern one and serve modern and
//! legacy clients; sessions survive a change of replica with the same key; an upstream that
//! restarts (losing its session) is recovered without the client noticing.

use crate::harness::*;
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

fn sdk_client(target: &[&str], args: &[&str]) -> Vec<Value> {
    let (opts, args): (Vec<&str>, Vec<&str>) = args.iter().partition(|a| a.starts_with("--"));
    let out = Command::new(python())
        .arg(repo().join("tests/py/modern_client.py"))
        .args(["--mode", "legacy"])
        .args(&opts)
        .args(target)
        .args(&args)
        .output()
        .expect("run the Python SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "legacy client {args:?} failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

fn exercise_legacy_client(target: &[&str]) {
    let tools = sdk_client(target, &["list"]);
    let names = tools[0]["tools"].as_array().expect("tools");
    assert!(names.iter().any(|n| n == "test_simple_text"), "{names:?}");
    let call = sdk_client(target, &["call", "test_simple_text", "{}"]);
    assert_eq!(call[0]["content"][0]["text"], "This is a simple text response for testing.", "{call:?}");
    let read = sdk_client(target, &["read", "test://static-text"]);
    assert_eq!(read[0]["contents"][0]["text"], "This is the content of the static text resource.", "{read:?}");
    let prompt = sdk_client(target, &["prompt", "test_prompt_with_arguments", r#"{"arg1":"x","arg2":"y"}"#]);
    assert!(prompt[0]["messages"][0]["content"]["text"].as_str().unwrap_or_default().contains("arg1='x'"), "{prompt:?}");
    let progress = sdk_client(target, &["--progress", "call", "test_tool_with_progress", "{}"]);
    let steps: Vec<&Value> = progress.iter().filter(|l| l.get("progress").is_some()).collect();
    assert!(steps.len() >= 2, "progress notifications reach a legacy client: {progress:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_clients_use_the_gateway_over_http_and_stdio() {
    let (_fixture, url) = py_script_http("tests/py/conformance_fixture.py", &[]);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"fixture\"\nurl = \"{url}\"\nprefix = \"\"\ntimeout = \"20s\"\n"
    );
    let gw = gateway(&config);
    exercise_legacy_client(&[gw.url.as_str()]);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, &config).expect("write config");
    let stdio = format!("{} stdio -c {}", env!("CARGO_BIN_EXE_mcpgate"), path.display());
    exercise_legacy_client(&["--stdio", &stdio]);
    // The same `mcpgate stdio` serves a modern (2026-07-28) client too.
    let out = Command::new(python())
        .arg(repo().join("tests/py/modern_client.py"))
        .args(["--mode", "2026-07-28", "--stdio", &stdio, "call", "test_simple_text", "{}"])
        .output()
        .expect("modern stdio client");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("This is a simple text response for testing."),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("\"resultType\":\"complete\""), "modern shape: {text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_upstreams_serve_modern_and_legacy_clients() {
    let (_everything, everything_url) = everything_http();
    let (_old, old_url) = py_http("old", &["--legacy-only"]);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n\n\
         [[upstream]]\nid = \"every\"\ncommand = {}\ntimeout = \"20s\"\n\n[[upstream]]\nid = \"everyhttp\"\nurl = \"{everything_url}\"\ntimeout = \"20s\"\n\n\
         [[upstream]]\nid = \"old\"\nurl = \"{old_url}\"\ntimeout = \"20s\"\n",
        everything_stdio_command()
    );
    let gw = gateway(&config);
    let names = tool_names(&gw.url).await;
    for n in ["calc__add", "every__echo", "everyhttp__echo", "old__whoami"] {
        assert!(names.contains(&n.to_string()), "{n} missing: {names:?}\n{}", gw.proc.log());
    }
    // A modern client: results from legacy upstreams gain resultType.
    for (tool, args, want) in [
        ("every__echo", json!({ "message": "héllo" }), "Echo: héllo"),
        ("everyhttp__echo", json!({ "message": "over http" }), "Echo: over http"),
        ("old__whoami", json!({}), "old"),
        ("calc__add", json!({ "a": 2, "b": 3 }), "5"),
    ] {
        let msg = call(&gw.url, tool, args).await;
        assert_eq!(text_of(&msg), want, "{tool}: {msg}");
        assert_eq!(msg["result"]["resultType"], "complete", "{tool}: {msg}");
    }
    // Legacy lists promise nothing: a list they contribute to is neither fresh nor shareable.
    let listed = rpc(&gw.url, "tools/list", json!({})).await.json();
    assert_eq!((listed["result"]["ttlMs"].as_u64(), listed["result"]["cacheScope"].as_str()), (Some(0), Some("private")), "{listed}");
    let read = rpc(&gw.url, "resources/read", json!({ "uri": "every+demo://resource/static/document/architecture.md" })).await.message();
    assert_eq!(read["result"]["contents"][0]["uri"], "every+demo://resource/static/document/architecture.md", "URIs map back: {read}");
    assert_eq!(read["result"]["cacheScope"], "private");
    // The resource links a tool returns are in the gateway's URI space, so they read back.
    for tool in ["every__get-resource-links", "everyhttp__get-resource-links"] {
        let msg = call(&gw.url, tool, json!({ "count": 2 })).await;
        let links: Vec<String> = msg["result"]["content"]
            .as_array()
            .map(|c| c.iter().filter(|b| b["type"] == "resource_link").filter_map(|b| b["uri"].as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        assert_eq!(links.len(), 2, "{tool}: {msg}");
        let prefix = tool.split("__").next().unwrap_or_default();
        for uri in links {
            assert!(uri.starts_with(&format!("{prefix}+demo://")), "{uri}");
            let read = rpc(&gw.url, "resources/read", json!({ "uri": uri })).await.message();
            assert_eq!(read["result"]["contents"][0]["uri"], uri.as_str(), "a link reads back: {read}");
        }
    }
    // Progress from a legacy upstream reaches a modern client.
    let mut m = meta();
    m["progressToken"] = json!("p-1");
    let r = rpc(
        &gw.url,
        "tools/call",
        json!({ "name": "every__trigger-long-running-operation", "arguments": { "duration": 1, "steps": 2 }, "_meta": m }),
    )
    .await;
    let progress = r.sse().into_iter().filter(|m| m["method"] == "notifications/progress").count();
    assert_eq!(progress, 2, "{}", String::from_utf8_lossy(&r.body));
    // A legacy client.
    for (tool, args, want) in
        [("every__echo", r#"{"message":"x"}"#, "Echo: x"), ("old__echo", r#"{"text":"y"}"#, "y"), ("calc__add", r#"{"a":1,"b":1}"#, "2")]
    {
        let out = sdk_client(&[gw.url.as_str()], &["call", tool, args]);
        assert_eq!(out[0]["content"][0]["text"], want, "{tool}: {out:?}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate"))
        .arg("check")
        .arg("-c")
        .arg(write_config(&config).path().join("gateway.toml"))
        .output()
        .expect("check");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.lines().any(|l| l.starts_with("every ") && l.contains("legacy (2025-11-25)")), "{table}");
    assert!(table.lines().any(|l| l.starts_with("calc ") && l.contains("modern (2026-07-28)")), "{table}");
}

pub(crate) async fn initialize(url: &str) -> String {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let r =
        post_raw(url, &[("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")], body.to_string()).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-06-18");
    r.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("Mcp-Session-Id").to_string()
}

pub(crate) async fn legacy_call(url: &str, session: &str, method: &str, params: Value) -> Resp {
    let body = json!({ "jsonrpc": "2.0", "id": 2, "method": method, "params": params });
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-06-18"),
        ("Mcp-Session-Id", session),
    ];
    post_raw(url, &headers, body.to_string()).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_continues_on_another_replica_with_the_same_key() {
    let key = "5f".repeat(32);
    let config = "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n";
    let first = gateway_with_env(config, &[("MCPGATE_TOKEN_KEY", &key)]);
    let second = gateway_with_env(config, &[("MCPGATE_TOKEN_KEY", &key)]);
    let other = gateway_with_env(config, &[("MCPGATE_TOKEN_KEY", &"a0".repeat(32))]);
    let session = initialize(&first.url).await;
    let notified = post_raw(
        &first.url,
        &[("Content-Type", "application/json"), ("Mcp-Session-Id", &session)],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(notified.status, 202);
    for gw in [&first, &second] {
        let list = legacy_call(&gw.url, &session, "tools/list", json!({})).await.message();
        assert!(list["result"]["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == "calc__add")), "{list}");
        assert!(list["result"].get("resultType").is_none() && list["result"].get("ttlMs").is_none(), "legacy shape: {list}");
        let sum =
            legacy_call(&gw.url, &session, "tools/call", json!({ "name": "calc__add", "arguments": { "a": 40, "b": 2 } })).await.message();
        assert_eq!(text_of(&sum), "42");
        let ping = legacy_call(&gw.url, &session, "ping", json!({})).await.json();
        assert_eq!(ping["result"], json!({}));
    }
    let refused = legacy_call(&other.url, &session, "tools/list", json!({})).await;
    assert_eq!(refused.status, 404, "another key cannot open the session: {}", String::from_utf8_lossy(&refused.body));
    let forged = legacy_call(&first.url, "forged-session", "tools/list", json!({})).await;
    assert_eq!(forged.status, 404);
    let missing = post_raw(
        &first.url,
        &[("Content-Type", "application/json"), ("MCP-Protocol-Version", "2025-06-18")],
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(missing.status, 400, "a legacy request without a session: {}", String::from_utf8_lossy(&missing.body));
    // DELETE ends the session on that replica.
    let deleted = send(http::Request::delete(&first.url).header("Mcp-Session-Id", &session).body(Default::default()).expect("req"))
        .await
        .expect("DELETE");
    assert_eq!(deleted.status, 200);
    assert_eq!(legacy_call(&first.url, &session, "tools/list", json!({})).await.status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_restart_is_noticed_and_recovered() {
    let (mut old, url) = py_http("old", &["--legacy-only"]);
    let port = url.trim_start_matches("http://127.0.0.1:").trim_end_matches("/mcp").to_string();
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"old\"\nurl = \"{url}\"\ntimeout = \"10s\"\n"));
    assert_eq!(text_of(&call(&gw.url, "old__whoami", json!({})).await), "old");
    old.kill();
    // Its GET stream drops: the gateway re-probes, finds it gone and takes its tools off the list.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tool_names(&gw.url).await.contains(&"old__whoami".to_string()) {
        assert!(std::time::Instant::now() < deadline, "the dead upstream's tools stay listed\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_restarted, _) = py_http("old", &["--legacy-only", "--port", &port]);
    // The restarted server gets a new session; its tools come back and answer.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let msg = call(&gw.url, "old__whoami", json!({})).await;
        if msg["result"]["content"][0]["text"] == "old" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not recovered: {msg}\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn list_changes_reach_legacy_clients_on_their_get_stream() {
    use http_body_util::BodyExt;
    let gw = gateway(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"dyn\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"dynamic\"]\n",
    );
    let session = initialize(&gw.url).await;
    let req = http::Request::get(&gw.url)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &session)
        .header("MCP-Protocol-Version", "2025-06-18")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let client = mcpgate_net::http::new_http_client();
    let resp = tokio::time::timeout(Duration::from_secs(5), client.request(req)).await.expect("the stream opens at once").expect("GET");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers().get("content-type").and_then(|v| v.to_str().ok()), Some("text/event-stream"));
    let mut body = resp.into_body();
    // Change the upstream's list: it announces that on its listen stream (stdio), and the gateway
    // re-reads its list and tells the client.
    let toggled = legacy_call(&gw.url, &session, "tools/call", json!({ "name": "dyn__toggle_bonus", "arguments": {} })).await.message();
    assert_eq!(text_of(&toggled), "bonus tool on");
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.contains("notifications/tools/list_changed") {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(f))) => seen.push_str(&String::from_utf8_lossy(&f.into_data().unwrap_or_default())),
            other => panic!("no list_changed on the GET stream ({other:?}): {seen}\n{}", gw.proc.log()),
        }
    }
    let list = legacy_call(&gw.url, &session, "tools/list", json!({})).await.message();
    assert!(list["result"]["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == "dyn__bonus")), "{list}");
}
