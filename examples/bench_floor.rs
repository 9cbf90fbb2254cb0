//! The floor of a proxy hop built on mcpgate's own HTTP stack: a hyper HTTP/1.1 server and a
//! hyper-util pooled client on one current-thread tokio runtime, forwarding each POST's body to
//! one upstream and its answer back, reading nothing (no JSON, no headers beyond the two that
//! MCP needs upstream). It is what mcpgate's pass-through path would cost if the gateway did no
//! work of its own, so `bench/run` can say how much of a call's CPU is the gateway and how much
//! the libraries under it. It prints `LISTENING <port>` once ready.
//!
//!     cargo run --release --example bench_floor -- --upstream http://127.0.0.1:P/u0/mcp [--port P]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::io::Write;
use std::sync::Arc;

type Upstream = Client<HttpConnector, Full<Bytes>>;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

async fn forward(client: &Upstream, target: &hyper::Uri, req: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let failed = |status| Response::builder().status(status).body(Full::new(Bytes::new())).unwrap_or_default();
    let (head, body) = req.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return failed(StatusCode::BAD_REQUEST);
    };
    let mut out = Request::post(target.clone());
    for name in [hyper::header::CONTENT_TYPE, hyper::header::ACCEPT] {
        if let Some(v) = head.headers.get(&name) {
            out = out.header(name, v);
        }
    }
    for name in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
        if let Some(v) = head.headers.get(name) {
            out = out.header(name, v);
        }
    }
    let Ok(out) = out.body(Full::new(body)) else {
        return failed(StatusCode::BAD_REQUEST);
    };
    let Ok(answer) = client.request(out).await else {
        return failed(StatusCode::BAD_GATEWAY);
    };
    let (head, body) = answer.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return failed(StatusCode::BAD_GATEWAY);
    };
    let mut reply = Response::builder().status(head.status);
    if let Some(v) = head.headers.get(hyper::header::CONTENT_TYPE) {
        reply = reply.header(hyper::header::CONTENT_TYPE, v);
    }
    reply.body(Full::new(body)).unwrap_or_else(|_| failed(StatusCode::BAD_GATEWAY))
}

fn main() -> std::io::Result<()> {
    let target: hyper::Uri = arg("--upstream")
        .and_then(|u| u.parse().ok())
        .ok_or_else(|| std::io::Error::other("--upstream http://host:port/path is required"))?;
    let port: u16 = arg("--port").and_then(|p| p.parse().ok()).unwrap_or(0);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        println!("LISTENING {}", listener.local_addr()?.port());
        std::io::stdout().flush()?;
        let client: Arc<Upstream> = Arc::new(Client::builder(TokioExecutor::new()).build_http());
        let target = Arc::new(target);
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let (client, target) = (client.clone(), target.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let (client, target) = (client.clone(), target.clone());
                    async move { Ok::<_, Infallible>(forward(&client, &target, req).await) }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    })
}
