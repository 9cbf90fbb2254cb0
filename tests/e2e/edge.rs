//! Edge limits: connections that never send a request (or half an HTTP/2 preface) are
//! closed in time, and a first request split inside its first bytes is still understood; a flood of silent sockets cannot starve a real client, even under a 1,024
//! open-files limit; requests in progress are limited per caller (429) and in total (503); a
//! client that stops reading (HTTP/1.1) or never opens its flow-control window (HTTP/2) is cut
//! off after the write timeout.

use crate::harness::*;
use bytes::Bytes;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn addr(gw: &Gateway) -> String {
    gw.base.trim_start_matches("http://").to_string()
}

/// How long until the server closes a socket that sent `first` (and then nothing).
fn closed_after(addr: &str, first: &[u8]) -> Duration {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s.write_all(first).expect("write");
    let started = Instant::now();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return started.elapsed(),
            Ok(_) => continue,
        }
    }
}

#[test]
fn silent_and_half_sent_connections_are_closed_in_time() {
    let gw = gateway(
        "[server]\nlisten = \"127.0.0.1:0\"\nheader_read_timeout = \"1s\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n",
    );
    let a = addr(&gw);
    for (what, first) in [
        ("nothing", &b""[..]),
        ("half an HTTP/2 preface", &b"PRI * HTTP/2.0\r\n"[..]),
        ("half a request head", &b"POST /mcp HTTP/1.1\r\nHost: x\r\n"[..]),
    ] {
        let took = closed_after(&a, first);
        assert!(took < Duration::from_secs(4), "{what}: open for {took:?}");
    }
}

/// Sends `parts` with a pause between them and returns the first bytes the server answers.
fn answer_to_parts(addr: &str, parts: &[&[u8]]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    for part in parts {
        s.write_all(part).expect("write");
        std::thread::sleep(Duration::from_millis(150));
    }
    let mut buf = vec![0u8; 256];
    let n = s.read(&mut buf).expect("an answer");
    buf.truncate(n);
    buf
}

#[test]
fn a_client_whose_first_bytes_arrive_apart_is_still_understood() {
    // HTTP/1.1 and HTTP/2 with prior knowledge are told apart by peeking at the first bytes
    // (`PRI ` begins HTTP/2's preface); a client whose first write is a piece of that is left to
    // a detection that waits for the rest, never guessed at (and never polled for).
    let gw = gateway("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n");
    let a = addr(&gw);
    let h1 = answer_to_parts(&a, &[b"GE", b"T /healthz HTTP/1.1\r\nHost: x\r\n\r\n"]);
    assert!(h1.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&h1));
    // A method that only shares HTTP/2's first letter is HTTP/1.1.
    let put = answer_to_parts(&a, &[b"P", b"UT /healthz HTTP/1.1\r\nHost: x\r\n\r\n"]);
    assert!(put.starts_with(b"HTTP/1.1 "), "{}", String::from_utf8_lossy(&put));
    // The preface, then an empty SETTINGS frame: the server's first frame is its own SETTINGS.
    let h2 = answer_to_parts(&a, &[b"PR", b"I * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0"]);
    assert!(h2.len() >= 9 && h2[3] == 0x04, "no HTTP/2 SETTINGS frame first: {h2:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_silent_sockets_does_not_starve_a_real_client() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    let config = "[server]\nlisten = \"127.0.0.1:0\"\nheader_read_timeout = \"60s\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n";
    let gw = gateway_with_open_files(config, 1024);
    let a = addr(&gw);
    let silent: Vec<TcpStream> = (0..1100).filter_map(|_| TcpStream::connect(&a).ok()).collect();
    assert!(
        silent.len() >= 1000,
        "the test itself could open only {} of the 1,000 sockets it needs: the test process's open-files limit (`ulimit -n`) is too low",
        silent.len()
    );
    let started = Instant::now();
    let names = tokio::time::timeout(Duration::from_secs(10), tool_names(&gw.url)).await.expect("answered in time");
    assert!(names.contains(&"calc__add".to_string()), "{names:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the real client was answered after {:?}, over the 5 s allowed: the silent sockets starve it (or the machine is very busy)",
        started.elapsed()
    );
    assert!(gw.proc.log().contains("max_connections lowered to fit the open-files limit"), "{}", gw.proc.log());
    drop(silent);
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_in_progress_are_limited_per_caller_and_in_total() {
    let (_up, url) = py_http("alpha", &[]);
    for (limits, refused_status, code) in [("max_in_flight_per_caller = 2", 429, 429), ("max_in_flight = 2", 503, -32603)] {
        let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n{limits}\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n"));
        let slow = || {
            let url = gw.url.clone();
            async move { rpc(&url, "tools/call", json!({ "name": "alpha__slow", "arguments": { "seconds": 1.5 } })).await }
        };
        let (a, b) = (tokio::spawn(slow()), tokio::spawn(slow()));
        tokio::time::sleep(Duration::from_millis(400)).await;
        let refused = rpc(&gw.url, "tools/call", json!({ "name": "alpha__whoami", "arguments": {} })).await;
        assert_eq!(refused.status, refused_status, "{limits}: {}", String::from_utf8_lossy(&refused.body));
        assert_eq!(refused.json()["error"]["code"], code, "{limits}");
        assert!(refused.headers.get("retry-after").is_some(), "{limits}: Retry-After");
        for h in [a, b] {
            assert_eq!(text_of(&h.await.expect("join").message()), "done");
        }
        // The places are free again once the responses have been sent.
        assert_eq!(text_of(&call(&gw.url, "alpha__whoami", json!({})).await), "alpha");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_stops_reading_is_cut_off() {
    let (_up, url) = py_http("alpha", &[]);
    let gw =
        gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\nwrite_timeout = \"1s\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n"));
    let params = json!({ "name": "alpha__big", "arguments": { "size": 12_000_000 }, "_meta": meta() });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params }).to_string();
    let mut head = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n", addr(&gw), body.len());
    for (k, v) in modern_headers("tools/call", &params) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let mut s = TcpStream::connect(addr(&gw)).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    // A small receive buffer fills at once; the client then never reads.
    s.write_all(format!("{head}\r\n{body}").as_bytes()).expect("send");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !gw.proc.log().contains("client stopped reading") {
        assert!(Instant::now() < deadline, "the stalled connection was never cut off:\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its place is free again: the gateway answers as usual.
    assert_eq!(text_of(&call(&gw.url, "alpha__whoami", json!({})).await), "alpha");
    drop(s);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http2_client_that_never_opens_its_window_is_cut_off() {
    let (_up, url) = py_http("alpha", &[]);
    let gw =
        gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\nwrite_timeout = \"1s\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n"));
    // HTTP/2 with prior knowledge. A window of 0 lets the gateway send the response head but no
    // byte of its body; the default window (64 KiB) lets it send the start of a 200 kB result.
    // Either way the client never grants more.
    for window in [0, 65_535] {
        let tcp = tokio::net::TcpStream::connect(addr(&gw)).await.expect("connect");
        let (mut client, connection) =
            h2::client::Builder::new().initial_window_size(window).handshake::<_, Bytes>(tcp).await.expect("h2 handshake");
        let connection = tokio::spawn(connection);
        let params = json!({ "name": "alpha__big", "arguments": { "size": 200_000 }, "_meta": meta() });
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params }).to_string();
        let mut req = http::Request::post(format!("http://{}/mcp", addr(&gw)));
        for (k, v) in modern_headers("tools/call", &params) {
            req = req.header(k, v);
        }
        let (response, mut send) = client.send_request(req.body(()).expect("request"), false).expect("send request");
        send.send_data(Bytes::from(body), true).expect("send body");
        let head = tokio::time::timeout(Duration::from_secs(20), response).await.expect("a response head in time").expect("response");
        assert_eq!(head.status(), 200);
        let _unread = head.into_body();
        // The gateway closes the connection once the body has waited for the client for 1 s.
        let ended = tokio::time::timeout(Duration::from_secs(15), connection).await;
        assert!(ended.is_ok(), "window {window}: the stalled HTTP/2 connection was never closed:\n{}", gw.proc.log());
    }
    // Its place is free again: the gateway answers as usual.
    assert_eq!(text_of(&call(&gw.url, "alpha__whoami", json!({})).await), "alpha");
}
