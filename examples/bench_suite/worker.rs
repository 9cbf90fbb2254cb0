//! What one worker costs per call (`bench/run`, sections 7 and 8): the gateway with a single
//! worker (`MCPGATE_WORKER_THREADS=1`) under 16 and 64 connections, alternately, several rounds, so
//! the two loads meet the same machine; and allocations per proxied call, counted by heaptrack as
//! the difference between a run under load and an idle run of the same length (startup and the
//! gateway's own timers cancel out).

use super::{Proc, cpu_ticks, free_port, release_dir, wait_ready, wrk};
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
