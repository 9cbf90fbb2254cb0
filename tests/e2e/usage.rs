//! Part 23: "who used which tool, how often, with what error rate". Three callers on two endpoints
//! (the root and a virtual server that presents `calc__divide` as `share`) call the demo
//! calculator; `mcpgate usage` (table and JSON) and the console's usage view answer with each
//! caller's calls, errors and error rate per tool under its catalogue name, an admin sees everyone
//! and a caller itself; the audit file has each call under the catalogue name with the presented
//! name beside it. A quota refuses the first call past it (429, `Retry-After`, the reset time) and
//! lets calls through again when its window ends; a call refused for its arguments or its
//! confirmation spends none of it. With `[cluster]`, two replicas answer the same
//! report and enforce one quota.

use crate::cluster::Redis;
use crate::harness::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const CALC: &str = "[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n";

fn callers() -> String {
    let h = mcpgate::auth::hash_key;
    format!(
        "[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\nadmin = true\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"carol\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[endpoint]]\npath = \"/mcp/dev\"\ninclude = [\"calc__*\"]\n\n\
         [[endpoint.tool]]\nname = \"calc__divide\"\nrename = \"share\"\n\n",
        h("alice-key"),
        h("bob-key"),
        h("carol-key")
    )
}

async fn call_as(url: &str, key: &str, tool: &str, args: Value) -> Resp {
    rpc_with(url, "tools/call", json!({ "name": tool, "arguments": args }), &[("Authorization", &format!("Bearer {key}"))]).await
}

/// Calls `tool` `n` times and checks each answered as `ok` says.
async fn calls(url: &str, key: &str, tool: &str, args: Value, n: usize) {
    for _ in 0..n {
        let r = call_as(url, key, tool, args.clone()).await;
        assert_eq!(r.status, 200, "{tool}: {}", String::from_utf8_lossy(&r.body));
        assert!(r.message().get("result").is_some(), "{tool}: {}", r.message());
    }
}

/// `mcpgate usage --json` on `config`, with the report's time fields left out.
fn usage_json(config: &Path, extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate"))
        .args(["usage", "--json", "-c"])
        .arg(config)
        .args(extra)
        .output()
        .expect("run mcpgate usage");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut v: Value = serde_json::from_slice(&out.stdout).expect("usage JSON");
    strip_times(&mut v);
    v
}

fn strip_times(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        o.remove("from");
        o.remove("until");
        o.remove("scope");
    }
}

fn line<'a>(report: &'a Value, caller: &str, tool: &str, endpoint: &str) -> &'a Value {
    report["lines"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["caller"] == caller && l["tool"] == tool && l["endpoint"] == endpoint))
        .unwrap_or_else(|| panic!("no line for {caller} {tool} {endpoint} in {report:#}"))
}

async fn console_usage(base: &str, key: &str) -> Value {
    let req = http::Request::get(format!("{base}/console/api/usage?since=1d"))
        .header("Authorization", format!("Bearer {key}"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let r = send(req).await.expect("console usage");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_answers_who_used_which_tool_how_often_with_what_error_rate() {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[console]\nenabled = true\n\n[usage]\nflush_interval = \"200ms\"\n\n\
         [audit]\nfile = \"audit.jsonl\"\n\n[[quota]]\ncallers = [\"carol\"]\ntools = \"calc__add\"\nlimit = \"3/day\"\n\n{}{CALC}",
        callers()
    );
    let gw = gateway(&config);
    let dev = format!("{}/mcp/dev", gw.base);
    let two = json!({ "a": 6, "b": 3 });
    let zero = json!({ "a": 6, "b": 0 });
    calls(&gw.url, "alice-key", "calc__add", two.clone(), 5).await;
    calls(&gw.url, "alice-key", "calc__divide", zero.clone(), 2).await;
    calls(&dev, "bob-key", "share", two.clone(), 2).await;
    calls(&dev, "bob-key", "share", zero.clone(), 1).await;
    calls(&dev, "bob-key", "calc__add", two.clone(), 2).await;
    calls(&gw.url, "carol-key", "calc__add", two.clone(), 3).await;
    // The first call past the quota: refused like a rate limit, with when it resets.
    let refused = call_as(&gw.url, "carol-key", "calc__add", two.clone()).await;
    assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
    let retry: u64 = refused.headers.get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok()).expect("Retry-After");
    assert!((1..=86_400).contains(&retry), "{retry}");
    let err = &refused.message()["error"];
    assert!(err["message"].as_str().unwrap_or("").contains("Quota exceeded for carol on calc__add: 3 calls per day"), "{err}");
    assert!(err["data"]["quota"]["resetsAt"].as_str().is_some_and(|t| t.ends_with("T00:00:00Z")), "{err}");
    // Other tools are not under carol's quota; an unknown tool is not counted at all.
    calls(&gw.url, "carol-key", "calc__multiply", two.clone(), 1).await;
    assert_eq!(call_as(&gw.url, "carol-key", "calc__nope", two.clone()).await.message()["error"]["code"], -32602);
    tokio::time::sleep(Duration::from_millis(700)).await;

    let report = usage_json(&gw.config_path, &["--since", "1d"]);
    let l = line(&report, "alice", "calc__add", "-");
    assert_eq!((l["calls"].as_u64(), l["errors"].as_u64(), l["upstream"].as_str()), (Some(5), Some(0), Some("calc")), "{l}");
    let l = line(&report, "alice", "calc__divide", "-");
    assert_eq!((l["calls"].as_u64(), l["errors"].as_u64(), l["error_rate"].as_f64()), (Some(2), Some(2), Some(1.0)), "{l}");
    // Counted under the catalogue's name, whatever name the endpoint presents.
    let l = line(&report, "bob", "calc__divide", "/mcp/dev");
    assert_eq!((l["calls"].as_u64(), l["errors"].as_u64(), l["outcomes"]["tool_error"].as_u64()), (Some(3), Some(1), Some(1)), "{l}");
    assert_eq!(line(&report, "bob", "calc__add", "/mcp/dev")["calls"], 2);
    let l = line(&report, "carol", "calc__add", "-");
    assert_eq!(
        (l["calls"].as_u64(), l["outcomes"]["ok"].as_u64(), l["outcomes"]["quota_exceeded"].as_u64()),
        (Some(4), Some(3), Some(1)),
        "{l}"
    );
    // The refusal is a call carol made, not an error of the tool: the tool never failed.
    assert_eq!((l["refused"].as_u64(), l["errors"].as_u64(), l["error_rate"].as_f64()), (Some(1), Some(0), Some(0.0)), "{l}");
    assert_eq!(report["lines"].as_array().map(Vec::len), Some(6), "{report:#}");
    assert!(!report.to_string().contains("share") && !report.to_string().contains("calc__nope"), "{report:#}");
    let carol = report["quotas"].as_array().and_then(|q| q.iter().find(|q| q["caller"] == "carol")).expect("carol's quota");
    assert_eq!((carol["used"].as_u64(), carol["left"].as_u64(), carol["limit"].as_u64()), (Some(3), Some(0), Some(3)), "{carol}");

    // Narrowed, and as a table.
    let bob = usage_json(&gw.config_path, &["--caller", "bob", "--tool", "calc__d*"]);
    assert_eq!(bob["lines"].as_array().map(Vec::len), Some(1), "{bob:#}");
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate")).args(["usage", "-c"]).arg(&gw.config_path).output().expect("usage table");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().take(8).collect::<Vec<_>>() == ["bob", "calc__divide", "calc", "/mcp/dev", "3", "0", "1", "33.3"]),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().take(8).collect::<Vec<_>>() == ["carol", "calc__add", "calc", "-", "4", "1", "0", "0.0"]),
        "{table}"
    );
    assert!(table.contains("quotas") && table.lines().any(|l| l.starts_with("carol") && l.contains("3/day")), "{table}");

    // The console: the admin sees everyone (the same lines), a caller only itself.
    let mut all = console_usage(&gw.base, "alice-key").await;
    assert_eq!(all["scope"], "everyone");
    strip_times(&mut all);
    assert_eq!(all["lines"], report["lines"]);
    let own = console_usage(&gw.base, "bob-key").await;
    assert_eq!(own["scope"], "self");
    assert!(own["lines"].as_array().is_some_and(|ls| ls.len() == 2 && ls.iter().all(|l| l["caller"] == "bob")), "{own:#}");

    // The audit file: the catalogue's name, with the presented name beside it.
    let audit = std::fs::read_to_string(gw.config_path.with_file_name("audit.jsonl")).expect("audit.jsonl");
    let records: Vec<Value> = audit.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let shares: Vec<&Value> = records.iter().filter(|r| r["presented"] == "share").collect();
    assert_eq!(shares.len(), 3, "{audit}");
    assert!(shares.iter().all(|r| r["item"] == "calc__divide" && r["endpoint"] == "/mcp/dev" && r["caller"] == "bob"), "{audit}");
    assert!(records.iter().any(|r| r["caller"] == "carol" && r["outcome"] == "quota_exceeded"), "{audit}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_quota_resets_when_its_window_ends() {
    let config = format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[quota]]\ncallers = [\"bob\"]\nlimit = \"2/3s\"\n\n{}{CALC}", callers());
    let gw = gateway(&config);
    let two = json!({ "a": 1, "b": 2 });
    // Start just after a window opens (windows are counted from the epoch), so the two calls
    // surely share one.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock");
    tokio::time::sleep(Duration::from_millis(3000 - (now.as_millis() % 3000) as u64 + 50)).await;
    calls(&gw.url, "bob-key", "calc__add", two.clone(), 2).await;
    let refused = call_as(&gw.url, "bob-key", "calc__multiply", two.clone()).await;
    assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
    let retry: u64 = refused.headers.get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok()).expect("Retry-After");
    assert!((1..=3).contains(&retry), "{retry}");
    // alice is not under the quota.
    calls(&gw.url, "alice-key", "calc__add", two.clone(), 3).await;
    tokio::time::sleep(Duration::from_secs(retry) + Duration::from_millis(100)).await;
    calls(&gw.url, "bob-key", "calc__add", two.clone(), 2).await;
    assert_eq!(call_as(&gw.url, "bob-key", "calc__add", two.clone()).await.status, 429);
}

#[tokio::test(flavor = "multi_thread")]
async fn replicas_answer_the_same_usage_and_enforce_one_quota() {
    let redis = Redis::start();
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[console]\nenabled = true\n\n[usage]\nflush_interval = \"200ms\"\n\n\
         [cluster]\nredis = \"{}\"\n\n[[quota]]\ncallers = [\"carol\"]\nlimit = \"4/day\"\n\n{}{CALC}",
        redis.url(),
        callers()
    );
    let (a, b) = (gateway(&config), gateway(&config));
    let two = json!({ "a": 6, "b": 3 });
    let zero = json!({ "a": 6, "b": 0 });
    calls(&a.url, "alice-key", "calc__add", two.clone(), 3).await;
    calls(&b.url, "alice-key", "calc__add", two.clone(), 2).await;
    calls(&b.url, "alice-key", "calc__divide", zero.clone(), 1).await;
    calls(&format!("{}/mcp/dev", a.base), "bob-key", "share", two.clone(), 1).await;
    calls(&format!("{}/mcp/dev", b.base), "bob-key", "share", zero.clone(), 1).await;
    calls(&a.url, "carol-key", "calc__add", two.clone(), 2).await;
    calls(&b.url, "carol-key", "calc__multiply", two.clone(), 2).await;
    // The fifth call of carol's, on either replica, is past the shared quota.
    assert_eq!(call_as(&a.url, "carol-key", "calc__add", two.clone()).await.status, 429);
    assert_eq!(call_as(&b.url, "carol-key", "calc__echo", json!({ "text": "x" })).await.status, 429);
    tokio::time::sleep(Duration::from_millis(700)).await;

    let from_a = usage_json(&a.config_path, &["--since", "1d"]);
    let from_b = usage_json(&b.config_path, &["--since", "1d"]);
    assert_eq!(from_a, from_b);
    assert_eq!(line(&from_a, "alice", "calc__add", "-")["calls"], 5, "{from_a:#}");
    let bob = line(&from_a, "bob", "calc__divide", "/mcp/dev");
    assert_eq!((bob["calls"].as_u64(), bob["errors"].as_u64()), (Some(2), Some(1)), "{bob}");
    let carol = from_a["quotas"].as_array().and_then(|q| q.iter().find(|q| q["caller"] == "carol")).expect("carol's quota");
    assert_eq!((carol["used"].as_u64(), carol["left"].as_u64()), (Some(4), Some(0)), "{carol}");
    let (mut ca, mut cb) = (console_usage(&a.base, "alice-key").await, console_usage(&b.base, "alice-key").await);
    strip_times(&mut ca);
    strip_times(&mut cb);
    assert_eq!(ca, cb);
    assert_eq!(ca["lines"], from_a["lines"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_shows_usage_to_an_admin_and_to_each_caller_in_chromium() {
    let config = format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[console]\nenabled = true\n\n{}{CALC}", callers());
    let gw = gateway(&config);
    calls(&gw.url, "alice-key", "calc__add", json!({ "a": 1, "b": 2 }), 2).await;
    calls(&format!("{}/mcp/dev", gw.base), "bob-key", "share", json!({ "a": 1, "b": 0 }), 1).await;
    let run = |key: &str, expected: Value| {
        let out = Command::new(python())
            .arg(repo().join("tests/browser/usage_test.py"))
            .arg(format!("{}/console", gw.base))
            .arg(key)
            .arg(expected.to_string())
            .output()
            .expect("run the browser test");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && stdout.contains("ok"), "the browser test failed:\n{stdout}\n{stderr}");
    };
    run("alice-key", json!({ "admin": true, "rows": [["alice", "calc__add", "-", 2, 0], ["bob", "calc__divide", "/mcp/dev", 1, 1]] }));
    run("bob-key", json!({ "admin": false, "rows": [["bob", "calc__divide", "/mcp/dev", 1, 1]] }));
}

/// A gateway stopped by SIGTERM right after a burst of calls: every call's record is in the audit
/// file (the writer is told to write what is queued and flush before the process exits).
#[tokio::test(flavor = "multi_thread")]
async fn the_audit_file_has_every_record_after_a_stop() {
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[audit]\nfile = \"audit.jsonl\"\n\n{CALC}"));
    let calls: Vec<_> = (0..40)
        .map(|i| {
            let url = gw.url.clone();
            tokio::spawn(async move { rpc(&url, "tools/call", json!({ "name": "calc__add", "arguments": { "a": i, "b": 1 } })).await })
        })
        .collect();
    for c in calls {
        let r = c.await.expect("join").message();
        assert!(r["result"].is_object(), "{r}");
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let mut proc = gw.proc;
    while proc.child.try_wait().ok().flatten().is_none() {
        assert!(std::time::Instant::now() < deadline, "the gateway did not exit:\n{}", proc.log());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let audit = std::fs::read_to_string(gw.config_path.with_file_name("audit.jsonl")).expect("audit.jsonl");
    let calls = audit.lines().filter(|l| l.contains("\"calc__add\"")).count();
    assert_eq!(calls, 40, "{audit}");
}

/// The quota is the last decision before the call goes out: a call refused for its arguments, for
/// a request state this gateway did not issue, or one a person was not able to confirm, spends
/// none of it.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_call_spends_no_quota() {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[quota]]\ncallers = [\"carol\"]\nlimit = \"2/day\"\n\n\
         [[confirm]]\ntools = [\"calc__multiply\"]\n\n{}{CALC}",
        callers()
    );
    let gw = gateway(&config);
    for _ in 0..3 {
        let r = call_as(&gw.url, "carol-key", "calc__add", json!({ "a": "one", "b": 2 })).await;
        assert_eq!(r.message()["error"]["code"], -32602, "{}", r.message());
    }
    // A retry carrying a state the gateway never issued is refused before the quota.
    for _ in 0..3 {
        let params = json!({ "name": "calc__add", "arguments": { "a": 1, "b": 2 }, "requestState": "forged",
            "inputResponses": { "q": { "action": "accept", "content": {} } } });
        let r = rpc_with(&gw.url, "tools/call", params, &[("Authorization", "Bearer carol-key")]).await;
        assert_eq!(r.message()["error"]["message"], "Invalid requestState: send the request again without inputResponses and requestState");
    }
    // A client that cannot be asked is refused by the confirmation, before the quota.
    let r = call_as(&gw.url, "carol-key", "calc__multiply", json!({ "a": 1, "b": 2 })).await;
    assert_ne!(r.status, 429, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.message()["result"]["isError"], true, "{}", r.message());
    calls(&gw.url, "carol-key", "calc__add", json!({ "a": 1, "b": 2 }), 2).await;
    assert_eq!(call_as(&gw.url, "carol-key", "calc__add", json!({ "a": 1, "b": 2 })).await.status, 429);
}
