//! Malformed or hostile input never crashes or hangs the gateway: each case gets a clear HTTP and
//! JSON-RPC error, and the gateway keeps serving afterwards.

use crate::harness::*;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn json_headers() -> Vec<(&'static str, &'static str)> {
    vec![("Content-Type", "application/json"), ("MCP-Protocol-Version", VERSION), ("Mcp-Method", "tools/list")]
}

fn expect(r: &Resp, status: u16, code: Option<i64>, why: &str) {
    assert_eq!(r.status, status, "{why}: {}", String::from_utf8_lossy(&r.body));
    if let Some(c) = code {
        assert_eq!(r.json()["error"]["code"], c, "{why}");
    }
}

fn raw_exchange(addr: &str, bytes: &[u8], pause: Duration, rest: &[u8]) -> (String, Duration) {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15))).expect("timeout");
    s.write_all(bytes).expect("write");
    std::thread::sleep(pause);
    // The server may answer and close before it has read everything: a failed write is fine.
    let _ = s.write_all(rest);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    (String::from_utf8_lossy(&out).to_string(), started.elapsed())
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_requests_get_clear_errors() {
    let gw = crate::demo_gateway("header_read_timeout = \"1s\"\nbody_read_timeout = \"1s\"");
    expect(&post_raw(&gw.url, &json_headers(), "{\"jsonrpc\":").await, 400, Some(-32700), "invalid JSON");
    expect(&post_raw(&gw.url, &json_headers(), "").await, 400, Some(-32700), "empty body");
    expect(
        &post_raw(&gw.url, &json_headers(), "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}]").await,
        400,
        Some(-32600),
        "JSON array",
    );
    expect(
        &post_raw(&gw.url, &json_headers(), "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}").await,
        400,
        Some(-32600),
        "a response object",
    );
    expect(&post_raw(&gw.url, &json_headers(), "\"just a string\"").await, 400, Some(-32600), "a JSON string");
    expect(&post_raw(&gw.url, &json_headers(), "{\"id\":1,\"method\":\"tools/list\"}").await, 400, Some(-32600), "no jsonrpc member");
    let addr = gw.base.trim_start_matches("http://").to_string();
    let ten_mib = 10 * 1024 * 1024;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {ten_mib}\r\nConnection: close\r\n\r\n"
    );
    // Refused from the Content-Length alone, before any of the body is read.
    let (reply, _) = raw_exchange(&addr, head.as_bytes(), Duration::ZERO, b"");
    assert!(reply.starts_with("HTTP/1.1 413") && reply.contains("-32600"), "10 MiB body: {reply}");
    // Without a Content-Length (chunked), the limit (4 MiB by default) applies while reading: the
    // last chunk crosses it, so the gateway has read everything sent when it answers.
    let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    let chunk = format!("{:x}\r\n{}\r\n", 1024 * 1024, " ".repeat(1024 * 1024));
    let body = format!("{}400\r\n{}\r\n", chunk.repeat(4), " ".repeat(1024));
    let (reply, _) = raw_exchange(&addr, head.as_bytes(), Duration::ZERO, body.as_bytes());
    assert!(reply.starts_with("HTTP/1.1 413"), "10 MiB chunked body: {reply}");
    expect(&post_raw(&gw.url, &[("MCP-Protocol-Version", VERSION)], "{}").await, 415, Some(-32600), "missing Content-Type");
    expect(&post_raw(&gw.url, &[("Content-Type", "text/plain")], "{}").await, 415, Some(-32600), "wrong Content-Type");
    let r = send(http::Request::get(&gw.url).body(Default::default()).expect("req")).await.expect("GET");
    assert_eq!((r.status, r.headers.get("allow").map(|v| v.as_bytes().to_vec())), (405, Some(b"POST".to_vec())));
    let r = send(http::Request::delete(&gw.url).body(Default::default()).expect("req")).await.expect("DELETE");
    assert_eq!(r.status, 405);
    let note =
        post_raw(&gw.url, &json_headers(), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}")
            .await;
    expect(&note, 202, None, "notification");

    // DNS rebinding: a foreign Origin, or a non-loopback Host on a loopback listener.
    let mut h = json_headers();
    h.push(("Origin", "https://evil.example.com"));
    expect(&post_raw(&gw.url, &h, "{}").await, 403, None, "foreign Origin");
    let mut h = json_headers();
    h.push(("Origin", "http://localhost:5173"));
    expect(&rpc_with(&gw.url, "tools/list", json!({}), &[("Origin", "http://localhost:5173")]).await, 200, None, "loopback Origin");
    let (reply, _) = raw_exchange(&addr, b"POST /mcp HTTP/1.1\r\nHost: evil.example.com\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", Duration::ZERO, b"");
    assert!(reply.starts_with("HTTP/1.1 403"), "foreign Host: {reply}");

    // Slow clients: headers that never finish, and a body that stalls.
    let (reply, took) = raw_exchange(&addr, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n", Duration::ZERO, b"");
    assert!(took < Duration::from_secs(10), "a slow header read is cut off ({took:?}): {reply}");
    assert!(reply.is_empty() || reply.starts_with("HTTP/1.1 408"), "{reply}");
    let (reply, took) = raw_exchange(
        &addr,
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{\"json",
        Duration::ZERO,
        b"",
    );
    assert!(took < Duration::from_secs(10), "a stalled body is cut off ({took:?})");
    assert!(reply.starts_with("HTTP/1.1 408"), "stalled body: {reply}");
    // Oversized headers are refused before anything is parsed.
    let huge = format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {}\r\nContent-Length: 0\r\n\r\n", "a".repeat(200 * 1024));
    let (reply, _) = raw_exchange(&addr, huge.as_bytes(), Duration::ZERO, b"");
    assert!(reply.starts_with("HTTP/1.1 431"), "oversized headers: {reply}");

    // Still alive and serving.
    let names = tool_names(&gw.url).await;
    assert!(names.contains(&"calc__add".to_string()), "{names:?}");
    assert_eq!(text_of(&call(&gw.url, "calc__add", json!({ "a": 1, "b": 2 })).await), "3");
}
