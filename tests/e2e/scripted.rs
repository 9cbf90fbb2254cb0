//! A small scripted legacy upstream that records what it receives, for what real servers do not
//! do on demand. Credentials on every channel: an upstream configured with a static
//! `Authorization` header *and* `[upstream.oauth]` must receive exactly one `Authorization` (the
//! OAuth token) on each kind of request the gateway sends it: the probe and calls (POST), the
//! legacy handshake's `notifications/initialized`, the standalone GET stream, and the answers to
//! its pings (on the GET stream and inside a call's SSE response). Session renewal: when the
//! upstream forgets the session (HTTP 404), the gateway initializes a new one, once, and the call
//! goes through.

use crate::harness::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What one request carried: its HTTP method, what the body was, and every Authorization value.
#[derive(Debug, Clone)]
struct Seen {
    verb: String,
    what: String,
    authorization: Vec<String>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// The scripted server's sessions: `sess-N` for the N-th `initialize`; sessions numbered below
/// `forgotten_below` get 404.
#[derive(Default)]
struct Sessions {
    issued: AtomicUsize,
    forgotten_below: AtomicUsize,
}
type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn json_reply(status: u16, body: Value, session: Option<String>) -> http::Response<Body> {
    let mut b = http::Response::builder().status(status).header("content-type", "application/json");
    if let Some(s) = session {
        b = b.header("mcp-session-id", s);
    }
    b.body(Full::new(Bytes::from(body.to_string())).boxed()).expect("response")
}

fn sse_reply(events: Vec<Value>, then_hold: bool) -> http::Response<Body> {
    let frames = events.into_iter().map(|e| Ok::<_, Infallible>(Frame::data(Bytes::from(format!("data: {e}\n\n")))));
    let head = futures_util::stream::iter(frames.collect::<Vec<_>>());
    let body: Body = if then_hold {
        let hold = futures_util::stream::once(async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, Infallible>(Frame::data(Bytes::new()))
        });
        StreamBody::new(futures_util::StreamExt::chain(head, hold)).boxed()
    } else {
        StreamBody::new(head).boxed()
    };
    http::Response::builder().status(200).header("content-type", "text/event-stream").body(body).expect("response")
}

async fn answer(req: http::Request<Incoming>, log: Log, sessions: Arc<Sessions>) -> Result<http::Response<Body>, Infallible> {
    let verb = req.method().to_string();
    let sent: Option<usize> = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.strip_prefix("sess-"))
        .and_then(|n| n.parse().ok());
    let authorization: Vec<String> = req.headers().get_all("authorization").iter().map(|v| v.to_str().unwrap_or("?").to_string()).collect();
    let bytes = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let msg: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let what = match (msg["method"].as_str(), msg.get("result")) {
        (Some(m), _) => m.to_string(),
        (None, Some(_)) => format!("answer to {}", msg["id"]),
        _ => String::new(),
    };
    log.lock().expect("log").push(Seen { verb: verb.clone(), what: what.clone(), authorization });
    let id = msg["id"].clone();
    if sent.is_some_and(|n| n < sessions.forgotten_below.load(Ordering::SeqCst)) {
        return Ok(json_reply(
            404,
            json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32001, "message": "Session not found" } }),
            None,
        ));
    }
    Ok(match (verb.as_str(), what.as_str()) {
        ("GET", _) => sse_reply(vec![json!({ "jsonrpc": "2.0", "id": "ping-on-get", "method": "ping" })], true),
        (_, "initialize") => json_reply(
            200,
            json!({ "jsonrpc": "2.0", "id": id, "result": { "protocolVersion": "2025-11-25", "capabilities": { "tools": {} }, "serverInfo": { "name": "recorder", "version": "1" } } }),
            Some(format!("sess-{}", sessions.issued.fetch_add(1, Ordering::SeqCst) + 1)),
        ),
        (_, "server/discover") => {
            json_reply(200, json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601, "message": "Method not found" } }), None)
        }
        (_, "tools/list") => json_reply(
            200,
            json!({ "jsonrpc": "2.0", "id": id, "result": { "tools": [{ "name": "echo", "inputSchema": { "type": "object" } }] } }),
            None,
        ),
        (_, "tools/call") => sse_reply(
            vec![
                json!({ "jsonrpc": "2.0", "id": "ping-in-call", "method": "ping" }),
                json!({ "jsonrpc": "2.0", "id": id, "result": { "content": [{ "type": "text", "text": "echoed" }] } }),
            ],
            false,
        ),
        _ => http::Response::builder().status(202).body(Full::new(Bytes::new()).boxed()).expect("response"),
    })
}

/// Starts the recording legacy upstream on loopback; returns its URL, its log and its sessions.
async fn recorder() -> (String, Log, Arc<Sessions>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let log: Log = Arc::default();
    let sessions: Arc<Sessions> = Arc::default();
    let (shared, state) = (log.clone(), sessions.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let (log, state) = (shared.clone(), state.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| answer(req, log.clone(), state.clone()));
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(stream), svc).await;
            });
        }
    });
    (format!("http://{addr}/mcp"), log, sessions)
}

#[tokio::test(flavor = "multi_thread")]
async fn one_authorization_header_on_every_channel() {
    let (url, log, _) = recorder().await;
    let (token_url, _issued, _requests) = crate::callers::token_endpoint(3600).await;
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"rec\"\nurl = \"{url}\"\n\
         [upstream.headers]\nAuthorization = {{ env = \"STATIC_TOKEN\", prefix = \"Bearer \" }}\n\
         [upstream.oauth]\ntoken_url = \"{token_url}\"\nclient_id = \"mcpgate\"\nclient_secret = {{ env = \"REC_SECRET\" }}\n"
    );
    let gw = gateway_with_env(&config, &[("STATIC_TOKEN", "static-token"), ("REC_SECRET", "s3cret")]);
    let r = call(&gw.url, "rec__echo", json!({})).await;
    assert_eq!(text_of(&r), "echoed", "{r}");
    // Wait until every channel has been used: the GET stream and both ping answers.
    let wanted = [
        "server/discover",
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
        "GET",
        "answer to \"ping-on-get\"",
        "answer to \"ping-in-call\"",
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let seen = loop {
        let seen = log.lock().expect("log").clone();
        let has = |w: &str| seen.iter().any(|s| s.what == w || (w == "GET" && s.verb == "GET"));
        if wanted.iter().all(|w| has(w)) || std::time::Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for w in wanted {
        assert!(seen.iter().any(|s| s.what == w || (w == "GET" && s.verb == "GET")), "the upstream never received {w}: {seen:#?}");
    }
    for s in &seen {
        assert_eq!(s.authorization, vec!["Bearer tok-1".to_string()], "{} {}: exactly the OAuth token, once: {seen:#?}", s.verb, s.what);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forgotten_session_is_renewed_once_and_the_call_goes_through() {
    let (url, log, sessions) = recorder().await;
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"rec\"\nurl = \"{url}\"\n"));
    assert_eq!(text_of(&call(&gw.url, "rec__echo", json!({})).await), "echoed");
    let before = sessions.issued.load(Ordering::SeqCst);
    // The upstream restarts its session store: every session issued so far is unknown.
    sessions.forgotten_below.store(before + 1, Ordering::SeqCst);
    let r = call(&gw.url, "rec__echo", json!({})).await;
    assert_eq!(text_of(&r), "echoed", "{r}\n{}", gw.proc.log());
    assert_eq!(sessions.issued.load(Ordering::SeqCst), before + 1, "one new session");
    assert!(gw.proc.log().contains("upstream session expired"), "{}", gw.proc.log());
    let inits = log.lock().expect("log").iter().filter(|s| s.what == "initialize").count();
    assert_eq!(inits, before + 1);
}
