//! Input requests through the gateway (Part 6), whatever each side speaks. The clients are the
//! official Python SDK's (tests/py/modern_client.py with elicitation, sampling and roots
//! callbacks), in 2026-07-28 and in legacy mode, over HTTP and `mcpgate stdio`; the upstreams are
//! the project's modern fixture (MRTR tools) and @modelcontextprotocol/server-everything (legacy:
//! it sends real elicitation and sampling requests), over stdio and HTTP. Then the request state
//! the gateway hands out: bound to the caller and the request, the upstream's own bytes inside.
//! And progress tokens: unique per upstream, each caller's own back.

use crate::harness::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Runs the SDK client; every JSON line it printed.
fn sdk_client(target: &[&str], mode: &str, answers: &[&str], action: &[&str]) -> Vec<Value> {
    let (ok, lines, stderr) = sdk_client_status(target, mode, answers, action);
    assert!(ok, "SDK client {mode} {action:?} failed: {lines:#?}\n{stderr}");
    lines
}

/// [`sdk_client`] that may fail: success, every JSON line, stderr.
fn sdk_client_status(target: &[&str], mode: &str, answers: &[&str], action: &[&str]) -> (bool, Vec<Value>, String) {
    let out = Command::new(python())
        .arg(repo().join("tests/py/modern_client.py"))
        .args(["--mode", mode])
        .args(answers)
        .args(target)
        .args(action)
        .output()
        .expect("run the SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    (out.status.success(), lines, String::from_utf8_lossy(&out.stderr).to_string())
}

fn all_text(result: &Value) -> String {
    result["content"].as_array().map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")).unwrap_or_default()
}

/// Asserts the client was asked `method` once and the final result contains `expect`.
fn asked_and_answered(lines: &[Value], method: &str, expect: &str, label: &str) {
    let asked: Vec<&Value> = lines.iter().filter(|l| l.get("asked").is_some()).collect();
    assert_eq!(asked.len(), 1, "{label}: one question: {lines:#?}");
    assert_eq!(asked[0]["asked"], method, "{label}");
    let last = lines.last().expect("a result");
    assert!(all_text(last).contains(expect), "{label}: the answer reached the tool: {last}");
}

#[test]
fn input_requests_work_in_every_era_pairing() {
    let (_fixture, fixture_url) = py_script_http("tests/py/conformance_fixture.py", &[]);
    let (_everything, everything_url) = everything_http();
    let (_legacy_py, legacy_py_url) = py_script_http("tests/py/changing_server.py", &["--legacy-only"]);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"fx\"\nurl = \"{fixture_url}\"\n\n\
         [[upstream]]\nid = \"ev\"\ncommand = {}\n\n[[upstream]]\nid = \"evh\"\nurl = \"{everything_url}\"\n\n\
         [[upstream]]\nid = \"py\"\nurl = \"{legacy_py_url}\"\n",
        everything_stdio_command()
    );
    let gw = gateway(&config);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, &config).expect("config");
    let stdio = format!("{} stdio -c {}", env!("CARGO_BIN_EXE_mcpgate"), path.display());
    let http = [gw.url.as_str()];
    let over_stdio = ["--stdio", stdio.as_str()];
    let elicit = ["--elicit", r#"{"name":"octo","color":"red","email":"o@example.com"}"#];
    let sample = ["--sample", "Paris"];
    let roots = ["--roots", "file:///home/u/project"];
    for mode in ["2026-07-28", "legacy"] {
        // A modern upstream asks with input_required.
        let lines = sdk_client(&http, mode, &elicit, &["call", "fx__test_input_required_result_elicitation"]);
        asked_and_answered(&lines, "elicitation/create", "Hello, octo!", &format!("{mode} client, modern upstream"));
        let lines = sdk_client(&http, mode, &sample, &["call", "fx__test_input_required_result_sampling"]);
        asked_and_answered(&lines, "sampling/createMessage", "Paris", &format!("{mode} client, modern upstream, sampling"));
        let lines = sdk_client(&http, mode, &roots, &["call", "fx__test_input_required_result_list_roots"]);
        asked_and_answered(&lines, "roots/list", "file:///home/u/project", &format!("{mode} client, modern upstream, roots"));
        // A legacy upstream sends real requests during the call (stdio and HTTP).
        let lines = sdk_client(&http, mode, &elicit, &["call", "ev__trigger-elicitation-request"]);
        asked_and_answered(&lines, "elicitation/create", "Name: octo", &format!("{mode} client, legacy stdio upstream"));
        let lines = sdk_client(&http, mode, &elicit, &["call", "evh__trigger-elicitation-request"]);
        asked_and_answered(&lines, "elicitation/create", "Name: octo", &format!("{mode} client, legacy HTTP upstream"));
        let lines = sdk_client(&http, mode, &elicit, &["call", "py__confirm", r#"{"question":"Who are you?"}"#]);
        asked_and_answered(&lines, "elicitation/create", "answered: octo", &format!("{mode} client, legacy Python SDK upstream"));
        let lines = sdk_client(&http, mode, &sample, &["call", "ev__trigger-sampling-request", r#"{"prompt":"capital?"}"#]);
        asked_and_answered(&lines, "sampling/createMessage", "Paris", &format!("{mode} client, legacy upstream, sampling"));
    }
    // Several rounds, and the legacy client of `mcpgate stdio`.
    let lines = sdk_client(&over_stdio, "legacy", &elicit, &["call", "fx__test_input_required_result_elicitation"]);
    asked_and_answered(&lines, "elicitation/create", "Hello, octo!", "legacy client over mcpgate stdio");
    let lines = sdk_client(&http, "legacy", &elicit, &["call", "fx__test_input_required_result_multi_round"]);
    assert_eq!(lines.iter().filter(|l| l["asked"] == "elicitation/create").count(), 2, "two rounds: {lines:#?}");
    // A client that declared nothing is not asked: the upstream reports what it needs.
    let (_, lines, _) = sdk_client_status(&http, "legacy", &[], &["call", "fx__test_missing_capability"]);
    assert!(lines.iter().all(|l| l.get("asked").is_none()), "{lines:#?}");
    assert_eq!(lines.last().map(|l| l["error"]["code"].clone()), Some(json!(-32021)), "{lines:#?}");
}

/// A scripted modern upstream whose tools `ask` and `ask2` answer `input_required` with an odd
/// `requestState`, and on the retry return the raw JSON text of the state they received.
pub(crate) async fn state_upstream() -> (String, Arc<AtomicUsize>) {
    const ODD: &str = r#""  odd \u00e9\n state ""#;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let retries = Arc::new(AtomicUsize::new(0));
    let seen = retries.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let seen = seen.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                    let seen = seen.clone();
                    async move {
                        let bytes = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                        let msg: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                        let raw: Box<serde_json::value::RawValue> = serde_json::from_slice::<Envelope>(&bytes)
                            .map(|e| e.params)
                            .unwrap_or_else(|_| serde_json::value::RawValue::from_string("{}".into()).unwrap());
                        let params: Params = serde_json::from_str(raw.get()).unwrap_or_default();
                        let result = match msg["method"].as_str().unwrap_or("") {
                            "server/discover" => {
                                json!({ "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": { "tools": {} }, "_meta": { "io.modelcontextprotocol/serverInfo": { "name": "state", "version": "1" } } })
                            }
                            "tools/list" => {
                                json!({ "resultType": "complete", "tools": [{ "name": "ask", "inputSchema": { "type": "object" } }, { "name": "ask2", "inputSchema": { "type": "object" } }] })
                            }
                            "tools/call" => match params.request_state {
                                // Raw text: the state's escapes must reach the gateway as written.
                                None => {
                                    let body = format!(
                                        r#"{{"jsonrpc":"2.0","id":{},"result":{{"resultType":"input_required","inputRequests":{{"q":{{"method":"elicitation/create","params":{{"message":"ok?","requestedSchema":{{"type":"object","properties":{{}}}}}}}}}},"requestState":{ODD}}}}}"#,
                                        msg["id"]
                                    );
                                    return Ok::<_, Infallible>(
                                        http::Response::builder()
                                            .header("content-type", "application/json")
                                            .body(Full::new(Bytes::from(body)))
                                            .expect("response"),
                                    );
                                }
                                Some(state) => {
                                    seen.fetch_add(1, Ordering::SeqCst);
                                    json!({ "resultType": "complete", "content": [{ "type": "text", "text": state.get() }] })
                                }
                            },
                            _ => json!({}),
                        };
                        let body = json!({ "jsonrpc": "2.0", "id": msg["id"], "result": result }).to_string();
                        Ok::<_, Infallible>(
                            http::Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(body)))
                                .expect("response"),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(stream), svc).await;
            });
        }
    });
    (format!("http://{addr}/mcp"), retries)
}

#[derive(serde::Deserialize)]
struct Envelope {
    params: Box<serde_json::value::RawValue>,
}

#[derive(serde::Deserialize, Default)]
struct Params {
    #[serde(rename = "requestState")]
    request_state: Option<Box<serde_json::value::RawValue>>,
}

async fn ask(url: &str, tool: &str, key: &str, retry: Option<&str>) -> Value {
    let mut params = json!({ "name": tool, "arguments": {}, "_meta": meta() });
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({ "elicitation": {} });
    if let Some(state) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] = json!({ "q": { "action": "accept", "content": {} } });
    }
    rpc_with(url, "tools/call", params, &[("Authorization", &format!("Bearer {key}"))]).await.message()
}

#[tokio::test(flavor = "multi_thread")]
async fn request_state_is_bound_to_its_caller_and_request_and_the_upstreams_bytes_go_back() {
    let (url, retries) = state_upstream().await;
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\ninput_timeout = \"2s\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n[[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[upstream]]\nid = \"st\"\nurl = \"{url}\"\n",
        crate::callers::hash("alice-key"),
        crate::callers::hash("bob-key"),
    ));
    let first = ask(&gw.url, "st__ask", "alice-key", None).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().expect("a state").to_string();
    assert!(!state.contains("odd"), "the client gets the gateway's sealed state, not the upstream's: {state}");
    // The client hears one message whatever the reason (a refusal says nothing about whose
    // state it was or what it was for); the audit has the reason.
    let refused = |r: &Value, why: &str| {
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(r["error"]["message"], "Invalid requestState: send the request again without inputResponses and requestState", "{r}");
        let log = gw.proc.log();
        assert!(
            log.lines().any(|l| l.contains("mcpgate::audit") && l.contains(&format!("outcome=invalid_request_state/{why}"))),
            "{why}: {log}"
        );
    };
    refused(&ask(&gw.url, "st__ask", "bob-key", Some(&state)).await, "another_caller");
    refused(&ask(&gw.url, "st__ask2", "alice-key", Some(&state)).await, "another_request");
    let mut bytes = state.clone().into_bytes();
    let mid = bytes.len() / 2;
    bytes[mid] = if bytes[mid] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(bytes).expect("ASCII");
    refused(&ask(&gw.url, "st__ask", "alice-key", Some(&tampered)).await, "not_issued_here");
    assert_eq!(retries.load(Ordering::SeqCst), 0, "no refused state reached the upstream");
    let done = ask(&gw.url, "st__ask", "alice-key", Some(&state)).await;
    assert_eq!(text_of(&done), r#""  odd \u00e9\n state ""#, "the upstream's own state, byte for byte");
    assert_eq!(retries.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(3100)).await;
    refused(&ask(&gw.url, "st__ask", "alice-key", Some(&state)).await, "expired");
}

#[tokio::test(flavor = "multi_thread")]
async fn callers_sharing_a_progress_token_each_get_only_their_own_progress() {
    let (_up, url) = py_http("alpha", &[]);
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n"));
    let with_token = |args: Value, tool: &str| {
        let mut params = json!({ "name": tool, "arguments": args, "_meta": meta() });
        params["_meta"]["progressToken"] = json!("shared");
        params
    };
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    for _ in 0..2 {
        let r = rpc(&gw.url, "tools/call", with_token(json!({}), "alpha__meta")).await.message();
        let upstream_meta: Value = serde_json::from_str(&text_of(&r)).expect("meta JSON");
        // The test server dumps _meta with its Python field name.
        seen.lock().expect("seen").push(upstream_meta["progress_token"].as_str().unwrap_or_default().to_string());
    }
    let tokens = seen.lock().expect("seen").clone();
    assert!(tokens.iter().all(|t| t.starts_with("mcpgate-")) && tokens[0] != tokens[1], "unique per upstream request: {tokens:?}");
    let (a, b) = tokio::join!(
        rpc(&gw.url, "tools/call", with_token(json!({ "steps": 2 }), "alpha__progress")),
        rpc(&gw.url, "tools/call", with_token(json!({ "steps": 5 }), "alpha__progress")),
    );
    for (resp, steps) in [(a, 2), (b, 5)] {
        let progress: Vec<Value> = resp.sse().into_iter().filter(|m| m["method"] == "notifications/progress").collect();
        assert_eq!(progress.len(), steps, "{progress:#?}");
        assert!(progress.iter().all(|p| p["params"]["progressToken"] == "shared" && p["params"]["total"] == steps), "{progress:#?}");
    }
}
