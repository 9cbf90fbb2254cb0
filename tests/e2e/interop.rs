//! Third-party client: the official Python SDK client in 2026-07-28 mode drives the gateway.

use crate::harness::*;
use std::process::Command;

fn client(url: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(python())
        .arg(repo().join("tests/py/modern_client.py"))
        .args(["--mode", "2026-07-28", url])
        .args(args)
        .output()
        .expect("run the Python SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client {args:?} failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_else(|| panic!("client {args:?} printed nothing"));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("client output is not JSON ({e}): {last}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_client_lists_and_calls_through_the_gateway() {
    let (_alpha, _url, gw) = crate::two_upstreams("10s");
    let list = client(&gw.url, &["list"]);
    let names: Vec<&str> = list["tools"].as_array().expect("tools").iter().filter_map(|t| t.as_str()).collect();
    assert!(names.contains(&"alpha__echo") && names.contains(&"beta__echo"), "{names:?}");

    let r = client(&gw.url, &["call", "beta__echo", r#"{"text":"héllo ✓"}"#]);
    assert_eq!(r["content"][0]["text"], "héllo ✓", "{r}");
    // The SDK client builds Mcp-Param-Region from the gateway's merged schema; the gateway checks
    // it and rebuilds it from the upstream's schema for the upstream, which also checks it.
    let r = client(&gw.url, &["call", "alpha__execute_sql", r#"{"region":"eu-west-1","query":"select 1"}"#]);
    assert_eq!(r["content"][0]["text"], "region=eu-west-1 header=eu-west-1 at=alpha", "{r}");
    let r = client(&gw.url, &["call", "alpha__structured", r#"{"a":1,"b":2}"#]);
    assert_eq!(r["structuredContent"]["sum"], 3, "{r}");
}
