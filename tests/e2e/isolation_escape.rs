//! What a sandboxed stdio upstream must not do to anything outside its sandbox (Part 34 of the
//! red-team review): stop the gateway or another caller's process with a signal, leave a daemon
//! behind that outlives it (a double-forked, `setsid`, SIGTERM- and SIGHUP-ignoring process), read
//! its sandbox's policy from a command line, and run past `cpu_seconds` without the log saying so.
//! The hostile server is tests/py/hostile_server.py (official Python SDK) over stdio.

use crate::harness::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SIGSTOP: i32 = 19;

fn hostile() -> String {
    format!("[{:?}, {:?}]", python(), repo().join("tests/py/hostile_server.py").display().to_string())
}

/// Two API-key callers, alice and bob, and the hostile server (one process per caller when
/// `per_caller`), sandboxed with `extra` in its table.
fn callers_config(per_caller: bool, extra: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[upstream]]\nid = \"hostile\"\ncommand = {}\ntimeout = \"5s\"\n{}[upstream.sandbox]\n{extra}",
        crate::callers::hash("alice-key"),
        crate::callers::hash("bob-key"),
        hostile(),
        if per_caller { "instances = \"per_caller\"\ninstance_idle = \"1s\"\n" } else { "" },
    )
}

async fn attempt_as(gw: &Gateway, key: &str, tool: &str, args: Value) -> Value {
    let auth = format!("Bearer {key}");
    let reply =
        rpc_with(&gw.url, "tools/call", json!({ "name": format!("hostile__{tool}"), "arguments": args }), &[("Authorization", &auth)])
            .await
            .message();
    let text = text_of(&reply);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{tool}: not JSON ({e}): {reply}\n{}", gw.proc.log()))
}

fn gateway_pid(gw: &Gateway) -> nix::unistd::Pid {
    nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"))
}

fn alive(pid: i32) -> bool {
    // A zombie is gone for this purpose (it runs nothing).
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()).is_some_and(|state| state != "Z"))
}

async fn gone_within(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    !alive(pid)
}

/// The pids cgroups this gateway made (`mcpgate-<gateway pid>-…`), wherever the machine keeps them.
fn cgroups_of(gateway: u32) -> Vec<PathBuf> {
    let prefix = format!("mcpgate-{gateway}-");
    ["/sys/fs/cgroup", "/sys/fs/cgroup/pids"]
        .iter()
        .flat_map(|root| std::fs::read_dir(root).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// The sandbox scopes signals (Landlock ABI 6): the hostile server tries to SIGSTOP its supervisor
/// and the gateway (its ancestors, found through /proc), and alice's own process tries to stop
/// bob's. Every attempt fails and says so; `/healthz` answers and bob's process still serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_server_cannot_stop_the_gateway_or_another_callers_process() {
    let gw = gateway(&callers_config(true, ""));
    let bob = attempt_as(&gw, "bob-key", "whereami", json!({})).await;
    let bob_pid = bob["pid"].as_i64().expect("bob's pid");
    let tried = tokio::time::timeout(
        Duration::from_secs(15),
        attempt_as(&gw, "alice-key", "signal_ancestors", json!({ "sig": SIGSTOP, "depth": 2 })),
    )
    .await;
    // Whatever happened, the gateway runs on for the rest of the tests.
    let _ = nix::sys::signal::kill(gateway_pid(&gw), nix::sys::signal::Signal::SIGCONT);
    let tried = tried.unwrap_or_else(|_| panic!("the call never came back: the gateway was stopped\n{}", gw.proc.log()));
    assert_eq!(tried["ok"], false, "{tried}");
    let attempts = tried["tried"].as_array().cloned().unwrap_or_default();
    assert_eq!(attempts.len(), 2, "the supervisor and the gateway were found: {tried}");
    assert!(attempts.iter().any(|a| a["pid"] == json!(gw.proc.child.id())), "the gateway is an ancestor: {tried}");
    for a in &attempts {
        assert_eq!(a["ok"], false, "every signal is refused: {tried}");
        assert!(a["error"].as_str().unwrap_or("").contains("PermissionError"), "{tried}");
    }
    let health = tokio::time::timeout(Duration::from_secs(3), get(&format!("{}/healthz", gw.base))).await;
    assert!(matches!(health, Ok(Ok(ref r)) if r.status == 200), "/healthz answers");
    let other = attempt_as(&gw, "alice-key", "signal", json!({ "pid": bob_pid, "sig": SIGSTOP })).await;
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(i32::try_from(bob_pid).unwrap_or(0)), nix::sys::signal::Signal::SIGCONT);
    assert_eq!(other["ok"], false, "alice's process cannot stop bob's: {other}");
    assert!(other["error"].as_str().unwrap_or("").contains("PermissionError"), "{other}");
    let still = tokio::time::timeout(Duration::from_secs(10), attempt_as(&gw, "bob-key", "whereami", json!({}))).await;
    assert!(still.is_ok_and(|v| v["pid"] == json!(bob_pid)), "bob's process still serves");
}

/// Starts a daemon from the hostile server as `key`'s caller; returns its pid.
async fn leave_a_daemon(gw: &Gateway, key: &str) -> i32 {
    let home = attempt_as(gw, key, "whereami", json!({})).await;
    let pidfile = Path::new(home["home"].as_str().expect("home")).join("daemon.pid");
    let d = attempt_as(gw, key, "daemon", json!({ "pidfile": pidfile })).await;
    let pid = d["pid"].as_i64().and_then(|p| i32::try_from(p).ok()).unwrap_or_else(|| panic!("no daemon: {d}\n{}", gw.proc.log()));
    assert!(alive(pid), "the daemon runs");
    pid
}

/// Kills a daemon a failed test left behind.
struct Reap(i32);
impl Drop for Reap {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.0), nix::sys::signal::Signal::SIGKILL);
    }
}

/// Whatever a sandboxed server starts ends when the upstream stops: a daemon that double-forks,
/// calls `setsid()` and ignores SIGTERM and SIGHUP is gone after the upstream's removal by a
/// reload, after a caller's idle process stops, and after the gateway's own SIGTERM; the pids
/// cgroups the gateway made are removed too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_sandboxed_server_starts_ends_with_it() {
    // 1. Removed by a reload.
    let gw = gateway(&callers_config(false, ""));
    let pid = leave_a_daemon(&gw, "alice-key").await;
    let _reap = Reap(pid);
    let without = callers_config(false, "").split("[[upstream]]").next().unwrap_or_default().to_string();
    std::fs::write(&gw.config_path, without).expect("rewrite");
    nix::sys::signal::kill(gateway_pid(&gw), nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    assert!(gone_within(pid, Duration::from_secs(20)).await, "the daemon outlived its upstream's removal\n{}", gw.proc.log());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cgroups_of(gw.proc.child.id()).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cgroups_of(gw.proc.child.id()), Vec::<PathBuf>::new(), "the removed upstream's cgroup is gone");
    drop(gw);

    // 2. A caller's idle process.
    let gw = gateway(&callers_config(true, ""));
    let pid = leave_a_daemon(&gw, "alice-key").await;
    let _reap = Reap(pid);
    assert!(gone_within(pid, Duration::from_secs(25)).await, "the daemon outlived the idle stop\n{}", gw.proc.log());
    assert!(gw.proc.log().contains("stopped a caller's idle process"), "{}", gw.proc.log());
    drop(gw);

    // 3. The gateway's own SIGTERM.
    let mut gw = gateway(&callers_config(false, ""));
    let gw_pid = gw.proc.child.id();
    let pid = leave_a_daemon(&gw, "alice-key").await;
    let _reap = Reap(pid);
    nix::sys::signal::kill(gateway_pid(&gw), nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let _ = gw.proc.child.wait();
    assert!(gone_within(pid, Duration::from_secs(15)).await, "the daemon outlived the gateway");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cgroups_of(gw_pid).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cgroups_of(gw_pid), Vec::<PathBuf>::new(), "no cgroup of the gateway is left");
}

/// The sandbox's policy (the folders it may read and write, its ports) is on no command line:
/// neither the server's own, nor its supervisor's, nor any process's on the machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_policy_is_on_no_command_line() {
    let gw = gateway(&callers_config(false, "read = [\"/srv/policy-marker\"]\n"));
    let seen = attempt_as(&gw, "alice-key", "cmdlines", json!({ "depth": 2 })).await;
    let lines: Vec<String> = seen["cmdlines"].as_array().into_iter().flatten().filter_map(|l| l.as_str().map(String::from)).collect();
    assert_eq!(lines.len(), 3, "its own, its supervisor's and the gateway's: {seen}");
    for line in &lines {
        assert!(!line.contains("policy-marker") && !line.contains("--policy "), "a policy on a command line: {line}");
    }
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let text = String::from_utf8_lossy(&cmdline);
        assert!(!text.contains("policy-marker"), "process {:?} shows the policy: {text}", entry.file_name());
    }
}

/// A server stopped by `cpu_seconds` is logged as stopped by its CPU-time limit, not as a bare
/// exit status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_stopped_by_its_cpu_time_limit_is_logged_as_such() {
    let gw = gateway(&callers_config(false, "cpu_seconds = 1\n"));
    let auth = "Bearer alice-key";
    let _ = rpc_with(&gw.url, "tools/call", json!({ "name": "hostile__spin", "arguments": { "seconds": 20 } }), &[("Authorization", auth)])
        .await;
    let deadline = Instant::now() + Duration::from_secs(15);
    let wanted = "stopped: CPU time limit (cpu_seconds = 1) reached";
    while !gw.proc.log().contains(wanted) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(gw.proc.log().contains(wanted), "{}", gw.proc.log());
}
