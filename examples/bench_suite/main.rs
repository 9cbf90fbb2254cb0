//! The benchmark suite (`bench/run`): mcpgate next to the physical floor of a proxy hop, nginx,
//! both in front of the same minimal Rust MCP upstream (`bench_upstream`), under the same load,
//! in the same run. Every figure is also given for the upstream called directly. It prints a
//! table and writes the figures as JSON.
//!
//! 1. `tools/call` throughput at 1, 16 and 64 connections (wrk, keep-alive), ÷ direct and ÷ nginx;
//! 2. latency p50/p99 at a fixed moderate rate (200 requests/s, one connection), and what each
//!    proxy adds to the direct path;
//! 3. CPU µs per proxied call, from /proc (utime + stime of the proxy's processes ÷ calls);
//! 4. `tools/list` latency with 1, 10 and 100 upstreams × 100 tools, and with 10,000 tools behind
//!    a caller policy of globs; the catalogue rebuild time for 10,000 tools (in process);
//! 5. RSS idle, with 10,000 tools, and per idle listen stream (`bench_listen`);
//! 6. startup to ready with 10 upstreams;
//! 7. CPU µs per call with one worker at 16 and 64 connections, alternately (`worker`);
//! 8. user and kernel µs per call, one worker each: nginx, the floor of the gateway's HTTP stack
//!    (`bench_floor`), mcpgate on the pass-through path, by default, and with fifty rules and a
//!    guard (`worker`);
//! 9. allocations per proxied call (heaptrack, `worker`);
//! 10. a quota per call, taken in the state database: none, SQLite, PostgreSQL (`quota`).
//!
//!     bench/run [--seconds S] [--streams N] [--rounds R] [--json PATH] [--only worker|quota]

mod quota;
#[path = "../../benches/support/synthetic.rs"]
mod synthetic;
mod worker;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t0","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
const ADD: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// A child process, killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    /// SIGTERM first, so nginx's master takes its workers down with it (a SIGKILLed master
    /// leaves them running); SIGKILL after 2 s.
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
            let until = Instant::now() + Duration::from_secs(2);
            while Instant::now() < until {
                if matches!(self.0.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// `target/release`, where this example and the binaries it runs live.
fn release_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let examples = exe.parent().ok_or_else(|| anyhow::anyhow!("no parent of {}", exe.display()))?;
    Ok(examples.parent().unwrap_or(examples).to_path_buf())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn upstream(upstreams: usize, tools: usize) -> anyhow::Result<(Proc, u16)> {
    let mut child = Command::new(release_dir()?.join("examples/bench_upstream"))
        .args(["--upstreams", &upstreams.to_string(), "--tools", &tools.to_string()])
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout"))?).read_line(&mut line)?;
    let port = line
        .trim()
        .strip_prefix("LISTENING ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("bench_upstream said {line:?}"))?;
    Ok((Proc(child), port))
}

/// Starts mcpgate on `config` (its listen address is set here) and waits until `/readyz` is 200.
fn gateway(dir: &Path, config: &str, name: &str) -> anyhow::Result<(Proc, u16, Duration)> {
    let port = free_port()?;
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, format!("[server]\nlisten = \"127.0.0.1:{port}\"\n\n{config}"))?;
    let started = Instant::now();
    // Its log goes to a file, as a deployed gateway's would (and to look at after a run).
    let log = std::fs::File::create(dir.join(format!("{name}.log")))?;
    let child = Command::new(release_dir()?.join("mcpgate"))
        .args(["run", "-c"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    let proc = Proc(child);
    wait_ready(port, started, name)?;
    Ok((proc, port, started.elapsed()))
}

/// Waits until the gateway on `port` answers `/readyz` with 200 (at most 60 s from `started`).
fn wait_ready(port: u16, started: Instant, name: &str) -> anyhow::Result<()> {
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
            let mut head = String::new();
            let _ = BufReader::new(s).read_line(&mut head);
            if head.contains(" 200 ") {
                return Ok(());
            }
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(60), "mcpgate ({name}) did not become ready");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn nginx(dir: &Path, upstream_port: u16) -> anyhow::Result<(Proc, u16)> {
    nginx_with(dir, upstream_port, 2)
}

/// [`nginx`] with `workers` worker processes.
fn nginx_with(dir: &Path, upstream_port: u16, workers: usize) -> anyhow::Result<(Proc, u16)> {
    let port = free_port()?;
    let d = dir.join(format!("nginx-{workers}"));
    std::fs::create_dir_all(&d)?;
    let conf = format!(
        "worker_processes {workers};\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\nevents {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
           upstream mcp {{ server 127.0.0.1:{upstream_port}; keepalive 256; }}\n\
           server {{\n    listen 127.0.0.1:{port};\n    location / {{\n      proxy_pass http://mcp;\n      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n    }}\n  }}\n}}\n",
        d = d.display()
    );
    std::fs::write(d.join("nginx.conf"), conf)?;
    let child = Command::new("nginx")
        .arg("-p")
        .arg(&d)
        .arg("-c")
        .arg(d.join("nginx.conf"))
        .args(["-e", &d.join("error.log").display().to_string(), "-g", "daemon off;"])
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start nginx ({e}): bench/run installs it (apt-get install nginx-light)"))?;
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(10), "nginx did not start: see {}", d.join("error.log").display());
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok((Proc(child), port))
}

/// CPU time (utime + stime, in clock ticks of 10 ms) of `pid` and its child processes.
fn cpu_ticks(pid: u32) -> u64 {
    let (user, kernel) = cpu_times(pid);
    user + kernel
}

/// The user and kernel CPU ticks of `pid` and its children (a proxy's workers), from `/proc`.
fn cpu_times(pid: u32) -> (u64, u64) {
    let fields = |p: &str| -> Option<(u32, u64, u64)> {
        let text = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        let rest: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
        Some((rest.get(1)?.parse().ok()?, rest.get(11)?.parse::<u64>().ok()?, rest.get(12)?.parse::<u64>().ok()?))
    };
    let mut total = fields(&pid.to_string()).map_or((0, 0), |f| (f.1, f.2));
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if let Some((ppid, user, kernel)) = name.parse::<u32>().ok().and_then(|_| fields(&name))
                && ppid == pid
            {
                total.0 += user;
                total.1 += kernel;
            }
        }
    }
    total
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

/// One wrk run: requests per second and the number of requests.
fn wrk(dir: &Path, url: &str, conns: usize, secs: u64) -> anyhow::Result<(f64, f64)> {
    let script = dir.join("call.lua");
    let body = CALL.replace('\'', "\\'");
    std::fs::write(
        &script,
        format!(
            "wrk.method = 'POST'\nwrk.body = '{body}'\nwrk.headers['Content-Type'] = 'application/json'\nwrk.headers['Accept'] = 'application/json, text/event-stream'\n\
             wrk.headers['MCP-Protocol-Version'] = '2026-07-28'\nwrk.headers['Mcp-Method'] = 'tools/call'\nwrk.headers['Mcp-Name'] = 't0'\n"
        ),
    )?;
    let threads = if conns == 1 { 1 } else { 2 };
    let out = Command::new("wrk")
        .args(["-t", &threads.to_string(), "-c", &conns.to_string(), "-d", &format!("{secs}s"), "-s"])
        .arg(&script)
        .arg(url)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run wrk ({e}): bench/run installs it (apt-get install wrk)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(!text.contains("Non-2xx") && !text.contains("Socket errors"), "wrk saw failures on {url}:\n{text}");
    let value = |key: &str| text.lines().find_map(|l| l.trim().strip_prefix(key)).and_then(|v| v.trim().parse::<f64>().ok());
    let rps = value("Requests/sec:").ok_or_else(|| anyhow::anyhow!("no Requests/sec in wrk output:\n{text}"))?;
    let total =
        text.lines().find_map(|l| l.trim().split_once(" requests in ")).and_then(|(n, _)| n.trim().parse::<f64>().ok()).unwrap_or(0.0);
    Ok((rps, total))
}

fn post(url: &str, body: &'static str, key: Option<&str>, method: &str) -> anyhow::Result<http::Request<Full<Bytes>>> {
    let mut b = http::Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if method == "tools/call" {
        let parsed: serde_json::Value = serde_json::from_str(body)?;
        b = b.header("mcp-name", parsed["params"]["name"].as_str().unwrap_or("t0"));
    }
    if let Some(k) = key {
        b = b.header("authorization", format!("Bearer {k}"));
    }
    Ok(b.body(Full::new(Bytes::from_static(body.as_bytes())))?)
}

/// Latencies of `n` requests sent one at a time every `every`, on one keep-alive connection.
async fn paced(url: &str, body: &'static str, key: Option<&str>, method: &str, n: usize, every: Duration) -> anyhow::Result<Vec<Duration>> {
    let client = mcpgate_net::http::new_http_client();
    let mut out = Vec::with_capacity(n);
    let mut tick = tokio::time::interval(every);
    for _ in 0..n {
        tick.tick().await;
        let t = Instant::now();
        let resp = client.request(post(url, body, key, method)?).await?;
        anyhow::ensure!(resp.status().is_success(), "{url}: HTTP {}", resp.status());
        let bytes = resp.into_body().collect().await?.to_bytes();
        anyhow::ensure!(
            bytes.windows(9).any(|w| w == br#""result":"#),
            "{url}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
        );
        out.push(t.elapsed());
    }
    out.sort();
    Ok(out)
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

fn upstreams_config(port: u16, n: usize) -> String {
    (0..n).map(|i| format!("[[upstream]]\nid = \"u{i}\"\nurl = \"http://127.0.0.1:{port}/u{i}/mcp\"\n\n")).collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let secs: u64 = arg("--seconds").and_then(|s| s.parse().ok()).unwrap_or(5);
    let streams: usize = arg("--streams").and_then(|s| s.parse().ok()).unwrap_or(2000);
    let json_path = PathBuf::from(arg("--json").unwrap_or_else(|| "bench/last-run.json".into()));
    let dir = tempfile::tempdir()?;
    let mut report = json!({ "seconds_per_run": secs, "cores": std::thread::available_parallelism().map_or(0, |n| n.get()) });

    // 1-3: one upstream with one tool, unprefixed, so the same request works on every path.
    let (up, up_port) = upstream(1, 10)?;
    // `--only worker`: sections 7 to 9 alone, to compare two builds (`MCPGATE_BENCH_BIN`)
    // alternately in one window.
    if arg("--only").as_deref() == Some("quota") {
        report["quota"] = quota::quota(dir.path(), up_port, secs).await?;
        drop(up);
        std::fs::write(&json_path, serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    if arg("--only").as_deref() == Some("worker") {
        let rounds: usize = arg("--rounds").and_then(|s| s.parse().ok()).unwrap_or(3);
        report["one_worker_cpu_us_per_call"] = worker::one_worker(dir.path(), up_port, secs, rounds)?;
        report["one_worker_split"] = worker::split(dir.path(), up_port, secs, rounds)?;
        report["allocations_per_call"] = json!(worker::allocations(dir.path(), up_port)?);
        drop(up);
        std::fs::write(&json_path, serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    let (gw, gw_port, _) =
        gateway(dir.path(), &format!("[[upstream]]\nid = \"u0\"\nprefix = \"\"\nurl = \"http://127.0.0.1:{up_port}/u0/mcp\"\n"), "call")?;
    let (ngx, ngx_port) = nginx(dir.path(), up_port)?;
    let urls = [
        ("direct", format!("http://127.0.0.1:{up_port}/u0/mcp"), None),
        ("nginx", format!("http://127.0.0.1:{ngx_port}/u0/mcp"), Some(ngx.pid())),
        ("mcpgate", format!("http://127.0.0.1:{gw_port}/mcp"), Some(gw.pid())),
    ];
    println!("mcpgate benchmark: {} cores, wrk, keep-alive, {secs} s per run, fast Rust upstream\n", report["cores"]);
    println!("tools/call throughput (req/s)");
    println!("{:>6}  {:>9}  {:>9} {:>7}  {:>9} {:>7} {:>7}", "conns", "direct", "nginx", "÷direct", "mcpgate", "÷direct", "÷nginx");
    let mut cpu = json!({});
    let mut split = json!({});
    let mut rows = Vec::new();
    for conns in [1usize, 16, 64] {
        let mut rps = Vec::new();
        for (name, url, pid) in &urls {
            let before = pid.map(cpu_times);
            let (r, total) = wrk(dir.path(), url, conns, secs)?;
            if let (Some(pid), Some(before)) = (pid, before)
                && conns == 16
            {
                let after = cpu_times(*pid);
                let per_call = |ticks: u64| ticks as f64 * 10_000.0 / total.max(1.0);
                let (user, kernel) = (per_call(after.0 - before.0), per_call(after.1 - before.1));
                cpu[name] = json!(user + kernel);
                split[name] = json!({ "user": user, "kernel": kernel });
            }
            rps.push(r);
        }
        println!(
            "{conns:>6}  {:>9.0}  {:>9.0} {:>7.2}  {:>9.0} {:>7.2} {:>7.2}",
            rps[0],
            rps[1],
            rps[1] / rps[0],
            rps[2],
            rps[2] / rps[0],
            rps[2] / rps[1]
        );
        rows.push(json!({ "connections": conns, "direct": rps[0], "nginx": rps[1], "mcpgate": rps[2] }));
    }
    report["throughput"] = json!(rows);
    report["cpu_us_per_call"] = cpu.clone();
    report["cpu_split_us_per_call"] = split.clone();
    println!(
        "\nCPU per proxied call at 16 connections (µs): nginx {:.1}, mcpgate {:.1}",
        cpu["nginx"].as_f64().unwrap_or(0.0),
        cpu["mcpgate"].as_f64().unwrap_or(0.0)
    );
    // Where it goes: the proxy's own work (user) and the kernel's (sockets, wake-ups), side by side.
    let part = |name: &str, key: &str| split[name][key].as_f64().unwrap_or(0.0);
    println!(
        "  user: nginx {:.1}, mcpgate {:.1} (x{:.2})   kernel: nginx {:.1}, mcpgate {:.1} (x{:.2})",
        part("nginx", "user"),
        part("mcpgate", "user"),
        part("mcpgate", "user") / part("nginx", "user").max(f64::MIN_POSITIVE),
        part("nginx", "kernel"),
        part("mcpgate", "kernel"),
        part("mcpgate", "kernel") / part("nginx", "kernel").max(f64::MIN_POSITIVE)
    );

    let mut lat = json!({});
    let mut p50 = Vec::new();
    for (name, url, _) in &urls {
        let l = paced(url, CALL, None, "tools/call", 1000, Duration::from_millis(5)).await?;
        p50.push((pct(&l, 0.5), pct(&l, 0.99)));
        lat[name] = json!({ "p50_us": pct(&l, 0.5), "p99_us": pct(&l, 0.99) });
    }
    report["latency_200rps"] = lat;
    println!("\nlatency at 200 req/s, one connection (µs)   p50      p99   added p50");
    for (i, (name, _, _)) in urls.iter().enumerate() {
        println!("  {name:<40} {:>7.0}  {:>7.0}  {:>7.0}", p50[i].0, p50[i].1, p50[i].0 - p50[0].0);
    }
    drop((gw, ngx));
    let rounds: usize = arg("--rounds").and_then(|s| s.parse().ok()).unwrap_or(3);
    report["one_worker_cpu_us_per_call"] = worker::one_worker(dir.path(), up_port, secs, rounds)?;
    report["one_worker_split"] = worker::split(dir.path(), up_port, secs, rounds)?;
    report["allocations_per_call"] = json!(worker::allocations(dir.path(), up_port)?);
    report["quota"] = quota::quota(dir.path(), up_port, secs).await?;
    drop(up);
    report["stdio_sandbox"] = stdio_sandbox(dir.path()).await?;

    // 4-6: catalogue scale, memory, startup.
    let mut lists = json!({});
    println!("\ntools/list through mcpgate (p50 of 30, ms)");
    let mut idle_rss = 0;
    for n in [1usize, 10, 100] {
        let (up, port) = upstream(n, 100)?;
        let (gw, gw_port, _) = gateway(dir.path(), &format!("[catalog]\npage_size = 20000\n\n{}", upstreams_config(port, n)), "list")?;
        let l = paced(&format!("http://127.0.0.1:{gw_port}/mcp"), LIST, None, "tools/list", 30, Duration::from_millis(20)).await?;
        let label = format!("{n:>3} {} x 100 tools", if n == 1 { "upstream" } else { "upstreams" });
        println!("  {label:<38}{:>8.2}", pct(&l, 0.5) / 1000.0);
        lists[format!("{n}x100")] = json!(pct(&l, 0.5) / 1000.0);
        if n == 100 {
            report["rss_kib_10000_tools"] = json!(rss_kib(gw.pid()));
        }
        if n == 1 {
            idle_rss = rss_kib(gw.pid());
        }
        drop((gw, up));
    }
    let (up, port) = upstream(100, 100)?;
    let globs: Vec<String> = (0..100).map(|i| format!("\"u{i}__t{}*\"", i % 10)).collect();
    let key_hash = mcpgate::auth::hash_key("bench-key");
    let policy = format!(
        "[auth]\nmode = \"api_key\"\n\n[[caller]]\nid = \"bench\"\nkey_sha256 = \"{key_hash}\"\nallow = [{}]\ndeny = [\"*__t99\"]\n\n[catalog]\npage_size = 20000\n\n{}",
        globs.join(", "),
        upstreams_config(port, 100)
    );
    let (gw, gw_port, _) = gateway(dir.path(), &policy, "policy")?;
    let l = paced(&format!("http://127.0.0.1:{gw_port}/mcp"), LIST, Some("bench-key"), "tools/list", 30, Duration::from_millis(20)).await?;
    println!("  10,000 tools, caller policy of 101 globs  {:>8.2}", pct(&l, 0.5) / 1000.0);
    lists["10000_with_policy"] = json!(pct(&l, 0.5) / 1000.0);
    drop((gw, up));
    let rebuild = rebuild_ms()?;
    println!("  catalogue rebuild, 100 x 100 tools (in process) {rebuild:.2}");
    lists["rebuild_ms_10000"] = json!(rebuild);
    report["tools_list_ms"] = lists;

    let (up, port) = upstream(10, 100)?;
    let (gw, _, ready) = gateway(dir.path(), &upstreams_config(port, 10), "startup")?;
    drop((gw, up));
    report["startup_ms_10_upstreams"] = json!(ready.as_secs_f64() * 1000.0);
    report["rss_kib_idle"] = json!(idle_rss);
    let (per_stream, last_notified_ms) = listen_streams(streams)?;
    report["rss_kib_per_listen_stream"] = json!(per_stream);
    report["listen_last_notified_ms"] = json!(last_notified_ms);
    println!("\nmemory and startup");
    println!("  RSS idle (1 upstream x 100 tools)          {:>8.1} MiB", idle_rss as f64 / 1024.0);
    println!("  RSS with 10,000 tools                      {:>8.1} MiB", report["rss_kib_10000_tools"].as_f64().unwrap_or(0.0) / 1024.0);
    println!("  RSS per idle listen stream ({streams} streams)   {per_stream:>8.1} KiB");
    println!("  change -> last of {streams} streams notified      {last_notified_ms:>8.1} ms");
    println!("  startup to ready, 10 upstreams             {:>8.1} ms", ready.as_secs_f64() * 1000.0);

    if let Some(parent) = json_path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&json_path, serde_json::to_string_pretty(&report)?)?;
    println!("\nfigures written to {}", json_path.display());
    Ok(())
}

/// A stdio upstream (the demo calculator, this same binary) unsandboxed and in the default
/// sandbox, alternately, three rounds: startup to ready, and p50/p99 of calls at 200 req/s.
async fn stdio_sandbox(dir: &Path) -> anyhow::Result<serde_json::Value> {
    let plain = "[[upstream]]\nid = \"calc\"\nprefix = \"\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n";
    let boxed = format!("{plain}[upstream.sandbox]\n");
    let mut figures: Vec<(f64, f64, f64)> = vec![(0.0, 0.0, 0.0); 2];
    for _round in 0..3 {
        for (i, config) in [plain.to_string(), boxed.clone()].iter().enumerate() {
            let (gw, port, ready) = gateway(dir, config, if i == 0 { "stdio" } else { "stdio-sandboxed" })?;
            let l = paced(&format!("http://127.0.0.1:{port}/mcp"), ADD, None, "tools/call", 400, Duration::from_millis(5)).await?;
            figures[i].0 += ready.as_secs_f64() * 1000.0 / 3.0;
            figures[i].1 += pct(&l, 0.5) / 3.0;
            figures[i].2 += pct(&l, 0.99) / 3.0;
            drop(gw);
        }
    }
    println!("\nstdio upstream, unsandboxed vs sandboxed (mean of 3 alternating rounds)");
    println!("  {:<14} {:>12} {:>10} {:>10}", "", "ready (ms)", "p50 (µs)", "p99 (µs)");
    for (name, f) in ["unsandboxed", "sandboxed"].iter().zip(&figures) {
        println!("  {name:<14} {:>12.1} {:>10.0} {:>10.0}", f.0, f.1, f.2);
    }
    Ok(json!({
        "unsandboxed": { "ready_ms": figures[0].0, "p50_us": figures[0].1, "p99_us": figures[0].2 },
        "sandboxed": { "ready_ms": figures[1].0, "p50_us": figures[1].1, "p99_us": figures[1].2 },
    }))
}

/// The catalogue rebuild for 100 upstreams × 100 tools, as the gateway does it after one
/// upstream's list changes (the merge of every upstream's lists), averaged over 20 runs.
fn rebuild_ms() -> anyhow::Result<f64> {
    let synthetic = synthetic::Synthetic::new(100, 100)?;
    let started = Instant::now();
    for _ in 0..20 {
        let cat = synthetic.build();
        anyhow::ensure!(cat.tools().len() == 10_000, "built {} tools", cat.tools().len());
    }
    Ok(started.elapsed().as_secs_f64() * 1000.0 / 20.0)
}

/// RSS per idle listen stream, and how long after a change the last stream heard of it, from
/// `bench_listen` (the release build, as its own process).
fn listen_streams(streams: usize) -> anyhow::Result<(f64, f64)> {
    let out = Command::new(release_dir()?.join("examples/bench_listen")).arg(streams.to_string()).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(out.status.success(), "bench_listen failed:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    let per_stream = field("RSS per idle stream")
        .and_then(|v| v.trim_end_matches("KiB").trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no RSS per idle stream in:\n{text}"))?;
    // A Debug-printed duration: "930.0ms", "1.2s", "850.0µs".
    let last = field("change -> last notified")
        .and_then(|v| {
            let (n, unit) = v.split_at(v.find(|c: char| c.is_alphabetic() || c == 'µ')?);
            let n: f64 = n.parse().ok()?;
            Some(match unit {
                "s" => n * 1000.0,
                "ms" => n,
                "µs" => n / 1000.0,
                "ns" => n / 1e6,
                _ => return None,
            })
        })
        .ok_or_else(|| anyhow::anyhow!("no change -> last notified in:\n{text}"))?;
    Ok((per_stream, last))
}
