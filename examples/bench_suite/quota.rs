//! Section 9 of the benchmark suite: what a quota costs per call now that its use is taken in
//! the state database before the call is forwarded (docs/performance.md, "A quota per call").
//! The same gateway and upstream with no quota, with a quota on the embedded SQLite file, and
//! with a quota on PostgreSQL (a server of its own on a loopback port, when the Debian package
//! is installed), alternately, three rounds: throughput at 16 connections and latency at 200
//! requests/s on one connection.

use super::{CALL, Proc, free_port, gateway, paced, pct, wrk};
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const QUOTA: &str = "[[quota]]\ntools = \"*\"\nlimit = \"1000000000/day\"\n";

/// A PostgreSQL server in `dir` on a loopback port (as the `postgres` user when run as root), and
/// its URL; `None` when PostgreSQL is not installed.
fn postgres(dir: &Path) -> anyhow::Result<Option<(Proc, String)>> {
    let bin = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .and_then(|d| d.filter_map(|e| e.ok().map(|e| e.path().join("bin"))).filter(|p| p.join("initdb").exists()).max());
    let Some(bin) = bin else { return Ok(None) };
    let data = dir.join("pg");
    let user = root_as_postgres();
    std::fs::create_dir_all(&data)?;
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(&data, Some(uid), Some(gid))?;
    }
    let mut initdb = Command::new(bin.join("initdb"));
    initdb.arg("-D").arg(&data).args(["-U", "bench", "--auth=trust"]).stdout(Stdio::null()).stderr(Stdio::null());
    if let Some((uid, gid)) = user {
        initdb.uid(uid).gid(gid);
    }
    anyhow::ensure!(initdb.status()?.success(), "initdb failed");
    let port = free_port()?;
    let mut pg = Command::new(bin.join("postgres"));
    pg.arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1", "-c"])
        .arg(format!("unix_socket_directories={}", data.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some((uid, gid)) = user {
        pg.uid(uid).gid(gid);
    }
    let proc = Proc(pg.spawn()?);
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "postgres did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    Ok(Some((proc, format!("postgres://bench@127.0.0.1:{port}/postgres"))))
}

/// PostgreSQL refuses to run as root: the `postgres` user the package makes, when root.
fn root_as_postgres() -> Option<(u32, u32)> {
    let id = |args: &[&str]| -> Option<u32> {
        let out = Command::new("id").args(args).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    (id(&["-u"]) == Some(0)).then(|| Some((id(&["-u", "postgres"])?, id(&["-g", "postgres"])?))).flatten()
}

pub async fn quota(dir: &Path, up_port: u16, secs: u64) -> anyhow::Result<serde_json::Value> {
    let upstream = format!("[[upstream]]\nid = \"u0\"\nprefix = \"\"\nurl = \"http://127.0.0.1:{up_port}/u0/mcp\"\n");
    let sqlite: PathBuf = dir.join("quota-state.db");
    let pg = postgres(dir)?;
    let mut cases = vec![
        ("no quota", format!("[state]\npath = {:?}\n\n{upstream}", dir.join("plain-state.db"))),
        ("quota, SQLite", format!("[state]\npath = {sqlite:?}\n\n{QUOTA}\n{upstream}")),
    ];
    if let Some((_, url)) = &pg {
        cases.push(("quota, PostgreSQL", format!("[state]\npostgres = {url:?}\n\n{QUOTA}\n{upstream}")));
    }
    let mut figures = vec![(0.0, 0.0, 0.0); cases.len()];
    let rounds = 3.0;
    for _ in 0..3 {
        for (i, (name, config)) in cases.iter().enumerate() {
            let (gw, port, _) = gateway(dir, config, &name.replace([' ', ','], ""))?;
            let url = format!("http://127.0.0.1:{port}/mcp");
            let (rps, _) = wrk(dir, &url, 16, secs)?;
            let l = paced(&url, CALL, None, "tools/call", 400, Duration::from_millis(5)).await?;
            figures[i].0 += rps / rounds;
            figures[i].1 += pct(&l, 0.5) / rounds;
            figures[i].2 += pct(&l, 0.99) / rounds;
            drop(gw);
        }
    }
    let had_pg = pg.is_some();
    drop(pg);
    println!("\na quota per call, taken in the state database (mean of 3 alternating rounds)");
    println!("  {:<18} {:>12} {:>10} {:>10} {:>14}", "", "req/s (16)", "p50 (µs)", "p99 (µs)", "added p50 (µs)");
    let mut out = json!({});
    for ((name, _), f) in cases.iter().zip(&figures) {
        println!("  {name:<18} {:>12.0} {:>10.0} {:>10.0} {:>14.0}", f.0, f.1, f.2, f.1 - figures[0].1);
        out[*name] = json!({ "rps_16": f.0, "p50_us": f.1, "p99_us": f.2 });
    }
    if !had_pg {
        println!("  (PostgreSQL is not installed: apt-get install postgresql for its row)");
    }
    Ok(out)
}
