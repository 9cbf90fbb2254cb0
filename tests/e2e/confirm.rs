//! Part 21: calls a person must confirm (`[[confirm]]`), with the official Python SDK client in
//! both eras answering the gateway's question: the upstream sees the call only after an accept,
//! with exactly the confirmed arguments; a decline never reaches it; a client that cannot be
//! asked is refused with the rule named; a tampered state, or changed arguments, bring a new
//! question instead of the call. And secrets in results (`[secrets]`): redacted or withheld,
//! audited and counted by detector, never logged.

use crate::harness::*;
use serde_json::{Value, json};

fn run(url: &str, options: &[&str], args: &[&str]) -> (bool, Vec<Value>) {
    let (out, lines) = sdk_run(options, url, args);
    (out.status.success(), lines)
}

async fn served_calls(url: &str) -> u64 {
    text_of(&call(url, "py__calls", json!({})).await).parse().unwrap_or(u64::MAX)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_confirmed_call_reaches_the_upstream_only_after_a_person_accepts() {
    let (_up, url) = py_http("alpha", &[]);
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[confirm]]\ntools = [\"py__echo\"]\nmessage = \"Echo talks to production.\"\n\n\
         [[upstream]]\nid = \"py\"\nurl = \"{url}\"\n"
    ));
    let echo = ["call", "py__echo", r#"{"text":"ship it"}"#];
    for mode in ["2026-07-28", "legacy"] {
        let before = served_calls(&gw.url).await;
        // Declined: refused, and the upstream never sees it.
        let (_, lines) = run(&gw.url, &["--mode", mode, "--no-list", "--decline"], &echo);
        let asked = lines.iter().find(|l| l["asked"] == "elicitation/create").unwrap_or_else(|| panic!("{mode}: asked: {lines:?}"));
        let message = asked["params"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("Echo talks to production.") && message.contains("py__echo") && message.contains("ship it"),
            "{mode}: {message}"
        );
        let last = lines.last().expect("a result");
        assert_eq!(last["isError"], true, "{mode}: declined: {last}");
        assert_eq!(served_calls(&gw.url).await, before + 1, "{mode}: only the counter's own call reached the upstream");
        // Accepted: the upstream runs it, with exactly those arguments.
        let (ok, lines) = run(&gw.url, &["--mode", mode, "--no-list", "--elicit", r#"{"confirm":true}"#], &echo);
        assert!(ok, "{mode}: {lines:?}");
        let text = lines.last().and_then(|l| l["content"][0]["text"].as_str()).unwrap_or_default().to_string();
        assert!(text.contains("ship it"), "{mode}: {lines:?}");
        assert_eq!(served_calls(&gw.url).await, before + 3, "{mode}: the accepted call ran once");
    }
    // A client that declared no elicitation cannot be asked: refused, naming the rule.
    let refused = call(&gw.url, "py__echo", json!({ "text": "x" })).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(text_of(&refused).contains("[[confirm]] #1"), "{refused}");

    // By hand, with a client that declares elicitation: a tampered state and changed arguments
    // bring a new question, never the call.
    let mut meta = meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({ "elicitation": {} });
    let ask = |args: Value, extra: Value| {
        let mut params = json!({ "name": "py__echo", "arguments": args, "_meta": meta.clone() });
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        params
    };
    let first = rpc(&gw.url, "tools/call", ask(json!({ "text": "a" }), json!({}))).await.json();
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().expect("a state").to_string();
    let yes = json!({ "mcpgate-confirm": { "action": "accept", "content": { "confirm": true } } });
    let before = served_calls(&gw.url).await;
    let mut tampered = state.clone();
    let flip = if tampered.ends_with('A') { "B" } else { "A" };
    tampered.replace_range(tampered.len() - 1.., flip);
    let forged =
        rpc(&gw.url, "tools/call", ask(json!({ "text": "a" }), json!({ "requestState": tampered, "inputResponses": yes }))).await.json();
    assert_eq!(forged["result"]["resultType"], "input_required", "a tampered state is not a confirmation: {forged}");
    let changed =
        rpc(&gw.url, "tools/call", ask(json!({ "text": "b" }), json!({ "requestState": state, "inputResponses": yes }))).await.json();
    assert_eq!(changed["result"]["resultType"], "input_required", "changed arguments need a fresh confirmation: {changed}");
    assert_eq!(served_calls(&gw.url).await, before + 1, "neither reached the upstream");
    let good =
        rpc(&gw.url, "tools/call", ask(json!({ "text": "a" }), json!({ "requestState": state, "inputResponses": yes }))).await.json();
    assert!(good["result"]["content"][0]["text"].as_str().unwrap_or_default().contains('a'), "{good}");
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_in_results_are_redacted_or_withheld_and_never_logged() {
    let (_up, url) = py_http("alpha", &[]);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[secrets]\nbuiltin = \"redact\"\n\n\
         [[secrets.pattern]]\nname = \"internal\"\nregex = \"itk_[a-z0-9]{{12}}\"\naction = \"block\"\n\n\
         [[upstream]]\nid = \"py\"\nurl = \"{url}\"\n"
    );
    let gw = gateway(&config);
    let key = "AKIAIOSFODNN7EXAMPLE";
    let redacted = call(&gw.url, "py__echo", json!({ "text": format!("the key is {key}") })).await;
    let text = text_of(&redacted);
    assert!(text.contains("[REDACTED:aws-access-key]") && !text.contains(key), "{redacted}");
    let internal = "itk_abcdef123456";
    let blocked = call(&gw.url, "py__echo", json!({ "text": format!("token {internal}") })).await;
    assert_eq!(blocked["result"]["isError"], true, "{blocked}");
    assert!(text_of(&blocked).contains("(internal)") && !blocked.to_string().contains(internal), "{blocked}");
    let log = gw.proc.log();
    assert!(log.contains("secret_redacted:aws-access-key") && log.contains("secret_blocked:internal"), "audited: {log}");
    assert!(!log.contains(key) && !log.contains(internal), "what matched is never logged");
    let metrics = String::from_utf8_lossy(&get(&format!("{}/metrics", gw.base)).await.expect("metrics").body).to_string();
    assert!(metrics.contains(r#"reason="secret_redacted"} 1"#) && metrics.contains(r#"reason="secret_blocked"} 1"#), "{metrics}");
}
