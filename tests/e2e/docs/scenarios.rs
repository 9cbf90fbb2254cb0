//! The documentation run for real: the curl session replayed against a gateway on the shipped
//! `gateway.toml` (each output compared with the one printed, digits and `…` elisions aside);
//! the quick start's Claude Code, MCP Inspector and client-file snippets run against a live
//! gateway over HTTP and stdio; the troubleshooting page checked against the messages the
//! binary prints in each situation it describes, and against what the OAuth-capable clients say
//! when the gateway refuses their API key; and the TLS recipe run, its certificate served and
//! trusted by the Node clients through `NODE_EXTRA_CA_CERTS`.

use super::{blocks_of, shell};
use crate::harness::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DOC_URL: &str = "http://127.0.0.1:8811/mcp";
const DOC_BINARY: &str = "/abs/path/to/mcpgate";
const DOC_CONFIG: &str = "/abs/path/to/gateway.toml";

fn shipped_gateway() -> Gateway {
    let text = std::fs::read_to_string(repo().join("gateway.toml")).expect("the shipped gateway.toml");
    gateway(&text)
}

/// Digits collapsed (counts, times and ids vary), `\r` and `date:` header values dropped.
fn normalize(s: &str) -> String {
    let mut out = String::new();
    let mut in_digits = false;
    for line in s.replace('\r', "").lines() {
        let line = if line.to_ascii_lowercase().starts_with("date:") { "date:" } else { line };
        for c in line.chars() {
            if c.is_ascii_digit() {
                if !in_digits {
                    out.push('0');
                }
                in_digits = true;
            } else {
                in_digits = false;
                out.push(c);
            }
        }
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// Glob match where `…` in `pattern` stands for any text.
fn matches(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('…').collect();
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else { return false };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    rest.is_empty()
}

pub async fn replay_curl_session() {
    let gw = shipped_gateway();
    let addr = gw.base.trim_start_matches("http://").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let blocks = blocks_of(&repo().join("docs/curl-session.md"));
    let mut script = String::from("set +e\n");
    let mut expected = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        if b.lang != "sh" {
            continue;
        }
        let body =
            b.body.replace("127.0.0.1:8811", &addr).replace("/tmp/mcpgate-headers", &dir.path().join("headers").display().to_string());
        script.push_str(&format!("echo '@@block {i}@@'\n{body}\n"));
        let output = blocks.get(i + 1).filter(|n| n.lang != "sh").map(|n| (n.line, n.body.clone()));
        expected.push((i, b.line, output));
    }
    script.push_str("echo '@@end@@'\n");
    let out = Command::new("bash").arg("-c").arg(&script).output().expect("bash");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    for (i, line, want) in expected {
        let start = stdout.find(&format!("@@block {i}@@\n")).unwrap_or_else(|| panic!("block {i} did not run:\n{stdout}"));
        let after = &stdout[start..];
        let got = after.split_once('\n').map(|(_, r)| r).unwrap_or("");
        let got = got[..got.find("@@").unwrap_or(got.len())].to_string();
        let Some((out_line, want)) = want else { continue };
        assert!(
            matches(&normalize(&want), &normalize(&got)),
            "docs/curl-session.md:{line}: the output printed at line {out_line} is not what the gateway answers now.\nprinted:\n{want}\nnow:\n{got}"
        );
    }
}

fn clients_bin(name: &str) -> String {
    installed_client(name)
}

/// A documented line with the placeholders made real.
fn localize(s: &str, url: &str) -> String {
    s.replace(DOC_URL, url)
        .replace(DOC_BINARY, env!("CARGO_BIN_EXE_mcpgate"))
        .replace(DOC_CONFIG, &repo().join("gateway.toml").display().to_string())
}

fn run(program: &str, args: &[String], home: &Path) -> (bool, String) {
    run_with(program, args, home, &[])
}

/// [`run`] with more environment variables. Its stdin is empty and its stderr a pipe, so a client
/// never finds a terminal to prompt on.
fn run_with(program: &str, args: &[String], home: &Path, env: &[(String, String)]) -> (bool, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(home)
        .env("HOME", home)
        .env("CI", "true")
        .env_remove("MCPGATE_TOKEN_KEY")
        .env_remove("MCP_AUTO_OPEN_ENABLED")
        .env_remove("NODE_EXTRA_CA_CERTS")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Whitespace runs as one space: a quote may wrap across lines of the Markdown source.
fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The message of the Inspector CLI's `{"error": {"message": …}}` line, or all it printed.
fn inspector_error(out: &str) -> String {
    out.lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l.trim()).ok().and_then(|v| v["error"]["message"].as_str().map(String::from)))
        .unwrap_or_else(|| out.trim().to_string())
}

pub async fn quick_start() {
    let gw = shipped_gateway();
    let mut ran = (0, 0, 0);
    for doc in ["README.md", "docs/quickstart.md"] {
        for b in blocks_of(&repo().join(doc)) {
            let at = format!("{doc}:{}", b.line);
            if b.lang == "sh" {
                for line in shell::logical_lines(&b.body) {
                    let line = localize(&line, &gw.url);
                    for words in shell::commands(&line) {
                        let home = tempfile::tempdir().expect("tempdir");
                        match (words[0].as_str(), words.get(1).map(String::as_str)) {
                            ("claude", Some("mcp")) => {
                                let claude = clients_bin("claude");
                                let (ok, out) = run(&claude, &words[1..], home.path());
                                assert!(ok, "{at}: `{}` failed:\n{out}", words.join(" "));
                                let (ok, out) = run(&claude, &["mcp".into(), "list".into()], home.path());
                                assert!(
                                    ok && out.contains("✔ Connected"),
                                    "{at}: after `{}`, claude mcp list says:\n{out}",
                                    words.join(" ")
                                );
                                ran.0 += 1;
                            }
                            ("npx", Some(w)) if super::test_deps::is_inspector(w) => {
                                let (ok, out) = run(&clients_bin("mcp-inspector"), &words[2..], home.path());
                                assert!(ok, "{at}: `{}` failed:\n{out}", words.join(" "));
                                let expect = if words.iter().any(|w| w == "tools/call") { "\"5\"" } else { "calc__add" };
                                assert!(out.contains(expect), "{at}: `{}` printed:\n{out}", words.join(" "));
                                ran.1 += 1;
                            }
                            _ => {}
                        }
                    }
                }
            }
            if b.lang == "json" && !b.body.contains('…') {
                let mut v: Value = serde_json::from_str(&localize(&b.body, &gw.url)).expect("JSON");
                // VS Code's `servers` holds the same entries as `mcpServers`.
                if let Some(servers) = v.get("servers").cloned() {
                    v = serde_json::json!({ "mcpServers": servers });
                }
                let Some(servers) = v["mcpServers"].as_object().cloned() else { continue };
                for (name, mut entry) in servers {
                    // `npx -y mcp-remote@…` runs the installed mcp-remote.
                    if entry["command"] == "npx" && entry["args"][1].as_str().is_some_and(|a| a.starts_with("mcp-remote@")) {
                        let rest: Vec<Value> = entry["args"].as_array().map(|a| a[2..].to_vec()).unwrap_or_default();
                        entry = serde_json::json!({ "command": clients_bin("mcp-remote"), "args": rest });
                    }
                    // The Inspector reads a bare `url` (Cursor's form) as a command; say it is HTTP.
                    if entry.get("url").is_some() && entry.get("type").is_none() {
                        entry["type"] = Value::from("http");
                    }
                    let home = tempfile::tempdir().expect("tempdir");
                    let file = home.path().join("client.json");
                    std::fs::write(&file, serde_json::json!({ "mcpServers": { &name: entry } }).to_string()).expect("write");
                    let args: Vec<String> = ["--cli", "--config", &file.display().to_string(), "--server", &name, "--method", "tools/list"]
                        .iter()
                        .map(|s| s.to_string())
                        .collect();
                    let (ok, out) = run(&clients_bin("mcp-inspector"), &args, home.path());
                    assert!(ok && out.contains("calc__add"), "{at}: server '{name}' of this snippet does not list the tools:\n{out}");
                    ran.2 += 1;
                }
            }
        }
    }
    assert!(ran.0 >= 2 && ran.1 >= 3 && ran.2 >= 5, "quick-start commands run (claude, inspector, client files): {ran:?}");
}

/// What the binary prints in each situation the troubleshooting page describes.
pub async fn troubleshooting() {
    let doc = std::fs::read_to_string(repo().join("docs/troubleshooting.md")).expect("docs/troubleshooting.md");
    let dir = tempfile::tempdir().expect("tempdir");
    let mcpgate = |args: &[&str], config: &str| -> String {
        std::fs::write(dir.path().join("gateway.toml"), config).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_mcpgate"))
            .args(args)
            .current_dir(dir.path())
            .env_remove("GITHUB_TOKEN")
            .env_remove("MCPGATE_LISTEN")
            .env("MCPGATE_LOG", "off")
            .output()
            .expect("run mcpgate");
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    };
    let quoted = |printed: &str, what: &str| {
        let line = printed.lines().find(|l| l.starts_with("error:") || l.starts_with("  ")).unwrap_or(printed).trim_end().to_string();
        assert!(doc.contains(&line), "docs/troubleshooting.md should quote what mcpgate prints for {what}:\n{line}");
    };
    let check = ["check", "-c", "gateway.toml"];
    quoted(&mcpgate(&check, "[[upstream]]\nid = \"Calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n"), "a bad id");
    let github = |value: &str| {
        format!("[[upstream]]\nid = \"github\"\nurl = \"https://api.example.com/mcp\"\nheaders = {{ Authorization = {value} }}\n")
    };
    quoted(&mcpgate(&check, &github("{ env = \"GITHUB_TOKEN\", prefix = \"Bearer \" }")), "a missing variable");
    quoted(&mcpgate(&check, &github("\"Bearer ghp_example\"")), "a literal secret");
    quoted(&mcpgate(&["run", "-c", "gateway.toml"], "[server]\nlisten = \"0.0.0.0:8811\"\n"), "a public listener without auth");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = busy.local_addr().expect("addr").port();
    let printed = mcpgate(&["run", "-c", "gateway.toml"], &format!("[server]\nlisten = \"127.0.0.1:{port}\"\n"));
    quoted(&printed.replace(&format!(":{port}"), ":8811"), "a port in use");
    let down = mcpgate(&check, "[[upstream]]\nid = \"tools\"\ncommand = [\"no-such-server\", \"--stdio\"]\n");
    quoted(down.split("Unavailable upstreams:\n").nth(1).unwrap_or(&down), "a missing program");
    let exited = mcpgate(&check, "[[upstream]]\nid = \"tools\"\ncommand = [\"sh\", \"-c\", \"exit 127\"]\n");
    quoted(exited.split("Unavailable upstreams:\n").nth(1).unwrap_or(&exited), "a command that is not found");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let refused = mcpgate(&check, &format!("[[upstream]]\nid = \"old\"\nurl = \"http://127.0.0.1:{closed}/sse\"\n"));
    quoted(refused.split("Unavailable upstreams:\n").nth(1).unwrap_or(&refused), "an HTTP upstream that is not there");
    drop(busy);

    // The messages clients get.
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n[[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"calc__*\"]\nrate_limit = \"1/s\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n",
        mcpgate::auth::hash_key("alice-key")
    );
    let gw = gateway(&config);
    let message = |r: Resp| r.json()["error"]["message"].as_str().unwrap_or_default().to_string();
    let said = |m: String, what: &str| assert!(doc.contains(&m), "docs/troubleshooting.md should quote the message for {what}: {m}");
    let alice = [("Authorization", "Bearer alice-key")];
    said(message(rpc(&gw.url, "tools/list", serde_json::json!({})).await), "no credential");
    said(
        message(rpc_with(&gw.url, "tools/list", serde_json::json!({}), &[alice[0], ("Origin", "https://evil.example")]).await),
        "a foreign origin",
    );
    said(
        message(rpc_with(&gw.url, "tools/call", serde_json::json!({ "name": "text__upper", "arguments": {} }), &alice).await),
        "a hidden tool",
    );
    let _ = rpc_with(&gw.url, "tools/list", serde_json::json!({}), &alice).await;
    said(message(rpc_with(&gw.url, "tools/list", serde_json::json!({}), &alice).await), "a rate limit");
    let legacy = post_raw(
        &gw.url,
        &[
            alice[0],
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-06-18"),
            ("Mcp-Session-Id", "bogus"),
        ],
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    )
    .await;
    said(message(legacy), "an unknown legacy session");
    let bare = post_raw(
        &gw.url,
        &[
            alice[0],
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
    )
    .await;
    said(message(bare), "a request without _meta");
}

/// API keys with real clients. The Inspector commands of the quick start and of the virtual
/// servers page that send `$MCPGATE_API_KEY` list the tools with a key the gateway knows; with a
/// wrong key, what the Inspector, `claude mcp list` and mcp-remote say (each takes the 401 for an
/// OAuth challenge) is quoted on the troubleshooting page, and so is the gateway's own refusal the
/// Inspector prints with `--stored-auth-only`. On an endpoint path, without the documented
/// `--transport http`, the Inspector stops with the message the docs quote.
pub async fn api_key_clients() {
    let trouble = flat(&std::fs::read_to_string(repo().join("docs/troubleshooting.md")).expect("docs/troubleshooting.md"));
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n[[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"calc__*\"]\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n\n[[endpoint]]\npath = \"/mcp/dev\"\ninclude = [\"upstream:calc\"]\n",
        mcpgate::auth::hash_key("alice-key")
    );
    let gw = gateway(&config);
    let inspector = clients_bin("mcp-inspector");
    let with_key = |words: &[String], key: &str| -> Vec<String> { words.iter().map(|w| w.replace("$MCPGATE_API_KEY", key)).collect() };

    // The documented Inspector commands that send a key, pointed at this gateway.
    let mut commands = Vec::new();
    for doc in ["docs/quickstart.md", "docs/virtual-servers.md"] {
        for b in blocks_of(&repo().join(doc)).iter().filter(|b| b.lang == "sh") {
            for line in shell::logical_lines(&b.body) {
                let line = localize(&line, &gw.url).replace("https://gateway.example.com", &gw.base);
                for words in shell::commands(&line) {
                    if words.get(1).is_some_and(|w| super::test_deps::is_inspector(w))
                        && words.iter().any(|w| w.contains("$MCPGATE_API_KEY"))
                    {
                        commands.push((doc, b.line, words));
                    }
                }
            }
        }
    }
    assert!(
        commands.len() >= 2,
        "Inspector commands sending $MCPGATE_API_KEY in docs/quickstart.md and docs/virtual-servers.md: {}",
        commands.len()
    );
    for (doc, line, words) in &commands {
        let at = format!("{doc}:{line}");
        let home = tempfile::tempdir().expect("tempdir");
        let (ok, out) = run(&inspector, &with_key(&words[2..], "alice-key"), home.path());
        assert!(ok && out.contains("calc__add"), "{at}: with a key the gateway knows, `{}` printed:\n{out}", words.join(" "));
        let (ok, out) = run(&inspector, &with_key(&words[2..], "wrong-key"), home.path());
        let said = inspector_error(&out);
        assert!(
            !ok && trouble.contains(&flat(&said)),
            "docs/troubleshooting.md should quote what the Inspector prints when the gateway refuses its key (`{}`):\n{said}",
            words.join(" ")
        );
        let mut stored = with_key(&words[2..], "wrong-key");
        stored.push("--stored-auth-only".into());
        let (ok, out) = run(&inspector, &stored, home.path());
        assert!(
            !ok && out.contains("Unauthorized: unknown API key")
                && trouble.contains("--stored-auth-only")
                && trouble.contains("Unauthorized: unknown API key"),
            "{at}: with --stored-auth-only the Inspector prints the gateway's refusal, which docs/troubleshooting.md should say:\n{out}"
        );
        // The transport is guessed from a path ending in /mcp only.
        let url = words.iter().find(|w| w.starts_with("http://") || w.starts_with("https://")).cloned().unwrap_or_default();
        if !url.ends_with("/mcp") {
            let i = words
                .iter()
                .position(|w| w == "--transport")
                .unwrap_or_else(|| panic!("{at}: the Inspector needs `--transport http` for {url}"));
            let without: Vec<String> = words.iter().enumerate().filter(|(j, _)| *j != i && *j != i + 1).map(|(_, w)| w.clone()).collect();
            let (ok, out) = run(&inspector, &with_key(&without[2..], "alice-key"), home.path());
            let said = inspector_error(&out);
            let said = said.split(": http").next().unwrap_or(said.as_str()).to_string();
            let text = flat(&std::fs::read_to_string(repo().join(doc)).expect("read doc"));
            assert!(
                !ok && text.contains(&flat(&said)),
                "{at}: without `--transport http` the Inspector says what {doc} should quote:\n{said}"
            );
        }
    }

    // Claude Code, with a wrong key configured as the docs show.
    let claude = clients_bin("claude");
    let home = tempfile::tempdir().expect("tempdir");
    let add: Vec<String> = ["mcp", "add", "--transport", "http", "mcpgate", gw.url.as_str(), "--header", "Authorization: Bearer wrong-key"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (ok, out) = run(&claude, &add, home.path());
    assert!(ok, "`claude {}` failed:\n{out}", add.join(" "));
    let (_, out) = run(&claude, &["mcp".into(), "list".into()], home.path());
    // `mcpgate: <url> (HTTP) - ✘ Failed to connect — <reason> Error detail: <the gateway's answer>`
    let reason = out
        .lines()
        .find(|l| l.starts_with("mcpgate:"))
        .and_then(|l| l.split_once(" — "))
        .map(|(_, r)| r.split(" Error detail:").next().unwrap_or(r).trim().to_string())
        .unwrap_or_else(|| out.clone());
    assert!(
        trouble.contains(&flat(&reason)),
        "docs/troubleshooting.md should quote what `claude mcp list` says when the gateway refuses the configured key:\n{reason}"
    );

    // mcp-remote, which tries to register itself as an OAuth client: what it says when the
    // gateway (with API keys, no authorization server) refuses that.
    let home = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(clients_bin("mcp-remote"))
        .args([gw.url.as_str(), "--header", "Authorization: Bearer wrong-key"])
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("CI", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mcp-remote");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut log, mut said) = (String::new(), None);
    while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        log.push_str(&line);
        log.push('\n');
        if let Some(i) = line.find("Dynamic Client Registration rejected") {
            said = Some(line[i..].trim().to_string());
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let said = said.unwrap_or_else(|| panic!("mcp-remote did not ask for a sign-in when the gateway refused its key:\n{log}"));
    assert!(
        trouble.contains(&flat(&said)),
        "docs/troubleshooting.md should quote what mcp-remote logs when the gateway refuses its key:\n{said}"
    );
}

/// The TLS recipe of docs/operations.md: its commands write the `cert` and `key` its
/// `[server.tls]` example names, a gateway serves HTTPS with them, and the Node clients the page
/// shows list the tools through `NODE_EXTRA_CA_CERTS` (and refuse the certificate without it).
pub async fn tls_recipe() {
    let doc = "docs/operations.md";
    let blocks = blocks_of(&repo().join(doc));
    let dir = tempfile::tempdir().expect("tempdir");
    let recipe = blocks
        .iter()
        .find(|b| b.lang == "sh" && b.body.contains("openssl req"))
        .unwrap_or_else(|| panic!("{doc} shows no `openssl req` recipe"));
    let made = Command::new("bash").arg("-ec").arg(&recipe.body).current_dir(dir.path()).output().expect("run bash");
    assert!(
        made.status.success(),
        "{doc}:{}: the recipe failed (openssl must be installed):\n{}",
        recipe.line,
        String::from_utf8_lossy(&made.stderr)
    );
    let tls = blocks
        .iter()
        .filter(|b| b.lang == "toml")
        .find_map(|b| toml::from_str::<toml::Value>(&b.body).ok().and_then(|v| v.get("server")?.get("tls").cloned()))
        .unwrap_or_else(|| panic!("{doc} has no [server.tls] example"));
    let file = |k: &str| dir.path().join(tls.get(k).and_then(toml::Value::as_str).unwrap_or_default());
    let (cert, key) = (file("cert"), file("key"));
    assert!(
        cert.is_file() && key.is_file(),
        "{doc}:{}: the recipe should write the `cert` and `key` of the [server.tls] example ({} and {})",
        recipe.line,
        cert.display(),
        key.display()
    );
    let gw = gateway_listening(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[server.tls]\ncert = {:?}\nkey = {:?}\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n",
        cert.display().to_string(),
        key.display().to_string()
    ));
    assert!(gw.url.starts_with("https://"), "{}", gw.url);
    // The certificate names localhost and 127.0.0.1; the page's URL uses the name.
    let url = gw.url.replace("127.0.0.1", "localhost");
    let claude_home = tempfile::tempdir().expect("tempdir");
    let mut ran = (0, 0);
    for b in blocks.iter().filter(|b| b.lang == "sh") {
        for line in shell::logical_lines(&b.body) {
            if !line.contains("https://localhost:8811/mcp") && !line.contains("NODE_EXTRA_CA_CERTS=") {
                continue;
            }
            let at = format!("{doc}:{}", b.line);
            let line = line.replace("https://localhost:8811/mcp", &url).replace("/abs/path/to/", &format!("{}/", dir.path().display()));
            // Leading `VAR=value` words are the command's environment.
            let all = shell::words(&line);
            let env: Vec<(String, String)> = all
                .iter()
                .take_while(|w| {
                    !w.starts_with('-')
                        && w.split_once('=').is_some_and(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
                })
                .filter_map(|w| w.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
                .collect();
            let words = &all[env.len()..];
            match (words[0].as_str(), words.get(2).map(String::as_str)) {
                ("npx", _) if words.get(1).is_some_and(|w| super::test_deps::is_inspector(w)) => {
                    assert!(!env.is_empty(), "{at}: the Inspector needs NODE_EXTRA_CA_CERTS for a self-signed certificate");
                    let inspector = clients_bin("mcp-inspector");
                    let home = tempfile::tempdir().expect("tempdir");
                    // The upstream may still be starting: the gateway is not waited for over HTTPS.
                    let deadline = Instant::now() + Duration::from_secs(30);
                    loop {
                        let (ok, out) = run_with(&inspector, &words[2..], home.path(), &env);
                        if ok && out.contains("calc__add") {
                            break;
                        }
                        assert!(Instant::now() < deadline, "{at}: `{}` printed:\n{out}", words.join(" "));
                        std::thread::sleep(Duration::from_millis(500));
                    }
                    let (ok, out) = run(&inspector, &words[2..], home.path());
                    assert!(
                        !ok && out.contains("self-signed certificate"),
                        "{at}: without NODE_EXTRA_CA_CERTS the Inspector should refuse the certificate, as the page says:\n{out}"
                    );
                    ran.0 += 1;
                }
                ("claude", Some("add")) => {
                    let (ok, out) = run_with(&clients_bin("claude"), &words[1..], claude_home.path(), &env);
                    assert!(ok, "{at}: `{}` failed:\n{out}", words.join(" "));
                }
                ("claude", Some("list")) => {
                    let claude = clients_bin("claude");
                    let (ok, out) = run_with(&claude, &words[1..], claude_home.path(), &env);
                    assert!(ok && out.contains("✔ Connected"), "{at}: `{}` printed:\n{out}", words.join(" "));
                    let (_, out) = run(&claude, &words[1..], claude_home.path());
                    assert!(
                        !out.contains("✔ Connected"),
                        "{at}: without NODE_EXTRA_CA_CERTS, Claude Code should refuse the certificate:\n{out}"
                    );
                    ran.1 += 1;
                }
                _ => {}
            }
        }
    }
    assert!(ran.0 >= 1 && ran.1 >= 1, "TLS commands run (inspector, claude mcp list): {ran:?}");
}
