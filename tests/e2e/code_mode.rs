//! Part 37: code mode end to end. A virtual server in code mode offers `search_tools` and
//! `run_code`; the official Python SDK client runs a program that combines the tools of two
//! upstreams. Every call a program makes is the caller's own `tools/call`: refused by a `[[rule]]`,
//! denied by a guard or over a quota, it fails inside the program with the same text and code as
//! by hand (and the audit's label as `reason`), and the audit names the program on each inner call
//! and on the run. A program sees only the tools its caller may use, cannot start another, and
//! hostile programs (loops, allocation, recursion, files, network, host functions, a slow tool)
//! each stop with a clear error while `/healthz` stays quick.

use crate::harness::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn callers() -> String {
    let h = mcpgate::auth::hash_key;
    format!(
        "[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"carol\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"dave\"\nkey_sha256 = \"{}\"\nallow = [\"calc__*\"]\n\n",
        h("carol-key"),
        h("dave-key"),
    )
}

/// A gateway with two upstreams (the Python SDK's test server as `alpha`, the demo calculator as
/// `calc`), a guard written as an MCP tool, a rule, a quota, and `/mcp/code` in code mode.
fn governed(alpha: &str, guard: &str, extra: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n{callers}[audit]\nfile = \"audit.jsonl\"\n\n\
         [code_mode]\ncpu = \"1s\"\nwall_clock = \"4s\"\nheap = \"32MiB\"\n{extra}\n\
         [[endpoint]]\npath = \"/mcp/code\"\ninclude = [\"alpha__*\", \"calc__*\"]\ncode_mode = true\n\n\
         [[rule]]\nname = \"no-secrets\"\neffect = \"deny\"\ntools = [\"alpha__echo\"]\nwhen = 'args.text == \"secret\"'\n\n\
         [[guard]]\nname = \"classifier\"\npoints = [\"request\"]\nupstream = \"guards\"\ntool = \"check\"\ntools = [\"alpha__*\"]\n\n\
         [[quota]]\ncallers = [\"carol\"]\ntools = \"calc__multiply\"\nlimit = \"1/day\"\n\n\
         [[upstream]]\nid = \"alpha\"\nurl = \"{alpha}\"\n\n\
         [[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n\n\
         [[upstream]]\nid = \"guards\"\nurl = \"{guard}\"\n",
        callers = callers()
    )
}

struct Setup {
    gw: Gateway,
    code: String,
    _alpha: Proc,
    _guard: Proc,
}

fn setup(extra: &str) -> Setup {
    let (alpha, alpha_url) = py_http("alpha", &[]);
    let (guard, guard_url) = py_script_http("tests/py/tool_guard.py", &[]);
    let gw = gateway(&governed(&alpha_url, &guard_url, extra));
    let code = gw.url.replace("/mcp", "/mcp/code");
    Setup { gw, code, _alpha: alpha, _guard: guard }
}

async fn call_as(url: &str, key: &str, tool: &str, args: Value) -> Value {
    rpc_with(url, "tools/call", json!({ "name": tool, "arguments": args }), &[("Authorization", &format!("Bearer {key}"))]).await.message()
}

async fn run_as(url: &str, key: &str, program: &str) -> Value {
    call_as(url, key, "run_code", json!({ "code": program })).await
}

/// The program's value (the result's first text, as JSON), after checking it finished.
fn value_of(msg: &Value) -> Value {
    assert_eq!(msg["result"]["isError"], false, "the program finished: {msg}");
    serde_json::from_str(&text_of(msg)).unwrap_or_else(|e| panic!("the result is JSON ({e}): {msg}"))
}

fn program_id(result: &Value) -> String {
    let id = result["_meta"]["io.mcpgate/program"].as_str().unwrap_or_default().to_string();
    assert!(id.starts_with("prg-"), "the result names its program: {result}");
    id
}

/// The audit export's records.
fn audit(gw: &Gateway) -> Vec<Value> {
    std::thread::sleep(Duration::from_millis(300));
    let path = gw.config_path.parent().expect("the config's folder").join("audit.jsonl");
    std::fs::read_to_string(&path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect()
}

fn of_program<'a>(records: &'a [Value], id: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["program"] == id).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_program_from_the_python_sdk_combines_two_upstreams_under_one_audited_id() {
    let s = setup("");
    let sdk_opts = ["--mode", "2026-07-28", "--bearer", "carol-key"];
    // The surface: two tools, and a search that answers typed declarations.
    let listed = sdk_lines(&sdk_opts, &s.code, &["list"]);
    assert_eq!(listed.last().map(|l| l["tools"].clone()), Some(json!(["search_tools", "run_code"])), "{listed:?}");
    let found = sdk_lines(&sdk_opts, &s.code, &["call", "search_tools", r#"{"query":"add two numbers"}"#]);
    let found = found.last().cloned().unwrap_or_default();
    let text = found["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("declare const tools: {")
            && text.contains("calc__add(args: { a: number; b: number; }): Promise<{ result: number; }>"),
        "{text}"
    );
    // A program over two upstreams: only its value comes back.
    let program = "const s = await tools.alpha__structured({ a: 2, b: 3 });\n\
                   const c = await tools.calc__add({ a: 4, b: 5 });\n\
                   console.log('summing');\n\
                   return { sum: s.sum, calc: c.result, both: s.sum + c.result };";
    let args = json!({ "code": program }).to_string();
    let out = sdk_lines(&sdk_opts, &s.code, &["call", "run_code", &args]);
    let result = out.last().cloned().unwrap_or_default();
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"], json!({ "sum": 5, "calc": 9, "both": 14 }), "{result}");
    assert!(result["content"][1]["text"].as_str().is_some_and(|t| t.contains("summing")), "the logs come back: {result}");
    let id = program_id(&result);
    // Each inner call is audited as carol's call on /mcp/code with the program's id, and the run too.
    let records = audit(&s.gw);
    let mine = of_program(&records, &id);
    let calls: Vec<(&str, &str, &str, &str)> = mine
        .iter()
        .map(|r| {
            (
                r["item"].as_str().unwrap_or(""),
                r["caller"].as_str().unwrap_or(""),
                r["endpoint"].as_str().unwrap_or(""),
                r["outcome"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("alpha__structured", "carol", "/mcp/code", "ok"),
            ("calc__add", "carol", "/mcp/code", "ok"),
            ("run_code", "carol", "/mcp/code", "ok")
        ],
        "{records:?}"
    );
    assert_eq!(mine[0]["upstream"], "alpha");
    assert_eq!(mine[1]["upstream"], "calc");
    assert!(s.gw.proc.log().contains(&format!("program={id}")), "the audit line names the program");
    // `mcpgate check` says where code mode is served and that programs can run here.
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_mcpgate")).args(["check", "-c"]).arg(&s.gw.config_path).output().expect("check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("Code mode: served on /mcp/code\n  programs run confined"), "{text}");
}

/// What a program caught for `tool` called with `args`: `{reason, code, message}`.
fn catching(tool: &str, args: &Value) -> String {
    format!(
        "try {{ await tools.call({tool:?}, {args}); return \"ran\"; }} \
         catch (e) {{ return {{ reason: e.reason, code: e.code, message: e.message, tool: e.tool, isToolError: e instanceof ToolError }}; }}"
    )
}

/// A by-hand answer as a program reads it: a tool error's text, or a JSON-RPC error's code and message.
fn by_hand(msg: &Value) -> (Option<i64>, String) {
    match msg.get("error") {
        Some(e) => (e["code"].as_i64(), e["message"].as_str().unwrap_or_default().to_string()),
        None => {
            assert_eq!(msg["result"]["isError"], true, "refused by hand: {msg}");
            (None, text_of(msg))
        }
    }
}

/// A quota's message says in how many seconds it resets: the rest must match exactly.
fn without_wait(message: &str) -> &str {
    message.split(" (in ").next().unwrap_or(message)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rule_a_guard_and_a_quota_refuse_inside_a_program_exactly_as_by_hand() {
    let s = setup("");
    let cases = [
        ("alpha__echo", json!({ "text": "secret" }), "denied_by_rule"),
        ("alpha__echo", json!({ "text": "tool-banned" }), "guard_denied"),
        ("calc__multiply", json!({ "a": 2, "b": 3 }), "quota_exceeded"),
    ];
    // carol's one multiply a day is spent by hand first.
    let spent = call_as(&s.code, "carol-key", "calc__multiply", json!({ "a": 1, "b": 1 })).await;
    assert_eq!(text_of(&spent), "1", "{spent}");
    for (tool, args, reason) in cases {
        let hand = call_as(&s.code, "carol-key", tool, args.clone()).await;
        let (code, message) = by_hand(&hand);
        let ran = run_as(&s.code, "carol-key", &catching(tool, &args)).await;
        let caught = value_of(&ran);
        assert_eq!(caught["reason"], reason, "{tool}: {caught}");
        assert_eq!(caught["code"].as_i64(), code, "{tool}: the same code as by hand: {caught} / {hand}");
        assert_eq!(without_wait(caught["message"].as_str().unwrap_or("")), without_wait(&message), "{tool}: the same text");
        assert_eq!((caught["tool"].as_str(), caught["isToolError"].as_bool()), (Some(tool), Some(true)), "{caught}");
        // The refusal is audited under the program's id, as by hand.
        let id = program_id(&ran["result"]);
        let records = audit(&s.gw);
        let inner: Vec<&str> = of_program(&records, &id).iter().map(|r| r["outcome"].as_str().unwrap_or("")).collect();
        assert_eq!(inner.first().copied(), Some(reason), "{tool}: {records:?}");
    }
    // A program cannot spend more than by hand: the quota stays spent for the rest.
    let again = run_as(&s.code, "carol-key", &catching("calc__multiply", &json!({ "a": 1, "b": 2 }))).await;
    assert_eq!(value_of(&again)["reason"], "quota_exceeded");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_program_sees_only_its_callers_tools_and_cannot_start_another() {
    let s = setup("");
    // dave may use calc only: alpha's tools do not exist in his programs, and answer as by hand.
    let hidden = json!({ "text": "hi" });
    let (code, message) = by_hand(&call_as(&s.code, "dave-key", "alpha__echo", hidden.clone()).await);
    let caught = value_of(&run_as(&s.code, "dave-key", &catching("alpha__echo", &hidden)).await);
    assert_eq!((caught["reason"].as_str(), caught["code"].as_i64()), (Some("unknown_or_denied"), code), "{caught}");
    assert_eq!(caught["message"].as_str(), Some(message.as_str()));
    let seen = value_of(&run_as(&s.code, "dave-key", "return Object.keys(tools).sort();").await);
    assert_eq!(seen, json!(["calc__add", "calc__divide", "calc__echo", "calc__multiply"]), "{seen}");
    // Neither code-mode tool is a tool a program can call.
    for tool in ["run_code", "search_tools"] {
        let caught = value_of(&run_as(&s.code, "carol-key", &catching(tool, &json!({ "code": "return 1", "query": "x" }))).await);
        assert_eq!(caught["reason"], "unknown_or_denied", "{tool}: {caught}");
    }
    // What a program puts in its arguments does not change who calls: the audit says dave.
    let forged = "try { await tools.calc__add({ a: 1, b: 2, caller: 'carol', _meta: { caller: 'carol' } }); } catch (e) {}\n\
                  return await tools.calc__add({ a: 1, b: 2 });";
    let ran = run_as(&s.code, "dave-key", forged).await;
    let id = program_id(&ran["result"]);
    let records = audit(&s.gw);
    let callers: Vec<&str> = of_program(&records, &id).iter().map(|r| r["caller"].as_str().unwrap_or("")).collect();
    assert!(!callers.is_empty() && callers.iter().all(|c| *c == "dave"), "{callers:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_programs_stop_with_a_clear_error_and_the_gateway_stays_responsive() {
    let s = setup("programs = 4\nprograms_per_caller = 4\n");
    let stopped = |msg: &Value| {
        assert_eq!(msg["result"]["isError"], true, "stopped: {msg}");
        text_of(msg)
    };
    let cases = [
        ("for (;;) {}", "cpu limit"),
        ("try { for (;;) {} } catch (e) { return 'caught'; }", "cpu limit"),
        ("const a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length);", "heap limit"),
        ("const f = (n) => f(n + 1) + 1; return f(0);", "stack limit"),
        ("throw new Error('boom')", "The program failed: "),
    ];
    for (program, says) in cases {
        let text = stopped(&run_as(&s.code, "carol-key", program).await);
        assert!(text.contains(says), "{program}: {text}");
    }
    // No file, no network, no module, no host function: none of them exists.
    let reach = "return { require: typeof require, process: typeof process, fetch: typeof fetch, std: typeof std, \
                 os: typeof os, xhr: typeof XMLHttpRequest, ws: typeof WebSocket, \
                 module: await import('fs').then(() => 'loaded', (e) => 'refused'), \
                 globals: Object.getOwnPropertyNames(globalThis).filter((n) => /native|host|call|send|__/i.test(n)) };";
    let reached = value_of(&run_as(&s.code, "carol-key", reach).await);
    assert_eq!(
        reached,
        json!({ "require": "undefined", "process": "undefined", "fetch": "undefined", "std": "undefined", "os": "undefined",
                "xhr": "undefined", "ws": "undefined", "module": "refused", "globals": [] }),
        "{reached}"
    );
    // A program that names tools with a megabyte of text: its list of calls stays small.
    let named = "for (let i = 0; i < 3; i++) { try { await tools.call('x'.repeat(1 << 20), {}); } catch (e) {} }\nthrow new Error('done');";
    let text = stopped(&run_as(&s.code, "carol-key", named).await);
    assert!(
        text.len() < 4_000 && text.matches(": unknown_or_denied").count() == 3,
        "{} bytes: {}",
        text.len(),
        &text[..text.len().min(400)]
    );
    // Too big to run: refused before anything starts.
    let huge = format!("return '{}';", "x".repeat(70 << 10));
    assert!(stopped(&run_as(&s.code, "carol-key", &huge).await).contains("at most 65536 bytes"));
    // A slow tool past the wall clock: stopped, with the calls it made listed.
    let slow = "await tools.calc__add({ a: 1, b: 1 }); await tools.alpha__slow({ seconds: 10 }); return 'never';";
    let text = stopped(&run_as(&s.code, "carol-key", slow).await);
    assert!(text.contains("wall_clock limit") && text.contains("- calc__add: ok") && text.contains("- alpha__slow: abandoned"), "{text}");
    // Four spinning programs at once: /healthz answers quickly all along.
    let spinners: Vec<_> = (0..4)
        .map(|_| {
            let url = s.code.clone();
            tokio::spawn(async move { run_as(&url, "carol-key", "for (;;) {}").await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A fifth is refused at once: the replica is full.
    let full = stopped(&run_as(&s.code, "carol-key", "return 1").await);
    assert!(full.contains("programs are already running"), "{full}");
    // Each poll is a new connection; the suite runs many tests at once on a small machine, so the
    // typical poll (the median) is held to 100 ms, and none may stall.
    let mut took = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let r = get(&format!("{}/healthz", s.gw.base)).await.expect("healthz");
        assert_eq!(r.status, 200);
        took.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    took.sort();
    let (median, slowest) = (took[took.len() / 2], took[took.len() - 1]);
    assert!(median < Duration::from_millis(100) && slowest < Duration::from_secs(1), "/healthz took {took:?} while programs spun");
    for spinner in spinners {
        let msg = spinner.await.expect("the spinner's request");
        assert!(text_of(&msg).contains("cpu limit"), "{msg}");
    }
}
