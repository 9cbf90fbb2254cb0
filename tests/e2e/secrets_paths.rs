//! Finding 6 of the second security review: `[secrets]` read only the final result of
//! `tools/call`, `prompts/get` and `resources/read`, and passed what it could not read. A hostile
//! upstream (tests/py/leaky_server.py, the official Python SDK's `MCPServer` and its usual
//! helpers) puts a fake AWS key and a fake GitHub token in every other place a client sees: each
//! test below is one place, through a modern (2026-07-28) client and a legacy session, and the
//! credentials must never reach the client. Tasks come from the conformance fixture.

use crate::harness::*;
use crate::streams::legacy_session;
use serde_json::{Value, json};
use std::process::Command;

const AWS: &str = "AKIAIOSFODNN7EXAMPLE";
const GITHUB: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

fn leaky(action: &str) -> (Proc, Gateway) {
    let (up, url) = py_script_http("tests/py/leaky_server.py", &[]);
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[secrets]\nbuiltin = \"{action}\"\n\n[[upstream]]\nid = \"leak\"\nurl = \"{url}\"\ntimeout = \"20s\"\n"
    ));
    (up, gw)
}

/// Nothing of either credential in `body`.
fn clean(body: &str, what: &str) {
    assert!(!body.contains(AWS) && !body.contains(GITHUB), "{what} leaked a credential: {body}");
}

/// The whole answer (JSON or every SSE message) to a modern request.
async fn modern(gw: &Gateway, method: &str, params: Value) -> String {
    String::from_utf8_lossy(&rpc(&gw.url, method, params).await.body).into_owned()
}

/// The whole answer to a request of a legacy session.
async fn legacy(gw: &Gateway, session: &str, method: &str, params: Value) -> String {
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params });
    let h = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Mcp-Session-Id", session),
    ];
    String::from_utf8_lossy(&post_raw(&gw.url, &h, body.to_string()).await.body).into_owned()
}

fn meta_with(key: &str, value: Value) -> Value {
    let mut m = meta();
    m[key] = value;
    m
}

/// Every JSON-RPC message of an SSE or JSON body.
fn messages(body: &str) -> Vec<Value> {
    if body.trim_start().starts_with('{') {
        return serde_json::from_str(body).map(|v| vec![v]).unwrap_or_default();
    }
    body.split("\n\n")
        .filter_map(|ev| {
            let data: Vec<&str> = ev.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
            (!data.is_empty()).then(|| serde_json::from_str(&data.join("\n")).ok()).flatten()
        })
        .collect()
}

fn with_method<'a>(all: &'a [Value], method: &str) -> Vec<&'a Value> {
    all.iter().filter(|m| m["method"] == method).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_notifications_are_redacted() {
    let (_up, gw) = leaky("redact");
    let params = json!({ "name": "leak__progress", "arguments": {}, "_meta": meta_with("progressToken", json!("p1")) });
    let body = modern(&gw, "tools/call", params).await;
    clean(&body, "modern progress");
    let all = messages(&body);
    let progress = with_method(&all, "notifications/progress");
    assert_eq!(progress.len(), 2, "{body}");
    assert_eq!(progress[0]["params"]["message"], "copied [REDACTED:aws-access-key]", "{body}");
    assert_eq!(progress[0]["params"]["progressToken"], "p1", "the caller's token is kept: {body}");

    let session = legacy_session(&gw.url, &[]).await;
    let body =
        legacy(&gw, &session, "tools/call", json!({ "name": "leak__progress", "arguments": {}, "_meta": { "progressToken": 9 } })).await;
    clean(&body, "legacy progress");
    assert_eq!(with_method(&messages(&body), "notifications/progress").len(), 2, "{body}");

    // With `block`, a notification that carries a secret is withheld; the call goes on.
    let (_up, gw) = leaky("block");
    let params = json!({ "name": "leak__progress", "arguments": {}, "_meta": meta_with("progressToken", json!("p1")) });
    let body = modern(&gw, "tools/call", params).await;
    clean(&body, "blocked progress");
    let all = messages(&body);
    assert!(with_method(&all, "notifications/progress").is_empty(), "{body}");
    assert_eq!(all.last().map(|m| m["result"]["content"][0]["text"].clone()), Some(json!("progress done")), "{body}");
    assert!(gw.proc.log().contains("outcome=secret_blocked:aws-access-key"), "audited: {}", gw.proc.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn log_notifications_are_redacted() {
    let (_up, gw) = leaky("redact");
    let params = json!({ "name": "leak__log", "arguments": {}, "_meta": meta_with("io.modelcontextprotocol/logLevel", json!("debug")) });
    let body = modern(&gw, "tools/call", params).await;
    clean(&body, "modern log");
    let all = messages(&body);
    let logs = with_method(&all, "notifications/message");
    assert_eq!(logs.len(), 2, "{body}");
    assert_eq!(logs[1]["params"]["data"]["config"]["token"], "[REDACTED:github-token]", "{body}");

    let session = legacy_session(&gw.url, &[]).await;
    legacy(&gw, &session, "logging/setLevel", json!({ "level": "debug" })).await;
    let body = legacy(&gw, &session, "tools/call", json!({ "name": "leak__log", "arguments": {} })).await;
    clean(&body, "legacy log");
    assert_eq!(with_method(&messages(&body), "notifications/message").len(), 2, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_errors_are_redacted() {
    let (_up, gw) = leaky("redact");
    let body = modern(&gw, "tools/call", json!({ "name": "leak__fail", "arguments": {} })).await;
    clean(&body, "modern error");
    let last = messages(&body).pop().unwrap_or_default();
    assert_eq!(last["error"]["message"], "cannot use key [REDACTED:aws-access-key]", "{body}");
    assert_eq!(last["error"]["data"]["token"], "[REDACTED:github-token]", "{body}");

    let session = legacy_session(&gw.url, &[]).await;
    let body = legacy(&gw, &session, "tools/call", json!({ "name": "leak__fail", "arguments": {} })).await;
    clean(&body, "legacy error");
    assert!(messages(&body).pop().unwrap_or_default()["error"]["message"].as_str().is_some_and(|m| m.contains("[REDACTED:")), "{body}");
}

/// The SDK client's lines for a call of `tool` in `mode`, answering every question.
pub(crate) fn sdk_ask(gw: &Gateway, mode: &str, tool: &str) -> String {
    let out = Command::new(python())
        .arg(repo().join("tests/py/modern_client.py"))
        .args(["--mode", mode, "--no-list", "--elicit", r#"{"value":"x"}"#, &gw.url, "call", tool, "{}"])
        .output()
        .expect("run the SDK client");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread")]
async fn questions_an_upstream_asks_are_redacted() {
    let (_up, gw) = leaky("redact");
    // A modern client gets the question in an input_required result.
    let caps = meta_with("io.modelcontextprotocol/clientCapabilities", json!({ "elicitation": {} }));
    let body = modern(&gw, "tools/call", json!({ "name": "leak__ask", "arguments": {}, "_meta": caps })).await;
    clean(&body, "modern input_required");
    assert!(body.contains("input_required") && body.contains("[REDACTED:aws-access-key]"), "{body}");
    // Through the SDK client, in both eras (a legacy client gets elicitation/create).
    for mode in ["2026-07-28", "legacy"] {
        let out = sdk_ask(&gw, mode, "leak__ask");
        clean(&out, mode);
        assert!(out.contains("\"asked\"") && out.contains("[REDACTED:github-token]") && out.contains("asked: accept"), "{mode}: {out}");
    }
    // With `block`, the question is withheld and the call ends saying so.
    let (_up, gw) = leaky("block");
    for mode in ["2026-07-28", "legacy"] {
        let out = sdk_ask(&gw, mode, "leak__ask");
        clean(&out, mode);
        assert!(!out.contains("\"asked\"") && out.contains("withheld by the gateway"), "{mode}: {out}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn resource_link_names_and_descriptions_are_redacted() {
    let (_up, gw) = leaky("redact");
    let body = modern(&gw, "tools/call", json!({ "name": "leak__link", "arguments": {} })).await;
    clean(&body, "modern resource link");
    let link = messages(&body).pop().unwrap_or_default()["result"]["content"][0].clone();
    assert_eq!(link["name"], "aws-[REDACTED:aws-access-key]", "{body}");
    assert_eq!(link["description"], "The token [REDACTED:github-token]", "{body}");
    assert_eq!(link["uri"], "leak+file:///creds/aws", "a URI is kept: {body}");

    let session = legacy_session(&gw.url, &[]).await;
    let body = legacy(&gw, &session, "tools/call", json!({ "name": "leak__link", "arguments": {} })).await;
    clean(&body, "legacy resource link");
}

#[tokio::test(flavor = "multi_thread")]
async fn completion_values_are_redacted() {
    let (_up, gw) = leaky("redact");
    let params = json!({ "ref": { "type": "ref/resource", "uri": "leak+leak://{name}" }, "argument": { "name": "name", "value": "a" } });
    let body = modern(&gw, "completion/complete", params.clone()).await;
    clean(&body, "modern completion");
    let values = messages(&body).pop().unwrap_or_default()["result"]["completion"]["values"].clone();
    assert_eq!(values, json!(["[REDACTED:aws-access-key]", "token-[REDACTED:github-token]"]), "{body}");

    let session = legacy_session(&gw.url, &[]).await;
    let body = legacy(&gw, &session, "completion/complete", params).await;
    clean(&body, "legacy completion");
    assert!(body.contains("[REDACTED:aws-access-key]"), "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_too_deep_to_read_is_withheld_not_passed() {
    let (_up, gw) = leaky("redact");
    // Deep, but within what the walker reads: redacted.
    let body = modern(&gw, "tools/call", json!({ "name": "leak__deep", "arguments": { "depth": 100 } })).await;
    clean(&body, "100 levels");
    assert!(body.contains("[REDACTED:aws-access-key]"), "{body}");
    // Deeper than it reads: withheld, in both eras.
    let body = modern(&gw, "tools/call", json!({ "name": "leak__deep", "arguments": { "depth": 140 } })).await;
    clean(&body, "140 levels");
    let last = messages(&body).pop().unwrap_or_default();
    assert_eq!(last["result"]["isError"], true, "{body}");
    assert!(last["result"]["content"][0]["text"].as_str().is_some_and(|t| t.contains("withheld by the gateway")), "{body}");
    let session = legacy_session(&gw.url, &[]).await;
    let body = legacy(&gw, &session, "tools/call", json!({ "name": "leak__deep", "arguments": { "depth": 140 } })).await;
    clean(&body, "140 levels, legacy");
    assert!(body.contains("withheld by the gateway"), "{body}");
    assert!(gw.proc.log().contains("outcome=secret_blocked:unreadable"), "{}", gw.proc.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn task_results_and_questions_are_redacted() {
    const TASKS: &str = "io.modelcontextprotocol/tasks";
    let (_fixture, fixture) = py_script_http("tests/py/conformance_fixture.py", &[]);
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[secrets]\nbuiltin = \"redact\"\n\n[[upstream]]\nid = \"fx\"\nurl = \"{fixture}\"\ntimeout = \"30s\"\n"
    ));
    let tasks_meta = meta_with("io.modelcontextprotocol/clientCapabilities", json!({ "extensions": { TASKS: {} }, "elicitation": {} }));
    let start = |tool: &'static str, args: Value| {
        let (url, meta) = (gw.url.clone(), tasks_meta.clone());
        async move {
            let r = rpc(&url, "tools/call", json!({ "name": tool, "arguments": args, "_meta": meta })).await.message();
            r["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {r}")).to_string()
        }
    };
    let get = |id: String| {
        let (url, meta) = (gw.url.clone(), tasks_meta.clone());
        async move {
            let name = mcpgate_protocol::headers::encode(&id);
            let params = json!({ "taskId": id, "_meta": meta });
            String::from_utf8_lossy(&rpc_with(&url, "tasks/get", params, &[("Mcp-Name", &name)]).await.body).into_owned()
        }
    };
    let done = start("fx__slow_compute", json!({ "seconds": 0.1, "label": AWS })).await;
    let asking = start("fx__confirm_delete", json!({ "filename": GITHUB })).await;
    let mut seen = (String::new(), String::new());
    for _ in 0..50 {
        seen = (get(done.clone()).await, get(asking.clone()).await);
        if seen.0.contains("completed") && seen.1.contains("input_required") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    clean(&seen.0, "a finished task's result");
    assert!(seen.0.contains("slow_compute done ([REDACTED:aws-access-key])"), "{}", seen.0);
    clean(&seen.1, "a task's question");
    assert!(seen.1.contains("Delete [REDACTED:github-token]?"), "{}", seen.1);
}
