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
    let state: Value = get(&format!("{}/console/api/state", gw.base)).await.expect("state").json();
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
    // The console's own request (its origin, JSON) and a non-browser client's (no Origin, no
    // fetch metadata: curl, `mcpgate`) are admitted.
    let r = post_raw(&approve, &[("Content-Type", "application/json"), ("Origin", &own), ("Sec-Fetch-Site", "same-origin")], body.clone())
        .await;
    assert!(!matches!(r.status, 403 | 415), "the console's own request: {} {}", r.status, String::from_utf8_lossy(&r.body));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_on_another_origin_cannot_approve_in_a_real_browser() {
    let (_up, _dir, gw) = held_tool().await;
    let out = Command::new(python())
        .arg(repo().join("tests/browser/csrf_test.py"))
        .args([gw.base.as_str(), "chg", "base"])
        .current_dir(repo().join("tests/browser"))
        .output()
        .expect("run the browser test");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && stdout.contains("ok: "), "{stdout}\n{stderr}\ngateway log:\n{}", gw.proc.log());
}
