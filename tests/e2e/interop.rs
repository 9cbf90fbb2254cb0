//! Third-party client: the official Python SDK client in 2026-07-28 mode drives the gateway.

use crate::harness::*;
use std::process::Command;

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_client_lists_and_calls_through_the_gateway() {
    let (_alpha, _url, gw) = crate::two_upstreams("10s");
    let list = sdk("2026-07-28", &gw.url, &["list"]);
    let names: Vec<&str> = list["tools"].as_array().expect("tools").iter().filter_map(|t| t.as_str()).collect();
    assert!(names.contains(&"alpha__echo") && names.contains(&"beta__echo"), "{names:?}");

    let r = sdk("2026-07-28", &gw.url, &["call", "beta__echo", r#"{"text":"héllo ✓"}"#]);
    assert_eq!(r["content"][0]["text"], "héllo ✓", "{r}");
    // The SDK client builds Mcp-Param-Region from the gateway's merged schema; the gateway checks
    // it and rebuilds it from the upstream's schema for the upstream, which also checks it.
    let r = sdk("2026-07-28", &gw.url, &["call", "alpha__execute_sql", r#"{"region":"eu-west-1","query":"select 1"}"#]);
    assert_eq!(r["content"][0]["text"], "region=eu-west-1 header=eu-west-1 at=alpha", "{r}");
    let r = sdk("2026-07-28", &gw.url, &["call", "alpha__structured", r#"{"a":1,"b":2}"#]);
    assert_eq!(r["structuredContent"]["sum"], 3, "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fastmcp_server_behind_the_gateway_serves_modern_and_legacy_clients() {
    use serde_json::json;
    let script = repo().join("tests/py/fastmcp_server.py");
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"fm\"\ncommand = [{:?}, {:?}]\ntimeout = \"20s\"\n",
        python(),
        script.display().to_string()
    ));
    let names = tool_names(&gw.url).await;
    assert_eq!(names, ["fm__add", "fm__shout"], "{}", gw.proc.log());
    let sum = call(&gw.url, "fm__add", json!({ "a": 19, "b": 23 })).await;
    assert_eq!(text_of(&sum), "42");
    assert_eq!(sum["result"]["structuredContent"]["result"], 42, "{sum}");
    let prompt = rpc(&gw.url, "prompts/get", json!({ "name": "fm__greeting", "arguments": { "name": "Ada" } })).await.message();
    assert!(prompt["result"]["messages"][0]["content"]["text"].as_str().unwrap_or_default().contains("Ada"), "{prompt}");
    let read = rpc(&gw.url, "resources/read", json!({ "uri": "fm+memo://fastmcp/note" })).await.message();
    assert_eq!(read["result"]["contents"][0]["text"], "remember the milk", "{read}");
    assert_eq!(read["result"]["contents"][0]["uri"], "fm+memo://fastmcp/note");
    // The same through the official SDK's client in both eras.
    let modern = sdk("2026-07-28", &gw.url, &["call", "fm__shout", r#"{"text":"quiet"}"#]);
    assert_eq!(modern["content"][0]["text"], "QUIET", "{modern}");
    let out = Command::new(python())
        .arg(repo().join("tests/py/modern_client.py"))
        .args(["--mode", "legacy", &gw.url, "call", "fm__add", r#"{"a":1,"b":2}"#])
        .output()
        .expect("legacy client");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("\"3\""), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
}
