//! Reload (Part 8): SIGHUP, or a change of a watched configuration file, applies the new
//! configuration as a diff: a broken one is refused and the old keeps serving; upstreams are
//! added and removed under steady load with no failed call to the ones that did not change, and
//! listeners are told.

use crate::harness::*;
use crate::streams::listen;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn sighup(gw: &Gateway) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
}

async fn wait_log(gw: &Gateway, needle: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while gw.proc.log().matches(needle).count() < n {
        assert!(Instant::now() < deadline, "no {needle:?} in the log:\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const DEMO: &str = "command = [\"mcpgate\", \"demo-server\"";

fn config(upstreams: &[(&str, &str)], watch: bool) -> String {
    let mut c = format!("[server]\nlisten = \"127.0.0.1:0\"\nwatch_config = {watch}\n");
    for (id, profile) in upstreams {
        c.push_str(&format!("\n[[upstream]]\nid = \"{id}\"\n{DEMO}, \"--profile\", \"{profile}\"]\n"));
    }
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_configuration_is_refused_and_the_old_keeps_serving() {
    let gw = gateway(&config(&[("calc", "calc")], false));
    std::fs::write(&gw.config_path, "[server\nthis is not toml").expect("write");
    sighup(&gw);
    wait_log(&gw, "reload refused", 1).await;
    assert_eq!(text_of(&call(&gw.url, "calc__add", json!({ "a": 2, "b": 3 })).await), "5");
}

/// Calls that must succeed at each stage of [`upstreams_come_and_go_under_load_without_failing_the_others`]:
/// a handful, so that the stage is known to have had calls in it; how many more a machine manages
/// says nothing about the reload.
const CALLS_PER_STAGE: usize = 3;

/// Waits until `ok` has grown by [`CALLS_PER_STAGE`] since `from` (the stage's first count).
async fn calls_made(ok: &AtomicUsize, from: usize, stage: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = ok.load(Ordering::SeqCst);
        if now >= from + CALLS_PER_STAGE {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{stage}: {} calls succeeded in 20 s, fewer than the {CALLS_PER_STAGE} this test needs to know the stage had calls: the machine is too busy to make a call every few seconds, or calls to the unchanged upstream hang",
            now - from
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The load is a loop of calls to the unchanged upstream. Asserted: none fails, and calls were
/// made before, between and after the two reloads (a few in each stage, not a throughput).
#[tokio::test(flavor = "multi_thread")]
async fn upstreams_come_and_go_under_load_without_failing_the_others() {
    let gw = gateway(&config(&[("calc", "calc"), ("old", "text")], true));
    let l = listen(&gw.url, "L", json!({ "toolsListChanged": true }), &[]).await;
    assert_eq!(l.wait_for("notifications/subscriptions/acknowledged", 1, Duration::from_secs(5)).await, 1);
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (url, ok, failed, stop) = (gw.url.clone(), ok.clone(), failed.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let r = call(&url, "calc__add", json!({ "a": 1, "b": 1 })).await;
                if r["result"]["content"][0]["text"] == "2" {
                    ok.fetch_add(1, Ordering::SeqCst)
                } else {
                    failed.fetch_add(1, Ordering::SeqCst)
                };
            }
        })
    };
    let before = calls_made(&ok, 0, "before the first reload").await;
    // Written, not signalled: the watched file changes.
    std::fs::write(&gw.config_path, config(&[("calc", "calc"), ("fresh", "dynamic")], true)).expect("write");
    wait_log(&gw, "configuration reloaded", 1).await;
    let names = tool_names(&gw.url).await;
    assert!(names.iter().any(|n| n.starts_with("fresh__")) && !names.iter().any(|n| n.starts_with("old__")), "{names:?}");
    assert!(l.wait_for("notifications/tools/list_changed", 1, Duration::from_secs(3)).await >= 1, "listeners are told");
    let between = calls_made(&ok, before, "between the two reloads").await;
    // And back, by SIGHUP.
    std::fs::write(&gw.config_path, config(&[("calc", "calc"), ("old", "text")], false)).expect("write");
    sighup(&gw);
    wait_log(&gw, "configuration reloaded", 2).await;
    let names = tool_names(&gw.url).await;
    assert!(names.iter().any(|n| n.starts_with("old__")) && !names.iter().any(|n| n.starts_with("fresh__")), "{names:?}");
    calls_made(&ok, between, "after the second reload").await;
    stop.store(true, Ordering::SeqCst);
    load.await.expect("load");
    assert_eq!(
        failed.load(Ordering::SeqCst),
        0,
        "calls to the unchanged upstream failed during the reloads ({} succeeded)",
        ok.load(Ordering::SeqCst)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_change_ends_open_subscriptions_so_they_are_judged_anew() {
    let with_policy = |allow: &str| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n[[caller]]\nid = \"a\"\nkey_sha256 = \"{}\"\nallow = [{allow}]\n\n[[upstream]]\nid = \"calc\"\n{DEMO}]\n",
            crate::callers::hash("a-key")
        )
    };
    let gw = gateway(&with_policy("\"*\""));
    let key = [("Authorization", "Bearer a-key")];
    let l = listen(&gw.url, "L", json!({ "toolsListChanged": true }), &key).await;
    assert_eq!(l.wait_for("notifications/subscriptions/acknowledged", 1, Duration::from_secs(5)).await, 1);
    std::fs::write(&gw.config_path, with_policy("\"calc__add\"")).expect("write");
    sighup(&gw);
    wait_log(&gw, "configuration reloaded", 1).await;
    let done = l.wait_until(|m| m["id"] == "L", Duration::from_secs(5)).await.expect("the subscription ends");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let names: Vec<String> = {
        let r = rpc_with(&gw.url, "tools/list", json!({}), &key).await.json();
        r["result"]["tools"].as_array().map(|t| t.iter().filter_map(|t| t["name"].as_str().map(String::from)).collect()).unwrap_or_default()
    };
    assert_eq!(names, vec!["calc__add".to_string()], "the new policy applies at once");
}

/// `mcpgate reload` finds the gateway by the pid file `run --pid-file` wrote and signals it.
fn reload_command(pid_file: &std::path::Path) {
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_mcpgate")).arg("reload").arg("--pid-file").arg(pid_file).output().expect("reload");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sent SIGHUP to mcpgate"), "{}", String::from_utf8_lossy(&out.stdout));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_that_adds_a_missing_program_warns_and_reports_its_endpoints() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pid_file = dir.path().join("mcpgate.pid");
    let pid = pid_file.display().to_string();
    let gw = gateway_with_env(&config(&[("calc", "calc")], false), &[("MCPGATE_PID_FILE", &pid)]);
    let written: u32 = std::fs::read_to_string(&pid_file).expect("the pid file").trim().parse().expect("a pid");
    assert_eq!(written, gw.proc.child.id());
    // The startup line gives the process id too, for `kill -HUP`.
    assert!(gw.proc.log().contains(&format!("(pid {written}, ")), "{}", gw.proc.log());
    let mut next = config(&[("calc", "calc")], false);
    next.push_str("\n[[upstream]]\nid = \"broken\"\ncommand = [\"/nonexistent/mcp-server\"]\n");
    next.push_str("\n[[endpoint]]\npath = \"/mcp/calc\"\ninclude = [\"calc__*\"]\n");
    std::fs::write(&gw.config_path, next).expect("write");
    reload_command(&pid_file);
    wait_log(&gw, "configuration reloaded", 1).await;
    let log = gw.proc.log();
    let reloaded = log.lines().find(|l| l.contains("configuration reloaded")).expect("the report");
    // The report is one logfmt value (`report="…"`), read back as written.
    let report = crate::logfmt::logfmt(reloaded).into_iter().find_map(|(k, v)| (k == "report").then_some(v).flatten()).unwrap_or_default();
    assert!(report.contains("added [\"broken\"]") && report.contains("endpoints added [\"/mcp/calc\"]"), "{reloaded}");
    // The same warning as at startup, naming the program.
    assert!(log.lines().any(|l| l.contains("upstream unavailable") && l.contains("broken") && l.contains("no such program")), "{log}");
    // A stale pid file does not signal whatever has the number now.
    std::fs::write(&pid_file, "1\n").expect("write");
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_mcpgate")).arg("reload").arg("--pid-file").arg(&pid_file).output().expect("reload");
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("not mcpgate"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn selection_problems_are_reported_once_the_catalogue_is_complete() {
    // The endpoint selects the tools of an upstream that takes a second to start, beside one
    // that is ready at once: nothing is wrong with the selection while it starts.
    let mut c = config(&[("text", "text")], false);
    c.push_str(&format!(
        "\n[[upstream]]\nid = \"calc\"\ncommand = [\"sh\", \"-c\", \"sleep 1; exec '{}' demo-server --profile calc\"]\n\
         \n[[endpoint]]\npath = \"/mcp/calc\"\ninclude = [\"calc__*\"]\n\n[[endpoint.tool]]\nname = \"calc__missing\"\nrename = \"gone\"\n",
        env!("CARGO_BIN_EXE_mcpgate")
    ));
    let gw = gateway(&c);
    wait_log(&gw, "catalogue ready", 1).await;
    let log = gw.proc.log();
    assert!(!log.contains("the selection matches nothing"), "reported while the upstream was starting:\n{log}");
    // A real problem is still reported, once, after the catalogue is complete.
    assert_eq!(log.matches("matches no tool the endpoint selects").count(), 1, "{log}");
    let lines: Vec<&str> = log.lines().collect();
    let warned = lines.iter().position(|l| l.contains("matches no tool")).expect("warned");
    let calc_ready = lines.iter().position(|l| l.contains("upstream ready") && l.contains("calc")).expect("calc ready");
    assert!(calc_ready < warned, "{log}");
}

/// What the operations guide's reload table says takes effect at once, does: `[console]`,
/// `[[confirm]]`, `[pins]` and `[secrets]`, each changed in the file and sent SIGHUP.
#[tokio::test(flavor = "multi_thread")]
async fn console_confirm_pins_and_secrets_take_effect_on_reload() {
    let base = config(&[("calc", "calc")], false);
    let gw = gateway(&base);
    let console = || async { get(&format!("{}/console", gw.base)).await.expect("GET /console").status };
    assert_eq!(console().await, 404);
    let secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let echo = || call(&gw.url, "calc__echo", json!({ "text": format!("key {secret}") }));
    assert!(text_of(&echo().await).contains(secret), "no detector yet");
    let dir = gw.config_path.parent().expect("the config's folder").to_path_buf();
    let pins = dir.join("empty-pins.json");
    std::fs::write(&pins, "{\"version\": 1, \"upstreams\": {}}").expect("write the lock file");

    // Each section in turn, with what it changes observed.
    let mut text = base.clone();
    let mut reloads = 0;
    let mut apply = |section: &str| {
        text = format!("{section}\n{text}");
        std::fs::write(&gw.config_path, &text).expect("write");
        sighup(&gw);
        reloads += 1;
        reloads
    };
    let n = apply("[console]\nenabled = true\n");
    wait_log(&gw, "configuration reloaded", n).await;
    assert_eq!(console().await, 200, "[console] on reload:\n{}", gw.proc.log());

    let n = apply("[secrets]\nbuiltin = \"redact\"\n");
    wait_log(&gw, "configuration reloaded", n).await;
    let r = echo().await;
    assert!(!text_of(&r).contains(secret) && text_of(&r).contains("[REDACTED"), "[secrets] on reload: {r}");

    let n = apply("[[confirm]]\ntools = [\"calc__add\"]\n");
    wait_log(&gw, "configuration reloaded", n).await;
    let r = call(&gw.url, "calc__add", json!({ "a": 1, "b": 2 })).await;
    assert!(text_of(&r).contains("needs a person's confirmation"), "[[confirm]] on reload: {r}");

    let n = apply(&format!("[pins]\nmode = \"enforce\"\nfile = {pins:?}\n"));
    wait_log(&gw, "configuration reloaded", n).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while tool_names(&gw.url).await.contains(&"calc__multiply".to_string()) {
        assert!(Instant::now() < deadline, "[pins] enforce on reload holds the unpinned tools:\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An OpenAPI description is read again on a reload even when the configuration did not change:
/// an operation added to the file is a tool as soon as the reload is done, not at the next
/// `refresh_interval` (docs/openapi.md).
#[tokio::test(flavor = "multi_thread")]
async fn a_reload_reads_an_edited_openapi_description_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let doc = dir.path().join("api.yaml");
    let describe = |ops: &[&str]| {
        let mut d = String::from("openapi: 3.0.3\ninfo: { title: Items, version: '1' }\npaths:\n");
        for op in ops {
            d.push_str(&format!(
                "  /{op}:\n    get:\n      operationId: {op}\n      responses:\n        '200':\n          description: ok\n"
            ));
        }
        d
    };
    std::fs::write(&doc, describe(&["first"])).expect("write the description");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"rest\"\nopenapi = {:?}\nbase_url = \"http://127.0.0.1:9\"\n",
        doc.display().to_string()
    );
    let gw = gateway(&config);
    assert_eq!(tool_names(&gw.url).await, vec!["rest__first".to_string()]);
    std::fs::write(&doc, describe(&["first", "second"])).expect("edit the description");
    sighup(&gw);
    wait_log(&gw, "configuration reloaded", 1).await;
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let names = tool_names(&gw.url).await;
        if names.contains(&"rest__second".to_string()) {
            break;
        }
        assert!(Instant::now() < deadline, "the added operation is not listed after the reload: {names:?}\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = gw.proc.log();
    let reloaded = log.lines().find(|l| l.contains("configuration reloaded")).expect("the report");
    assert!(reloaded.contains("descriptions changed [\\\"rest\\\"]") || reloaded.contains("descriptions changed [\"rest\"]"), "{reloaded}");
}
