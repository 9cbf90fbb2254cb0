//! Code mode's child process, `mcpgate code-run`, driven through `upstream::program` as the
//! gateway drives it: confined (no new privileges, seccomp filter, empty environment, nice 10, `/`, three descriptors)
//! before it runs the program, a tool call answered over the pipe, and killed with its `Program`.

use mcpgate::upstream::program;
use mcpgate_coderun::Answer;
use mcpgate_coderun::wire::{FromChild, Limits};
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

fn limits() -> Limits {
    Limits { heap: 16 << 20, stack: 256 << 10, cpu_ms: 1_000, calls: 5, output: 1 << 16, logs: 1 << 10 }
}

fn start() -> program::Program {
    program::start_from(Path::new(env!("CARGO_BIN_EXE_mcpgate")), &limits()).expect("the program's process starts")
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(20)
}

/// The `field` line of `/proc/<pid>/status`.
fn status(pid: u32, field: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    text.lines().find_map(|l| l.strip_prefix(field)).map(|v| v.trim().to_owned()).unwrap_or_default()
}

/// The nice value of `/proc/<pid>`: field 19 of its `stat`, after the parenthesised name.
fn nice(pid: &str) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    after_name.split_whitespace().nth(16).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{stat}"))
}

#[tokio::test]
async fn the_child_is_confined_before_the_program_runs_and_its_call_is_answered() {
    let mut run = start();
    let pid = run.pid().expect("running");
    run.send_start("const r = await tools.x({q: 1}); return {got: r, typeofRequire: typeof require};", &["x".to_owned()])
        .await
        .expect("start line");
    // The call comes from inside the program, so the process has confined itself by now.
    let FromChild::Call(call) = run.next(soon()).await.expect("a call") else { panic!("expected a call") };
    assert_eq!((call.id, call.tool.as_str(), &call.arguments), (1, "x", &json!({"q": 1})));
    assert_eq!(status(pid, "NoNewPrivs:"), "1");
    assert_eq!(status(pid, "Seccomp:"), "2");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    assert!(environ.is_empty(), "{}", String::from_utf8_lossy(&environ));
    // Nice 10, or this test's own when it already runs lower (`nice -n 19 cargo test`).
    assert_eq!(nice(&pid.to_string()), nice("self").max(10));
    assert_eq!(std::fs::read_link(format!("/proc/{pid}/cwd")).expect("cwd"), Path::new("/"));
    // Only its three pipes (and no policy descriptor: it was read and closed).
    let fds: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fds").filter_map(|e| e.ok()).collect();
    assert_eq!(fds.len(), 3, "{fds:?}");
    run.answer(1, Answer::Ok(json!({"n": 7}))).await.expect("answer");
    match run.next(soon()).await.expect("the end") {
        FromChild::Done(done) => assert_eq!(done.value, json!({"got": {"n": 7}, "typeofRequire": "undefined"})),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn dropping_the_program_kills_its_process() {
    let mut run = start();
    let pid = run.pid().expect("running");
    run.send_start("await tools.x(); return 1;", &["x".to_owned()]).await.expect("start line");
    assert!(matches!(run.next(soon()).await, Ok(FromChild::Call(_))));
    drop(run);
    let gone = Instant::now() + Duration::from_secs(10);
    loop {
        // Killed: gone, or a zombie until the runtime reaps it.
        let state = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("State:")).map(|v| v.trim().to_owned()));
        match state {
            None => break,
            Some(s) if s.starts_with('Z') => break,
            Some(s) => assert!(Instant::now() < gone, "still {s}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_program_past_its_wall_clock_is_a_timeout_and_a_spinning_one_hits_its_cpu_limit() {
    let mut run = start();
    run.send_start("await tools.x(); return 1;", &["x".to_owned()]).await.expect("start line");
    assert!(matches!(run.next(soon()).await, Ok(FromChild::Call(_))));
    // Reading again before answering is the gateway's own mistake, refused.
    assert!(run.next(soon()).await.is_err());
    let mut spin = start();
    spin.send_start("for (;;) {}", &[]).await.expect("start line");
    let early = Instant::now() + Duration::from_millis(200);
    assert!(matches!(spin.next(early).await, Err(mcpgate::upstream::UpstreamError::Timeout { .. })));
    match spin.next(soon()).await.expect("the end") {
        FromChild::Failed(failed) => assert_eq!(failed.limit.map(|l| l.as_str()), Some("cpu"), "{failed:?}"),
        other => panic!("{other:?}"),
    }
}

/// A child that writes `lines` whatever it is asked (a stand-in for a compromised process).
fn scripted(dir: &Path, lines: &[&str]) -> program::Program {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("child.sh");
    let body: String = lines.iter().map(|l| format!("echo '{l}'\n")).collect();
    std::fs::write(&script, format!("#!/bin/sh\n{body}exec sleep 5\n")).expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("mode");
    program::start_from(&script, &limits()).expect("starts")
}

#[tokio::test]
async fn a_child_line_out_of_protocol_is_a_protocol_error() {
    let dir = tempfile::tempdir().expect("dir");
    let cases: [&[&str]; 3] = [
        &[r#"{"call":{"id":1,"tool":"x","arguments":{},"caller":"root"}}"#],
        &[r#"{"call":{"id":2,"tool":"x","arguments":{}}}"#],
        &["not json"],
    ];
    for lines in cases {
        let mut run = scripted(dir.path(), lines);
        let got = run.next(soon()).await;
        assert!(matches!(got, Err(mcpgate::upstream::UpstreamError::Protocol(_))), "{lines:?}: {:?}", got.map(|_| ()));
    }
    // A repeated id: the first call is read, the same id again is refused.
    let call = r#"{"call":{"id":1,"tool":"x","arguments":{}}}"#;
    let mut run = scripted(dir.path(), &[call, call]);
    assert!(matches!(run.next(soon()).await, Ok(FromChild::Call(_))));
    run.answer(1, Answer::Ok(json!(1))).await.expect("answer");
    assert!(matches!(run.next(soon()).await, Err(mcpgate::upstream::UpstreamError::Protocol(_))));
}

/// Deep recursion ends with the stack limit, never a crash of the process, up to the largest
/// stack the configuration accepts (the program runs on its process's main thread).
#[tokio::test]
async fn the_largest_stack_accepted_ends_deep_recursion_with_its_limit() {
    for stack in [256 << 10, mcpgate_config::code_mode::MAX_STACK as usize] {
        let limits = Limits { heap: 256 << 20, stack, ..limits() };
        let mut run = program::start_from(Path::new(env!("CARGO_BIN_EXE_mcpgate")), &limits).expect("the program's process starts");
        run.send_start("const f = (n) => f(n + 1) + 1; return f(0);", &[]).await.expect("start line");
        match run.next(soon()).await.unwrap_or_else(|e| panic!("{stack}: {e:?}")) {
            FromChild::Failed(failed) => assert_eq!(failed.limit.map(|l| l.as_str()), Some("stack"), "{stack}: {failed:?}"),
            other => panic!("{stack}: {other:?}"),
        }
    }
}
