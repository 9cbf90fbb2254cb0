//! Part 37: a `[[confirm]]` inside a program. The call that needs a person pauses the program; the
//! question reaches the client of the `run_code` call as an input request (a modern client's
//! `input_required`, a legacy client's `elicitation/create` through the bridge), and the person is
//! asked once and the call runs once, in both eras with the official Python SDK client. A decline
//! is a `ToolError` the program can catch; a replayed retry runs nothing; a program nobody answers
//! is dropped after the input timeout and audited as abandoned.

use crate::harness::*;
use serde_json::{Value, json};
use std::time::Duration;

fn config(alpha: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\ninput_timeout = \"3s\"\n\n[audit]\nfile = \"audit.jsonl\"\n\n\
         [[confirm]]\ntools = [\"alpha__echo\"]\n\n\
         [[endpoint]]\npath = \"/mcp/code\"\ninclude = [\"alpha__*\"]\ncode_mode = true\n\n\
         [[upstream]]\nid = \"alpha\"\nurl = \"{alpha}\"\n"
    )
}

async fn served_calls(url: &str) -> u64 {
    text_of(&call(url, "alpha__calls", json!({})).await).parse().unwrap_or(u64::MAX)
}

const PROGRAM: &str = "const r = await tools.alpha__echo({ text: 'ship it' });\n\
                       return { echoed: r.text };";

const CATCHING: &str = "try { await tools.alpha__echo({ text: 'ship it' }); return 'ran'; }\n\
                        catch (e) { return { reason: e.reason, message: e.message }; }";

#[tokio::test(flavor = "multi_thread")]
async fn a_confirmation_inside_a_program_asks_once_and_runs_once_in_both_eras() {
    let (_alpha, alpha_url) = py_http("alpha", &[]);
    let gw = gateway(&config(&alpha_url));
    let code = gw.url.replace("/mcp", "/mcp/code");
    let args = json!({ "code": PROGRAM }).to_string();
    for mode in ["2026-07-28", "legacy"] {
        let before = served_calls(&gw.url).await;
        let lines = sdk_lines(&["--mode", mode, "--elicit", r#"{"confirm":true}"#], &code, &["call", "run_code", &args]);
        let asked: Vec<&Value> = lines.iter().filter(|l| l.get("asked").is_some()).collect();
        assert_eq!(asked.len(), 1, "{mode}: the person is asked once: {lines:?}");
        let message = asked[0]["params"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("alpha__echo") && message.contains("ship it"), "{mode}: the question shows the call: {message}");
        let result = lines.last().cloned().unwrap_or_default();
        assert_eq!(result["structuredContent"], json!({ "echoed": "ship it" }), "{mode}: {result}");
        // `before` counted itself; the confirmed call ran once; this count is the third.
        assert_eq!(served_calls(&gw.url).await, before + 2, "{mode}: the confirmed call ran once");
    }
    // Declined: the program catches a ToolError that says so.
    let args = json!({ "code": CATCHING }).to_string();
    let lines = sdk_lines(&["--mode", "2026-07-28", "--elicit", r#"{"confirm":false}"#], &code, &["call", "run_code", &args]);
    let result = lines.last().cloned().unwrap_or_default();
    let caught = &result["structuredContent"];
    assert_eq!(caught["reason"], "confirmation_declined", "{result}");
    assert_eq!(caught["message"], "alpha__echo was not run: the call was not confirmed.", "{result}");
}

fn question_of(msg: &Value) -> (String, Value) {
    let r = &msg["result"];
    assert_eq!(r["resultType"], "input_required", "a question: {msg}");
    (r["requestState"].as_str().expect("a state").to_string(), r["inputRequests"].clone())
}

fn asking_meta() -> Value {
    let mut meta = meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({ "elicitation": {} });
    meta
}

async fn retry(url: &str, state: &str, answers: Value) -> Value {
    let params = json!({
        "name": "run_code", "arguments": { "code": PROGRAM }, "requestState": state, "inputResponses": answers,
        "_meta": asking_meta(),
    });
    rpc(url, "tools/call", params).await.message()
}

async fn ask(url: &str) -> Value {
    let params = json!({
        "name": "run_code", "arguments": { "code": PROGRAM },
        "_meta": asking_meta(),
    });
    rpc(url, "tools/call", params).await.message()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_program_resumes_once_and_is_dropped_when_nobody_answers() {
    let (_alpha, alpha_url) = py_http("alpha", &[]);
    let gw = gateway(&config(&alpha_url));
    let code = gw.url.replace("/mcp", "/mcp/code");
    let yes = json!({ "mcpgate-confirm": { "action": "accept", "content": { "confirm": true } } });
    let (state, asks) = question_of(&ask(&code).await);
    assert!(asks["mcpgate-confirm"]["params"]["message"].as_str().is_some_and(|m| m.contains("ship it")), "{asks}");
    let before = served_calls(&gw.url).await;
    let done = retry(&code, &state, yes.clone()).await;
    assert_eq!(done["result"]["structuredContent"], json!({ "echoed": "ship it" }), "{done}");
    // The same retry again: nothing waits for it, and nothing runs.
    let replay = retry(&code, &state, yes.clone()).await;
    assert_eq!(replay["result"]["isError"], true, "{replay}");
    assert!(text_of(&replay).contains("no longer waiting"), "{replay}");
    assert_eq!(served_calls(&gw.url).await, before + 2, "the confirmed call ran once");
    // A state that is not a paused program's: refused.
    let forged = retry(&code, "not-a-state", yes.clone()).await;
    assert_eq!(forged["error"]["code"], -32602, "{forged}");
    // Nobody answers: after the input timeout the program is gone, audited as abandoned.
    let (state, _) = question_of(&ask(&code).await);
    let id = {
        let again = ask(&code).await;
        again["result"]["_meta"]["io.mcpgate/program"].as_str().unwrap_or_default().to_string()
    };
    tokio::time::sleep(Duration::from_millis(4_000)).await;
    let late = retry(&code, &state, yes).await;
    assert!(late.get("error").is_some() || text_of(&late).contains("no longer waiting"), "{late}");
    let path = gw.config_path.parent().expect("the config's folder").join("audit.jsonl");
    let audit = std::fs::read_to_string(path).unwrap_or_default();
    let abandoned = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|r| r["program"] == id.as_str() && r["item"] == "run_code" && r["outcome"] == "abandoned");
    assert!(abandoned, "the unanswered program {id} is audited as abandoned: {audit}");
    assert_eq!(served_calls(&gw.url).await, before + 3, "an unanswered program ran nothing");
    // A null requestState is no retry: the program runs (and asks).
    let params = json!({ "name": "run_code", "arguments": { "code": PROGRAM }, "requestState": null, "_meta": asking_meta() });
    let fresh = rpc(&code, "tools/call", params).await.message();
    assert_eq!(fresh["result"]["resultType"], "input_required", "{fresh}");
}
