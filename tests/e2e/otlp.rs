//! Trace export over OTLP (`--features otlp`): a gateway told where a collector is (the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) posts protobuf span batches to `/v1/traces` that carry the
//! caller's trace id, the caller's span as the parent of the gateway's request span, and the
//! gateway's own span, which is what the upstream receives as its parent in `traceparent`, both
//! from the HTTP header and from `_meta`. A collector that is down is logged, without the
//! credential in its URL, and calls go on. Without the variable nothing is exported and the
//! caller's trace context passes through unchanged (see `observability`).

use crate::harness::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::json;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a collector received: path, content type and body of each POST.
type Received = Arc<Mutex<Vec<(String, String, Bytes)>>>;

/// A minimal OTLP/HTTP collector on loopback that records every request and answers 200.
async fn collector() -> (String, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind collector");
    let addr = listener.local_addr().expect("collector address");
    let received: Received = Arc::default();
    let log = received.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let log = log.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let ctype = req.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                        let body = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                        log.lock().expect("collector log").push((path, ctype, body));
                        let answer =
                            http::Response::builder().header("content-type", "application/x-protobuf").body(Full::new(Bytes::new()));
                        Ok::<_, Infallible>(answer.expect("collector answer"))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(stream), svc).await;
            });
        }
    });
    (format!("http://{addr}"), received)
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// The three parts of a `traceparent`: trace id, parent span id, flags.
fn parts(tp: &str) -> (String, String, String) {
    let p: Vec<&str> = tp.split('-').collect();
    assert_eq!(p.len(), 4, "a traceparent: {tp}");
    (p[1].to_string(), p[2].to_string(), p[3].to_string())
}

/// One exported span, as the collector decoded it: ids, name, string attributes and the
/// status message.
#[derive(Debug, Clone)]
struct Span {
    trace: Vec<u8>,
    id: Vec<u8>,
    parent: Vec<u8>,
    name: String,
    attributes: Vec<(String, String)>,
    status: String,
}

impl Span {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// A `KeyValue` (key 1, value 2) whose value is a string (`AnyValue.string_value`, 1).
fn key_value(kv: &[u8]) -> Option<(String, String)> {
    let f = fields(kv);
    let key = f.iter().find(|(n, _)| *n == 1)?.1;
    let value = fields(f.iter().find(|(n, _)| *n == 2)?.1).into_iter().find(|(n, _)| *n == 1)?.1;
    Some((String::from_utf8_lossy(key).into_owned(), String::from_utf8_lossy(value).into_owned()))
}

/// The length-delimited fields of one protobuf message, as `(field number, bytes)`.
fn fields(mut buf: &[u8]) -> Vec<(u64, &[u8])> {
    fn varint(buf: &mut &[u8]) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        while let Some((&b, rest)) = buf.split_first() {
            *buf = rest;
            v |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        v
    }
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf);
        match key & 7 {
            0 => {
                varint(&mut buf);
            }
            1 => buf = &buf[8..],
            5 => buf = &buf[4..],
            2 => {
                let n = varint(&mut buf) as usize;
                out.push((key >> 3, &buf[..n]));
                buf = &buf[n..];
            }
            t => panic!("unexpected protobuf wire type {t}"),
        }
    }
    out
}

/// The spans of an OTLP `ExportTraceServiceRequest`: resource_spans (1), scope_spans (2),
/// spans (2) with trace_id (1), span_id (2), parent_span_id (4), name (5), attributes (9) and
/// status (15, its message 2).
fn spans(body: &[u8]) -> Vec<Span> {
    let mut out = Vec::new();
    for (_, rs) in fields(body).into_iter().filter(|(f, _)| *f == 1) {
        for (_, ss) in fields(rs).into_iter().filter(|(f, _)| *f == 2) {
            for (_, sp) in fields(ss).into_iter().filter(|(f, _)| *f == 2) {
                let mut span =
                    Span { trace: vec![], id: vec![], parent: vec![], name: String::new(), attributes: vec![], status: String::new() };
                for (f, v) in fields(sp) {
                    match f {
                        1 => span.trace = v.to_vec(),
                        2 => span.id = v.to_vec(),
                        4 => span.parent = v.to_vec(),
                        5 => span.name = String::from_utf8_lossy(v).into_owned(),
                        9 => span.attributes.extend(key_value(v)),
                        15 => {
                            if let Some((_, m)) = fields(v).into_iter().find(|(n, _)| *n == 2) {
                                span.status = String::from_utf8_lossy(m).into_owned();
                            }
                        }
                        _ => {}
                    }
                }
                out.push(span);
            }
        }
    }
    out
}

/// Waits until the collector has received a span that `wanted` accepts, and returns it.
async fn exported(received: &Received, what: &str, wanted: impl Fn(&Span) -> bool) -> Span {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let all: Vec<Span> = received.lock().expect("collector log").iter().flat_map(|(_, _, b)| spans(b)).collect();
        if let Some(found) = all.iter().find(|s| wanted(s)) {
            return found.clone();
        }
        assert!(Instant::now() < deadline, "the collector never received {what}: {all:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_are_exported_and_the_upstream_hangs_under_the_gateway() {
    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const META_TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let (endpoint, received) = collector().await;
    let (_up, url) = py_http("alpha", &[]);
    let config = format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_SERVICE_NAME", "mcpgate-under-test"),
    ];
    let gw = gateway_with_env(&config, &env);

    // The trace context in the HTTP header.
    let r = rpc_with(&gw.url, "tools/call", json!({ "name": "alpha__headers", "arguments": {} }), &[("traceparent", TP)]).await;
    let seen: serde_json::Value = serde_json::from_str(&text_of(&r.message())).expect("headers JSON");
    let upstream_tp = seen["traceparent"].as_str().unwrap_or_else(|| panic!("the upstream gets a traceparent: {seen}"));
    let (trace, hop, flags) = parts(upstream_tp);
    let (client_trace, client_span, _) = parts(TP);
    assert_eq!(trace, client_trace, "the upstream stays in the caller's trace");
    assert_ne!(hop, client_span, "the upstream's parent is the gateway's span, not the caller's");
    assert_eq!(flags, "01", "the sampled flag is kept");
    let (trace, hop, client_span) = (unhex(&trace), unhex(&hop), unhex(&client_span));
    // The request span hangs under the caller's span, and the mcp span (the upstream's parent)
    // under the request span, all in the caller's trace.
    let request = exported(&received, "the request span under the caller's span", |s| {
        s.name == "request" && s.trace == trace && s.parent == client_span
    })
    .await;
    // Named and described as the OpenTelemetry MCP semantic conventions say.
    exported(&received, "the mcp span under the request span", |s| {
        s.name == "tools/call alpha__headers" && s.id == hop && s.trace == trace && s.parent == request.id
    })
    .await;
    {
        let got = received.lock().expect("collector log");
        assert!(
            got.iter().all(|(path, ctype, _)| path == "/v1/traces" && ctype == "application/x-protobuf"),
            "OTLP/HTTP protobuf posts to /v1/traces"
        );
        let all: Vec<u8> = got.iter().flat_map(|(_, _, b)| b.to_vec()).collect();
        assert!(all.windows(18).any(|w| w == b"mcpgate-under-test"), "the service name is OTEL_SERVICE_NAME");
        for attribute in [&b"mcp.method.name"[..], b"gen_ai.tool.name", b"mcp.protocol.version", b"rpc.method"] {
            assert!(all.windows(attribute.len()).any(|w| w == attribute), "{} is an attribute", String::from_utf8_lossy(attribute));
        }
    }

    // The trace context only in `_meta` (another trace): the gateway's span joins that trace.
    let mut params = json!({ "name": "alpha__meta", "arguments": {} });
    params["_meta"] = meta();
    params["_meta"]["traceparent"] = META_TP.into();
    let r = rpc(&gw.url, "tools/call", params).await;
    let meta_seen: serde_json::Value = serde_json::from_str(&text_of(&r.message())).expect("meta JSON");
    let (trace, hop, _) = parts(meta_seen["traceparent"].as_str().unwrap_or_else(|| panic!("_meta carries a traceparent: {meta_seen}")));
    let (meta_trace, meta_span, _) = parts(META_TP);
    assert_eq!(trace, meta_trace, "the trace named in _meta is kept");
    assert_ne!(hop, meta_span, "and the upstream's parent is the gateway's span");
    let (trace, hop, meta_span) = (unhex(&trace), unhex(&hop), unhex(&meta_span));
    exported(&received, "the mcp span joined to the trace named in _meta", |s| {
        s.name == "tools/call alpha__meta" && s.id == hop && s.trace == trace && s.parent == meta_span
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_carry_the_conventions_attributes_ids_sessions_and_errors() {
    let (endpoint, received) = collector().await;
    let (_up, url) = py_http("alpha", &[]);
    let config = format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n");
    let gw = gateway_with_env(&config, &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")]);

    // A modern call with a string id.
    let mut params = json!({ "name": "alpha__whoami", "arguments": {} });
    params["_meta"] = meta();
    let body = json!({ "jsonrpc": "2.0", "id": "call-7", "method": "tools/call", "params": params }).to_string();
    let headers = modern_headers("tools/call", &params);
    let refs: Vec<(&str, &str)> = headers.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(text_of(&post_raw(&gw.url, &refs, body).await.message()), "alpha");
    let ok = exported(&received, "the tool call's span with its id", |s| s.attr("jsonrpc.request.id") == Some("call-7")).await;
    assert_eq!(ok.name, "tools/call alpha__whoami");
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "alpha__whoami"),
        ("gen_ai.operation.name", "execute_tool"),
        ("mcp.protocol.version", "2026-07-28"),
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
    ] {
        assert_eq!(ok.attr(key), Some(value), "{key} on {ok:?}");
    }
    assert_eq!(ok.attr("error.type"), None, "a success has no error.type: {ok:?}");
    assert_eq!(ok.attr("mcp.session.id"), None, "a modern request is in no session: {ok:?}");

    // An error: error.type and rpc.response.status_code are the JSON-RPC code, the status its message.
    let refused = call(&gw.url, "alpha__missing", json!({})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let err = exported(&received, "the refused call's span", |s| s.attr("error.type") == Some("-32602")).await;
    assert_eq!(err.attr("rpc.response.status_code"), Some("-32602"), "{err:?}");
    assert_eq!(err.status, refused["error"]["message"].as_str().unwrap_or_default(), "the status carries the message: {err:?}");

    // A legacy client: its session and the version it speaks. The session is named by the
    // gateway's own id for it, not by the sealed `Mcp-Session-Id` the client holds.
    let session = crate::legacy::initialize(&gw.url).await;
    let r = crate::legacy::legacy_call(&gw.url, &session, "tools/call", json!({ "name": "alpha__whoami", "arguments": {} })).await;
    assert_eq!(r.status, 200);
    let legacy = exported(&received, "the legacy call's span", |s| s.attr("mcp.protocol.version") == Some("2025-06-18")).await;
    assert_eq!(legacy.attr("jsonrpc.request.id"), Some("2"), "{legacy:?}");
    let sid = legacy.attr("mcp.session.id").unwrap_or_else(|| panic!("a legacy request names its session: {legacy:?}"));
    assert!(sid.len() >= 16 && sid != session, "the gateway's id of the session, not the client's header: {sid}");
    // The same session's next request carries the same id.
    let r = crate::legacy::legacy_call(&gw.url, &session, "tools/list", json!({})).await;
    assert_eq!(r.status, 200);
    exported(&received, "the same session on its next request", |s| s.name == "tools/list" && s.attr("mcp.session.id") == Some(sid)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_that_is_down_is_reported_and_calls_go_on() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address");
    // With a credential in the URL and the log at debug, the credential still never shows.
    let endpoint = format!("http://user:sekrit-in-url@{closed}");
    let (_up, url) = py_http("alpha", &[]);
    let config = format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n");
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100"), ("MCPGATE_LOG", "debug")];
    let gw = gateway_with_env(&config, &env);
    assert_eq!(text_of(&call(&gw.url, "alpha__whoami", json!({})).await), "alpha");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !gw.proc.log().contains("ExportError") {
        assert!(Instant::now() < deadline, "a failed export is never logged:\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(text_of(&call(&gw.url, "alpha__whoami", json!({})).await), "alpha", "calls go on");
    assert!(!gw.proc.log().contains("sekrit"), "the collector's credential reached the log");
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_records_are_exported_as_otlp_logs() {
    let (endpoint, received) = collector().await;
    let config = "[server]\nlisten = \"127.0.0.1:0\"\n\n[audit]\notlp = true\n\n\
        [[endpoint]]\npath = \"/mcp/calc\"\ninclude = [\"calc__*\"]\n\n[[endpoint.tool]]\nname = \"calc__add\"\nrename = \"plus\"\n\n\
        [[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n";
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BLRP_SCHEDULE_DELAY", "100")];
    let gw = gateway_with_env(config, &env);
    let r = call(&format!("{}/mcp/calc", gw.base), "plus", json!({ "a": 2, "b": 3 })).await;
    assert_eq!(text_of(&r), "5");
    let contains = |hay: &[u8], needle: &str| hay.windows(needle.len()).any(|w| w == needle.as_bytes());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let found = received.lock().expect("collector log").iter().any(|(path, ctype, body)| {
            path == "/v1/logs"
                && ctype == "application/x-protobuf"
                && contains(body, "mcpgate.audit")
                && contains(body, "calc__add")
                && contains(body, "presented")
                && contains(body, "plus")
        });
        if found {
            break;
        }
        assert!(Instant::now() < deadline, "no audit log record reached the collector:\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The records chain as the file's lines do: a collector checks them with `audit verify`.
    for n in 0..3 {
        assert_eq!(text_of(&call(&format!("{}/mcp/calc", gw.base), "plus", json!({ "a": n, "b": 1 })).await), (n + 1).to_string());
    }
    let lines = loop {
        let lines = audit_lines(&received);
        if lines.len() >= 4 {
            break lines;
        }
        assert!(Instant::now() < deadline + Duration::from_secs(15), "the audit records never all arrived: {lines:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("collected.jsonl");
    std::fs::write(&file, lines.iter().map(|(_, l)| format!("{l}\n")).collect::<String>()).expect("write");
    let (code, out) = crate::audit_chain::verify(std::slice::from_ref(&file), None);
    assert_eq!(code, 0, "the exported chain verifies: {out}\n{lines:?}");
    let mut swapped: Vec<String> = lines.iter().map(|(_, l)| l.clone()).collect();
    swapped.swap(1, 2);
    std::fs::write(&file, swapped.iter().map(|l| format!("{l}\n")).collect::<String>()).expect("write");
    let (code, out) = crate::audit_chain::verify(std::slice::from_ref(&file), None);
    assert_ne!(code, 0, "a swapped pair is found: {out}");
    for (seq, line) in &lines {
        let v: serde_json::Value = serde_json::from_str(line).expect("an audit line is JSON");
        assert_eq!(v["seq"].to_string(), *seq, "audit.seq is the line's seq: {line}");
    }
}

/// The `audit.seq` and `audit.line` of every audit log record received (ExportLogsServiceRequest:
/// resource_logs 1, scope_logs 2, log_records 2, attributes 6), ordered by `seq`.
fn audit_lines(received: &Received) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, _, body) in received.lock().expect("collector log").iter() {
        if path != "/v1/logs" {
            continue;
        }
        for (_, rl) in fields(body).into_iter().filter(|(f, _)| *f == 1) {
            for (_, sl) in fields(rl).into_iter().filter(|(f, _)| *f == 2) {
                for (_, rec) in fields(sl).into_iter().filter(|(f, _)| *f == 2) {
                    let attrs: Vec<(String, String)> =
                        fields(rec).into_iter().filter(|(f, _)| *f == 6).filter_map(|(_, kv)| key_value(kv)).collect();
                    let get = |k: &str| attrs.iter().find(|(a, _)| a == k).map(|(_, v)| v.clone());
                    if let (Some(seq), Some(line)) = (get("audit.seq"), get("audit.line")) {
                        out.push((seq, line));
                    }
                }
            }
        }
    }
    out.sort_by_key(|(seq, _)| seq.parse::<u64>().unwrap_or(u64::MAX));
    out
}
