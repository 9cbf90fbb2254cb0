//! Change notifications end to end (Part 5), with the official Python SDK as the upstream
//! (tests/py/changing_server.py): a tool added at runtime reaches every listening client that may
//! see it exactly once, modern (`subscriptions/listen`) and legacy (GET stream) alike; a caller
//! whose policy hides the tool hears nothing; a burst is one notification; an upstream that dies
//! or comes back is announced; a legacy upstream's change reaches modern listeners; resource
//! updates reach their subscribers only; a client that lists at once sees a slow upstream.

use crate::harness::*;
use crate::streams::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const CHANGING: &str = "tests/py/changing_server.py";
const CHANGED: &str = "notifications/tools/list_changed";
const ACK: &str = "notifications/subscriptions/acknowledged";

fn auth_config(url: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"all\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"limited\"\nkey_sha256 = \"{}\"\nallow = [\"chg__base\", \"chg__add_tool\", \"chg__add_many\"]\n\n\
         [[upstream]]\nid = \"chg\"\nurl = \"{url}\"\n",
        crate::callers::hash("all-key"),
        crate::callers::hash("limited-key"),
    )
}

async fn names(url: &str, extra: &[(&str, &str)]) -> Vec<String> {
    let r = rpc_with(url, "tools/list", json!({}), extra).await.json();
    r["result"]["tools"].as_array().map(|t| t.iter().filter_map(|t| t["name"].as_str().map(String::from)).collect()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_tool_reaches_each_listener_once_and_only_callers_who_may_see_it() {
    let (_up, url) = py_script_http(CHANGING, &[]);
    let gw = gateway(&auth_config(&url));
    let all = [("Authorization", "Bearer all-key")];
    let limited = [("Authorization", "Bearer limited-key")];
    let d = rpc_with(&gw.url, "server/discover", json!({}), &all).await.json();
    assert_eq!(d["result"]["capabilities"]["tools"]["listChanged"], true, "{d}");

    let modern = listen(&gw.url, "L1", json!({ "toolsListChanged": true, "promptsListChanged": true }), &all).await;
    let hidden = listen(&gw.url, "L2", json!({ "toolsListChanged": true }), &limited).await;
    let session = legacy_session(&gw.url, &all).await;
    let legacy = legacy_stream(&gw.url, &session, &all).await;
    assert_eq!(modern.wait_for(ACK, 1, Duration::from_secs(5)).await, 1);
    assert_eq!(hidden.wait_for(ACK, 1, Duration::from_secs(5)).await, 1);
    let first = &modern.all()[0];
    assert_eq!(first["method"], ACK, "the acknowledgement comes first: {first}");
    assert_eq!(first["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "L1");
    assert_eq!(first["params"]["notifications"], json!({ "toolsListChanged": true, "promptsListChanged": true }), "{first}");
    let ack = &hidden.all()[0];
    assert_eq!(ack["params"]["notifications"], json!({ "toolsListChanged": true }), "{ack}");

    let started = Instant::now();
    let r = rpc_with(&gw.url, "tools/call", json!({ "name": "chg__add_tool", "arguments": { "name": "fresh" } }), &all).await.message();
    assert_eq!(text_of(&r), "added fresh", "{r}");
    assert_eq!(modern.wait_for(CHANGED, 1, Duration::from_secs(1)).await, 1, "modern listener within a second\n{}", gw.proc.log());
    assert_eq!(legacy.wait_for(CHANGED, 1, Duration::from_secs(1)).await, 1, "legacy GET stream within a second");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(names(&gw.url, &all).await.contains(&"chg__fresh".to_string()), "the next tools/list has the tool");
    assert!(!names(&gw.url, &limited).await.contains(&"chg__fresh".to_string()));
    for m in modern.all().iter().filter(|m| m["method"] == CHANGED) {
        assert_eq!(m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "L1", "{m}");
    }

    // Ten rapid changes: one notification per client.
    let r = rpc_with(&gw.url, "tools/call", json!({ "name": "chg__add_many", "arguments": { "n": 10 } }), &all).await.message();
    assert_eq!(text_of(&r), "added 10", "{r}");
    modern.wait_for(CHANGED, 2, Duration::from_secs(3)).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(modern.count(CHANGED), 2, "one per change and one per burst: {:#?}", modern.all());
    assert_eq!(legacy.count(CHANGED), 2, "{:#?}", legacy.all());
    assert_eq!(hidden.count(CHANGED), 0, "a caller whose policy hides the new tools hears nothing: {:#?}", hidden.all());
    assert_eq!(names(&gw.url, &all).await.iter().filter(|n| n.starts_with("chg__burst_")).count(), 10);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_that_dies_is_announced_and_so_is_its_return() {
    let (mut up, url) = py_script_http(CHANGING, &[]);
    let port = url.trim_start_matches("http://127.0.0.1:").trim_end_matches("/mcp").to_string();
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"chg\"\nurl = \"{url}\"\ntimeout = \"5s\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n"
    ));
    let l = listen(&gw.url, "L", json!({ "toolsListChanged": true }), &[]).await;
    assert_eq!(l.wait_for(ACK, 1, Duration::from_secs(5)).await, 1);
    assert!(tool_names(&gw.url).await.contains(&"chg__base".to_string()));
    up.kill();
    assert_eq!(l.wait_for(CHANGED, 1, Duration::from_secs(5)).await, 1, "told that it went\n{}", gw.proc.log());
    let now = tool_names(&gw.url).await;
    assert!(!now.contains(&"chg__base".to_string()) && now.contains(&"calc__add".to_string()), "{now:?}");
    let (_back, _) = py_script_http(CHANGING, &["--port", &port]);
    assert_eq!(l.wait_for(CHANGED, 2, Duration::from_secs(20)).await, 2, "told that it came back\n{}", gw.proc.log());
    assert!(tool_names(&gw.url).await.contains(&"chg__base".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_upstreams_change_reaches_modern_listeners() {
    let (_up, url) = py_script_http(CHANGING, &["--legacy-only"]);
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"chg\"\nurl = \"{url}\"\n"));
    let l = listen(&gw.url, "L", json!({ "toolsListChanged": true }), &[]).await;
    assert_eq!(l.wait_for(ACK, 1, Duration::from_secs(5)).await, 1);
    let r = call(&gw.url, "chg__add_tool", json!({ "name": "late" })).await;
    assert_eq!(text_of(&r), "added late", "{r}");
    assert_eq!(l.wait_for(CHANGED, 1, Duration::from_secs(3)).await, 1, "{}", gw.proc.log());
    assert!(tool_names(&gw.url).await.contains(&"chg__late".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn resource_updates_reach_their_subscribers_in_both_eras() {
    let (_up, url) = py_script_http(CHANGING, &[]);
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"chg\"\nurl = \"{url}\"\n"));
    let doc = "chg+memo://changing/doc";
    let d = rpc(&gw.url, "server/discover", json!({})).await.json();
    assert_eq!(d["result"]["capabilities"]["resources"]["subscribe"], true, "{d}");
    let follower = listen(&gw.url, "F", json!({ "resourceSubscriptions": [doc, "nowhere+memo://x"] }), &[]).await;
    let other = listen(&gw.url, "O", json!({ "toolsListChanged": true }), &[]).await;
    assert_eq!(follower.wait_for(ACK, 1, Duration::from_secs(5)).await, 1);
    assert_eq!(
        follower.all()[0]["params"]["notifications"],
        json!({ "resourceSubscriptions": [doc] }),
        "URIs no upstream serves are not honoured"
    );
    let session = legacy_session(&gw.url, &[]).await;
    let legacy = legacy_stream(&gw.url, &session, &[]).await;
    let r = legacy_request(&gw.url, &session, "resources/subscribe", json!({ "uri": doc }), &[]).await;
    assert_eq!(r["result"], json!({}), "{r}");
    let r = legacy_request(&gw.url, &session, "resources/subscribe", json!({ "uri": "nowhere+memo://x" }), &[]).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // The gateway follows the URI upstream (its listen stream is re-opened with it).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gw.proc.log().contains("resourceSubscriptions") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    call(&gw.url, "chg__touch", json!({ "uri": "memo://changing/doc" })).await;
    const UPDATED: &str = "notifications/resources/updated";
    assert_eq!(follower.wait_for(UPDATED, 1, Duration::from_secs(3)).await, 1, "{}", gw.proc.log());
    let got: Vec<Value> = follower.all().into_iter().filter(|m| m["method"] == UPDATED).collect();
    assert_eq!(got[0]["params"]["uri"], doc, "the URI in the gateway's form");
    assert_eq!(got[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "F");
    assert_eq!(legacy.wait_for(UPDATED, 1, Duration::from_secs(3)).await, 1);
    assert_eq!(other.count(UPDATED), 0, "only subscribers hear about the resource");
    // After unsubscribe the legacy session hears no more.
    let r = legacy_request(&gw.url, &session, "resources/unsubscribe", json!({ "uri": doc }), &[]).await;
    assert_eq!(r["result"], json!({}), "{r}");
    call(&gw.url, "chg__touch", json!({ "uri": "memo://changing/doc" })).await;
    assert_eq!(follower.wait_for(UPDATED, 2, Duration::from_secs(3)).await, 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(legacy.count(UPDATED), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_lists_at_once_sees_a_slow_starting_upstream() {
    let script = repo().join(CHANGING);
    let gw = gateway_listening(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"slow\"\ncommand = [{:?}, {:?}, \"--transport\", \"stdio\", \"--start-delay\", \"2\"]\n",
        python(),
        script.display().to_string()
    ));
    let names = tool_names(&gw.url).await;
    assert!(names.contains(&"slow__base".to_string()), "{names:?}\n{}", gw.proc.log());
}

/// `mcpgate stdio` with one client that speaks both eras on one connection: a modern listen
/// (cancelled by its id) and a legacy session's notifications.
#[test]
fn mcpgate_stdio_delivers_changes_to_both_eras() {
    use std::io::{BufRead, BufReader, Write};
    let (_up, url) = py_script_http(CHANGING, &[]);
    let (mut child, _dir) = mcpgate_stdio(&format!("[[upstream]]\nid = \"chg\"\nurl = \"{url}\"\n"));
    let mut stdin = child.stdin.take().expect("stdin");
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let mut send = |v: Value| writeln!(stdin, "{v}").expect("write");
    let mut seen: Vec<Value> = Vec::new();
    // Waits until `n` of the messages received so far match (in any order); the last match.
    let wait = |pred: &dyn Fn(&Value) -> bool, n: usize, seen: &mut Vec<Value>| -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.iter().filter(|v| pred(v)).count() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = rx.recv_timeout(left).unwrap_or_else(|_| panic!("nothing matching; seen {seen:#?}"));
            seen.push(v);
        }
        seen.iter().filter(|v| pred(v)).last().cloned().unwrap_or_default()
    };
    send(
        json!({ "jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen", "params": { "_meta": meta(), "notifications": { "toolsListChanged": true } } }),
    );
    let ack = wait(&|v| v["method"] == ACK, 1, &mut seen);
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "L");
    send(
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } }),
    );
    wait(&|v| v["id"] == 1, 1, &mut seen);
    send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    send(
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "_meta": meta(), "name": "chg__add_tool", "arguments": { "name": "viastdio" } } }),
    );
    wait(&|v| v["id"] == 2, 1, &mut seen);
    let tagged = wait(&|v| v["method"] == CHANGED && !v["params"]["_meta"].is_null(), 1, &mut seen);
    assert_eq!(tagged["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "L");
    wait(&|v| v["method"] == CHANGED && v["params"]["_meta"].is_null(), 1, &mut seen);
    // Cancelling the listen id ends that subscription; the legacy session still hears changes.
    send(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": "L" } }));
    std::thread::sleep(Duration::from_millis(300));
    send(
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "_meta": meta(), "name": "chg__add_tool", "arguments": { "name": "again" } } }),
    );
    wait(&|v| v["id"] == 3, 1, &mut seen);
    wait(&|v| v["method"] == CHANGED && v["params"]["_meta"].is_null(), 2, &mut seen);
    std::thread::sleep(Duration::from_millis(500));
    while let Ok(v) = rx.try_recv() {
        seen.push(v);
    }
    let tagged = seen.iter().filter(|v| v["method"] == CHANGED && !v["params"]["_meta"].is_null()).count();
    assert_eq!(tagged, 1, "nothing more on the cancelled subscription: {seen:#?}");
    drop(stdin);
    let status = child.wait().expect("exit");
    assert!(status.success(), "mcpgate stdio ends at EOF even with a listen stream once open");
}

#[tokio::test(flavor = "multi_thread")]
async fn listen_streams_end_with_their_final_result_when_the_gateway_stops() {
    let gw = gateway("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n");
    let l = listen(&gw.url, "bye", json!({ "toolsListChanged": true }), &[]).await;
    assert_eq!(l.wait_for(ACK, 1, Duration::from_secs(5)).await, 1);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let done = l.wait_until(|m| m["id"] == "bye", Duration::from_secs(5)).await.expect("the final result");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(done["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "bye", "{done}");
}
