//! Observability (Part 8). `/metrics`: after a few calls, the OpenMetrics text the gateway serves
//! parses strictly and shows the series: calls by method, upstream and outcome with their latency,
//! refusals, upstream health, catalogue size, change streams and connections. Request ids and
//! trace context: every request gets an `x-request-id` (the client's, when it sent one) that the
//! audit line carries, and a W3C `traceparent` reaches HTTP upstreams as a header and in `_meta`.

use crate::demo_gateway;
use crate::harness::*;
use serde_json::json;
use std::collections::BTreeMap;

type Sample = (String, BTreeMap<String, String>, f64);

/// A strict reader of the text format: `# TYPE|HELP|UNIT` lines, samples `name{k="v",...} value`,
/// and a final `# EOF`. Any other line fails the test.
fn parse(text: &str) -> Vec<Sample> {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"), "the exposition ends with # EOF");
    let mut typed = Vec::new();
    let mut samples = Vec::new();
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            assert!(matches!(kind, "TYPE" | "HELP" | "UNIT") && !name.is_empty(), "bad comment line: {line}");
            if kind == "TYPE" {
                typed.push(name.to_string());
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad sample line: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line}"));
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("unclosed labels: {line}"));
                let mut labels = BTreeMap::new();
                for pair in body.split("\",").filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once("=\"").unwrap_or_else(|| panic!("bad label in {line}"));
                    labels.insert(k.to_string(), v.trim_end_matches('"').to_string());
                }
                (name.to_string(), labels)
            }
        };
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "bad metric name in {line}");
        assert!(typed.iter().any(|t| name.starts_with(t.as_str())), "{name} has no # TYPE before it");
        samples.push((name, labels, value));
    }
    samples
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples.iter().find(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))).map(|s| s.2)
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_show_the_series_after_a_few_calls() {
    let gw = demo_gateway("");
    for _ in 0..3 {
        assert!(!text_of(&call(&gw.url, "calc__add", json!({ "a": 1, "b": 2 })).await).is_empty());
    }
    let refused = call(&gw.url, "calc__nope", json!({})).await;
    assert_eq!(refused["error"]["code"], -32602);
    let r = get(&format!("{}/metrics", gw.base)).await.expect("metrics");
    assert_eq!(r.status, 200);
    assert!(r.content_type().starts_with("application/openmetrics-text"), "{}", r.content_type());
    let samples = parse(&String::from_utf8_lossy(&r.body));
    let ok = [("method", "tools/call"), ("upstream", "calc"), ("outcome", "ok")];
    assert_eq!(value(&samples, "mcpgate_calls_total", &ok), Some(3.0), "{samples:#?}");
    // The OpenTelemetry MCP conventions' histograms: the gateway as the client of its upstream, and
    // as the server of its caller (refusals included, by their code).
    let upstream = [("mcp_method_name", "tools/call"), ("upstream", "calc"), ("network_transport", "pipe"), ("error_type", "")];
    assert_eq!(value(&samples, "mcp_client_operation_duration_seconds_count", &upstream), Some(3.0), "{samples:#?}");
    let served = [("mcp_method_name", "tools/call"), ("mcp_protocol_version", "2026-07-28"), ("network_transport", "tcp")];
    assert_eq!(value(&samples, "mcp_server_operation_duration_seconds_count", &[&served[..], &[("error_type", "")]].concat()), Some(3.0));
    assert_eq!(
        value(&samples, "mcp_server_operation_duration_seconds_count", &[&served[..], &[("error_type", "-32602")]].concat()),
        Some(1.0)
    );
    assert!(samples.iter().all(|(n, _, _)| n != "mcpgate_call_duration_seconds_count"), "the earlier name only with legacy names");
    assert_eq!(value(&samples, "mcpgate_refused_total", &[("reason", "unknown_or_denied")]), Some(1.0));
    assert_eq!(value(&samples, "mcpgate_upstream_up", &[("upstream", "calc")]), Some(1.0));
    assert!(value(&samples, "mcpgate_catalog_items", &[("kind", "tools")]).is_some_and(|n| n >= 4.0));
    assert!(value(&samples, "mcpgate_connections", &[]).is_some_and(|n| n >= 1.0));
    assert!(value(&samples, "mcpgate_change_streams", &[]).is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_carry_an_id_and_their_trace_context_upstream() {
    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (_up, url) = py_http("alpha", &[]);
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n"));
    let extra = [("x-request-id", "client-req-42"), ("traceparent", TP)];
    let r = rpc_with(&gw.url, "tools/call", json!({ "name": "alpha__headers", "arguments": {} }), &extra).await;
    assert_eq!(r.headers.get("x-request-id").and_then(|v| v.to_str().ok()), Some("client-req-42"), "the client's id is kept");
    let seen: serde_json::Value = serde_json::from_str(&text_of(&r.message())).expect("headers JSON");
    assert_eq!(seen["traceparent"], TP, "the trace context goes upstream as a header: {seen}");
    let r = rpc_with(&gw.url, "tools/call", json!({ "name": "alpha__meta", "arguments": {} }), &extra).await;
    let meta: serde_json::Value = serde_json::from_str(&text_of(&r.message())).expect("meta JSON");
    assert_eq!(meta["traceparent"], TP, "and in _meta: {meta}");
    let r = rpc(&gw.url, "tools/list", json!({})).await;
    assert!(r.headers.get("x-request-id").is_some_and(|v| !v.is_empty()), "every response has an id");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !gw.proc.log().lines().any(|l| l.contains("mcpgate::audit") && l.contains("client-req-42") && l.contains("caller=anonymous")) {
        assert!(std::time::Instant::now() < deadline, "the audit line carries the request id: {}", gw.proc.log());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// An idle listen stream holds no read buffer while it streams (`vendor/hyper`), and still sees
/// its client go away: a closed or half-closed connection's stream is released (the open-streams
/// gauge falls back), and bytes a client sends mid-stream do not end it.
#[tokio::test(flavor = "multi_thread")]
async fn a_listen_stream_is_released_when_its_client_goes_away() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gw = demo_gateway("");
    let addr = gw.base.trim_start_matches("http://").to_string();
    let listen = |id: &str| {
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": { "_meta": meta(), "notifications": { "toolsListChanged": true } } })
        .to_string();
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let streams = |gw: &Gateway| {
        let url = format!("{}/metrics", gw.base);
        async move {
            let r = get(&url).await.expect("metrics");
            value(&parse(&String::from_utf8_lossy(&r.body)), "mcpgate_change_streams", &[]).unwrap_or(-1.0)
        }
    };
    let until = |want: f64| {
        let gw = &gw;
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                let now = streams(gw).await;
                if now == want {
                    return;
                }
                assert!(std::time::Instant::now() < deadline, "change streams stayed at {now}, not {want}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    };
    let mut open = Vec::new();
    for i in 0..4 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.expect("connect");
        s.write_all(listen(&format!("s{i}")).as_bytes()).await.expect("send");
        let mut head = [0u8; 256];
        let n = s.read(&mut head).await.expect("read");
        assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head[..n]));
        open.push(s);
    }
    until(4.0).await;
    // A client that sends more mid-stream keeps its stream.
    open[0].write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("pipelined");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(streams(&gw).await, 4.0, "bytes sent mid-stream do not end the stream");
    // Closing the connection (or only its sending side) releases the stream.
    drop(open.pop());
    until(3.0).await;
    open[2].shutdown().await.expect("half-close");
    until(2.0).await;
    drop(open.remove(1));
    until(1.0).await;
}
