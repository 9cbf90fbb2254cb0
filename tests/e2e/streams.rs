//! Long-lived client streams for the change-notification tests: a modern `subscriptions/listen`
//! POST and a legacy session's GET stream, each read in the background into a list of the
//! JSON-RPC messages received so far, which tests inspect and count.

use crate::harness::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Messages received on one stream, as they arrive.
#[derive(Clone, Default)]
pub struct Inbox(Arc<Mutex<Vec<Value>>>);

impl Inbox {
    pub fn all(&self) -> Vec<Value> {
        self.0.lock().expect("inbox").clone()
    }

    /// How many messages with `method` arrived.
    pub fn count(&self, method: &str) -> usize {
        self.all().iter().filter(|m| m["method"] == method).count()
    }

    /// Waits for the first message `pred` accepts (or `within` to pass).
    pub async fn wait_until(&self, pred: impl Fn(&Value) -> bool, within: Duration) -> Option<Value> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(m) = self.all().into_iter().find(|m| pred(m)) {
                return Some(m);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `n` messages with `method` arrived (or `within` passed); their number.
    pub async fn wait_for(&self, method: &str, n: usize, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        while self.count(method) < n && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.count(method)
    }
}

async fn open(req: http::Request<Full<Bytes>>) -> Inbox {
    let client = mcpgate_net::http::new_http_client();
    let resp = tokio::time::timeout(Duration::from_secs(10), client.request(req)).await.expect("the stream opens").expect("request");
    assert_eq!(resp.status(), 200, "stream refused");
    let inbox = Inbox::default();
    let sink = inbox.clone();
    let mut body = resp.into_body();
    tokio::spawn(async move {
        let mut buf = String::new();
        while let Some(Ok(frame)) = body.frame().await {
            let Ok(data) = frame.into_data() else { continue };
            buf.push_str(&String::from_utf8_lossy(&data));
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
                if let Ok(v) = serde_json::from_str::<Value>(&data.join("\n")) {
                    sink.0.lock().expect("inbox").push(v);
                }
            }
        }
    });
    inbox
}

/// A modern `subscriptions/listen` with `notifications` as its filter; `id` is its request id.
pub async fn listen(url: &str, id: &str, notifications: Value, extra: &[(&str, &str)]) -> Inbox {
    let params = json!({ "_meta": meta(), "notifications": notifications });
    let body = json!({ "jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params }).to_string();
    let mut b = http::Request::post(url);
    for (k, v) in modern_headers("subscriptions/listen", &params) {
        b = b.header(k, v);
    }
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
    open(b.body(Full::new(Bytes::from(body))).expect("request")).await
}

/// A legacy client's session (initialize, then notifications/initialized).
pub async fn legacy_session(url: &str, extra: &[(&str, &str)]) -> String {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let mut h = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    h.extend_from_slice(extra);
    let r = post_raw(url, &h, body.to_string()).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let session = r.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("Mcp-Session-Id").to_string();
    let mut h = vec![("Content-Type", "application/json"), ("MCP-Protocol-Version", "2025-11-25"), ("Mcp-Session-Id", session.as_str())];
    h.extend_from_slice(extra);
    post_raw(url, &h, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
    session
}

/// A request of a legacy session; the final message.
pub async fn legacy_request(url: &str, session: &str, method: &str, params: Value, extra: &[(&str, &str)]) -> Value {
    let body = json!({ "jsonrpc": "2.0", "id": 2, "method": method, "params": params });
    let mut h = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Mcp-Session-Id", session),
    ];
    h.extend_from_slice(extra);
    post_raw(url, &h, body.to_string()).await.message()
}

/// A legacy session's standalone GET stream.
pub async fn legacy_stream(url: &str, session: &str, extra: &[(&str, &str)]) -> Inbox {
    let mut b = http::Request::get(url)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", session)
        .header("MCP-Protocol-Version", "2025-11-25");
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
    open(b.body(Full::new(Bytes::new())).expect("request")).await
}
