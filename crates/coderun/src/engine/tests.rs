//! The engine run in-process with a fake host: values, tool errors, every limit, and what a
//! program can and cannot reach. Limits are small (200 ms of running) so the suite stays fast.

use super::*;
use crate::wire::ToolFailure;
use serde_json::{Value as Json, json};

/// Answers `fail` with a refusal, `slow` after 300 ms, anything else with what it was asked.
#[derive(Default)]
struct Fake {
    calls: Vec<(String, String)>,
}

impl Host for Fake {
    fn call(&mut self, tool: &str, arguments: &str) -> Answer {
        self.calls.push((tool.to_owned(), arguments.to_owned()));
        let args: Json = serde_json::from_str(arguments).unwrap_or(Json::Null);
        match tool {
            "fail" => Answer::Error(ToolFailure {
                reason: "denied_by_rule".into(),
                code: Some(-32003),
                message: "denied by rule no-writes".into(),
                result: Some(json!({"isError": true})),
            }),
            "slow" => {
                std::thread::sleep(Duration::from_millis(300));
                Answer::Ok(json!("late"))
            }
            _ => Answer::Ok(json!({"tool": tool, "args": args})),
        }
    }
}

fn limits() -> Limits {
    Limits { heap: 32 << 20, stack: 256 << 10, cpu_ms: 200, calls: 50, output: 1 << 20, logs: 4 << 10 }
}

fn names() -> Vec<String> {
    ["echo", "other-tool", "fail", "slow", "call"].iter().map(|s| s.to_string()).collect()
}

fn run_with(program: &str, limits: Limits) -> (Ended, Fake) {
    let mut host = Fake::default();
    let ended = Engine::run(program, &names(), &limits, &mut host);
    (ended, host)
}

fn run(program: &str) -> (Ended, Fake) {
    run_with(program, limits())
}

fn value(program: &str) -> Json {
    match run(program).0 {
        Ended::Done(done) => done.value,
        other => panic!("{program}: {other:?}"),
    }
}

fn failed(program: &str) -> Failed {
    match run(program).0 {
        Ended::Failed(failed) => failed,
        other => panic!("{program}: {other:?}"),
    }
}

fn limit_of(program: &str) -> Option<Limit> {
    let f = failed(program);
    assert!(f.kind == FailKind::Limit || f.limit.is_none(), "{f:?}");
    f.limit
}

#[test]
fn two_calls_make_one_combined_value() {
    let program = r#"
        const a = await tools.echo({x: 1});
        const b = await tools["other-tool"]({y: 2});
        const [c, d] = await Promise.all([tools.call("echo", {n: 3}), tools.echo()]);
        return {a, b, c: c.args, d: d.args};
    "#;
    let (ended, host) = run(program);
    let Ended::Done(done) = ended else { panic!("{ended:?}") };
    assert_eq!(
        done.value,
        json!({"a": {"tool": "echo", "args": {"x": 1}}, "b": {"tool": "other-tool", "args": {"y": 2}}, "c": {"n": 3}, "d": {}})
    );
    let asked: Vec<(&str, &str)> = host.calls.iter().map(|(t, a)| (t.as_str(), a.as_str())).collect();
    assert_eq!(asked, [("echo", r#"{"x":1}"#), ("other-tool", r#"{"y":2}"#), ("echo", r#"{"n":3}"#), ("echo", "{}")]);
}

#[test]
fn a_tool_error_is_caught_with_its_fields_and_rethrown() {
    let caught = value(
        r#"try { await tools.fail({}); return "no error"; } catch (e) {
            return {is: e instanceof ToolError && e instanceof Error, name: e.name, reason: e.reason, code: e.code,
                    message: e.message, tool: e.tool, result: e.result};
        }"#,
    );
    assert_eq!(
        caught,
        json!({"is": true, "name": "ToolError", "reason": "denied_by_rule", "code": -32003,
               "message": "denied by rule no-writes", "tool": "fail", "result": {"isError": true}})
    );
    let rethrown = failed(r#"try { await tools.fail({}); } catch (e) { console.log("saw " + e.reason); throw e; }"#);
    assert_eq!((rethrown.kind, rethrown.limit), (FailKind::Exception, None));
    assert_eq!(rethrown.message, "ToolError: denied by rule no-writes");
    assert_eq!(rethrown.logs, ["saw denied_by_rule"]);
}

#[test]
fn a_loop_is_stopped_and_cannot_catch_the_stop() {
    for program in [
        "for (;;) {}",
        "try { for (;;) {} } catch (e) {} return 1;",
        "for (;;) { try { for (;;) {} } catch (e) {} finally { continue; } }",
        "await null; for (;;) {}",
    ] {
        let started = Instant::now();
        assert_eq!(limit_of(program), Some(Limit::Cpu), "{program}");
        assert!(started.elapsed() < Duration::from_secs(2), "{program}: {:?}", started.elapsed());
    }
}

#[test]
fn a_catastrophic_regex_is_stopped() {
    assert_eq!(limit_of(r#"return /^(a+)+$/.test("a".repeat(40) + "!");"#), Some(Limit::Cpu));
}

#[test]
fn an_allocation_loop_meets_the_heap_limit() {
    assert_eq!(limit_of(r#"const a = []; for (;;) a.push("x".repeat(1e6));"#), Some(Limit::Heap));
}

#[test]
fn deep_recursion_meets_the_stack_limit() {
    assert_eq!(limit_of("f = () => f(); f();"), Some(Limit::Stack));
    assert_eq!(limit_of("const g = (n) => g(n + 1) + 1; return g(0);"), Some(Limit::Stack));
    let nested = limit_of(r#"return JSON.parse("[".repeat(1e6));"#);
    assert!(matches!(nested, Some(Limit::Stack | Limit::Heap)), "{nested:?}");
}

#[test]
fn the_call_past_the_limit_ends_the_program() {
    let (ended, host) = run(r#"for (let i = 0; i < 51; i++) await tools.echo({i}); return "all";"#);
    let Ended::Failed(f) = ended else { panic!("{ended:?}") };
    assert_eq!((f.kind, f.limit), (FailKind::Limit, Some(Limit::Calls)));
    assert_eq!(host.calls.len(), 50);
    // Catching the refusal does not save the program.
    let (ended, _) = run(r#"for (let i = 0; i < 60; i++) { try { await tools.echo({i}); } catch (e) {} } return "all";"#);
    assert!(matches!(ended, Ended::Failed(Failed { limit: Some(Limit::Calls), .. })), "{ended:?}");
}

#[test]
fn a_large_value_meets_the_output_limit() {
    let f = failed(r#"return "x".repeat(2 * 1024 * 1024);"#);
    assert_eq!((f.kind, f.limit), (FailKind::Limit, Some(Limit::Output)));
    assert!(f.message.contains("2097154 bytes"), "{}", f.message);
}

#[test]
fn a_log_flood_is_truncated() {
    let (ended, _) = run(r#"for (let i = 0; i < 5000; i++) console.log("line", i, {i}); return "done";"#);
    let Ended::Done(done) = ended else { panic!("{ended:?}") };
    assert_eq!(done.value, json!("done"));
    assert_eq!(done.logs.first().map(String::as_str), Some(r#"line 0 {"i":0}"#));
    assert_eq!(done.logs.last().map(String::as_str), Some(TRUNCATED));
    let kept: usize = done.logs[..done.logs.len() - 1].iter().map(String::len).sum();
    assert!(kept <= limits().logs, "{kept}");
}

#[test]
fn no_ambient_io_is_reachable() {
    let kinds = value(
        r#"return [typeof require, typeof process, typeof std, typeof os, typeof fetch, typeof XMLHttpRequest,
                   typeof globalThis.require, typeof module, typeof Deno, typeof print];"#,
    );
    assert_eq!(kinds, Json::from(vec!["undefined"; 10]));
    let imported = value(r#"try { await import("fs"); return "loaded"; } catch (e) { return "rejected"; }"#);
    assert_eq!(imported, json!("rejected"));
    // Atomics.wait would block the thread where no interrupt reaches it: QuickJS refuses it.
    let wait =
        value(r#"try { Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); return "blocked"; } catch (e) { return e.message; }"#);
    assert_eq!(wait, json!("cannot block in this thread"));
    let static_import = failed(r#"import fs from "fs"; return 1;"#);
    assert_eq!(static_import.kind, FailKind::Exception);
}

/// Every global a program sees. A new one (a native bridge left behind, an intrinsic a new QuickJS
/// adds) fails here until it is looked at.
const GLOBALS: &[&str] = &[
    "AggregateError",
    "Array",
    "ArrayBuffer",
    "AsyncDisposableStack",
    "Atomics",
    "BigInt",
    "BigInt64Array",
    "BigUint64Array",
    "Boolean",
    "DOMException",
    "DataView",
    "Date",
    "DisposableStack",
    "Error",
    "EvalError",
    "FinalizationRegistry",
    "Float16Array",
    "Float32Array",
    "Float64Array",
    "Function",
    "Infinity",
    "Int16Array",
    "Int32Array",
    "Int8Array",
    "InternalError",
    "Iterator",
    "JSON",
    "Map",
    "Math",
    "NaN",
    "Number",
    "Object",
    "Promise",
    "Proxy",
    "RangeError",
    "ReferenceError",
    "Reflect",
    "RegExp",
    "Set",
    "SharedArrayBuffer",
    "String",
    "SuppressedError",
    "Symbol",
    "SyntaxError",
    "ToolError",
    "TypeError",
    "URIError",
    "Uint16Array",
    "Uint32Array",
    "Uint8Array",
    "Uint8ClampedArray",
    "WeakMap",
    "WeakRef",
    "WeakSet",
    "atob",
    "btoa",
    "console",
    "decodeURI",
    "decodeURIComponent",
    "encodeURI",
    "encodeURIComponent",
    "escape",
    "eval",
    "globalThis",
    "isFinite",
    "isNaN",
    "parseFloat",
    "parseInt",
    "performance",
    "queueMicrotask",
    "tools",
    "undefined",
    "unescape",
];

#[test]
fn the_globals_are_a_pinned_list_and_the_bridge_is_not_among_them() {
    let seen = value("return Object.getOwnPropertyNames(globalThis).sort();");
    let seen: Vec<&str> = seen.as_array().into_iter().flatten().filter_map(Json::as_str).collect();
    assert_eq!(seen, GLOBALS);
    // The tools object: null prototype, frozen, one function per name, `call` the generic one.
    let shape = value(
        r#"const before = Object.keys(tools);
           try { tools.echo = () => "forged"; } catch (e) {}
           try { tools.extra = 1; } catch (e) {}
           return {proto: Object.getPrototypeOf(tools) === null, frozen: Object.isFrozen(tools), keys: before,
                   echo: typeof tools.echo, extra: typeof tools.extra, call: typeof tools.call,
                   forged: (await tools.echo({})).tool};"#,
    );
    assert_eq!(
        shape,
        json!({"proto": true, "frozen": true, "keys": ["echo", "other-tool", "fail", "slow"], "echo": "function",
               "extra": "undefined", "call": "function", "forged": "echo"})
    );
    // A tool named `call` is still reachable, through tools.call.
    assert_eq!(value(r#"return (await tools.call("call", {a: 1})).tool;"#), json!("call"));
}

#[test]
fn bigint_and_cyclic_values_are_a_clear_error() {
    let big = failed("return {n: 10n};");
    assert_eq!((big.kind, big.limit), (FailKind::Exception, None));
    assert!(big.message.starts_with("the program's value cannot be written as JSON: TypeError: a BigInt"), "{}", big.message);
    let cyclic = failed("const a = {}; a.self = a; return a;");
    assert_eq!((cyclic.kind, cyclic.limit), (FailKind::Exception, None));
    assert!(cyclic.message.starts_with("the program's value cannot be written as JSON: TypeError:"), "{}", cyclic.message);
    assert!(cyclic.message.contains("circular"), "{}", cyclic.message);
}

#[test]
fn exceptions_syntax_errors_and_odd_ends_are_reported() {
    let thrown = failed(r#"throw new Error("boom");"#);
    assert_eq!(thrown.message, "Error: boom");
    assert!(thrown.stack.as_deref().is_some_and(|s| s.contains("program")), "{thrown:?}");
    assert_eq!(failed(r#"throw {code: 7};"#).message, r#"the program threw {"code":7}"#);
    assert_eq!(failed("return (;").kind, FailKind::Exception);
    assert!(failed("await new Promise(() => {});").message.contains("nothing is left to settle"));
    assert_eq!(value("const x = 1;"), Json::Null);
    assert_eq!(value("return undefined;"), Json::Null);
}

#[test]
fn waiting_for_an_answer_is_not_running_time() {
    let (ended, host) = run(r#"return [await tools.slow(), await tools.slow()];"#);
    assert_eq!(ended, Ended::Done(Done { value: json!(["late", "late"]), logs: vec![] }));
    assert_eq!(host.calls.len(), 2);
}

#[test]
fn a_call_left_queued_when_the_program_ends_is_never_made() {
    let (ended, host) = run(r#"tools.echo({late: true}); return "early";"#);
    assert_eq!(ended, Ended::Done(Done { value: json!("early"), logs: vec![] }));
    assert!(host.calls.is_empty(), "{:?}", host.calls);
}

#[test]
fn a_heap_too_small_to_start_is_a_heap_failure() {
    let (ended, host) = run_with("return 1;", Limits { heap: 16 << 10, ..limits() });
    assert!(matches!(ended, Ended::Failed(Failed { limit: Some(Limit::Heap), .. })), "{ended:?}");
    assert!(host.calls.is_empty());
}

#[test]
fn empty_log_lines_count_toward_the_limit() {
    let (ended, _) = run("for (let i = 0; i < 100000; i++) console.log(); return 1;");
    let Ended::Done(done) = ended else { panic!("{ended:?}") };
    assert!(done.logs.len() <= limits().logs + 1, "{} lines", done.logs.len());
    assert_eq!(done.logs.last().map(String::as_str), Some(TRUNCATED));
}

#[test]
fn a_huge_thrown_message_is_cut() {
    let f = failed(r#"throw new Error("é".repeat(1000000));"#);
    assert_eq!(f.kind, FailKind::Exception);
    assert!(f.message.len() <= THROWN_TEXT + '…'.len_utf8() && f.message.ends_with('…'), "{}", f.message.len());
    assert!(f.message.starts_with("Error: éé"), "{}", &f.message[..20]);
    assert!(f.stack.as_ref().is_none_or(|s| s.len() <= THROWN_TEXT + '…'.len_utf8()));
}
