//! What one worker costs per call (`bench/run`, sections 7 to 9): the gateway with a single
//! worker (`MCPGATE_WORKER_THREADS=1`) under 16 and 64 connections, alternately, several rounds, so
//! the two loads meet the same machine; user and kernel time per call side by side for nginx (one
//! worker), the floor of the gateway's own HTTP stack (`examples/bench_floor`: hyper in and out,
//! nothing read) and the gateway on three policies; and allocations per proxied call, counted by
//! heaptrack as the difference between a run under load and an idle run of the same length
//! (startup and the gateway's own timers cancel out).

use super::{Proc, cpu_ticks, cpu_times, free_port, nginx_with, release_dir, wait_ready, wrk};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// mcpgate with one worker on `config`, started through `wrapper` (e.g. heaptrack) when given;
/// ready when this returns. The process, its port and the gateway's own pid.
fn one_worker_gateway(dir: &Path, config: &str, name: &str, wrapper: Option<&[&str]>) -> anyhow::Result<(Proc, u16, u32)> {
    let port = free_port()?;
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, format!("[server]\nlisten = \"127.0.0.1:{port}\"\n\n{config}"))?;
    // `MCPGATE_BENCH_BIN` names another build, to compare two builds in one window.
    let bin = match std::env::var_os("MCPGATE_BENCH_BIN") {
        Some(b) => std::path::PathBuf::from(b),
        None => release_dir()?.join("mcpgate"),
    };
    let mut cmd = match wrapper {
        Some(w) => {
            let mut c = Command::new(w[0]);
            c.args(&w[1..]).arg(&bin);
            c
        }
        None => Command::new(&bin),
    };
    let log = std::fs::File::create(dir.join(format!("{name}.log")))?;
    let child = cmd
        .args(["run", "-c"])
        .arg(&path)
        .env("MCPGATE_WORKER_THREADS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    let proc = Proc(child);
    wait_ready(port, Instant::now(), name)?;
    let pid = if wrapper.is_some() { child_named(proc.pid(), "mcpgate").unwrap_or(proc.pid()) } else { proc.pid() };
    Ok((proc, port, pid))
}

/// The pid of `parent`'s child whose command is `name`.
fn child_named(parent: u32, name: &str) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let pid = entry.file_name().to_string_lossy().to_string();
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some((head, rest)) = stat.rsplit_once(')') else { continue };
        let comm = head.split_once('(').map(|(_, c)| c).unwrap_or("");
        let ppid: Option<u32> = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok());
        if ppid == Some(parent) && comm == name {
            return pid.parse().ok();
        }
    }
    None
}

/// CPU µs per call with one worker, 16 and 64 connections alternately for `rounds` rounds.
pub fn one_worker(dir: &Path, upstream_port: u16, secs: u64, rounds: usize) -> anyhow::Result<serde_json::Value> {
    let config = format!("[[upstream]]\nid = \"u0\"\nprefix = \"\"\nurl = \"http://127.0.0.1:{upstream_port}/u0/mcp\"\n");
    let (gw, port, pid) = one_worker_gateway(dir, &config, "one-worker", None)?;
    let url = format!("http://127.0.0.1:{port}/mcp");
    // A short warm-up, so the first measured round does not pay for opening the upstream pool.
    wrk(dir, &url, 16, 1)?;
    let mut by_conns: Vec<(usize, Vec<f64>)> = vec![(16, Vec::new()), (64, Vec::new())];
    for _ in 0..rounds {
        for (conns, runs) in by_conns.iter_mut() {
            let before = cpu_ticks(pid);
            let (_, total) = wrk(dir, &url, *conns, secs)?;
            runs.push((cpu_ticks(pid) - before) as f64 * 10_000.0 / total.max(1.0));
        }
    }
    drop(gw);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (m16, m64) = (mean(&by_conns[0].1), mean(&by_conns[1].1));
    println!("\none worker, CPU per call (µs), {rounds} alternating rounds of {secs} s");
    for (conns, runs) in &by_conns {
        let list: Vec<String> = runs.iter().map(|r| format!("{r:.1}")).collect();
        println!("  {conns:>2} connections  {}   mean {:.1}", list.join("  "), mean(runs));
    }
    println!("  64 ÷ 16                              {:.2}", m64 / m16.max(f64::MIN_POSITIVE));
    Ok(json!({ "16": by_conns[0].1, "64": by_conns[1].1, "mean_16": m16, "mean_64": m64, "ratio_64_16": m64 / m16.max(f64::MIN_POSITIVE) }))
}

/// A policy of fifty rules (forty on other tools, nine that read every call's arguments, one
/// allowing the rest) and one built-in guard on requests and results: what a governed
/// deployment decides on every call.
fn fifty_rules_and_a_guard() -> String {
    let mut out = String::new();
    for i in 0..40 {
        out.push_str(&format!("[[rule]]\nname = \"other-{i}\"\neffect = \"deny\"\ntools = [\"x{i}_*\"]\n\n"));
    }
    for i in 0..9 {
        out.push_str(&format!("[[rule]]\nname = \"args-{i}\"\neffect = \"deny\"\ntools = [\"t*\"]\nwhen = 'has(args.secret{i})'\n\n"));
    }
    out.push_str("[[rule]]\nname = \"rest\"\neffect = \"allow\"\ntools = [\"*\"]\n\n");
    out.push_str("[[guard]]\nname = \"keys\"\npoints = [\"request\", \"result\"]\nbuiltin = \"secrets\"\naction = \"block\"\n");
    out
}

/// The floor of the gateway's own HTTP stack in front of the upstream (`examples/bench_floor`).
fn floor(upstream_port: u16) -> anyhow::Result<(Proc, u16)> {
    let port = free_port()?;
    let child = Command::new(release_dir()?.join("examples/bench_floor"))
        .args(["--upstream", &format!("http://127.0.0.1:{upstream_port}/u0/mcp"), "--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(10), "bench_floor did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok((Proc(child), port))
}

/// User and kernel µs per call at 16 connections, one worker each, alternately for `rounds`
/// rounds: nginx, the floor, and mcpgate with nothing that reads a call (argument validation off:
/// the pass-through path), by default (validation on) and with fifty rules and a guard; each as
/// a ratio of its total to nginx's.
pub fn split(dir: &Path, upstream_port: u16, secs: u64, rounds: usize) -> anyhow::Result<serde_json::Value> {
    let upstream = format!("[[upstream]]\nid = \"u0\"\nprefix = \"\"\nurl = \"http://127.0.0.1:{upstream_port}/u0/mcp\"\n");
    let (ngx, ngx_port) = nginx_with(dir, upstream_port, 1)?;
    let (flr, flr_port) = floor(upstream_port)?;
    let (pass, pass_port, pass_pid) = one_worker_gateway(dir, &format!("{upstream}validate_arguments = false\n"), "pass-through", None)?;
    let (dflt, dflt_port, dflt_pid) = one_worker_gateway(dir, &upstream, "default", None)?;
    let (gov, gov_port, gov_pid) = one_worker_gateway(dir, &format!("{upstream}\n{}", fifty_rules_and_a_guard()), "fifty-rules", None)?;
    let runs = [
        ("nginx", format!("http://127.0.0.1:{ngx_port}/u0/mcp"), ngx.pid()),
        ("floor", format!("http://127.0.0.1:{flr_port}/u0/mcp"), flr.pid()),
        ("pass_through", format!("http://127.0.0.1:{pass_port}/mcp"), pass_pid),
        ("default", format!("http://127.0.0.1:{dflt_port}/mcp"), dflt_pid),
        ("fifty_rules_and_a_guard", format!("http://127.0.0.1:{gov_port}/mcp"), gov_pid),
    ];
    let mut sums = vec![(0.0f64, 0.0f64, 0.0f64); runs.len()];
    for (_, url, _) in &runs {
        wrk(dir, url, 16, 1)?;
    }
    for _ in 0..rounds {
        for (i, (_, url, pid)) in runs.iter().enumerate() {
            let before = cpu_times(*pid);
            let (rps, total) = wrk(dir, url, 16, secs)?;
            let after = cpu_times(*pid);
            let per_call = |ticks: u64| ticks as f64 * 10_000.0 / total.max(1.0);
            sums[i].0 += per_call(after.0 - before.0);
            sums[i].1 += per_call(after.1 - before.1);
            sums[i].2 += rps;
        }
    }
    drop((ngx, flr, pass, dflt, gov));
    let n = rounds.max(1) as f64;
    let nginx_total = (sums[0].0 + sums[0].1) / n;
    println!(
        "
one worker each, 16 connections, {rounds} alternating rounds of {secs} s: µs per call"
    );
    println!("  {:<26} {:>6} {:>7} {:>6} {:>8} {:>8}", "", "user", "kernel", "total", "÷nginx", "req/s");
    let mut out = json!({});
    for (i, (name, _, _)) in runs.iter().enumerate() {
        let (user, kernel, rps) = (sums[i].0 / n, sums[i].1 / n, sums[i].2 / n);
        let ratio = (user + kernel) / nginx_total.max(f64::MIN_POSITIVE);
        println!("  {name:<26} {user:>6.1} {kernel:>7.1} {:>6.1} {ratio:>8.2} {rps:>8.0}", user + kernel);
        out[*name] = json!({ "user": user, "kernel": kernel, "ratio_to_nginx": ratio, "rps": rps });
    }
    Ok(out)
}

/// Allocations per proxied call (heaptrack): `None` when heaptrack is not installed.
pub fn allocations(dir: &Path, upstream_port: u16) -> anyhow::Result<Option<f64>> {
    if Command::new("heaptrack").arg("--version").output().is_err() {
        println!("\nallocations per proxied call: heaptrack is not installed (apt-get install heaptrack)");
        return Ok(None);
    }
    let config = format!("[[upstream]]\nid = \"u0\"\nprefix = \"\"\nurl = \"http://127.0.0.1:{upstream_port}/u0/mcp\"\n");
    let mut points = Vec::new();
    let secs = 4;
    for i in 0..2 {
        let out = dir.join(format!("alloc-{i}"));
        let out_arg = out.display().to_string();
        let (mut gw, port, pid) = one_worker_gateway(dir, &config, &format!("heaptrack-{i}"), Some(&["heaptrack", "-o", &out_arg]))?;
        let calls = if i == 0 {
            std::thread::sleep(Duration::from_secs(secs));
            0.0
        } else {
            wrk(dir, &format!("http://127.0.0.1:{port}/mcp"), 4, secs)?.1
        };
        // SIGTERM to the gateway itself: heaptrack writes its data when the program exits.
        Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
        gw.0.wait()?;
        let data = std::fs::read_dir(dir)?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with(&format!("alloc-{i}.")) && (n.ends_with(".zst") || n.ends_with(".gz"))
                })
            })
            .ok_or_else(|| anyhow::anyhow!("heaptrack wrote no data for run {i}"))?;
        let printed = Command::new("heaptrack_print").arg(&data).output()?;
        let text = String::from_utf8_lossy(&printed.stdout);
        let count = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("calls to allocation functions:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .ok_or_else(|| anyhow::anyhow!("no allocation count in heaptrack_print's output"))?;
        points.push((calls, count));
    }
    let per_call = (points[1].1 - points[0].1) / (points[1].0 - points[0].0).max(1.0);
    println!(
        "\nallocations per proxied call (heaptrack, one worker, 4 connections): {per_call:.1} ({} idle, {} with {} calls)",
        points[0].1, points[1].1, points[1].0
    );
    Ok(Some(per_call))
}
