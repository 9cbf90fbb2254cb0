//! The user's experience. `mcpgate import` on a realistic client file (five servers,
//! stdio with env, HTTP with headers) round-trips into a gateway.toml that `mcpgate check`
//! accepts once demo upstreams stand in for the real ones, with no secret copied; the console
//! answers admin callers only, shows what a caller's policy shows, the calls as they happen, and
//! works in a real headless Chromium, whose first screen shows health, recent calls and held tools.

use crate::harness::*;
use serde_json::{Value, json};
use std::io::Write;
use std::process::Command;

const CLIENT_FILE: &str = r#"{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_R3alL00kingT0kenValue0123456789abcd" }
    },
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Documents", "/Users/me/Desktop"]
    },
    "postgres": {
      "command": "uvx",
      "args": ["mcp-server-postgres"],
      "env": { "DATABASE_URL": "postgresql://app:hunter2-secret@db.internal:5432/app", "PGAPPNAME": "claude" }
    },
    "linear": {
      "type": "http",
      "url": "https://mcp.linear.app/mcp",
      "headers": { "Authorization": "Bearer lin_api_S3cr3tS3cr3tS3cr3t0123" }
    },
    "Sentry Issues": {
      "type": "http",
      "url": "https://mcp.sentry.dev/mcp",
      "headers": { "X-Api-Key": "sntrys_0123456789abcdefSECRET" }
    }
  }
}"#;

fn mcpgate(args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate")).args(args).envs(envs.iter().copied()).output().expect("run mcpgate");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn import_round_trips_a_client_file_without_copying_secrets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("claude_desktop_config.json");
    std::fs::write(&src, CLIENT_FILE).expect("write");
    let out_path = dir.path().join("gateway.toml");
    let (code, _, err) = mcpgate(&["import", &src.display().to_string(), "-o", &out_path.display().to_string()], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("imported 5 servers"), "{err}");
    let toml = std::fs::read_to_string(&out_path).expect("written");
    for secret in ["ghp_R3al", "hunter2", "lin_api_S3cr3t", "sntrys_0123"] {
        assert!(!toml.contains(secret), "{secret} was copied:\n{toml}");
    }
    assert!(toml.contains("PGAPPNAME = \"claude\""), "plain settings stay:\n{toml}");
    assert!(toml.contains("\"/Users/me/Documents\", \"/Users/me/Desktop\""), "{toml}");
    assert!(toml.contains("id = \"sentry-issues\""), "{toml}");
    let (code, _, err) = mcpgate(&["import", &src.display().to_string(), "-o", &out_path.display().to_string()], &[]);
    assert_ne!(code, 0, "never overwrites: {err}");

    // Demo upstreams stand in for the real servers; the secrets come from the environment.
    let (_demo, demo_url) = demo_http("text");
    let substituted: String = toml
        .lines()
        .map(|l| {
            if l.starts_with("command = ") {
                "command = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]".to_string()
            } else if l.starts_with("url = ") {
                format!("url = \"{demo_url}\"")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let cfg = dir.path().join("substituted.toml");
    std::fs::write(&cfg, &substituted).expect("write");
    let vars: Vec<String> = err_vars(&err_of_import(&src));
    assert_eq!(vars.len(), 4, "one variable per secret: {vars:?}");
    let envs: Vec<(&str, &str)> = vars.iter().map(|v| (v.as_str(), "from-the-environment")).collect();
    let (code, out, err) = mcpgate(&["check", "-c", &cfg.display().to_string()], &envs);
    assert_eq!(code, 0, "{out}\n{err}\n{substituted}");
    assert!(out.contains("served from 5 upstreams"), "{out}");
    let (code, _, err) = mcpgate(&["check", "-c", &cfg.display().to_string()], &[]);
    assert_eq!(code, 2, "without the secrets exported, the config says which is missing");
    assert!(err.contains("is not set"), "{err}");
}

fn err_of_import(src: &std::path::Path) -> String {
    mcpgate(&["import", &src.display().to_string()], &[]).2
}

fn err_vars(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("export before running: "))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Secrets inside arguments and URLs: a stdio server given its key as `KEY=VALUE` (through `env`)
/// runs through `sh -c` with the key from the environment, and the gateway starts it; an HTTP
/// server with its key in the URL's query or path is skipped, since a URL cannot come from the
/// environment. No key is written or printed.
#[test]
fn import_takes_secrets_in_arguments_from_the_environment_and_skips_secret_urls() {
    let bin = env!("CARGO_BIN_EXE_mcpgate");
    let client = json!({ "mcpServers": {
        "calc": { "command": "env", "args": ["CALC_API_TOKEN=sk-live-Arg5ecret0123", bin, "demo-server", "--profile", "calc"] },
        "zapier": { "url": "https://mcp.zapier.com/api/mcp/s/sk-ak-PathS3cret99/mcp" },
        "search": { "type": "http", "url": "https://mcp.example.com/mcp?api_key=QueryS3cret-777" }
    }});
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("claude_desktop_config.json");
    std::fs::write(&src, client.to_string()).expect("write");
    let out_path = dir.path().join("gateway.toml");
    let (code, _, err) = mcpgate(&["import", &src.display().to_string(), "-o", &out_path.display().to_string()], &[]);
    assert_eq!(code, 0, "{err}");
    let toml = std::fs::read_to_string(&out_path).expect("written");
    for secret in ["Arg5ecret", "PathS3cret", "QueryS3cret"] {
        assert!(!toml.contains(secret) && !err.contains(secret), "{secret} was copied or printed:\n{toml}\n{err}");
    }
    assert!(err.contains("imported 1 server from"), "one server, in the singular: {err}");
    assert!(
        err.contains("'zapier'") && err.contains("URL path") && err.contains("'search'") && err.contains("query parameter api_key"),
        "{err}"
    );
    assert_eq!(err_vars(&err), ["CALC_API_TOKEN"], "{err}");
    let cfg = out_path.display().to_string();
    let (code, out, err) = mcpgate(&["check", "-c", &cfg], &[("CALC_API_TOKEN", "sk-live-Arg5ecret0123")]);
    assert_eq!(code, 0, "the gateway starts the command through sh:\n{out}\n{err}\n{toml}");
    assert!(out.contains("served from 1 upstream."), "{out}");
    let (code, _, err) = mcpgate(&["check", "-c", &cfg], &[]);
    assert_eq!(code, 2, "without the secret exported, the config says which is missing: {err}");
    assert!(err.contains("CALC_API_TOKEN") && err.contains("is not set"), "{err}");
}

#[test]
fn completions_and_the_tools_table() {
    let (code, out, _) = mcpgate(&["completions", "bash"], &[]);
    assert_eq!(code, 0);
    assert!(out.contains("mcpgate") && out.contains("import") && out.contains("complete"), "{out}");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("gateway.toml");
    std::fs::write(&cfg, "[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n").expect("write");
    let (code, out, err) = mcpgate(&["tools", "-c", &cfg.display().to_string()], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("NAME"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("calc__add") && l.contains("calc")), "{out}");
    assert!(out.contains("4 tools."), "{out}");
}

async fn console_get(base: &str, path: &str, key: Option<&str>) -> Resp {
    let mut b = http::Request::get(format!("{base}{path}"));
    if let Some(k) = key {
        b = b.header("Authorization", format!("Bearer {k}"));
    }
    send(b.body(http_body_util::Full::new(bytes::Bytes::new())).expect("request")).await.expect("GET")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_is_for_admins_and_shows_what_a_policy_shows() {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[console]\nenabled = true\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"ops\"\nkey_sha256 = \"{}\"\nadmin = true\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"calc__*\"]\ndeny = [\"calc__divide\"]\n\n\
         [[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n\n\
         [[upstream]]\nid = \"text\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"text\"]\n",
        mcpgate::auth::hash_key("ops-key"),
        mcpgate::auth::hash_key("bob-key")
    );
    let gw = gateway(&config);
    let page = console_get(&gw.base, "/console", None).await;
    assert_eq!(page.status, 200);
    assert!(String::from_utf8_lossy(&page.body).contains("<title>mcpgate console</title>"));
    let csp = page.headers.get("content-security-policy").and_then(|v| v.to_str().ok()).unwrap_or("");
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    assert_eq!(console_get(&gw.base, "/console/api/state", None).await.status, 401);
    assert_eq!(console_get(&gw.base, "/console/api/state", Some("bob-key")).await.status, 403, "not an admin");
    let state = console_get(&gw.base, "/console/api/state", Some("ops-key")).await.json();
    let ups: Vec<&str> = state["upstreams"].as_array().expect("upstreams").iter().filter_map(|u| u["id"].as_str()).collect();
    assert_eq!(ups, ["calc", "text"]);
    assert_eq!(state["upstreams"][0]["status"], "ready");
    assert_eq!(state["upstreams"][0]["era"], "modern (2026-07-28)");
    assert_eq!(state["upstreams"][0]["circuit"], "closed");
    assert_eq!(state["catalog"].as_array().expect("catalog").len(), 10);

    // "View as" is exactly what bob's tools/list shows.
    let view = console_get(&gw.base, "/console/api/view?caller=bob", Some("ops-key")).await.json();
    let listed = rpc_with(&gw.url, "tools/list", json!({}), &[("Authorization", "Bearer bob-key")]).await.json();
    let mut from_list: Vec<String> =
        listed["result"]["tools"].as_array().expect("tools").iter().map(|t| format!("tool:{}", t["name"].as_str().unwrap_or(""))).collect();
    let mut from_view: Vec<String> = view["visible"]
        .as_array()
        .expect("visible")
        .iter()
        .filter_map(Value::as_str)
        .filter(|s| s.starts_with("tool:"))
        .map(str::to_string)
        .collect();
    from_list.sort();
    from_view.sort();
    assert_eq!(from_view, from_list);
    assert_eq!(from_view, ["tool:calc__add", "tool:calc__echo", "tool:calc__multiply"]);
    assert_eq!(console_get(&gw.base, "/console/api/view?caller=nobody", Some("ops-key")).await.status, 404);

    // Calls show up in the recent calls, refused ones too.
    let r = rpc_with(
        &gw.url,
        "tools/call",
        json!({ "name": "calc__add", "arguments": { "a": 1, "b": 2 } }),
        &[("Authorization", "Bearer bob-key")],
    )
    .await;
    assert_eq!(r.status, 200);
    let _ = rpc_with(
        &gw.url,
        "tools/call",
        json!({ "name": "calc__divide", "arguments": { "a": 1, "b": 2 } }),
        &[("Authorization", "Bearer bob-key")],
    )
    .await;
    let calls = console_get(&gw.base, "/console/api/calls", Some("ops-key")).await.json();
    let calls = calls.as_array().expect("calls");
    assert!(
        calls.iter().any(|c| c["caller"] == "bob" && c["item"] == "calc__add" && c["outcome"] == "ok" && c["upstream"] == "calc"),
        "{calls:?}"
    );
    assert!(calls.iter().any(|c| c["item"] == "calc__divide" && c["outcome"] == "unknown_or_denied"), "{calls:?}");
    assert!(!serde_json::to_string(calls).unwrap_or_default().contains("\"a\":1"), "no arguments");

    let off = gateway("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n");
    assert_eq!(console_get(&off.base, "/console", None).await.status, 404, "off by default");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_works_in_headless_chromium() {
    // Two upstreams, one of calc's tools not pinned yet (held for review), and a few calls: the
    // first screen must answer "is everything healthy and what is happening".
    let dir = tempfile::tempdir().expect("tempdir");
    let (config_path, pins) = (dir.path().join("gateway.toml"), dir.path().join("pins.json"));
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[console]\nenabled = true\n\n[pins]\nmode = \"enforce\"\nfile = {pins:?}\n\n\
         [[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n\n\
         [[upstream]]\nid = \"text\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"text\"]\n"
    );
    std::fs::write(&config_path, &config).expect("write the config");
    let (code, out, err) = mcpgate(&["pin", "-c", &config_path.to_string_lossy(), "--approve"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let mut lock: Value = serde_json::from_str(&std::fs::read_to_string(&pins).expect("the lock file")).expect("JSON");
    assert!(lock["upstreams"]["calc"].as_object_mut().and_then(|t| t.remove("divide")).is_some(), "{lock}");
    std::fs::write(&pins, lock.to_string()).expect("write the lock file");
    let gw = gateway(&config);
    assert_eq!(text_of(&call(&gw.url, "calc__add", json!({ "a": 1, "b": 2 })).await), "3");
    let _ = call(&gw.url, "calc__divide", json!({ "a": 1, "b": 0 })).await;
    let _ = call(&gw.url, "text__upper", json!({ "text": "hi" })).await;

    let shot = repo().join(".work/screenshots/console.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new(python())
        .arg(repo().join("tests/browser/console_test.py"))
        // The link the gateway logged: without authentication, its key opens the console.
        .arg(format!("{}/console#key={}", gw.base, console_key(&gw)))
        .arg(&shot)
        .output()
        .expect("run the browser test");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the browser test failed:\n{stdout}\n{stderr}\ngateway log:\n{}", gw.proc.log());
    assert!(stdout.contains("ok: "), "{stdout}");
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "a real screenshot: {size} bytes");
    // Written past the test harness's capture, so CI's log shows where the screenshot is.
    let _ = writeln!(std::io::stderr(), "console screenshot: {}", shot.display());
}
