//! Findings of the security review (Part 17), what the gateway hands out and where it answers:
//! task ids expire, belong to the endpoint they were issued on and are re-decided by policy (a
//! reload that denies the upstream ends them); legacy sessions belong to their endpoint; the
//! protected-resource metadata and the loopback-only metrics answer only a Host and Origin the
//! listener accepts; refused request states and cursors get one message whatever the reason,
//! the reason going to the audit. Tasks come from the conformance fixture (official Python SDK).

use crate::callers::{hash, issuer, serve_jwks};
use crate::harness::*;
use crate::streams::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const TASKS: &str = "io.modelcontextprotocol/tasks";

fn tasks_meta() -> Value {
    let mut m = meta();
    m["io.modelcontextprotocol/clientCapabilities"] = json!({ "extensions": { TASKS: {} } });
    m
}

async fn start_task(url: &str, tool: &str) -> String {
    let params = json!({ "name": tool, "arguments": { "seconds": 30 }, "_meta": tasks_meta() });
    let r = rpc_with(url, "tools/call", params, &[("Authorization", "Bearer alice-key")]).await.message();
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    r["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no taskId: {r}")).to_string()
}

async fn task_get(url: &str, id: &str) -> Value {
    let params = json!({ "taskId": id, "_meta": tasks_meta() });
    let name = mcpgate_protocol::headers::encode(id);
    rpc_with(url, "tasks/get", params, &[("Authorization", "Bearer alice-key"), ("Mcp-Name", &name)]).await.message()
}

fn unknown(r: &Value, why: &str) {
    assert_eq!(r["error"]["message"], "Unknown taskId", "{why}: {r}");
}

fn known(r: &Value, why: &str) {
    assert_eq!(r["result"]["status"], "working", "{why}: {r}");
}

fn tasks_config(fixture: &str, deny: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\ndeny = [{deny}]\n\n\
         [[upstream]]\nid = \"fx\"\nurl = \"{fixture}\"\ntimeout = \"30s\"\n\n\
         [[endpoint]]\npath = \"/mcp/a\"\ninclude = [\"upstream:fx\"]\n\n\
         [[endpoint]]\npath = \"/mcp/b\"\ninclude = [\"fx__test_simple_text\"]\n",
        hash("alice-key"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn task_ids_belong_to_their_endpoint_and_follow_the_policy_in_force() {
    let (_fixture, fixture) = py_script_http("tests/py/conformance_fixture.py", &[]);
    let gw = gateway(&tasks_config(&fixture, ""));
    let (a, b) = (format!("{}/mcp/a", gw.base), format!("{}/mcp/b", gw.base));

    let on_root = start_task(&gw.url, "fx__slow_compute").await;
    known(&task_get(&gw.url, &on_root).await, "on the root, where it was issued");
    unknown(&task_get(&a, &on_root).await, "a root task id on an endpoint");
    let on_a = start_task(&a, "fx__slow_compute").await;
    known(&task_get(&a, &on_a).await, "on its endpoint");
    unknown(&task_get(&b, &on_a).await, "on an endpoint that does not select its tool");
    unknown(&task_get(&gw.url, &on_a).await, "an endpoint's task id on the root");

    // A reload that denies the tool's upstream ends access to its tasks, under the same caller.
    std::fs::write(&gw.config_path, tasks_config(&fixture, "\"upstream:fx\"")).expect("rewrite");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = task_get(&gw.url, &on_root).await;
        if r["error"]["message"] == "Unknown taskId" {
            break;
        }
        assert!(Instant::now() < deadline, "the reload never took the task away: {r}\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    unknown(&task_get(&a, &on_a).await, "after the reload, on the endpoint");
    let log = gw.proc.log();
    for why in ["unknown_task/another_endpoint", "unknown_task/tool_denied"] {
        assert!(log.contains(&format!("outcome={why}")), "{why}: {log}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_sessions_belong_to_the_endpoint_they_were_opened_on() {
    let (_vault, vault) = crate::security::vault_http();
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"vault\"\nurl = \"{vault}\"\n\n\
         [[endpoint]]\npath = \"/mcp/dev\"\ninclude = [\"upstream:vault\"]\n\n\
         [[endpoint]]\npath = \"/mcp/up1\"\ninclude = [\"upstream:vault\"]\n"
    ));
    let (dev, up1) = (format!("{}/mcp/dev", gw.base), format!("{}/mcp/up1", gw.base));
    let session = legacy_session(&dev, &[]).await;
    let here = legacy_request(&dev, &session, "tools/list", json!({}), &[]).await;
    assert_eq!(here["result"]["tools"][0]["name"], "vault__hello", "{here}");
    for elsewhere in [&up1, &gw.url] {
        let body = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {} });
        let r = post_raw(
            elsewhere,
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("MCP-Protocol-Version", "2025-11-25"),
                ("Mcp-Session-Id", &session),
            ],
            body.to_string(),
        )
        .await;
        assert_eq!(r.status, 404, "{elsewhere}: {}", String::from_utf8_lossy(&r.body));
    }
}

/// A GET with a chosen Host header; the status and body.
async fn get_with_host(url: &str, host: &str) -> (u16, String) {
    let req = http::Request::get(url).header("Host", host).body(http_body_util::Full::new(bytes::Bytes::new())).expect("request");
    let r = send(req).await.expect("HTTP exchange");
    (r.status, String::from_utf8_lossy(&r.body).to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_and_metrics_answer_only_hosts_the_listener_accepts() {
    let jwks_url = serve_jwks(issuer("k1").jwks.to_string()).await;
    let gw = crate::demo_gateway(&format!(
        "\n[auth]\nmode = \"jwt\"\nissuer = \"https://issuer.test\"\naudience = [\"mcpgate\"]\njwks_url = \"{jwks_url}\"\n\n\
         [[caller]]\nid = \"ops\"\nclaims = {{ groups = \"ops\" }}\nallow = [\"*\"]\n\n\
         [[endpoint]]\npath = \"/mcp/dev\"\ninclude = [\"calc__*\"]\n"
    ));
    let own = gw.base.trim_start_matches("http://").to_string();
    for path in ["/.well-known/oauth-protected-resource/mcp/dev", "/.well-known/oauth-protected-resource", "/metrics"] {
        let url = format!("{}{path}", gw.base);
        let (status, body) = get_with_host(&url, "evil.example:80").await;
        assert_eq!(status, 403, "{path}: {body}");
        assert!(!body.contains("evil.example:80/"), "{path} echoed the foreign host: {body}");
        let (status, body) = get_with_host(&url, &own).await;
        // The metrics then ask for an admin's credential (loopback proves nothing).
        let wanted = if path == "/metrics" { 401 } else { 200 };
        assert_eq!(status, wanted, "{path}: {body}");
    }
    let (_, doc) = get_with_host(&format!("{}/.well-known/oauth-protected-resource/mcp/dev", gw.base), &own).await;
    assert!(doc.contains(&format!("\"resource\":\"http://{own}/mcp/dev\"")), "{doc}");
    // The probes answer whatever the Host (load balancers and kubelets probe by address).
    assert_eq!(get_with_host(&format!("{}/healthz", gw.base), "evil.example:80").await.0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_cursor_says_the_same_whatever_the_reason() {
    let (_vault, vault) = crate::security::vault_http();
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[catalog]\npage_size = 1\n\n[[upstream]]\nid = \"vault\"\nurl = \"{vault}\"\n"
    ));
    let first = rpc(&gw.url, "resources/list", json!({})).await.json();
    let cursor = first["result"]["nextCursor"].as_str().unwrap_or_else(|| panic!("no cursor: {first}")).to_string();
    let mut said = Vec::new();
    for (method, cursor) in [("resources/templates/list", cursor.as_str()), ("tools/list", cursor.as_str()), ("resources/list", "forged")] {
        let r = rpc(&gw.url, method, json!({ "cursor": cursor })).await.json();
        assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
        said.push(r["error"]["message"].as_str().unwrap_or("").to_string());
    }
    assert!(said.iter().all(|m| m == "Invalid cursor: list again from the start"), "{said:?}");
    let next = rpc(&gw.url, "resources/list", json!({ "cursor": cursor })).await.json();
    assert_eq!(next["result"]["resources"].as_array().map(Vec::len), Some(1), "the cursor works where it belongs: {next}");
    let log = gw.proc.log();
    assert!(log.contains("outcome=invalid_cursor/another_list") && log.contains("outcome=invalid_cursor/not_issued_here"), "{log}");
}

/// An `OPTIONS` preflight or a `POST` from a browser page at `origin`.
async fn from_page(url: &str, method: &str, origin: &str, extra: &[(&str, &str)], body: &str) -> Resp {
    let mut b = http::Request::builder().method(method).uri(url).header("Origin", origin);
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
    send(b.body(http_body_util::Full::new(bytes::Bytes::from(body.to_string()))).expect("request")).await.expect("HTTP exchange")
}

#[tokio::test(flavor = "multi_thread")]
async fn browser_pages_of_accepted_origins_may_call_the_gateway_and_no_others() {
    let gw = crate::demo_gateway("");
    let page = "http://localhost:5173";
    let pre = from_page(
        &gw.url,
        "OPTIONS",
        page,
        &[
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type, mcp-protocol-version, mcp-method, mcp-name, mcp-param-region"),
        ],
        "",
    )
    .await;
    assert_eq!(pre.status, 204, "{}", String::from_utf8_lossy(&pre.body));
    let h = |r: &Resp, name: &str| r.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    assert_eq!(h(&pre, "access-control-allow-origin"), page);
    assert!(h(&pre, "access-control-allow-methods").contains("POST"));
    let allowed = h(&pre, "access-control-allow-headers");
    assert!(
        allowed.contains("mcp-protocol-version") && allowed.contains("mcp-param-region") && allowed.contains("authorization"),
        "{allowed}"
    );

    // The call itself names the page's origin, and lets it read the session header.
    let params = json!({ "name": "calc__add", "arguments": { "a": 2, "b": 3 }, "_meta": meta() });
    let headers: Vec<(String, String)> = modern_headers("tools/call", &params);
    let refs: Vec<(&str, &str)> = headers.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params }).to_string();
    let call = from_page(&gw.url, "POST", page, &refs, &body).await;
    assert_eq!(call.status, 200, "{}", String::from_utf8_lossy(&call.body));
    assert_eq!(h(&call, "access-control-allow-origin"), page);
    assert!(h(&call, "access-control-expose-headers").contains("mcp-session-id"));
    assert_eq!(text_of(&call.json()), "5");

    // A page from elsewhere gets no CORS header, and the call is refused.
    let evil = "https://evil.example";
    let pre = from_page(&gw.url, "OPTIONS", evil, &[("Access-Control-Request-Method", "POST")], "").await;
    assert!(pre.headers.get("access-control-allow-origin").is_none(), "{:?}", pre.headers);
    let call = from_page(&gw.url, "POST", evil, &refs, &body).await;
    assert_eq!(call.status, 403);
    assert!(call.headers.get("access-control-allow-origin").is_none());
}
