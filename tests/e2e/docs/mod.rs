//! The documentation cannot drift from the code. Every fenced snippet of README.md and docs/*.md
//! is checked: TOML snippets load as configurations and expect no shell interpolation, JSON
//! snippets parse (client files also import), every `mcpgate` command line parses with the real
//! CLI, every other command is a known program whose repository paths exist, and every curl
//! request is consistent (a JSON-RPC body whose method and name match its `Mcp-Method` and
//! `Mcp-Name` headers). The log levels the prose quotes are the code's (`levels.rs`), and every
//! metric the gateway registers has a row in the metrics table, and every key the configuration
//! file accepts is in docs/configuration.md (`config_keys.rs`). Beyond syntax, the curl session is
//! replayed against a real gateway and its outputs compared, the quick start runs with the real
//! Claude Code CLI, MCP Inspector and mcp-remote, the troubleshooting page must quote the messages
//! the binary and those clients really print, and the TLS recipe serves Node clients (see
//! `scenarios.rs`). The shipped configuration's comments name pages and headings that exist
//! (`shipped_config.rs`); the configuration reference's overview lists every top-level part the
//! file model accepts (`config_overview.rs`); README.md and docs/production.md quote no benchmark
//! figure that docs/performance.md's "Latest run" does not hold (`perf_figures.rs`); the per-user
//! identity section names every key of `[upstream.user_auth]` and `[identity]` and the token
//! endpoint methods the gateway uses (`user_auth.rs`); and the quick start's Python SDK recipe runs
//! against real gateways, answering a confirmation (`python_recipe.rs`). The README's list of what
//! `scripts/test` installs is the install script's, and the clients the docs run with `npx` are
//! pinned to the tested versions (`test_deps.rs`); the README's and the quick start's command
//! servers are sandboxed; every response shown with its headers carries `x-request-id`; where the
//! vault and the counts live is told with the PostgreSQL case, and what a crash can lose matches
//! the code (`state_stores.rs`); every command the CLI offers has a row in docs/cli.md that shows
//! `-c` when it takes one (`cli_reference.rs`). `markdown.rs` scopes a check to one section of a page.

mod architecture_map;
mod cli_reference;
mod config_keys;
mod config_overview;
mod levels;
mod markdown;
mod perf_figures;
mod python_recipe;
mod scenarios;
mod shell;
mod shipped_config;
mod state_stores;
mod test_deps;
mod user_auth;

use crate::harness::*;
use serde_json::Value;
use std::path::PathBuf;

pub struct Block {
    pub file: String,
    pub line: usize,
    pub lang: String,
    pub body: String,
}

fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Every fenced block of one file.
pub fn blocks_of(path: &std::path::Path) -> Vec<Block> {
    let text = std::fs::read_to_string(path).expect("read doc");
    let name = path.strip_prefix(repo()).unwrap_or(path).display().to_string();
    let mut out = Vec::new();
    let mut open: Option<(usize, String, String, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None if trimmed.starts_with("```") => {
                let indent = line.len() - trimmed.len();
                open = Some((i + 1, trimmed.trim_start_matches('`').trim().to_string(), String::new(), " ".repeat(indent)));
            }
            Some((start, lang, body, indent)) if trimmed.starts_with("```") => {
                out.push(Block { file: name.clone(), line: *start, lang: lang.clone(), body: std::mem::take(body) });
                let _ = indent;
                open = None;
            }
            Some((_, _, body, indent)) => {
                body.push_str(line.strip_prefix(indent.as_str()).unwrap_or(line));
                body.push('\n');
            }
            None => {}
        }
    }
    out
}

pub fn all_blocks() -> Vec<Block> {
    doc_files().iter().flat_map(|p| blocks_of(p)).collect()
}

/// Users do not know the project's internal work items ("Part 22"): the docs name the change.
#[test]
fn user_docs_name_no_internal_work_items() {
    let mut found = Vec::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).expect("read a doc");
        for (n, line) in text.lines().enumerate() {
            let words: Vec<&str> = line.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
            if words.windows(2).any(|w| matches!(w[0], "Part" | "Parts") && w[1].chars().all(|c| c.is_ascii_digit())) {
                found.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
        }
    }
    assert!(found.is_empty(), "internal work items named in user docs:\n{}", found.join("\n"));
}

#[test]
fn every_toml_snippet_is_a_valid_configuration() {
    let mut checked = 0;
    for b in all_blocks().iter().filter(|b| b.lang == "toml" && !is_cases(b)) {
        // Secret files a snippet names exist, with a made-up value.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("snippet.toml");
        let parsed: toml::Value = toml::from_str(&b.body).unwrap_or_else(|e| panic!("{}:{}: not TOML: {e}", b.file, b.line));
        for file in secret_files(&parsed) {
            let p = dir.path().join(&file);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).expect("mkdir");
            }
            std::fs::write(&p, "from-a-file").expect("write");
        }
        if let Err(e) = mcpgate_config::Config::parse(&b.body, &path, None, &|k: &str| {
            // Values that look like what the variables hold.
            Some(match k {
                k if k.contains("REDIS") => "redis://127.0.0.1:6379/0".into(),
                k if k.contains("POSTGRES") => "postgres://mcpgate:pw@127.0.0.1:5432/mcpgate".into(),
                _ => "from-the-environment".into(),
            })
        }) {
            panic!("{}:{}: this TOML snippet does not load: {e}\n{}", b.file, b.line, b.body);
        }
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} TOML snippets found");
}

/// A `policy test` cases file (its first line says so), run by [`the_policy_examples_decide_as_documented`].
fn is_cases(b: &Block) -> bool {
    b.body.lines().next().is_some_and(|l| l.trim() == "# cases.toml")
}

/// Each cases file in the docs is run with `mcpgate policy test` against the configuration shown
/// just before it, and every case decides as the docs say.
#[test]
fn the_policy_examples_decide_as_documented() {
    let blocks = all_blocks();
    let mut ran = 0;
    for (i, b) in blocks.iter().enumerate().filter(|(_, b)| b.lang == "toml" && is_cases(b)) {
        let config = blocks[..i].iter().rev().find(|c| c.file == b.file && c.lang == "toml" && !is_cases(c));
        let Some(config) = config else { panic!("{}:{}: a cases file with no configuration before it", b.file, b.line) };
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("gateway.toml"), &config.body).expect("write");
        std::fs::write(dir.path().join("cases.toml"), &b.body).expect("write");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpgate"))
            .args(["policy", "test", "-c", "gateway.toml", "cases.toml"])
            .current_dir(dir.path())
            .output()
            .expect("run mcpgate policy test");
        let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && printed.contains(", 0 failed"), "{}:{}: the documented cases fail:\n{printed}", b.file, b.line);
        ran += 1;
    }
    assert!(ran >= 1, "no cases file in the docs");
}

/// The gateway interpolates nothing: `"${GITHUB_TOKEN}"` or `"$GITHUB_TOKEN"` in a snippet would
/// reach the child or the upstream as that very text. Secrets are written `{ env = "VAR" }`.
#[test]
fn no_toml_snippet_expects_shell_interpolation() {
    let mut checked = 0;
    for b in all_blocks().iter().filter(|b| b.lang == "toml") {
        // A snippet that is not TOML is reported by `every_toml_snippet_is_a_valid_configuration`.
        let Ok(parsed) = toml::from_str::<toml::Value>(&b.body) else { continue };
        let mut found = Vec::new();
        interpolations(&parsed, "", &mut found);
        if let Some((key, value)) = found.first() {
            let line = b.body.lines().position(|l| l.contains(value.as_str())).map_or(b.line, |i| b.line + 1 + i);
            panic!(
                "{}:{line}: `{key} = {value:?}` expects shell interpolation, which mcpgate does not do: the text would be passed as it is. Write `{{ env = \"{}\" }}` to read the variable from the gateway's environment (or `{{ file = \"path\" }}`).",
                b.file,
                variable_in(value)
            );
        }
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} TOML snippets found");
}

/// Each string of `v` (with its dotted key) that looks like `${VAR}` or `$VAR` interpolation.
/// The one place a shell expands them is a `command` run with `sh -c` (which `mcpgate import`
/// writes for a secret in an argument): its arguments are left alone.
fn interpolations(v: &toml::Value, key: &str, out: &mut Vec<(String, String)>) {
    match v {
        toml::Value::String(s) if looks_interpolated(s) => out.push((key.to_string(), s.clone())),
        toml::Value::Table(t) => {
            for (k, v) in t {
                if k == "command" && runs_a_shell(v) {
                    continue;
                }
                let key = if key.is_empty() { k.clone() } else { format!("{key}.{k}") };
                interpolations(v, &key, out);
            }
        }
        toml::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                interpolations(v, &format!("{key}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn looks_interpolated(s: &str) -> bool {
    // `${…}` anywhere, or a word that is `$` and a variable name in capitals (`$GITHUB_TOKEN`,
    // `Bearer $TOKEN`); `$5` or `$x` in a description are not taken for one.
    s.contains("${")
        || s.split_whitespace().any(|w| {
            w.strip_prefix('$').is_some_and(|n| {
                n.starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
                    && n.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            })
        })
}

/// `["sh", "-c", …]` (or bash, dash, zsh).
fn runs_a_shell(v: &toml::Value) -> bool {
    let args: Vec<&str> = v.as_array().into_iter().flatten().filter_map(toml::Value::as_str).collect();
    args.first().is_some_and(|p| matches!(p.rsplit('/').next(), Some("sh" | "bash" | "dash" | "zsh"))) && args.contains(&"-c")
}

/// The variable an interpolated value names (`VAR` when none can be told).
fn variable_in(value: &str) -> String {
    let name = match value.split_once("${") {
        Some((_, rest)) => rest.split('}').next().unwrap_or("").trim_start_matches("env:").to_string(),
        None => value.split_whitespace().find_map(|w| w.strip_prefix('$')).unwrap_or("").to_string(),
    };
    if name.is_empty() { "VAR".into() } else { name }
}

/// Every series the gateway registers (`registry.register("name", …)` in `src/` and `crates/`,
/// under `mcpgate_`; `register_with_unit("name", …)` for the OpenTelemetry conventions' histograms,
/// at the root with their unit) has a row in the metrics table of docs/operations.md, and every
/// row is a registered series.
#[test]
fn every_metric_is_in_the_operations_table() {
    let doc = std::fs::read_to_string(repo().join("docs/operations.md")).expect("docs/operations.md");
    let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `mcpgate_")).collect();
    let root_rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `mcp_")).collect();
    let mut files = Vec::new();
    for dir in ["src", "crates"] {
        rust_files(&repo().join(dir), &mut files);
    }
    let (mut names, mut root) = (Vec::new(), Vec::new());
    for file in files {
        let Ok(src) = std::fs::read_to_string(&file) else { continue };
        for (call, found) in [(".register(", &mut names), (".register_with_unit(", &mut root)] {
            for (at, _) in src.match_indices(call) {
                let rest = src[at + call.len()..].trim_start();
                let Some(rest) = rest.strip_prefix('"') else { continue };
                if let Some(end) = rest.find('"') {
                    found.push(rest[..end].to_string());
                }
            }
        }
    }
    assert!(root.len() >= 2, "the conventions' histograms: {root:?}");
    for name in &root {
        assert!(
            root_rows.iter().any(|r| r.starts_with(&format!("| `{name}_seconds`"))),
            "docs/operations.md: the metrics table has no row for `{name}_seconds`"
        );
    }
    for r in &root_rows {
        let series = r.trim_start_matches("| `").split('`').next().unwrap_or("");
        assert!(
            root.iter().any(|n| series.strip_suffix("_seconds") == Some(n.as_str())),
            "docs/operations.md: the metrics table lists `{series}`, which the gateway does not register"
        );
    }
    assert!(names.len() >= 10, "registered metrics found: {names:?}");
    for name in &names {
        let row = format!("| `mcpgate_{name}");
        assert!(
            rows.iter().any(|r| r.starts_with(&row)),
            "docs/operations.md: the metrics table has no row for `mcpgate_{name}` (a counter is exported with `_total`): add one saying what it counts"
        );
    }
    for r in &rows {
        let series = r.trim_start_matches("| `").split('`').next().unwrap_or("");
        let base = series.trim_start_matches("mcpgate_");
        let base = base.strip_suffix("_total").unwrap_or(base);
        assert!(
            names.iter().any(|n| n == base),
            "docs/operations.md: the metrics table lists `{series}`, which the gateway does not register"
        );
    }
}

pub fn rust_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    files_with(dir, "rs", out);
}

/// Every file under `dir` (a `target` folder aside) whose extension is `ext`.
pub fn files_with(dir: &std::path::Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target") {
                files_with(&p, ext, out);
            }
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
}

#[test]
fn every_log_level_the_docs_quote_is_the_codes() {
    levels::check();
}

/// The relative paths of the files a configuration reads (secrets, PEM files, keys).
fn secret_files(v: &toml::Value) -> Vec<String> {
    match v {
        toml::Value::Table(t) => t
            .iter()
            .flat_map(|(k, v)| match (k.as_str(), v) {
                (
                    "file" | "cert" | "key" | "ca" | "client_ca" | "jwks_file" | "token_key_file" | "redis_password_file",
                    toml::Value::String(s),
                ) if !s.starts_with('/') => {
                    vec![s.clone()]
                }
                _ => secret_files(v),
            })
            .collect(),
        toml::Value::Array(a) => a.iter().flat_map(secret_files).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn every_json_snippet_parses_and_client_files_import() {
    let mut clients = 0;
    for b in all_blocks().iter().filter(|b| b.lang == "json") {
        // Outputs shortened with "…" are replayed by the transcript test instead.
        if b.body.contains('…') {
            continue;
        }
        let v: Value = serde_json::from_str(&b.body).unwrap_or_else(|e| panic!("{}:{}: not JSON ({e}):\n{}", b.file, b.line, b.body));
        if v.get("mcpServers").is_some() || v.get("servers").is_some() {
            let imported =
                mcpgate::commands::import::import(&b.body, "snippet.json").unwrap_or_else(|e| panic!("{}:{}: {e}", b.file, b.line));
            assert!(imported.servers > 0);
            clients += 1;
            for server in v.get("mcpServers").or_else(|| v.get("servers")).and_then(Value::as_object).into_iter().flat_map(|m| m.values()) {
                let command = server["command"].as_str().unwrap_or("");
                if command.ends_with("/mcpgate") || command == "mcpgate" {
                    let args: Vec<String> =
                        server["args"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(String::from)).collect();
                    shell::assert_cli_parses(&args, &format!("{}:{}", b.file, b.line));
                }
            }
        }
    }
    assert!(clients >= 4, "the client configuration snippets: {clients}");
}

#[test]
fn every_command_in_the_docs_is_real() {
    let mut mcpgate_lines = 0;
    for b in all_blocks().iter().filter(|b| matches!(b.lang.as_str(), "sh" | "bash" | "console")) {
        for line in shell::logical_lines(&b.body) {
            for words in shell::commands(&line) {
                mcpgate_lines += usize::from(shell::check_command(&words, &format!("{}:{}", b.file, b.line)));
            }
        }
    }
    assert!(mcpgate_lines >= 8, "mcpgate command lines found: {mcpgate_lines}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_curl_session_is_what_the_gateway_answers() {
    scenarios::replay_curl_session().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_quick_start_works_with_real_clients() {
    scenarios::quick_start().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn troubleshooting_quotes_the_real_messages() {
    scenarios::troubleshooting().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn clients_send_api_keys_as_documented_and_troubleshooting_quotes_their_refusals() {
    scenarios::api_key_clients().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tls_recipe_serves_node_clients() {
    scenarios::tls_recipe().await;
}

/// "Command servers run in a sandbox" holds for what the README and the quick start show: each
/// command upstream of their TOML snippets has an `[upstream.sandbox]` table.
#[test]
fn the_readme_and_the_quick_start_sandbox_every_command_server() {
    let mut checked = 0;
    for file in ["README.md", "docs/quickstart.md"] {
        for b in blocks_of(&repo().join(file)).iter().filter(|b| b.lang == "toml") {
            let parsed: toml::Value = toml::from_str(&b.body).unwrap_or_else(|e| panic!("{}:{}: not TOML: {e}", b.file, b.line));
            for up in parsed.get("upstream").and_then(toml::Value::as_array).into_iter().flatten() {
                if up.get("command").is_none() {
                    continue;
                }
                checked += 1;
                assert!(
                    up.get("sandbox").is_some(),
                    "{}:{}: the command upstream {:?} has no [upstream.sandbox], so it would run unsandboxed, as the gateway's user",
                    b.file,
                    b.line,
                    up.get("id").and_then(toml::Value::as_str).unwrap_or("?")
                );
            }
        }
    }
    assert!(checked >= 3, "only {checked} command upstreams found in README.md and docs/quickstart.md");
}

/// Every response the docs show with its headers is what the gateway sends, and it sends
/// `x-request-id` on every response (refusals included).
#[test]
fn every_documented_response_carries_the_request_id() {
    let mut checked = 0;
    for b in all_blocks() {
        let mut lines = b.body.lines().skip_while(|l| !l.starts_with("HTTP/1.1 "));
        let Some(status) = lines.next() else { continue };
        let headers: Vec<&str> = lines.take_while(|l| !l.trim().is_empty()).collect();
        assert!(
            headers.iter().any(|h| h.to_ascii_lowercase().starts_with("x-request-id:")),
            "{}:{}: the response `{status}` lacks the `x-request-id` header the gateway sends on every response",
            b.file,
            b.line
        );
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} responses with headers found in the docs");
}
