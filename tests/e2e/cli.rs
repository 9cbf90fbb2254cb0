//! The command line: `check`, `tools`, config errors, `--version`.

use crate::harness::*;
use std::process::Command;

fn mcpgate(args: &[&str], config: Option<&str>) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gateway.toml");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpgate"));
    cmd.args(args);
    if let Some(c) = config {
        std::fs::write(&path, c).expect("write");
        cmd.arg("-c").arg(&path);
    }
    let out = cmd.output().expect("run mcpgate");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
}

const DEMO: &str = "[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n\n[[upstream]]\nid = \"text\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"text\"]\n";

#[test]
fn check_prints_a_status_table_and_fails_when_an_upstream_is_down() {
    let (code, out, err) = mcpgate(&["check"], Some(DEMO));
    assert_eq!(code, 0, "{out}\n{err}");
    let calc = out.lines().find(|l| l.starts_with("calc")).unwrap_or_else(|| panic!("no calc row: {out}"));
    for word in ["stdio", "modern", "ready", "4"] {
        assert!(calc.contains(word), "{calc}");
    }
    assert!(out.contains("10 tools served from 2 upstreams"), "{out}");
    // One upstream is "1 upstream".
    let one = DEMO.split("\n\n").next().unwrap_or_default();
    let (code, out, err) = mcpgate(&["check"], Some(one));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("4 tools served from 1 upstream."), "{out}");

    let down = format!("{DEMO}\n[[upstream]]\nid = \"gone\"\nurl = \"http://127.0.0.1:9/mcp\"\ntimeout = \"2s\"\n");
    let (code, out, _) = mcpgate(&["check"], Some(&down));
    assert_eq!(code, 1, "{out}");
    assert!(out.lines().any(|l| l.starts_with("gone") && l.contains("http") && l.contains("down")), "{out}");
    assert!(out.contains("gone: server/discover failed") || out.contains("gone:"), "{out}");
}

#[test]
fn check_reports_tools_that_cannot_be_served() {
    let (_alpha, url) = py_http("alpha", &[]);
    let cfg = format!(
        "[[upstream]]\nid = \"a\"\nurl = \"{url}\"\nprefix = \"\"\n\n[[upstream]]\nid = \"b\"\ncommand = {}\nprefix = \"\"\n",
        py_stdio_command("b")
    );
    let (code, out, err) = mcpgate(&["check"], Some(&cfg));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Not served:"), "{out}");
    assert!(out.contains("b / tool echo: gateway name 'echo' collides"), "collisions are reported, never silent: {out}");
}

#[test]
fn tools_prints_the_merged_catalogue() {
    let (code, out, err) = mcpgate(&["tools", "--json"], Some(DEMO));
    assert_eq!(code, 0, "{err}");
    let tools: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let names: Vec<&str> = tools.as_array().expect("array").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "calc__add",
            "calc__multiply",
            "calc__divide",
            "calc__echo",
            "text__echo",
            "text__upper",
            "text__word_count",
            "text__now",
            "text__greet",
            "text__countdown"
        ]
    );
}

#[test]
fn renames_apply_and_nobody_publishes_into_another_namespace() {
    let cfg = "[catalog]\nmax_name_length = 24\n\n\
        [[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\nrename = { add = \"plus\" }\n\n\
        [[upstream]]\nid = \"text\"\nprefix = \"text_with_a_long_prefix\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"text\"]\nrename = { upper = \"calc__upper\" }\n";
    let (code, out, err) = mcpgate(&["tools", "--json"], Some(cfg));
    assert_eq!(code, 0, "{err}");
    let tools: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let names: Vec<&str> = tools.as_array().expect("array").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names[..4], ["plus", "calc__multiply", "calc__divide", "calc__echo"], "{names:?}");
    assert!(!names.contains(&"calc__upper"), "{names:?}");
    let long: Vec<&&str> = names.iter().filter(|n| n.starts_with("text_with_a")).collect();
    assert_eq!(long.len(), 5, "every text tool but the one renamed away: {names:?}");
    assert!(long.iter().all(|n| n.len() == 24), "shortened to the maximum: {long:?}");
    let (code, out, err) = mcpgate(&["check"], Some(cfg));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("'calc__upper' lies in the namespace of upstream #1"), "{out}");
}

#[test]
fn config_errors_name_file_line_and_key() {
    let (code, _, err) = mcpgate(&["check"], Some("[[upstream]]\nid = \"Bad_Id\"\nurl = \"http://127.0.0.1:1/mcp\"\n"));
    assert_eq!(code, 2);
    assert!(err.contains("gateway.toml:2: upstream.id: 'Bad_Id' is not a valid id. Fix:"), "{err}");
    let (code, _, err) = mcpgate(&["run"], Some("[server]\nlisten = \"127.0.0.1:0\"\nunknown_key = true\n"));
    assert_eq!(code, 2);
    assert!(err.contains("gateway.toml:3") && err.contains("unknown_key"), "{err}");
    let (code, out, _) = mcpgate(&["--version"], None);
    assert_eq!(code, 0);
    assert!(out.starts_with("mcpgate "), "{out}");
}

#[test]
fn hash_key_prints_the_sha256_for_key_sha256() {
    let (code, out, _) = mcpgate(&["hash-key", "secret"], None);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b");
    let (code, out, _) = mcpgate(&["hash-key", "--generate"], None);
    assert_eq!(code, 0);
    let key = out.lines().find_map(|l| l.strip_prefix("key:")).map(str::trim).expect("key line");
    let hash = out.lines().find_map(|l| l.strip_prefix("key_sha256:")).map(str::trim).expect("hash line");
    assert_eq!(mcpgate::auth::hash_key(key), hash);
    assert!(key.len() >= 32);
}

/// `mcpgate usage` reads stored counts: it needs none of the upstreams' secrets (a variable not
/// set, a file not there), and says there is no store only when there is none to read (not
/// while it reads the state database, which the JSON file of earlier releases does not matter to).
#[test]
fn usage_reads_the_state_database_without_the_upstreams_secrets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        "[[upstream]]\nid = \"api\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
         headers = { Authorization = { env = \"MCPGATE_TEST_NEVER_SET\", prefix = \"Bearer \" }, X-Key = { file = \"missing.key\" } }\n",
    )
    .expect("config");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpgate"))
            .args(args)
            .arg("-c")
            .arg(&config)
            .env_remove("MCPGATE_TEST_NEVER_SET")
            .output()
            .expect("run mcpgate");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // No state database and no file of an earlier release: the note names both.
    let (code, out, err) = run(&["usage"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("no usage counted yet") && err.contains("mcpgate-state.db") && err.contains("mcpgate-usage.json"), "{err}");
    // `migrate` creates the database (and needs no upstream secret either).
    let (code, out, err) = run(&["migrate"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(dir.path().join("mcpgate-state.db").exists(), "{out}");
    for args in [&["usage"][..], &["usage", "--json"][..]] {
        let (code, out, err) = run(args);
        assert_eq!(code, 0, "{args:?}: {out}\n{err}");
        assert!(!err.contains("no usage"), "{args:?}: the database is read, no note about the old JSON file: {err}");
    }
}
