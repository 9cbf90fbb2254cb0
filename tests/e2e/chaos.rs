//! Faulty upstreams and shutdown under load (Part 8): an upstream that accepts a call but never
//! answers, answers garbage, cuts its SSE stream short, or sends 100 MiB gets a clear error that
//! names it, in time, and the gateway keeps serving; SIGTERM lets calls in progress finish.

use crate::harness::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::time::{Duration, Instant};

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn reply(status: u16, ctype: &str, body: Body) -> http::Response<Body> {
    http::Response::builder().status(status).header("content-type", ctype).body(body).expect("response")
}

async fn misbehave(req: http::Request<Incoming>) -> Result<http::Response<Body>, Infallible> {
    let bytes = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let msg: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let id = msg["id"].clone();
    let ok = |result: Value| {
        reply(200, "application/json", Full::new(Bytes::from(json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string())).boxed())
    };
    Ok(match (msg["method"].as_str().unwrap_or(""), msg["params"]["name"].as_str().unwrap_or("")) {
        ("server/discover", _) => ok(
            json!({ "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": { "tools": {} }, "_meta": { "io.modelcontextprotocol/serverInfo": { "name": "chaos", "version": "1" } } }),
        ),
        ("tools/list", _) => {
            let tools: Vec<Value> = ["hang", "garbage", "truncated", "huge", "fine"]
                .iter()
                .map(|n| json!({ "name": n, "inputSchema": { "type": "object" } }))
                .collect();
            ok(json!({ "resultType": "complete", "tools": tools }))
        }
        ("tools/call", "hang") => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            ok(json!({}))
        }
        ("tools/call", "garbage") => reply(200, "text/html", Full::new(Bytes::from_static(b"<html>\x00\xff oops")).boxed()),
        ("tools/call", "truncated") => {
            let frames = vec![Ok::<_, Infallible>(Frame::data(Bytes::from(
                "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":",
            )))];
            reply(200, "text/event-stream", StreamBody::new(futures_util::stream::iter(frames)).boxed())
        }
        ("tools/call", "huge") => {
            let chunk = Bytes::from(vec![b' '; 1024 * 1024]);
            let frames = futures_util::stream::iter((0..100).map(move |_| Ok::<_, Infallible>(Frame::data(chunk.clone()))));
            reply(200, "application/json", StreamBody::new(frames).boxed())
        }
        ("tools/call", _) => ok(json!({ "resultType": "complete", "content": [{ "type": "text", "text": "fine" }] })),
        _ => ok(json!({})),
    })
}

async fn chaos_upstream() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(misbehave);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(stream), svc).await;
            });
        }
    });
    format!("http://{addr}/mcp")
}

#[tokio::test(flavor = "multi_thread")]
async fn faulty_upstreams_fail_clearly_and_in_time() {
    let url = chaos_upstream().await;
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"chaos\"\nurl = \"{url}\"\ntimeout = \"2s\"\n"));
    for (tool, expect) in [
        ("chaos__hang", "did not answer within 2s"),
        ("chaos__garbage", "without a JSON-RPC response"),
        ("chaos__truncated", "ended before the response"),
        ("chaos__huge", "exceeded"),
    ] {
        let started = Instant::now();
        let r = call(&gw.url, tool, json!({})).await;
        let message = r["error"]["message"].as_str().unwrap_or_else(|| panic!("{tool}: expected an error: {r}"));
        assert!(message.contains("'chaos'") && message.contains(expect), "{tool}: {message}");
        assert!(started.elapsed() < Duration::from_secs(5), "{tool}: took {:?}", started.elapsed());
        assert_eq!(text_of(&call(&gw.url, "chaos__fine", json!({})).await), "fine", "still serving after {tool}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_calls_in_progress_finish() {
    let (_up, url) = py_http("alpha", &[]);
    let gw =
        gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\ndrain_timeout = \"10s\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n"));
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let url = gw.url.clone();
            tokio::spawn(async move { call(&url, "alpha__slow", json!({ "seconds": 1.5 })).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    for c in calls {
        let r = c.await.expect("join");
        assert_eq!(text_of(&r), "done", "a call in progress was cut short: {r}\n{}", gw.proc.log());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut proc = gw.proc;
    while proc.child.try_wait().ok().flatten().is_none() {
        assert!(Instant::now() < deadline, "the gateway did not exit after draining:\n{}", proc.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
