//! Listen-stream benchmark: how much a gateway holding many idle `subscriptions/listen` streams
//! costs, and how fast one upstream change reaches all of them. It starts the release `mcpgate`
//! binary (a separate process, so its RSS is the gateway's alone) in front of the built-in demo
//! server's `dynamic` profile over stdio, opens N listen streams over HTTP/1.1, measures the
//! gateway's RSS before and after, then toggles the demo's tool list once and times the
//! `tools/list_changed` notification on every stream.
//!
//!     cargo build --release && cargo run --release --example bench_listen -- [streams, default 10000]
//!
//! The time includes the gateway's debounce (`catalog.debounce`, 100 ms by default), which is
//! there on purpose: a burst of upstream changes becomes one notification per client.

use anyhow::Context;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).context("no VmRSS")?;
    Ok(line.split_whitespace().nth(1).context("VmRSS value")?.parse()?)
}

fn raise_nofile() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

fn request(addr: &str, method: &str, body: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{}Content-Length: {}\r\n\r\n{body}",
        if method == "tools/call" { "Mcp-Name: dyn__toggle_bonus\r\n" } else { "" },
        body.len()
    )
}

/// Opens one listen stream and waits for its acknowledgement.
async fn open(addr: Arc<String>, i: usize) -> anyhow::Result<TcpStream> {
    let mut s = TcpStream::connect(addr.as_str()).await?;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"s{i}","method":"subscriptions/listen","params":{{{META},"notifications":{{"toolsListChanged":true}}}}}}"#
    );
    s.write_all(request(&addr, "subscriptions/listen", &body).as_bytes()).await?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 2048];
    while !seen.windows(12).any(|w| w == b"acknowledged") {
        let n = s.read(&mut buf).await?;
        anyhow::ensure!(n > 0, "stream {i} closed before its acknowledgement: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    Ok(s)
}

/// Waits on an open stream for the list-changed notification.
async fn until_changed(mut s: TcpStream) -> anyhow::Result<Instant> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        let n = s.read(&mut buf).await?;
        anyhow::ensure!(n > 0, "stream closed");
        seen.extend_from_slice(&buf[..n]);
        if seen.windows(12).any(|w| w == b"list_changed") {
            return Ok(Instant::now());
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    raise_nofile();
    let streams: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(10_000);
    let exe = std::env::current_exe()?;
    // `MCPGATE_BENCH_BIN` names another build, to compare two builds in one window.
    let bin = match std::env::var_os("MCPGATE_BENCH_BIN") {
        Some(b) => std::path::PathBuf::from(b),
        None => exe.parent().and_then(|p| p.parent()).map(|p| p.join("mcpgate")).context("locate target dir")?,
    };
    anyhow::ensure!(bin.exists(), "{} is missing: run `cargo build --release` first", bin.display());
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        "[server]\nmax_streams_per_caller = 1000000\n\n[[upstream]]\nid = \"dyn\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"dynamic\"]\n",
    )?;
    let mut gw = Command::new(&bin)
        .args(["run", "-c"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .env("MCPGATE_LOG", "warn,mcpgate=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = gw.stderr.take().context("stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines.next().context("the gateway exited")??;
        if let Some(i) = line.find("listening on http://") {
            break line[i + "listening on http://".len()..].trim().trim_end_matches("/mcp").to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    tokio::time::sleep(Duration::from_millis(800)).await;
    let pid = gw.id();
    let before = rss_kib(pid)?;

    let addr = Arc::new(addr);
    let opened = Instant::now();
    let mut open_streams = Vec::with_capacity(streams);
    for chunk in (0..streams).collect::<Vec<_>>().chunks(100) {
        let batch: Vec<_> = chunk.iter().map(|&i| tokio::spawn(open(addr.clone(), i))).collect();
        for b in batch {
            open_streams.push(b.await??);
        }
    }
    let open_time = opened.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(pid)?;

    let waiting: Vec<_> = open_streams.into_iter().map(|s| tokio::spawn(until_changed(s))).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{{META},"name":"dyn__toggle_bonus","arguments":{{}}}}}}"#);
    let t0 = Instant::now();
    let mut s = TcpStream::connect(addr.as_str()).await?;
    s.write_all(request(&addr, "tools/call", &body).as_bytes()).await?;
    let mut times = Vec::with_capacity(streams);
    for w in waiting {
        times.push(tokio::time::timeout(Duration::from_secs(120), w).await???.duration_since(t0));
    }
    times.sort();
    let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    println!("streams                     {streams}");
    println!("opened in                   {:.2?} ({:.0} streams/s)", open_time, streams as f64 / open_time.as_secs_f64());
    println!("gateway RSS before/after    {} KiB / {} KiB", before, after);
    println!("RSS per idle stream         {:.1} KiB", (after.saturating_sub(before)) as f64 / streams as f64);
    println!("change -> first notified    {:.1?}", times[0]);
    println!("change -> p50 notified      {:.1?}", pct(0.5));
    println!("change -> last notified     {:.1?}", times[times.len() - 1]);
    let _ = gw.kill();
    let _ = gw.wait();
    Ok(())
}
