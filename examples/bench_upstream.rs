//! The benchmark suite's upstream: a minimal MCP server (2026-07-28 over HTTP/1.1 keep-alive,
//! plain JSON answers, one thread) whose answers are prepared once, so that it is never what a
//! benchmark measures. It serves `--upstreams N` MCP endpoints at `/u0/mcp` … `/u{N-1}/mcp`, each
//! with `--tools T` tools named `t0` … `t{T-1}` (every one answers `tools/call` with the text
//! "ok"). It prints `LISTENING <port>` once ready. Used by `bench/run` (`examples/bench_suite.rs`).
//!
//!     cargo run --release --example bench_upstream -- [--upstreams N] [--tools T] [--port P]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::convert::Infallible;
use std::io::Write;
use std::sync::Arc;

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<&'a str>,
}

struct Answers {
    discover: String,
    list: String,
    call: String,
    upstreams: usize,
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn answers(tools: usize, upstreams: usize) -> Answers {
    let defs: Vec<String> = (0..tools)
        .map(|i| format!(r#"{{"name":"t{i}","description":"Benchmark tool {i}: answers ok.","inputSchema":{{"type":"object","properties":{{"text":{{"type":"string"}}}}}}}}"#))
        .collect();
    Answers {
        discover: r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"bench-upstream","version":"1"}}"#.into(),
        list: format!(r#"{{"resultType":"complete","tools":[{}],"ttlMs":300000,"cacheScope":"public"}}"#, defs.join(",")),
        call: r#"{"resultType":"complete","content":[{"type":"text","text":"ok"}]}"#.into(),
        upstreams,
    }
}

fn respond(a: &Answers, path: &str, body: &[u8]) -> Response<Full<Bytes>> {
    let known =
        path.strip_prefix("/u").and_then(|r| r.strip_suffix("/mcp")).and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n < a.upstreams);
    let reply = match serde_json::from_slice::<Envelope>(body) {
        Ok(e) if known => {
            let result = match e.method {
                Some("tools/call") => Some(a.call.as_str()),
                Some("tools/list") => Some(a.list.as_str()),
                Some("server/discover") => Some(a.discover.as_str()),
                _ => None,
            };
            let id = e.id.map_or("null", RawValue::get);
            match result {
                Some(r) => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{r}}}"#),
                None => format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"Method not found"}}}}"#),
            }
        }
        _ => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"not found")));
            *r.status_mut() = hyper::StatusCode::NOT_FOUND;
            return r;
        }
    };
    let mut r = Response::new(Full::new(Bytes::from(reply)));
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    r
}

fn main() -> anyhow::Result<()> {
    let answers = Arc::new(answers(arg("--tools", 10), arg("--upstreams", 1)));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", arg("--port", 0) as u16)).await?;
        println!("LISTENING {}", listener.local_addr()?.port());
        std::io::stdout().flush()?;
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let answers = answers.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let answers = answers.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let body = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                        Ok::<_, Infallible>(respond(&answers, &path, &body))
                    }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    })
}
