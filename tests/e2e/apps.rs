//! MCP Apps (SEP-1865) through the gateway, with the example server people start from
//! (`@modelcontextprotocol/server-basic-vanillajs` 2.0.3 over stdio): its UI resource keeps the
//! `ui://` scheme under the gateway's namespace (`ui://<prefix>/<rest>`), the same URI in the
//! tool's `_meta.ui.resourceUri` (and the flat `_meta["ui/resourceUri"]`), in `resources/list` and
//! in the read's `contents[].uri`; the HTML reads back, and the tool is callable; both eras.

use crate::harness::*;
use serde_json::json;
use std::path::PathBuf;
use std::process::Command;

const UI: &str = "ui://app/get-time/mcp-app.html";

fn app_server() -> String {
    installed_server("mcp-server-basic-vanillajs")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_apps_ui_resource_keeps_its_scheme_and_reads_back() {
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"app\"\ncommand = [{:?}, \"--stdio\"]\ntimeout = \"30s\"\n\n\
         [[upstream]]\nid = \"react\"\ncommand = [{:?}, \"--stdio\"]\ntimeout = \"30s\"\n",
        app_server(),
        installed_server("mcp-server-basic-react")
    ));
    let tools = rpc(&gw.url, "tools/list", json!({})).await.json();
    // A second example server (the React one), under its own namespace.
    let react = tools["result"]["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == "react__get-time")).cloned();
    let react = react.unwrap_or_else(|| panic!("react__get-time is listed: {tools}"));
    assert_eq!(react["_meta"]["ui"]["resourceUri"], "ui://react/get-time/mcp-app.html", "{react}");
    let read = rpc(&gw.url, "resources/read", json!({ "uri": "ui://react/get-time/mcp-app.html" })).await.message();
    assert_eq!(read["result"]["contents"][0]["mimeType"], "text/html;profile=mcp-app", "{read}");
    let tool = tools["result"]["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == "app__get-time")).cloned();
    let tool = tool.unwrap_or_else(|| panic!("app__get-time is listed: {tools}\n{}", gw.proc.log()));
    assert_eq!(tool["_meta"]["ui"]["resourceUri"], UI, "{tool}");
    assert_eq!(tool["_meta"]["ui/resourceUri"], UI, "the deprecated flat key too: {tool}");
    let discovered = rpc(&gw.url, "server/discover", json!({})).await.json();
    assert!(
        discovered["result"]["capabilities"]["extensions"].get("io.modelcontextprotocol/ui").is_some(),
        "the gateway offers the UI extension for the app it relays: {discovered}"
    );

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

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_reaches_its_tools_and_resources_by_their_bare_names() {
    let app = app_server();
    let config = |bare: bool| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[catalog]\nbare_names = {bare}\n\n[auth]\nmode = \"api_key\"\n\n\
             [[caller]]\nid = \"all\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
             [[caller]]\nid = \"one\"\nkey_sha256 = \"{}\"\nallow = [\"upstream:app\"]\n\n\
             [[caller]]\nid = \"none\"\nkey_sha256 = \"{}\"\nallow = [\"upstream:app\"]\ndeny = [\"app__get-time\", \"ui://app/*\"]\n\n\
             [[caller]]\nid = \"noui\"\nkey_sha256 = \"{}\"\nallow = [\"upstream:app\"]\ndeny = [\"ui://app/*\"]\n\n\
             [[upstream]]\nid = \"app\"\ncommand = [{app:?}, \"--stdio\"]\ntimeout = \"30s\"\n\n\
             [[upstream]]\nid = \"twin\"\ncommand = [{app:?}, \"--stdio\"]\ntimeout = \"30s\"\n",
            crate::callers::hash("all-key"),
            crate::callers::hash("one-key"),
            crate::callers::hash("none-key"),
            crate::callers::hash("noui-key"),
        )
    };
    let gw = gateway(&config(true));
    let call = |key: &'static str| {
        let url = gw.url.clone();
        async move {
            rpc_with(&url, "tools/call", json!({ "name": "get-time", "arguments": {} }), &[("Authorization", &bearer(key))]).await.message()
        }
    };
    let read = |key: &'static str| {
        let url = gw.url.clone();
        async move {
            rpc_with(&url, "resources/read", json!({ "uri": "ui://get-time/mcp-app.html" }), &[("Authorization", &bearer(key))])
                .await
                .message()
        }
    };

    // One upstream in the caller's view serves `get-time`: the bare name reaches it.
    let one = call("one-key").await;
    assert!(one["result"]["structuredContent"]["time"].is_string(), "{one}");
    let html = read("one-key").await;
    assert_eq!(html["result"]["contents"][0]["uri"], UI, "the read answers with the gateway's URI: {html}");
    let log = gw.proc.log();
    assert!(
        log.contains("caller=one endpoint=- method=tools/call item=app__get-time upstream=app outcome=ok"),
        "audited under its name: {log}"
    );

    // Two do: the caller is told which names to use.
    let both = call("all-key").await;
    assert_eq!(both["error"]["code"], -32602, "{both}");
    assert_eq!(both["error"]["data"]["candidates"], json!(["app__get-time", "twin__get-time"]), "{both}");
    let both = read("all-key").await;
    assert_eq!(both["error"]["data"]["candidates"], json!([UI, "ui://twin/get-time/mcp-app.html"]), "{both}");

    // A caller denied the tool and its UI resource sees neither.
    let auth = [("Authorization", bearer("none-key"))];
    let auth: Vec<(&str, &str)> = auth.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let tools = rpc_with(&gw.url, "tools/list", json!({}), &auth).await.json();
    assert_eq!(tools["result"]["tools"], json!([]), "{tools}");
    let resources = rpc_with(&gw.url, "resources/list", json!({}), &auth).await.json();
    assert_eq!(resources["result"]["resources"], json!([]), "{resources}");

    // None the caller may use: exactly like a missing name.
    let none = call("none-key").await;
    assert_eq!(none["error"]["message"], "Unknown tool: get-time", "{none}");
    assert!(read("none-key").await["error"]["message"].as_str().is_some_and(|m| m.starts_with("Resource not found")));

    // A caller who may not read the app's UI resource sees the tool without the reference.
    let listed = rpc_with(&gw.url, "tools/list", json!({}), &[("Authorization", &bearer("noui-key"))]).await.json();
    let tool = &listed["result"]["tools"][0];
    assert_eq!(tool["name"], "app__get-time", "{listed}");
    assert!(tool["_meta"].get("ui").is_none() && tool["_meta"].get("ui/resourceUri").is_none(), "{tool}");
    let listed = rpc_with(&gw.url, "tools/list", json!({}), &[("Authorization", &bearer("one-key"))]).await.json();
    assert_eq!(listed["result"]["tools"][0]["_meta"]["ui"]["resourceUri"], UI, "a caller who may read it sees it: {listed}");

    // Turned off, a bare name is just a missing one.
    std::fs::write(&gw.config_path, config(false)).expect("rewrite");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let r = call("one-key").await;
        if r["error"]["message"] == "Unknown tool: get-time" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "bare_names = false never took effect: {r}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The bundled host page (scripts/install-test-deps.sh builds it from tests/js/apps-host).
fn apps_host() -> PathBuf {
    let dir = std::env::var("MCPGATE_APPS_HOST").map(PathBuf::from).unwrap_or_else(|_| repo().join(".work/apps-host/page"));
    assert!(dir.join("host.bundle.js").exists(), "{} is missing: run scripts/install-test-deps.sh (scripts/test runs it)", dir.display());
    dir
}

/// Runs the real host in headless Chromium against `url`, for the app behind `tool`.
fn render_in_browser(gw: &Gateway, url: &str, tool: &str, shot: &str) -> String {
    let shot = repo().join(".work/screenshots").join(shot);
    let out = Command::new(python())
        .arg(repo().join("tests/browser/apps_host_test.py"))
        .arg(apps_host())
        .args([url, tool])
        .arg(&shot)
        .current_dir(repo().join("tests/browser"))
        .output()
        .expect("run the browser test");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the app host failed on {url}:\n{stdout}\n{stderr}\ngateway log:\n{}", gw.proc.log());
    stdout.lines().find(|l| l.starts_with("ok: ")).unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_host_renders_the_app_through_the_gateway_and_its_button_calls_through_it() {
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"app\"\ncommand = [{:?}, \"--stdio\"]\ntimeout = \"30s\"\n\n\
         [[endpoint]]\npath = \"/mcp/apps\"\ninclude = [\"upstream:app\"]\n",
        app_server()
    ));
    for (url, shot) in [(gw.url.clone(), "apps-host.png"), (format!("{}/mcp/apps", gw.base), "apps-host-endpoint.png")] {
        let ok = render_in_browser(&gw, &url, "app__get-time", shot);
        assert!(ok.contains('T'), "the app showed the server's time: {ok}");
    }
    // The app's own call used the server's bare tool name; the gateway decided and audited it
    // under its own, on each endpoint.
    let log = gw.proc.log();
    assert!(log.contains("endpoint=- method=tools/call item=app__get-time upstream=app outcome=ok"), "{log}");
    assert!(log.contains("endpoint=/mcp/apps method=tools/call item=app__get-time upstream=app outcome=ok"), "{log}");
    assert!(log.contains("method=resources/read item=ui://app/get-time/mcp-app.html upstream=app outcome=ok"), "{log}");
}
