//! No decider gives way on what it cannot read (docs/security.md, "A decider that cannot read
//! refuses"): every decision point of the gateway — the rules, the guards at the request, result,
//! input and catalogue points, `[secrets]`, pins and argument validation — is fed, one at a time,
//! a message holding a lone surrogate, a number past a float's range, 200 levels of nesting, a key
//! given twice and bytes that are not UTF-8, in each place it reads (a call's arguments and
//! `_meta`, a result, a question, a definition). Each message also carries what that decider
//! exists to stop (a key, an injection, an argument a rule denies): it must be refused or
//! withheld, never passed because the decider could not read it. A clean message of the same shape
//! passes, so the test can fail.

use crate::harness::*;
use bytes::Bytes;
use serde_json::json;
use std::time::{Duration, Instant};

/// Each poison, as raw JSON text (`utf8` holds the byte 0xff inside a string).
fn poisons() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("surrogate", br#""\ud800""#.to_vec()),
        ("number", b"1e400".to_vec()),
        ("deep", [vec![b'['; 200], b"1".to_vec(), vec![b']'; 200]].concat()),
        ("duplicate", br#"{"x":1,"x":2}"#.to_vec()),
        ("utf8", b"\"\xff\"".to_vec()),
    ]
}

const KEY: &str = "AKIAIOSFODNN7EXAMPLE";
const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

fn upstream(flags: &str) -> String {
    let script = repo().join("tests/py/unreadable_server.py");
    format!("command = [{:?}, {:?}{flags}]\ntimeout = \"4s\"\n", python(), script.display().to_string())
}

fn config(rest: &str) -> String {
    format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"up\"\n{}\n{rest}", upstream(""))
}

/// A `tools/call` of `tool` (a `prompts/get` when it names a prompt, `up__greet`) whose body is
/// `arguments` and `_meta` as raw text, with `@` in either replaced by `poison`.
async fn raw_call(url: &str, tool: &str, arguments: &str, meta: &str, poison: &[u8]) -> (u16, String) {
    let method = if tool == "up__greet" { "prompts/get" } else { "tools/call" };
    let params = format!(r#"{{"name":"{tool}","arguments":{arguments},"_meta":{meta}}}"#);
    let head = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#);
    let mut body = Vec::new();
    let mut parts = head.split('@');
    body.extend_from_slice(parts.next().unwrap_or_default().as_bytes());
    for part in parts {
        body.extend_from_slice(poison);
        body.extend_from_slice(part.as_bytes());
    }
    let headers = modern_headers(method, &json!({ "name": tool }));
    let refs: Vec<(&str, &str)> = headers.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let resp = post_raw(url, &refs, Bytes::from(body)).await;
    (resp.status, String::from_utf8_lossy(&resp.body).into_owned())
}

fn meta_text() -> String {
    meta().to_string()
}

/// A `_meta` with `@` in a member of its own.
fn poisoned_meta() -> String {
    let m = meta_text();
    format!("{},\"p\":@}}", &m[..m.len() - 1])
}

/// Whether the upstream answered the call (the echo tool says what it received).
fn forwarded(body: &str) -> bool {
    body.contains("received ")
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_and_meta_that_cannot_be_read_are_refused_by_every_decider() {
    // Each decider alone (validation is off but for its own case, so that it does not refuse
    // first), on a tool call and a prompt get.
    let off = "validate_arguments = false\n";
    let deciders = [
        (
            "rule",
            off,
            "[[rule]]\nname = \"no-secret\"\neffect = \"deny\"\ntools = [\"up__echo\"]\nprompts = [\"up__greet\"]\nwhen = 'has(args.secret)'\n",
        ),
        ("request guard", off, "[[guard]]\nname = \"keys\"\npoints = [\"request\"]\nbuiltin = \"secrets\"\naction = \"block\"\n"),
        ("validation", "", ""),
    ];
    for (decider, validation, rest) in deciders {
        let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"up\"\n{}{validation}\n{rest}", upstream("")));
        for item in ["up__echo", "up__greet"] {
            if decider == "validation" && item == "up__greet" {
                continue;
            }
            // What the decider stops, plainly written, is stopped; an innocent call passes.
            let (_, plain) = raw_call(&gw.url, item, &format!(r#"{{"secret":"{TOKEN}"}}"#), &meta_text(), b"").await;
            let (_, innocent) = raw_call(&gw.url, item, r#"{"text":"hello","z":@}"#, &meta_text(), b"\"1\"").await;
            assert!(forwarded(&innocent), "{decider} {item}: {innocent}");
            if decider != "validation" {
                assert!(!forwarded(&plain), "{decider} {item}: {plain}");
            }
            for (kind, poison) in poisons() {
                let args = format!(r#"{{"secret":"{TOKEN}","z":@}}"#);
                let (status, body) = raw_call(&gw.url, item, &args, &meta_text(), &poison).await;
                assert!(!forwarded(&body), "{decider} {item}, {kind} in the arguments: forwarded ({status}): {body}");
                assert!(!body.contains(TOKEN), "{decider} {item}, {kind}: {body}");
                let (status, body) = raw_call(&gw.url, item, r#"{"text":"hello"}"#, &poisoned_meta(), &poison).await;
                assert!(!forwarded(&body), "{decider} {item}, {kind} in _meta: forwarded ({status}): {body}");
            }
            // The refusal says what could not be read.
            let (_, body) = raw_call(&gw.url, item, r#"{"secret":"x","z":@}"#, &meta_text(), br#""\ud800""#).await;
            assert!(body.contains("cannot read") && body.contains("surrogate"), "{decider} {item}: {body}");
        }
    }
}

/// The texts a client reads of a message (results, questions, errors), as one string.
async fn answer_of(url: &str, tool: &str) -> String {
    let mut m = meta();
    m["io.modelcontextprotocol/clientCapabilities"] = json!({ "elicitation": { "form": {} } });
    let resp = rpc(url, "tools/call", json!({ "name": tool, "arguments": {}, "_meta": m })).await;
    String::from_utf8_lossy(&resp.body).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn results_and_questions_that_cannot_be_read_are_withheld_by_every_decider() {
    let deciders = [
        ("result guard", "[[guard]]\nname = \"keys\"\npoints = [\"result\", \"input\"]\nbuiltin = \"secrets\"\naction = \"block\"\n"),
        ("injection guard", "[[guard]]\nname = \"inj\"\npoints = [\"result\", \"input\"]\nbuiltin = \"injection\"\naction = \"block\"\n"),
        ("secrets", "[secrets]\nbuiltin = \"block\"\n"),
    ];
    for (decider, rest) in deciders {
        let gw = gateway(&config(rest));
        for (kind, _) in poisons() {
            for tool in [format!("up__result_{kind}"), format!("up__ask_{kind}")] {
                let body = answer_of(&gw.url, &tool).await;
                let leaked = body.contains(KEY) || body.contains("Ignore all previous instructions");
                assert!(!leaked, "{decider}: {tool} reached the client: {body}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn definitions_that_cannot_be_read_are_held_by_the_catalogue_guards_and_pins() {
    let guard = "[[guard]]\nname = \"inj\"\npoints = [\"catalogue\"]\nbuiltin = \"injection\"\naction = \"block\"\n";
    let second = format!("[[upstream]]\nid = \"up8\"\n{}\n", upstream(", \"--utf8-definition\""));
    let dir = tempfile::tempdir().expect("tempdir");
    let lock = dir.path().join("pins.json");
    let pins = format!("[pins]\nmode = \"enforce\"\nfile = {lock:?}\n");
    for (decider, rest) in [("catalogue guard", format!("{second}\n{guard}")), ("pins", pins)] {
        let gw = gateway(&config(&rest));
        let deadline = Instant::now() + Duration::from_secs(10);
        let names = loop {
            let names = tool_names(&gw.url).await;
            if decider == "pins" || names.iter().any(|n| n == "up__echo") || Instant::now() > deadline {
                break names;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        for (kind, _) in poisons() {
            let name = format!("up__def_{kind}");
            assert!(!names.contains(&name), "{decider}: {name} is served: {names:?}");
            assert!(!names.contains(&format!("up8__def_{kind}")), "{decider}: {names:?}");
        }
        if decider == "catalogue guard" {
            assert!(names.contains(&"up__echo".to_string()) && !names.contains(&"up__plain_injection".to_string()), "{names:?}");
            let call = call(&gw.url, "up__def_surrogate", json!({})).await;
            assert_eq!(call["error"]["code"], -32602, "a held tool cannot be called: {call}");
            // The guard's verdict on what it could not read is counted and audited.
            let metrics = get(&format!("{}/metrics", gw.base)).await.map(|r| String::from_utf8_lossy(&r.body).into_owned());
            let metrics = metrics.unwrap_or_default();
            assert!(metrics.lines().any(|l| l.contains("point=\"catalogue\"") && l.contains("verdict=\"deny\"")), "{metrics}");
            let log = gw.proc.log();
            assert!(log.lines().any(|l| l.contains("outcome=guard_denied") && l.contains("cannot be read")), "{log}");
        }
    }
}

/// With nothing that decides on it, a message passes as it came: the gateway reads only what a
/// decider needs.
#[tokio::test(flavor = "multi_thread")]
async fn with_no_decider_nothing_is_read() {
    let gw =
        gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"up\"\n{}validate_arguments = false\n", upstream("")));
    let (_, body) = raw_call(&gw.url, "up__echo", r#"{"text":"hello","z":@}"#, &meta_text(), br#"{"x":1,"x":2}"#).await;
    assert!(forwarded(&body), "{body}");
    let body = answer_of(&gw.url, "up__result_number").await;
    assert!(body.contains(KEY) && body.contains("1e400"), "{body}");
}

/// A confirmation shows a person the arguments: arguments it cannot read are refused, never
/// asked about (and never forwarded); readable ones are asked about first.
#[tokio::test(flavor = "multi_thread")]
async fn a_confirmation_is_never_asked_about_arguments_it_cannot_read() {
    let gw = gateway(&config("validate_arguments = false\n\n[[confirm]]\ntools = [\"up__echo\"]\n"));
    let mut m = meta();
    m["io.modelcontextprotocol/clientCapabilities"] = json!({ "elicitation": { "form": {} } });
    let meta_text = || m.to_string();
    let (_, asked) = raw_call(&gw.url, "up__echo", r#"{"text":"hello","z":@}"#, &meta_text(), b"\"1\"").await;
    assert!(asked.contains("input_required") && !forwarded(&asked), "a readable call is asked about first: {asked}");
    for (kind, poison) in poisons() {
        let (status, body) = raw_call(&gw.url, "up__echo", r#"{"text":"hello","z":@}"#, &meta_text(), &poison).await;
        assert!(!forwarded(&body), "{kind}: forwarded ({status}): {body}");
        assert!(!body.contains("input_required"), "{kind}: asked about what cannot be read ({status}): {body}");
        // Refused: what cannot be read (a body that is not UTF-8 is not JSON at all).
        assert!(body.contains("cannot read") || (kind == "utf8" && body.contains("-32700")), "{kind}: ({status}): {body}");
    }
}
