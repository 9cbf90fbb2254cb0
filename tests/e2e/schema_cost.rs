//! Part 31 (finding 2): checking arguments against an upstream's schema is bounded and never
//! holds the thread that serves other requests. A hostile upstream serves a schema that nests
//! `anyOf` over `$ref` 22 levels deep (2^22 applications: a minute of a worker before) and a small
//! recursive schema whose two branches recurse into the same member (2^depth applications for
//! arguments nested that deep). The first is held when the catalogue is built, with the reason in
//! `mcpgate check` and the log; a call of the second with deep arguments is refused, unchecked,
//! saying why; and with one worker thread `/healthz` answers promptly all along.

use crate::harness::*;
use serde_json::{Value, json};
use std::time::Duration;

/// Calls `tool` while polling `/healthz`: the call's final message, and whether every health
/// check answered 200 within 5 s.
async fn call_while_probing(gw: &Gateway, tool: &str, args: Value) -> (Value, bool) {
    let (url, tool) = (gw.url.clone(), tool.to_string());
    let call = tokio::spawn(async move {
        tokio::time::timeout(Duration::from_secs(30), crate::harness::call(&url, &tool, args)).await.unwrap_or(Value::Null)
    });
    let mut healthy = true;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let probe = tokio::time::timeout(Duration::from_secs(5), get(&format!("{}/healthz", gw.base))).await;
        healthy &= matches!(probe, Ok(Ok(r)) if r.status == 200);
    }
    (call.await.unwrap_or(Value::Null), healthy)
}

fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!({ "c": v });
    }
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn a_costly_schema_check_is_refused_and_never_holds_a_worker() {
    let (_up, url) = py_script_http("tests/py/hostile_schema_server.py", &["--levels", "22"]);
    let config = format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"hostile\"\nurl = \"{url}\"\n");
    let gw = gateway_with_env(&config, &[("MCPGATE_WORKER_THREADS", "1")]);

    // The schema that expands exponentially is held: not listed, a call is refused at once, and
    // the reason is in the log and in `mcpgate check`.
    let (deep, healthy) = call_while_probing(&gw, "hostile__deep", json!({ "x": 1 })).await;
    assert!(healthy, "/healthz answered while the call ran");
    assert!(deep["error"].is_object() || deep["result"]["isError"] == true, "refused, not run: {deep}");
    assert!(!tool_names(&gw.url).await.contains(&"hostile__deep".to_string()), "held out of the list");
    let log = gw.proc.log();
    assert!(log.contains("hostile__deep") || log.contains("deep"), "{log}");
    assert!(log.contains("expands to more than"), "the log says why: {log}");
    let dir = write_config(&config);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpgate"))
        .args(["check", "-c"])
        .arg(dir.path().join("gateway.toml"))
        .output()
        .expect("run mcpgate check");
    let out = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.contains("Not served:") && out.contains("hostile / tool deep: the inputSchema expands to more than"), "{out}");

    // The small recursive schema is served; shallow arguments are checked and run, deep ones are
    // refused without running the validator, saying why.
    let ok = crate::harness::call(&gw.url, "hostile__forked", json!({ "x": nested(3) })).await;
    assert_eq!(text_of(&ok), "ran", "{ok}");
    let wrong = crate::harness::call(&gw.url, "hostile__forked", json!({ "x": { "c": 1.5 } })).await;
    assert_eq!(wrong["error"]["code"], -32602, "still checked: {wrong}");
    let (forked, healthy) = call_while_probing(&gw, "hostile__forked", json!({ "x": nested(40) })).await;
    assert!(healthy, "/healthz answered while the call ran");
    assert_eq!(forked["error"]["code"], -32602, "{forked}");
    let message = forked["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("were not checked, so it was not called") && message.contains("more than"), "{message}");
    // Within the budget but not cheap (2^13 applications, all failing): checked on the blocking
    // pool, and refused as invalid.
    let mut costly = nested(13);
    if let Some(leaf) = costly.pointer_mut(&"/c".repeat(13)) {
        *leaf = json!(1.5);
    }
    let (checked, healthy) = call_while_probing(&gw, "hostile__forked", json!({ "x": costly })).await;
    assert!(healthy, "/healthz answered while the call was checked");
    assert!(
        checked["error"]["message"].as_str().unwrap_or_default().starts_with("Invalid arguments for tool hostile__forked"),
        "{checked}"
    );
    let calls = crate::harness::call(&gw.url, "hostile__calls", json!({})).await;
    assert_eq!(text_of(&calls), "1", "only the shallow call reached the upstream");
    assert!(gw.proc.log().contains("arguments_too_costly"), "audited as what it is");
}
