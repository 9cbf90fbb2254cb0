//! Part 31 (findings 4 and 11): a person's confirmation runs the confirmed call once, on the
//! endpoint it was asked on, with exactly the arguments shown. Replaying an accepted answer brings
//! a new question (the upstream never runs it twice), an answer taken to another endpoint is not a
//! confirmation there, and numbers are bound and shown by their exact text (two integers that round
//! to the same `f64` are two different calls).

use crate::harness::*;
use serde_json::{Value, json};

async fn served_calls(url: &str) -> u64 {
    text_of(&call(url, "py__calls", json!({})).await).parse().unwrap_or(u64::MAX)
}

fn asking_meta() -> Value {
    let mut meta = meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({ "elicitation": {} });
    meta
}

/// A `tools/call` of `tool` whose arguments are the JSON text `args` (sent as written), with
/// `extra` members (a state and answers) added to the params.
async fn call_raw(url: &str, tool: &str, args: &str, extra: &Value) -> Value {
    let mut params = json!({ "name": tool, "_meta": asking_meta() });
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    let headers = modern_headers("tools/call", &params);
    let refs: Vec<(&str, &str)> = headers.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let params_text = params.to_string();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"arguments":{args},{}}}"#,
        params_text.strip_prefix('{').unwrap_or(&params_text)
    );
    post_raw(url, &refs, body).await.message()
}

fn yes(state: &str) -> Value {
    json!({ "requestState": state, "inputResponses": { "mcpgate-confirm": { "action": "accept", "content": { "confirm": true } } } })
}

fn state_of(asked: &Value) -> String {
    assert_eq!(asked["result"]["resultType"], "input_required", "a question: {asked}");
    asked["result"]["requestState"].as_str().expect("a state").to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_accepted_confirmation_runs_once_and_only_on_its_endpoint() {
    let (_up, url) = py_http("alpha", &[]);
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[confirm]]\ntools = [\"py__echo\"]\n\n\
         [[upstream]]\nid = \"py\"\nurl = \"{url}\"\n\n\
         [[endpoint]]\npath = \"/mcp/ops\"\ninclude = [\"py__*\"]\n"
    ));
    let ops = gw.url.replace("/mcp", "/mcp/ops");
    let args = r#"{"text":"drop it"}"#;
    // Asked on the root endpoint, answered on the virtual one: not a confirmation there.
    let state = state_of(&call_raw(&gw.url, "py__echo", args, &json!({})).await);
    let before = served_calls(&gw.url).await;
    let moved = call_raw(&ops, "py__echo", args, &yes(&state)).await;
    assert_eq!(moved["result"]["resultType"], "input_required", "an answer is bound to its endpoint: {moved}");
    assert_eq!(served_calls(&gw.url).await, before + 1, "the moved answer did not run");
    // Answered where it was asked: runs once.
    let ran = call_raw(&gw.url, "py__echo", args, &yes(&state)).await;
    assert_eq!(text_of(&ran), "drop it", "{ran}");
    assert_eq!(served_calls(&gw.url).await, before + 3, "the confirmed call ran once");
    // The same accepted answer again, on either endpoint: a new question, never a second run.
    for at in [&gw.url, &ops] {
        let replay = call_raw(at, "py__echo", args, &yes(&state)).await;
        assert_eq!(replay["result"]["resultType"], "input_required", "a confirmation is spent once used: {replay}");
    }
    assert_eq!(served_calls(&gw.url).await, before + 4, "no replay ran");
    let log = gw.proc.log();
    assert!(log.contains("confirmation_spent"), "the replay is audited as what it is: {log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_confirmation_binds_and_shows_numbers_as_written() {
    let (_up, url) = py_http("alpha", &[]);
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[confirm]]\ntools = [\"py__structured\"]\n\n\
         [[upstream]]\nid = \"py\"\nurl = \"{url}\"\n"
    ));
    // 2^64 + 1 and 2^64 are one f64: the question shows the number sent, and the answer to it
    // does not confirm the other.
    let asked = call_raw(&gw.url, "py__structured", r#"{"a":18446744073709551617,"b":1}"#, &json!({})).await;
    let message = asked["result"]["inputRequests"]["mcpgate-confirm"]["params"]["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("18446744073709551617"), "the exact number is shown: {message}");
    let state = state_of(&asked);
    let other = call_raw(&gw.url, "py__structured", r#"{"a":18446744073709551616,"b":1}"#, &yes(&state)).await;
    assert_eq!(other["result"]["resultType"], "input_required", "another number needs its own confirmation: {other}");
    // The number that was shown runs, with its exact value.
    let state = state_of(&call_raw(&gw.url, "py__structured", r#"{"a":18446744073709551617,"b":1}"#, &json!({})).await);
    let ran = call_raw(&gw.url, "py__structured", r#"{"a":18446744073709551617,"b":1}"#, &yes(&state)).await;
    assert!(text_of(&ran).contains("18446744073709551618"), "the upstream received the exact number: {ran}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_confirmed_calls_own_rounds_are_answered_once() {
    // An upstream that asks a question of its own and completes on any retry carrying its state.
    let (url, retries) = crate::input::state_upstream().await;
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[confirm]]\ntools = [\"st__ask\"]\n\n[[upstream]]\nid = \"st\"\nurl = \"{url}\"\n"
    ));
    let state = state_of(&call_raw(&gw.url, "st__ask", "{}", &json!({})).await);
    let round = call_raw(&gw.url, "st__ask", "{}", &yes(&state)).await;
    assert!(round["result"]["inputRequests"]["q"].is_object(), "confirmed, and the upstream asks its own question: {round}");
    let round_state = round["result"]["requestState"].as_str().expect("the round's state").to_string();
    let answer = json!({ "requestState": round_state, "inputResponses": { "q": { "action": "accept", "content": {} } } });
    let done = call_raw(&gw.url, "st__ask", "{}", &answer).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(retries.load(std::sync::atomic::Ordering::SeqCst), 1);
    // The round's answer replayed: the gateway's question again, not a second run.
    let replay = call_raw(&gw.url, "st__ask", "{}", &answer).await;
    assert!(replay["result"]["inputRequests"]["mcpgate-confirm"].is_object(), "{replay}");
    assert_eq!(retries.load(std::sync::atomic::Ordering::SeqCst), 1, "the upstream ran the confirmed call once");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_cluster_a_confirmation_asked_on_one_replica_runs_once_on_any() {
    let redis = crate::cluster::Redis::start();
    let (_up, url) = py_http("alpha", &[]);
    let key = "5d".repeat(32);
    let env = [("MCPGATE_TOKEN_KEY", key.as_str())];
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[cluster]\nredis = \"{}\"\n\n[[confirm]]\ntools = [\"py__echo\"]\n\n\
         [[upstream]]\nid = \"py\"\nurl = \"{url}\"\n",
        redis.url()
    );
    let (a, b) = (gateway_with_env(&config, &env), gateway_with_env(&config, &env));
    let args = r#"{"text":"once"}"#;
    let state = state_of(&call_raw(&a.url, "py__echo", args, &json!({})).await);
    let ran = call_raw(&b.url, "py__echo", args, &yes(&state)).await;
    assert_eq!(text_of(&ran), "once", "answered on another replica: {ran}");
    for at in [&a.url, &b.url] {
        let replay = call_raw(at, "py__echo", args, &yes(&state)).await;
        assert_eq!(replay["result"]["resultType"], "input_required", "spent on every replica: {replay}");
    }
}
