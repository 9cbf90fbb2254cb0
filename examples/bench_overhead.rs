//! Gateway overhead benchmark: the built-in demo server is called directly and through an
//! in-process mcpgate with the same client, same concurrency and same request mix, in the same
//! process, so the ratio (not the absolute numbers) is what to read on a shared machine.
//!
//!     cargo run --release --example bench_overhead -- [requests per run, default 4000] [concurrency, default 16]
//!
//! Prints throughput and latency percentiles for both paths and their ratios.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mcpgate::demo::{Demo, Profile};
use mcpgate::dispatch::Service;
use mcpgate::edge::era::legacy::LegacyState;
use mcpgate::gateway::Gateway;
use mcpgate_config::Config;
use mcpgate_model::token::Sealer;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"NAME","arguments":{"a":2,"b":40},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

async fn serve(svc: Arc<dyn Service>, config: &str) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let mut server = Config::parse(config, Path::new("bench.toml"), None, &|_| None)?.server;
    server.listen = listener.local_addr()?;
    let url = format!("http://{}/mcp", server.listen);
    let legacy = Arc::new(LegacyState::new(Arc::new(Sealer::random()?), server.session_ttl));
    let mount = mcpgate::edge::shared::Mount { svc, console: None, legacy, auth: None };
    tokio::spawn(mcpgate::edge::listen::serve(listener, mount, server, std::future::pending()));
    Ok(url)
}

async fn run(url: &str, tool: &str, total: usize, concurrency: usize) -> anyhow::Result<(f64, Vec<Duration>)> {
    let client = mcpgate_net::http::new_http_client();
    let body = Bytes::from(BODY.replace("NAME", tool));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let (client, body, url, tool) = (client.clone(), body.clone(), url.to_string(), tool.to_string());
        let n = total / concurrency + usize::from(worker < total % concurrency);
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(n);
            for _ in 0..n {
                let req = http::Request::post(&url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-method", "tools/call")
                    .header("mcp-name", tool.as_str())
                    .body(Full::new(body.clone()))?;
                let t = Instant::now();
                let resp = client.request(req).await?;
                let ok = resp.status().is_success();
                let bytes = resp.into_body().collect().await?.to_bytes();
                anyhow::ensure!(
                    ok && bytes.windows(11).any(|w| w == br#""text":"42""#),
                    "unexpected reply: {}",
                    String::from_utf8_lossy(&bytes)
                );
                lat.push(t.elapsed());
            }
            Ok::<_, anyhow::Error>(lat)
        }));
    }
    let mut all = Vec::with_capacity(total);
    for t in tasks {
        all.extend(t.await??);
    }
    let secs = started.elapsed().as_secs_f64();
    all.sort();
    Ok((all.len() as f64 / secs, all))
}

fn pct(v: &[Duration], p: f64) -> f64 {
    v[((v.len() as f64 - 1.0) * p) as usize].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (total, concurrency) = (args.first().copied().unwrap_or(4000), args.get(1).copied().unwrap_or(16));
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let direct = serve(Arc::new(Demo::new(Profile::Calc)), "").await?;
    let cfg = Config::parse(&format!("[[upstream]]\nid = \"calc\"\nurl = \"{direct}\"\n"), Path::new("bench.toml"), None, &|_| None)?;
    let gw = Gateway::new(cfg)?;
    gw.refresh_all().await;
    let via = serve(gw, "").await?;
    // Warm up both paths, then alternate runs so that machine noise hits both alike.
    run(&direct, "add", 500, concurrency).await?;
    run(&via, "calc__add", 500, concurrency).await?;
    let (mut d_rps, mut g_rps, mut d_lat, mut g_lat) = (0.0, 0.0, Vec::new(), Vec::new());
    for _ in 0..3 {
        let (r, l) = run(&direct, "add", total, concurrency).await?;
        d_rps += r / 3.0;
        d_lat.extend(l);
        let (r, l) = run(&via, "calc__add", total, concurrency).await?;
        g_rps += r / 3.0;
        g_lat.extend(l);
    }
    d_lat.sort();
    g_lat.sort();
    println!("tools/call, {total} requests x 3 runs, concurrency {concurrency}, HTTP/1.1 keep-alive, loopback");
    println!("{:<10} {:>10} {:>9} {:>9} {:>9}", "path", "req/s", "p50 ms", "p90 ms", "p99 ms");
    for (name, rps, lat) in [("direct", d_rps, &d_lat), ("gateway", g_rps, &g_lat)] {
        println!("{name:<10} {rps:>10.0} {:>9.3} {:>9.3} {:>9.3}", pct(lat, 0.5), pct(lat, 0.9), pct(lat, 0.99));
    }
    println!(
        "ratio gateway/direct: throughput {:.2}, p50 {:.2}, p99 {:.2}",
        g_rps / d_rps,
        pct(&g_lat, 0.5) / pct(&d_lat, 0.5),
        pct(&g_lat, 0.99) / pct(&d_lat, 0.99)
    );
    Ok(())
}
