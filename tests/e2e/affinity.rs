//! Era affinity (docs/protocol.md, "Which era each upstream is spoken to in"). An everyday-SDK
//! server (tests/py/sdk_conformance_fixture.py) asks for input with `ctx.elicit()` and
//! `ctx.session.list_roots()`, which work only in a legacy session. Through the gateway, a legacy
//! client gets those questions, as it does directly: on an HTTP upstream in an upstream session of
//! its own (opened with its own clientInfo and capabilities, roots included), on a stdio upstream
//! in a second, legacy-era process (whose one session declares no roots: it is shared).
//! A modern client of the same gateway keeps the modern era.

use crate::harness::*;
use serde_json::{Value, json};

fn fixture_gateway(stdio: bool) -> (Option<(Proc, String)>, Gateway) {
    let head = "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"app\"\ntimeout = \"20s\"\n";
    if stdio {
        let script = repo().join("tests/py/sdk_conformance_fixture.py");
        let command = format!("command = [{:?}, {:?}, \"--transport\", \"stdio\"]\n", python(), script.display().to_string());
        return (None, gateway(&format!("{head}{command}")));
    }
    let (fixture, url) = py_script_http("tests/py/sdk_conformance_fixture.py", &[]);
    let gw = gateway(&format!("{head}url = \"{url}\"\n"));
    (Some((fixture, url)), gw)
}

/// A legacy session opened with clientInfo `name`; its `Mcp-Session-Id`.
pub async fn open_session(url: &str, name: &str) -> String {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": name, "version": "1" } } });
    let r =
        post_raw(url, &[("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")], body.to_string()).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("Mcp-Session-Id").to_string()
}

/// What the upstream says about the session a legacy client's call ran in.
pub async fn whoami(url: &str, session: &str) -> String {
    let body = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "app__test_whoami", "arguments": {} } });
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Mcp-Session-Id", session),
    ];
    text_of(&post_raw(url, &headers, body.to_string()).await.message())
}

/// The HTTP status of a legacy request sent straight to the upstream in `session`.
pub async fn whoami_direct(url: &str, session: &str) -> u16 {
    let body = json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": "test_whoami", "arguments": {} } });
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Mcp-Session-Id", session),
    ];
    post_raw(url, &headers, body.to_string()).await.status
}

pub fn field<'a>(who: &'a str, key: &str) -> &'a str {
    who.split_whitespace().find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('='))).unwrap_or_else(|| panic!("{key} in {who:?}"))
}

/// The official SDK client in the legacy era, answering elicitation and roots requests.
fn legacy_sdk(gw: &Gateway, args: &[&str]) -> Vec<Value> {
    let answers = ["--mode", "legacy", "--elicit", r#"{"username":"ada","email":"ada@example.com"}"#, "--roots", "file:///work/project"];
    sdk_lines(&answers, &gw.url, args)
}

/// `roots`: whether the client's roots are asked for too (in a session of the client's own; the
/// gateway's shared sessions do not declare roots, docs/input-requests.md).
fn legacy_questions_reach_the_legacy_client(gw: &Gateway, label: &str, roots: bool) {
    let lines = legacy_sdk(gw, &["call", "app__test_elicitation", r#"{"message":"Who are you?"}"#]);
    assert!(lines.iter().any(|l| l["asked"] == "elicitation/create"), "{label}: the client was asked: {lines:?}");
    let result = lines.last().expect("a result");
    let text = text_of(&json!({ "result": result }));
    assert!(text.contains("ada@example.com"), "{label}: the answer reached the tool: {lines:?}");

    if !roots {
        return;
    }
    // On failure, the gateway's log says where the question or its answer went.
    let lines = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| legacy_sdk(gw, &["call", "app__test_list_roots", "{}"])))
        .unwrap_or_else(|e| {
            let why = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            panic!("{label}: {why}\ngateway log:\n{}", gw.proc.log())
        });
    assert!(lines.iter().any(|l| l["asked"] == "roots/list"), "{label}: the client was asked for roots: {lines:?}");
    let text = text_of(&json!({ "result": lines.last().expect("a result") }));
    assert!(text.contains("file:///work/project"), "{label}: {lines:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_clients_get_an_upstream_session_of_their_own_over_http() {
    let (fixture, gw) = fixture_gateway(false);
    let upstream_url = fixture.as_ref().map(|(_, u)| u.clone()).expect("an HTTP fixture");
    let (a, b) = (open_session(&gw.url, "client-a").await, open_session(&gw.url, "client-b").await);
    let (who_a, who_b) = (whoami(&gw.url, &a).await, whoami(&gw.url, &b).await);
    assert_eq!(field(&who_a, "client"), "client-a", "the upstream sees the client itself: {who_a}");
    assert_eq!(field(&who_b, "client"), "client-b", "{who_b}");
    assert_eq!(field(&who_a, "version"), "2025-11-25", "{who_a}");
    assert_ne!(field(&who_a, "session"), field(&who_b, "session"), "two clients, two upstream sessions");
    let again = whoami(&gw.url, &a).await;
    assert_eq!(field(&again, "session"), field(&who_a, "session"), "a client keeps its upstream session");

    // A modern client of the same gateway is spoken to in the modern era.
    let modern = text_of(&rpc(&gw.url, "tools/call", json!({ "name": "app__test_whoami", "arguments": {} })).await.message());
    assert_eq!(field(&modern, "version"), "2026-07-28", "{modern}");

    // The client ends its session: the gateway ends the upstream one, and a new session of the
    // same client gets a new one.
    assert_eq!(whoami_direct(&upstream_url, field(&who_a, "session")).await, 200, "the client's upstream session is live");
    let end = http::Request::delete(&gw.url)
        .header("Mcp-Session-Id", &a)
        .header("MCP-Protocol-Version", "2025-11-25")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    assert_eq!(send(end).await.expect("DELETE").status, 200);
    let upstream_session = field(&who_a, "session").to_string();
    let mut forgotten = false;
    for _ in 0..50 {
        if whoami_direct(&upstream_url, &upstream_session).await == 404 {
            forgotten = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(forgotten, "the upstream session of an ended client session is ended upstream too");
    let a2 = open_session(&gw.url, "client-a").await;
    let who_a2 = whoami(&gw.url, &a2).await;
    assert_ne!(field(&who_a2, "session"), field(&who_a, "session"), "{who_a2}");

    legacy_questions_reach_the_legacy_client(&gw, "HTTP", true);
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_clients_of_a_stdio_server_get_its_legacy_era_process() {
    let (_, gw) = fixture_gateway(true);
    let modern = text_of(&rpc(&gw.url, "tools/call", json!({ "name": "app__test_whoami", "arguments": {} })).await.message());
    assert_eq!(field(&modern, "version"), "2026-07-28", "the process the catalogue comes from speaks the modern era: {modern}");
    let a = open_session(&gw.url, "client-a").await;
    let who = whoami(&gw.url, &a).await;
    assert_eq!(field(&who, "version"), "2025-11-25", "a legacy client is served by the legacy-era process: {who}");
    legacy_questions_reach_the_legacy_client(&gw, "stdio", false);
    let modern = text_of(&rpc(&gw.url, "tools/call", json!({ "name": "app__test_whoami", "arguments": {} })).await.message());
    assert_eq!(field(&modern, "version"), "2026-07-28", "modern clients stay where they were: {modern}");
}
