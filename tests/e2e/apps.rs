//! MCP Apps (SEP-1865) through the gateway, with the example server people start from
//! (`@modelcontextprotocol/server-basic-vanillajs` 2.0.3 over stdio): its UI resource keeps the
//! `ui://` scheme under the gateway's namespace (`ui://<prefix>/<rest>`), the same URI in the
//! tool's `_meta.ui.resourceUri` (and the flat `_meta["ui/resourceUri"]`), in `resources/list` and
//! in the read's `contents[].uri`; the HTML reads back, and the tool is callable; both eras.

use crate::harness::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

const UI: &str = "ui://app/get-time/mcp-app.html";

fn app_server() -> String {
    let dir = std::env::var("MCPGATE_SERVERS_BIN").map(PathBuf::from).unwrap_or_else(|_| repo().join(".work/servers/node_modules/.bin"));
    let path = dir.join("mcp-server-basic-vanillajs");
    assert!(path.exists(), "{} is missing: run scripts/install-test-deps.sh (scripts/test runs it)", path.display());
    path.display().to_string()
}

fn sdk(mode: &str, url: &str, args: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(repo().join("tests/py/modern_client.py"))
        .args(["--mode", mode, url])
        .args(args)
        .output()
        .expect("run the Python SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{mode} {args:?}: {}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {last}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_apps_ui_resource_keeps_its_scheme_and_reads_back() {
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"app\"\ncommand = [{:?}, \"--stdio\"]\ntimeout = \"30s\"\n",
        app_server()
    ));
    let tools = rpc(&gw.url, "tools/list", json!({})).await.json();
    let tool = tools["result"]["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == "app__get-time")).cloned();
    let tool = tool.unwrap_or_else(|| panic!("app__get-time is listed: {tools}\n{}", gw.proc.log()));
    assert_eq!(tool["_meta"]["ui"]["resourceUri"], UI, "{tool}");
    assert_eq!(tool["_meta"]["ui/resourceUri"], UI, "the deprecated flat key too: {tool}");

    for mode in ["2026-07-28", "legacy"] {
        let listed = sdk(mode, &gw.url, &["resources"]);
        assert!(listed["resources"].as_array().is_some_and(|r| r.iter().any(|u| u == UI)), "{mode}: {listed}");
        let read = sdk(mode, &gw.url, &["read", UI]);
        let content = &read["contents"][0];
        assert_eq!(content["uri"], UI, "{mode}: {read}");
        assert_eq!(content["mimeType"], "text/html;profile=mcp-app", "{mode}: {read}");
        assert!(content["text"].as_str().is_some_and(|t| t.to_ascii_lowercase().contains("<html")), "{mode}: the app's HTML");
        let called = sdk(mode, &gw.url, &["call", "app__get-time"]);
        assert_ne!(called["isError"], true, "{mode}: {called}");
        assert!(called["structuredContent"]["time"].as_str().is_some_and(|t| t.contains('T')), "{mode}: {called}");
    }
}
