//! The Python recipe of docs/quickstart.md, run as written with the official MCP SDK of the test
//! venv (`python()`): its defaults are the shipped `gateway.toml`'s URL; against a gateway on the
//! shipped file it prints what the page shows; against a gateway with an API-key caller and a
//! `[[confirm]]` entry on `calc__add` (URL and key passed in `MCPGATE_URL` and `MCPGATE_API_KEY`),
//! it shows the gateway's question, and typing `y` gets the tool's result while `n` gets the
//! refusal the page quotes; without the key the gateway refuses it.

use super::blocks_of;
use crate::harness::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const DOC: &str = "docs/quickstart.md";
const MESSAGE: &str = "Adding costs money.";

/// Runs the recipe at `script` on `url` with `key` in `MCPGATE_API_KEY` (none: unset), `typed`
/// on its stdin: whether it succeeded, its stdout, and its stdout and stderr for a failure message.
fn run_recipe(script: &Path, url: &str, key: Option<&str>, typed: &str) -> (bool, String, String) {
    let mut cmd = Command::new(python());
    cmd.arg(script)
        .env("MCPGATE_URL", url)
        .env_remove("MCPGATE_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(key) = key {
        cmd.env("MCPGATE_API_KEY", key);
    }
    let mut child = cmd.spawn().expect("run the recipe with the venv's Python");
    if let Some(mut stdin) = child.stdin.take() {
        // A recipe that stopped early has closed its end: what it printed says why.
        let _ = stdin.write_all(typed.as_bytes());
    }
    let out = child.wait_with_output().expect("the recipe's output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    (out.status.success(), stdout, all)
}

/// Whitespace runs as one space: a quote may wrap across lines of the Markdown source.
fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<&str>>().join(" ")
}

#[test]
fn the_python_recipe_lists_calls_and_confirms_through_the_gateway() {
    let blocks = blocks_of(&repo().join(DOC));
    let at = blocks.iter().position(|b| b.lang == "python").unwrap_or_else(|| panic!("{DOC} has no ```python recipe"));
    assert_eq!(blocks.iter().filter(|b| b.lang == "python").count(), 1, "{DOC}: one ```python recipe");
    let recipe = &blocks[at];
    let printed = blocks[at + 1..]
        .iter()
        .find(|b| b.lang == "text")
        .unwrap_or_else(|| panic!("{DOC}:{}: no ```text block after the recipe showing what it prints", recipe.line));
    let lines: Vec<&str> = printed.body.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let result = lines.last().copied().unwrap_or_else(|| panic!("{DOC}:{}: the printed output is empty", printed.line));

    // Its default URL is where the shipped gateway.toml listens.
    let shipped = std::fs::read_to_string(repo().join("gateway.toml")).expect("gateway.toml");
    let v: toml::Value = toml::from_str(&shipped).expect("the shipped gateway.toml is TOML");
    let listen = v.get("server").and_then(|s| s.get("listen")).and_then(toml::Value::as_str).unwrap_or("127.0.0.1:8811");
    let path = v.get("server").and_then(|s| s.get("path")).and_then(toml::Value::as_str).unwrap_or("/mcp");
    let default_url = format!("http://{listen}{path}");
    assert!(recipe.body.contains(&format!("\"{default_url}\"")), "{DOC}:{}: the recipe's default URL should be {default_url}", recipe.line);

    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("gateway_client.py");
    std::fs::write(&script, &recipe.body).expect("write the recipe");

    // On the shipped gateway.toml: no key, no question, what the page shows.
    {
        let gw = gateway(&shipped);
        let (ok, out, all) = run_recipe(&script, &gw.url, None, "");
        assert!(ok, "{DOC}:{}: the recipe failed on the shipped gateway.toml:\n{all}\ngateway log:\n{}", recipe.line, gw.proc.log());
        for line in &lines {
            assert!(out.contains(line), "{DOC}:{}: the recipe does not print `{line}` on the shipped gateway.toml:\n{all}", printed.line);
        }
    }

    // With an API-key caller and a confirmation on calc__add.
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"calc__*\"]\n\n\
         [[confirm]]\ntools = [\"calc__add\"]\nmessage = \"{MESSAGE}\"\n\n\
         [[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n",
        mcpgate::auth::hash_key("alice-key")
    );
    let gw = gateway(&config);

    let (ok, out, all) = run_recipe(&script, &gw.url, Some("alice-key"), "y\n");
    assert!(ok, "{DOC}:{}: the recipe failed with a key and a confirmation:\n{all}\ngateway log:\n{}", recipe.line, gw.proc.log());
    assert!(out.contains(MESSAGE) && out.contains("calc__add"), "{DOC}:{}: the gateway's question was not shown:\n{all}", recipe.line);
    assert!(out.contains(result), "{DOC}:{}: after `y` the recipe should print `{result}`:\n{all}", recipe.line);

    let (ok, out, all) = run_recipe(&script, &gw.url, Some("alice-key"), "n\n");
    assert!(ok && out.contains(MESSAGE), "{DOC}:{}: declining failed:\n{all}", recipe.line);
    assert!(!out.contains(result), "{DOC}:{}: a declined call reached the upstream:\n{all}", recipe.line);
    let quoted = flat(&std::fs::read_to_string(repo().join(DOC)).expect("read the quick start"))
        .split_once("A declined confirmation prints `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(q, _)| q.to_string())
        .unwrap_or_else(|| panic!("{DOC} should say what a declined confirmation prints (\"A declined confirmation prints `…`\")"));
    assert!(flat(&out).contains(&quoted), "{DOC}: a declined confirmation prints something else than `{quoted}`:\n{all}");

    let (ok, out, all) = run_recipe(&script, &gw.url, None, "");
    assert!(!ok && !out.contains(result), "{DOC}:{}: without MCPGATE_API_KEY the gateway should refuse the recipe:\n{all}", recipe.line);
}
