//! Policy as code (`[[rule]]`, docs/policy.md) with servers people install behind the gateway
//! (server-filesystem, server-memory) and JWT callers driven by the official Python SDK client:
//! file writes only under one folder, a claim-based rule, a time rule under a fixed clock, a
//! confirmation asked by argument, what is listed versus what is called, the audit naming the
//! rule; and `mcpgate check`, reload, `mcpgate policy explain` and `policy test` on rules.

use crate::callers::{claims, issuer, serve_jwks, sign};
use crate::harness::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn config(jwks_url: &str, root: &Path, memory_file: &Path) -> String {
    let workspace = root.join("workspace");
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n\
         [auth]\nmode = \"jwt\"\nissuer = \"https://issuer.test\"\nresource = \"https://gw.test/mcp\"\njwks_url = \"{jwks_url}\"\n\n\
         [[upstream]]\nid = \"fs\"\ncommand = [{fs:?}, {root:?}]\ntimeout = \"30s\"\n\n\
         [[upstream]]\nid = \"memory\"\ncommand = [{memory:?}]\ntimeout = \"30s\"\n[upstream.env]\nMEMORY_FILE_PATH = {memory_file:?}\n\n\
         [[rule]]\nname = \"reads\"\neffect = \"allow\"\nupstreams = [\"fs\"]\nwhen = 'has(tool.annotations.readOnlyHint) && tool.annotations.readOnlyHint'\n\n\
         [[rule]]\nname = \"workspace-writes\"\neffect = \"allow\"\ntools = [\"fs__write_file\"]\n\
         when = '''has(args.path) && args.path.startsWith(\"{workspace}/\") && !args.path.contains(\"..\")'''\n\n\
         [[rule]]\nname = \"oncall-memory\"\neffect = \"allow\"\ntools = [\"memory__*\"]\nwhen = '\"oncall\" in caller.groups'\n\n\
         [[rule]]\nname = \"office-hours\"\neffect = \"deny\"\ntools = [\"memory__delete_*\"]\nwhen = 'now.hour < 9 || now.hour >= 17'\n\n\
         [[rule]]\nname = \"several-entities\"\neffect = \"confirm\"\ntools = [\"memory__create_entities\"]\nwhen = 'size(args.entities) > 1'\n",
        fs = installed_server("mcp-server-filesystem"),
        root = root.display().to_string(),
        memory = installed_server("mcp-server-memory"),
        memory_file = memory_file.display().to_string(),
        workspace = workspace.display(),
    )
}

fn token(iss: &crate::callers::Issuer, sub: &str, groups: &[&str]) -> String {
    let mut c = claims(sub, "mcp");
    c["groups"] = json!(groups);
    sign(iss, "k1", c)
}

/// The SDK client's answer to calling `name` with `args` as the bearer of `token`.
fn call_as(url: &str, token: &str, extra: &[&str], name: &str, args: Value) -> Vec<Value> {
    let mut options = vec!["--bearer", token, "--no-list"];
    options.extend_from_slice(extra);
    let (_, lines) = sdk_run(&options, url, &["call", name, &args.to_string()]);
    lines
}

fn listed(url: &str, token: &str) -> Vec<String> {
    let out = sdk_lines(&["--bearer", token], url, &["list"]);
    out.last().and_then(|l| l["tools"].as_array()).into_iter().flatten().filter_map(|t| t.as_str().map(str::to_string)).collect()
}

fn text(v: &Value) -> String {
    v["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_decide_calls_of_installed_servers_by_what_they_do() {
    let iss = issuer("k1");
    let jwks_url = serve_jwks(iss.jwks.to_string()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("files/workspace")).expect("root");
    let root = dir.path().join("files").canonicalize().expect("root");
    let memory_file = dir.path().join("memory.jsonl");
    // 20:00 UTC: outside office hours.
    let gw = gateway_with_env(&config(&jwks_url, &root, &memory_file), &[("MCPGATE_POLICY_NOW", "2026-12-03T20:00:00Z")]);
    let alice = token(&iss, "alice", &["oncall"]);
    let bob = token(&iss, "bob", &["dev"]);

    // Listed: what some rule can allow for the caller, whatever the arguments.
    let for_alice = listed(&gw.url, &alice);
    for name in ["fs__read_text_file", "fs__list_directory", "fs__write_file", "memory__create_entities", "memory__delete_entities"] {
        assert!(for_alice.contains(&name.to_string()), "{name} is listed for alice: {for_alice:?}");
    }
    assert!(!for_alice.contains(&"fs__move_file".to_string()), "no rule can allow a move: {for_alice:?}");
    let for_bob = listed(&gw.url, &bob);
    assert!(for_bob.iter().all(|n| !n.starts_with("memory__")), "memory is for the on-call group: {for_bob:?}");
    assert!(for_bob.contains(&"fs__write_file".to_string()), "{for_bob:?}");

    // Writes only under the workspace, decided on the exact arguments.
    let inside = root.join("workspace/note.txt");
    let out = call_as(&gw.url, &alice, &[], "fs__write_file", json!({ "path": inside, "content": "kept" }));
    assert_ne!(out.last().map(|r| &r["isError"]), Some(&json!(true)), "{out:?}\n{}", gw.proc.log());
    assert_eq!(std::fs::read_to_string(&inside).ok().as_deref(), Some("kept"));
    for path in [root.join("outside.txt"), root.join("workspace/../escaped.txt")] {
        let out = call_as(&gw.url, &alice, &[], "fs__write_file", json!({ "path": path, "content": "no" }));
        let result = out.last().cloned().unwrap_or_default();
        assert_eq!(result["isError"], true, "{path:?}: a tool error: {result}");
        assert!(text(&result).contains("rule 'workspace-writes' does not hold"), "{path:?}: names the rule: {result}");
        assert!(!root.join("outside.txt").exists() && !root.join("escaped.txt").exists(), "nothing reached the server");
    }
    // A name-level refusal answers like a missing tool.
    let out = call_as(&gw.url, &bob, &[], "memory__read_graph", json!({}));
    let error = out.last().cloned().unwrap_or_default();
    assert!(error["error"]["message"].as_str().unwrap_or_default().contains("Unknown tool"), "{error}");

    // Confirmation by argument: two entities ask a person, one does not.
    let two = json!({ "entities": [
        { "name": "a", "entityType": "t", "observations": [] },
        { "name": "b", "entityType": "t", "observations": [] }
    ] });
    let out = call_as(&gw.url, &alice, &["--elicit", r#"{"confirm":true}"#], "memory__create_entities", two);
    assert_eq!(out.first().map(|l| l["asked"].clone()), Some(json!("elicitation/create")), "asked first: {out:?}");
    assert!(out.first().is_some_and(|l| l.to_string().contains("several-entities")), "the question names the rule: {out:?}");
    assert_ne!(out.last().map(|r| &r["isError"]), Some(&json!(true)), "{out:?}");
    let one = json!({ "entities": [{ "name": "c", "entityType": "t", "observations": [] }] });
    let out = call_as(&gw.url, &alice, &[], "memory__create_entities", one);
    assert_eq!(out.len(), 1, "no question: {out:?}");
    assert_ne!(out[0]["isError"], true, "{out:?}");
    let stored = std::fs::read_to_string(&memory_file).unwrap_or_default();
    assert!(stored.contains("\"a\"") && stored.contains("\"c\""), "{stored}");

    // A time rule, on the gateway's clock: deletes outside office hours are refused, and the
    // audit names the rule.
    let out = call_as(&gw.url, &alice, &[], "memory__delete_entities", json!({ "entityNames": ["a"] }));
    let result = out.last().cloned().unwrap_or_default();
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(&result).contains("refused this call of memory__delete_entities: rule 'office-hours'"), "{result}");
    assert!(std::fs::read_to_string(&memory_file).unwrap_or_default().contains("\"a\""), "not deleted");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gw.proc.log().contains("office-hours") {
        assert!(Instant::now() < deadline, "the audit names the rule:\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let audited = gw.proc.log().lines().find(|l| l.contains("office-hours")).unwrap_or_default().to_string();
    assert!(audited.contains("denied_by_rule") && audited.contains("alice"), "{audited}");
    drop(gw);

    // In office hours, the same delete goes through.
    let gw = gateway_with_env(&config(&jwks_url, &root, &memory_file), &[("MCPGATE_POLICY_NOW", "2026-12-03T10:00:00Z")]);
    let out = call_as(&gw.url, &alice, &[], "memory__delete_entities", json!({ "entityNames": ["a"] }));
    assert_ne!(out.last().map(|r| &r["isError"]), Some(&json!(true)), "{out:?}");
}

fn mcpgate(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate")).args(args).output().expect("run mcpgate");
    (out.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

const RULES: &str = "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
    [[caller]]\nid = \"alice\"\nkey_sha256 = \"2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae\"\nallow = [\"*\"]\n\n\
    [[rule]]\nname = \"no-etc\"\neffect = \"deny\"\ntools = [\"fs__*\"]\nwhen = 'has(args.path) && args.path.startsWith(\"/etc\")'\n";

#[test]
fn policy_explain_and_test_print_the_decision_of_the_running_rules() {
    let dir = write_config(RULES);
    let cfg = dir.path().join("gateway.toml");
    let cfg = cfg.to_str().unwrap_or_default();
    let (code, out) =
        mcpgate(&["policy", "explain", "-c", cfg, "--caller", "alice", "--tool", "fs__read", "--args", r#"{"path":"/etc/shadow"}"#]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("no-etc") && out.contains("decision: deny (rule 'no-etc')"), "{out}");
    let (code, out) =
        mcpgate(&["policy", "explain", "-c", cfg, "--caller", "alice", "--tool", "fs__read", "--args", r#"{"path":"/home"}"#]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("decision: allow"), "{out}");
    let (code, out) = mcpgate(&["policy", "explain", "-c", cfg, "--caller", "mallory", "--tool", "fs__read"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("no [[caller]] has id \"mallory\""), "{out}");

    let cases = dir.path().join("cases.toml");
    std::fs::write(
        &cases,
        "[[case]]\nname = \"etc is off limits\"\ncaller = \"alice\"\ntool = \"fs__read\"\nargs = { path = \"/etc/passwd\" }\nexpect = \"deny\"\n\n\
         [[case]]\nname = \"home is fine\"\ncaller = \"alice\"\ntool = \"fs__read\"\nargs = { path = \"/home/a\" }\nexpect = \"allow\"\n",
    )
    .expect("cases");
    let cases = cases.to_str().unwrap_or_default();
    let (code, out) = mcpgate(&["policy", "test", "-c", cfg, cases]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 cases, 0 failed"), "{out}");
    let wrong = dir.path().join("wrong.toml");
    std::fs::write(
        &wrong,
        "[[case]]\nname = \"wrong\"\ncaller = \"alice\"\ntool = \"fs__read\"\nargs = { path = \"/etc/x\" }\nexpect = \"allow\"\n",
    )
    .expect("cases");
    let (code, out) = mcpgate(&["policy", "test", "-c", cfg, wrong.to_str().unwrap_or_default()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL  wrong: expected allow, decided deny"), "{out}");
}

#[test]
fn a_broken_expression_fails_check_with_its_position() {
    let broken = RULES.replace("startsWith", "startswith");
    let dir = write_config(&broken);
    let cfg = dir.path().join("gateway.toml");
    let (code, out) = mcpgate(&["check", "-c", cfg.to_str().unwrap_or_default()]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("gateway.toml:16") && out.contains("rule \"no-etc\" when") && out.contains("unknown function 'startswith'"),
        "{out}"
    );
    assert!(out.contains("at 1:"), "the position in the expression: {out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_with_a_broken_rule_keeps_the_running_rules() {
    let config = "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n\n\
        [[rule]]\nname = \"small-sums\"\neffect = \"deny\"\ntools = [\"calc__add\"]\nwhen = 'args.a > 100'\n";
    let gw = gateway(config);
    let refused = call(&gw.url, "calc__add", json!({ "a": 101, "b": 1 })).await;
    assert!(text_of(&refused).contains("rule 'small-sums'"), "{refused}");
    std::fs::write(&gw.config_path, config.replace("args.a > 100", "args.a >")).expect("write");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !gw.proc.log().contains("reload refused") {
        assert!(Instant::now() < deadline, "{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gw.proc.log().contains("small-sums"), "the refusal names the rule: {}", gw.proc.log());
    let still = call(&gw.url, "calc__add", json!({ "a": 101, "b": 1 })).await;
    assert!(text_of(&still).contains("rule 'small-sums'"), "the running rule still holds: {still}");
    assert_eq!(text_of(&call(&gw.url, "calc__add", json!({ "a": 2, "b": 3 })).await), "5");
}

/// Every method that acts on one item goes through the same chain, so a rule reading the call
/// decides prompts, reads and completions as it decides tool calls (server-everything's own).
#[tokio::test(flavor = "multi_thread")]
async fn call_time_rules_decide_prompts_reads_and_completions_too() {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"ev\"\ncommand = {}\ntimeout = \"30s\"\n\n\
         [[rule]]\nname = \"night\"\neffect = \"deny\"\nprompts = [\"ev__*\"]\nresources = [\"*\"]\nwhen = 'now.hour >= 22'\n",
        everything_stdio_command()
    );
    let at = |time: &str| gateway_with_env(&config, &[("MCPGATE_POLICY_NOW", time)]);
    let gw = at("2026-12-03T23:00:00Z");
    // Listed all the same: the rule waits for the call.
    let prompts = rpc(&gw.url, "prompts/list", json!({})).await.message();
    let names: Vec<&str> = prompts["result"]["prompts"].as_array().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
    assert!(names.contains(&"ev__simple-prompt") && names.contains(&"ev__completable-prompt"), "{prompts}");
    let resources = rpc(&gw.url, "resources/list", json!({})).await.message();
    let uri = resources["result"]["resources"][0]["uri"].as_str().unwrap_or_else(|| panic!("a resource: {resources}")).to_string();

    let refused = |r: &Value, what: &str| {
        assert_eq!(r["error"]["code"], -32602, "{what}: {r}");
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("policy refused this call") && message.contains("rule 'night'"), "{what}: {r}");
    };
    refused(&rpc(&gw.url, "prompts/get", json!({ "name": "ev__simple-prompt" })).await.message(), "prompts/get");
    refused(&rpc(&gw.url, "resources/read", json!({ "uri": uri })).await.message(), "resources/read");
    let complete =
        json!({ "ref": { "type": "ref/prompt", "name": "ev__completable-prompt" }, "argument": { "name": "department", "value": "E" } });
    refused(&rpc(&gw.url, "completion/complete", complete.clone()).await.message(), "completion/complete");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gw.proc.log().lines().any(|l| l.contains("mcpgate::audit") && l.contains("prompts/get") && l.contains("night")) {
        assert!(Instant::now() < deadline, "the audit names the rule:\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(gw);

    // By day the same requests are served.
    let gw = at("2026-12-03T10:00:00Z");
    let got = rpc(&gw.url, "prompts/get", json!({ "name": "ev__simple-prompt" })).await.message();
    assert!(got["result"]["messages"].as_array().is_some_and(|m| !m.is_empty()), "{got}");
    let read = rpc(&gw.url, "resources/read", json!({ "uri": uri })).await.message();
    assert!(read["result"]["contents"].as_array().is_some_and(|c| !c.is_empty()), "{read}");
    let completed = rpc(&gw.url, "completion/complete", complete).await.message();
    assert!(completed["result"]["completion"]["values"].is_array(), "{completed}");
}
