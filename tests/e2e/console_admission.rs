//! Finding 9 of the second security review: with `[auth] mode = "none"` on loopback, a page on any
//! other loopback origin approved a held tool with a `text/plain` POST to the console API (a
//! "simple" request, which browsers send cross-origin without asking). A request that changes
//! something must now prove it comes from the gateway's own pages: `Content-Type:
//! application/json` (which a cross-origin page cannot send without a preflight the console never
//! answers), an `Origin` that is the gateway's own, and, without `Origin`, no `Sec-Fetch-Site`
//! other than `same-origin` or `none`. The held tool comes from tests/py/changing_server.py
//! (official Python SDK) changing its description at runtime.

use crate::harness::*;
use crate::pins::{changing_upstream, pin};
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

/// A gateway without authentication, with the console on and `chg/base` held by its pin.
async fn held_tool() -> (Proc, tempfile::TempDir, Gateway) {
    let (up, dir, config, text) = changing_upstream("[pins]\nmode = \"enforce\"\n\n", "");
    assert!(pin(&config, &["--approve"]).0);
    let gw = gateway(&text.replace(
        "[pins]\nmode = \"enforce\"\n",
        &format!("[console]\nenabled = true\n\n[pins]\nmode = \"enforce\"\nfile = {:?}\n", dir.path().join("mcpgate-pins.json")),
    ));
    call(&gw.url, "chg__redescribe", json!({ "name": "base", "description": "Changed under the reviewer." })).await;
    for _ in 0..50 {
        if held(&gw).await == ["chg/base"] {
            return (up, dir, gw);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chg/base was not held: {}", gw.proc.log());
}

async fn held(gw: &Gateway) -> Vec<String> {
    let state: Value = get_as(&format!("{}/console/api/state", gw.base), &console_key(gw)).await.json();
    state["held"]
        .as_array()
        .map(|a| a.iter().map(|h| format!("{}/{}", h["upstream"].as_str().unwrap_or(""), h["tool"].as_str().unwrap_or(""))).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_consoles_own_requests_change_anything() {
    let (_up, _dir, gw) = held_tool().await;
    let approve = format!("{}/console/api/pins/approve", gw.base);
    let own = format!("http://{}", gw.base.trim_start_matches("http://"));
    let body = json!({ "upstream": "chg", "tool": "base" }).to_string();
    let refused: [(&str, &[(&str, &str)]); 6] = [
        ("a text/plain POST from another loopback page", &[("Content-Type", "text/plain"), ("Origin", "http://localhost:3000")]),
        (
            "a form POST from another loopback page",
            &[("Content-Type", "application/x-www-form-urlencoded"), ("Origin", "http://127.0.0.1:9")],
        ),
        ("JSON from another loopback page", &[("Content-Type", "application/json"), ("Origin", "http://localhost:3000")]),
        ("JSON from another port of the same host", &[("Content-Type", "application/json"), ("Origin", "http://127.0.0.1:1")]),
        ("a browser's cross-site request without Origin", &[("Content-Type", "application/json"), ("Sec-Fetch-Site", "cross-site")]),
        ("text/plain without Origin", &[("Content-Type", "text/plain")]),
    ];
    for (what, headers) in refused {
        let r = post_raw(&approve, headers, body.clone()).await;
        assert!(matches!(r.status, 403 | 415), "{what}: {} {}", r.status, String::from_utf8_lossy(&r.body));
        assert_eq!(held(&gw).await, ["chg/base"], "{what} approved the tool");
    }
    // The console's own request (its origin, JSON, the console key it was opened with) and a
    // non-browser client's with the key (no Origin, no fetch metadata: curl, `mcpgate`) are
    // admitted.
    let key = format!("Bearer {}", console_key(&gw));
    let r = post_raw(
        &approve,
        &[("Content-Type", "application/json"), ("Origin", &own), ("Sec-Fetch-Site", "same-origin"), ("Authorization", &key)],
        body.clone(),
    )
    .await;
    assert!(!matches!(r.status, 403 | 415), "the console's own request: {} {}", r.status, String::from_utf8_lossy(&r.body));
}

/// Part 34: a process on loopback is no administrator for being there. Without authentication, a
/// plain client (a sandboxed server with `network = "open"`, say) that sends what a non-browser
/// client sends cannot approve a held tool nor read the console's state: administration needs the
/// console key the gateway logged at start (`/console#key=…`), which the sandbox cannot read.
#[tokio::test(flavor = "multi_thread")]
async fn a_loopback_client_without_the_console_key_cannot_approve_a_held_tool() {
    let (_up, _dir, gw) = held_tool().await;
    let state = get(&format!("{}/console/api/state", gw.base)).await.expect("state");
    assert_eq!(state.status, 403, "the console's state without the key: {}", String::from_utf8_lossy(&state.body));
    let approve = format!("{}/console/api/pins/approve", gw.base);
    let fingerprint = get_as(&format!("{}/console/api/state", gw.base), &console_key(&gw)).await.json()["held"][0]["fingerprint"].clone();
    let body = json!({ "upstream": "chg", "tool": "base", "fingerprint": fingerprint }).to_string();
    let r = post_raw(&approve, &[("Content-Type", "application/json")], body.clone()).await;
    assert_eq!(r.status, 403, "approved without the key: {}", String::from_utf8_lossy(&r.body));
    let wrong = post_raw(&approve, &[("Content-Type", "application/json"), ("Authorization", "Bearer guessed")], body.clone()).await;
    assert_eq!(wrong.status, 403, "approved with a wrong key: {}", String::from_utf8_lossy(&wrong.body));
    assert_eq!(held(&gw).await, ["chg/base"]);
    assert!(!gw.proc.log().contains("a held tool was approved from the console"), "{}", gw.proc.log());
    let key = format!("Bearer {}", console_key(&gw));
    let r = post_raw(&approve, &[("Content-Type", "application/json"), ("Authorization", &key)], body).await;
    assert_eq!(r.status, 200, "with the key: {}", String::from_utf8_lossy(&r.body));
    assert_eq!(held(&gw).await, Vec::<String>::new());
}

/// With API keys, a loopback client without a key reads neither `/metrics` nor the console's API
/// and approves nothing; a caller that is no admin reads no metrics; an admin's key reads them.
#[tokio::test(flavor = "multi_thread")]
async fn with_api_keys_a_loopback_client_without_a_key_reads_no_metrics_and_no_console() {
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[console]\nenabled = true\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"ops\"\nkey_sha256 = \"{}\"\nadmin = true\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n[[upstream]]\nid = \"calm\"\ncommand = {}\n",
        crate::callers::hash("ops-key"),
        crate::callers::hash("bob-key"),
        py_stdio_command("calm"),
    ));
    let metrics = get(&format!("{}/metrics", gw.base)).await.expect("metrics");
    assert_ne!(metrics.status, 200, "metrics without a key: {}", String::from_utf8_lossy(&metrics.body));
    assert_eq!(get_as(&format!("{}/metrics", gw.base), "bob-key").await.status, 403, "a caller that is no admin");
    assert_eq!(get_as(&format!("{}/metrics", gw.base), "ops-key").await.status, 200, "an admin");
    let state = get(&format!("{}/console/api/state", gw.base)).await.expect("state");
    assert_eq!(state.status, 401, "{}", String::from_utf8_lossy(&state.body));
    let body = json!({ "upstream": "calm", "tool": "echo", "fingerprint": "x" }).to_string();
    let r = post_raw(&format!("{}/console/api/pins/approve", gw.base), &[("Content-Type", "application/json")], body).await;
    assert_eq!(r.status, 401, "{}", String::from_utf8_lossy(&r.body));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_on_another_origin_cannot_approve_in_a_real_browser() {
    let (_up, _dir, gw) = held_tool().await;
    let out = Command::new(python())
        .arg(repo().join("tests/browser/csrf_test.py"))
        .args([gw.base.as_str(), "chg", "base", &console_key(&gw)])
        .current_dir(repo().join("tests/browser"))
        .output()
        .expect("run the browser test");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && stdout.contains("ok: "), "{stdout}\n{stderr}\ngateway log:\n{}", gw.proc.log());
}
