//! stdio upstream supervision (Part 8): a child that writes garbage keeps answering, it sees no
//! gateway secret, a crash loop backs off, and neither the child nor its own children outlive a
//! gateway that is killed.

use crate::harness::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn py_stdio(label: &str, extra: &str) -> String {
    format!("[[upstream]]\nid = \"{label}\"\ncommand = {}\n{extra}", py_stdio_command(label))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_that_writes_garbage_keeps_answering() {
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n{}", py_stdio("beta", "max_message_bytes = 1048576\n")));
    for _ in 0..2 {
        let r = call(&gw.url, "beta__noise", json!({ "size": 2 * 1024 * 1024 })).await;
        assert_eq!(text_of(&r), "ok", "{r}");
        assert_eq!(text_of(&call(&gw.url, "beta__whoami", json!({})).await), "beta");
    }
    let log = gw.proc.log();
    assert!(log.contains("skipping a stdout line over the size limit"), "{log}");
    assert!(log.contains("binary stderr"), "stderr is still logged after bytes that are not UTF-8: {log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_sees_no_gateway_secret() {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n{}env = {{ OWN_SETTING = \"1\" }}\n\n[[upstream]]\nid = \"web\"\nurl = \"http://127.0.0.1:9/mcp\"\n[upstream.headers]\nAuthorization = {{ env = \"WEB_TOKEN\" }}\n",
        py_stdio("beta", "")
    );
    let gw = gateway_with_env(&config, &[("MCPGATE_TOKEN_KEY", &"ab".repeat(32)), ("WEB_TOKEN", "secret"), ("UNRELATED_SECRET", "x")]);
    let r = call(&gw.url, "beta__env", json!({})).await;
    let names: Vec<String> = serde_json::from_str(&text_of(&r)).expect("names");
    for secret in ["MCPGATE_TOKEN_KEY", "WEB_TOKEN", "UNRELATED_SECRET", "MCPGATE_LOG"] {
        assert!(!names.contains(&secret.to_string()), "{secret} reached the child: {names:?}");
    }
    assert!(names.contains(&"OWN_SETTING".to_string()) && names.contains(&"PATH".to_string()), "{names:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_loop_backs_off() {
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n{}", py_stdio("beta", "timeout = \"5s\"\n")));
    let started = |log: &str| log.lines().filter(|l| l.contains("started stdio upstream") && l.contains("upstream=beta")).count();
    let before = started(&gw.proc.log());
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut refused = 0;
    while Instant::now() < deadline {
        let r: Value = call(&gw.url, "beta__crash", json!({})).await;
        if r["error"]["message"].as_str().is_some_and(|m| m.contains("next start in")) {
            refused += 1;
        }
    }
    let spawns = started(&gw.proc.log()) - before;
    assert!(refused > 0, "calls during the backoff are refused clearly");
    assert!(spawns <= 6, "{spawns} restarts in 4 s: the crash loop is not backed off\n{}", gw.proc.log());
}

/// The live processes (not zombies) in process group `pgrp`.
fn group_members(pgrp: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid pgrp ...: split after the command name, which may hold spaces.
        let Some(rest) = stat.rsplit_once(") ").map(|(_, r)| r.to_string()) else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgrp && fields[0] != "Z" {
            out.push(stat.split_whitespace().take(2).collect::<Vec<_>>().join(" "));
        }
    }
    out
}

#[test]
fn children_and_their_children_die_with_a_killed_gateway() {
    // The server is the child; `sleep`, started by the shell before it, is a grandchild that
    // ignores its stdin and would live on unless the whole group is taken down.
    let script = repo().join("tests/py/upstream_server.py");
    let command = format!("[\"sh\", \"-c\", \"sleep 1000 & exec {} {} --transport stdio --label beta\"]", python(), script.display());
    let mut gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"beta\"\ncommand = {command}\n"));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let pid: u32 = text_of(&rt.block_on(call(&gw.url, "beta__pid", json!({})))).parse().expect("pid");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let pgrp = stat.rsplit_once(") ").map(|(_, r)| r.split_whitespace().nth(2).unwrap_or("").to_string()).expect("pgrp");
    let members = group_members(&pgrp);
    assert!(members.len() >= 2, "the server and sleep (and the supervisor): {members:?}");
    let _ = gw.proc.child.kill(); // SIGKILL: the gateway gets no chance to clean up
    let _ = gw.proc.child.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !group_members(&pgrp).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(group_members(&pgrp).is_empty(), "outlived the gateway: {:?} (were {members:?})", group_members(&pgrp));
}
