//! Just enough shell to read the documentation's command lines: continuation lines joined,
//! commands split at `|`, `&&`, `;` and `&` (outside quotes and `$(…)`), words unquoted,
//! redirections and leading `VAR=value` assignments dropped; and the checks made on each command.

use crate::harness::repo;
use serde_json::Value;
use std::process::Command;

/// Lines with `\` continuations joined, comments and blank lines dropped, `$ ` prompts removed.
pub fn logical_lines(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for raw in body.lines() {
        let line = raw.trim_end();
        let line = line.strip_prefix("$ ").unwrap_or(line);
        if cur.is_empty() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                cur.push_str(head);
                cur.push(' ');
            }
            None => {
                cur.push_str(line);
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The simple commands of a line, each as its words.
pub fn commands(line: &str) -> Vec<Vec<String>> {
    let mut parts = Vec::new();
    let (mut cur, mut quote, mut depth) = (String::new(), None::<char>, 0usize);
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            // An escaped character, outside quotes or inside double ones, is kept with its `\`.
            (Some('"') | None, '\\') => {
                cur.push(c);
                i += 1;
                if let Some(n) = chars.get(i) {
                    cur.push(*n);
                }
                i += 1;
                continue;
            }
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') if cur.ends_with('$') => depth += 1,
            (None, ')') if depth > 0 => depth -= 1,
            (None, '|' | ';' | '&') if depth == 0 => {
                if c == '&' && cur.ends_with(['>', '2']) {
                    cur.push(c);
                    i += 1;
                    continue;
                }
                parts.push(std::mem::take(&mut cur));
                while chars.get(i + 1).is_some_and(|n| matches!(n, '|' | '&')) {
                    i += 1;
                }
                i += 1;
                continue;
            }
            _ => {}
        }
        cur.push(c);
        i += 1;
    }
    parts.push(cur);
    parts.iter().map(|p| strip(words(p))).filter(|w| !w.is_empty()).collect()
}

/// Redirections and leading assignments removed.
fn strip(words: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for w in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        if out.is_empty()
            && w.contains('=')
            && w.split('=').next().is_some_and(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        {
            continue;
        }
        if matches!(w.as_str(), ">" | ">>" | "<" | "2>") {
            skip_next = true;
            continue;
        }
        if w.starts_with("2>") || (w.starts_with('>') && w.len() > 1) {
            continue;
        }
        out.push(w);
    }
    out
}

/// Shell words: quotes removed (adjacent pieces joined), `\x` outside quotes is `x`.
pub fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut any = false;
    let mut chars = s.chars().peekable();
    let mut depth = 0usize;
    // Quotes inside `$(…)` are kept as they are, and hide their parentheses.
    let mut inner: Option<char> = None;
    while let Some(c) = chars.next() {
        if depth > 0 {
            match (inner, c) {
                (Some(q), _) if c == q => inner = None,
                (None, '\'' | '"') => inner = Some(c),
                (None, '(') => depth += 1,
                (None, ')') => depth -= 1,
                _ => {}
            }
            cur.push(c);
            continue;
        }
        match c {
            '\'' if depth == 0 => {
                any = true;
                for n in chars.by_ref() {
                    if n == '\'' {
                        break;
                    }
                    cur.push(n);
                }
            }
            '"' if depth == 0 => {
                any = true;
                while let Some(n) = chars.next() {
                    match n {
                        '"' => break,
                        '\\' => {
                            if let Some(m) = chars.next() {
                                cur.push(m);
                            }
                        }
                        _ => cur.push(n),
                    }
                }
            }
            '\\' if depth == 0 => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    any = true;
                }
            }
            '(' if cur.ends_with('$') => {
                depth += 1;
                cur.push(c);
            }
            ')' if depth > 0 => {
                depth -= 1;
                cur.push(c);
            }
            c if c.is_whitespace() && depth == 0 => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The programs the documentation may tell people to run besides mcpgate.
const KNOWN: &[&str] = &[
    "curl",
    "docker",
    "helm",
    "kubectl",
    "openssl",
    "npx",
    "uvx",
    "pip",
    "python",
    "claude",
    "cargo",
    "jq",
    "echo",
    "sleep",
    "wait",
    "kill",
    "for",
    "done",
    "do",
    "ss",
    "which",
    "systemctl",
    "install",
    "cp",
    "mkdir",
    "awk",
    "tr",
    "grep",
    "head",
    "cat",
    "tee",
    "export",
    "cd",
    "git",
    "scripts/test",
    "bench/run",
    "deploy/check",
    "deploy/kubernetes/render",
    "scripts/install-test-deps.sh",
];

/// Checks one command; true when it is an mcpgate invocation.
pub fn check_command(words: &[String], at: &str) -> bool {
    let program = words[0].as_str();
    if program == "mcpgate" || program.ends_with("/mcpgate") {
        assert_cli_parses(&words[1..], at);
        return true;
    }
    if program == "cargo"
        && words.get(1).is_some_and(|w| w == "run")
        && let Some(i) = words.iter().position(|w| w == "--")
    {
        assert_cli_parses(&words[i + 1..], at);
        return true;
    }
    assert!(KNOWN.contains(&program), "{at}: `{}` is not a program the docs test knows; add it to KNOWN if it is real", words.join(" "));
    for w in &words[1..] {
        let path = w.split_once('=').map(|(_, v)| v).unwrap_or(w);
        if ["deploy/", "scripts/", "bench/", "tests/", "docs/", "src/", "examples/"].iter().any(|p| path.starts_with(p)) {
            assert!(repo().join(path).exists(), "{at}: `{}` names {path}, which does not exist", words.join(" "));
        }
    }
    if program == "curl" {
        check_curl(words, at);
    }
    false
}

/// The real CLI accepts these arguments (they parse up to a final `--help`).
pub fn assert_cli_parses(args: &[String], at: &str) {
    let args: Vec<&str> = args.iter().map(String::as_str).filter(|a| *a != "&").collect();
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate")).args(&args).arg("--help").output().expect("run mcpgate");
    assert!(out.status.success(), "{at}: `mcpgate {}` does not parse:\n{}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// A curl request is one a gateway would take: its body JSON-RPC, its MCP headers matching it.
fn check_curl(words: &[String], at: &str) {
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut data = None;
    let mut i = 1;
    while i < words.len() {
        match words[i].as_str() {
            "-H" | "--header" => {
                if let Some((k, v)) = words.get(i + 1).and_then(|h| h.split_once(':')) {
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
                i += 1;
            }
            "-d" | "--data" | "--data-raw" => {
                data = words.get(i + 1).cloned();
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    let Some(data) = data else { return };
    // Shell variables stand for values: the same placeholder on both sides.
    let vars = |s: &str| {
        let mut out = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '$' && chars.peek().is_some_and(|n| n.is_ascii_alphabetic() || *n == '{') {
                let mut name = String::new();
                while let Some(n) = chars.peek().copied().filter(|n| n.is_ascii_alphanumeric() || *n == '_' || *n == '{' || *n == '}') {
                    name.push(n);
                    chars.next();
                }
                out.push_str(&format!("VAR_{}", name.trim_matches(['{', '}'])));
            } else {
                out.push(c);
            }
        }
        out
    };
    let body: Value = serde_json::from_str(&vars(&data)).unwrap_or_else(|e| panic!("{at}: the curl body is not JSON ({e}): {data}"));
    assert_eq!(body["jsonrpc"], "2.0", "{at}: not JSON-RPC: {data}");
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| vars(v));
    if let (Some(m), Some(method)) = (header("mcp-method"), body["method"].as_str()) {
        assert_eq!(m, method, "{at}: Mcp-Method does not match the body");
    }
    if let (Some(n), Some(name)) = (header("mcp-name"), body["params"]["name"].as_str()) {
        // One documented example shows the mismatch being refused.
        if n != name {
            assert!(at.contains("curl-session.md"), "{at}: Mcp-Name {n} does not match params.name {name}");
        }
    }
    if header("mcp-protocol-version").as_deref() == Some("2026-07-28") && body.get("id").is_some() && body.get("method").is_some() {
        assert_eq!(
            body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
            "{at}: a 2026-07-28 request needs its _meta"
        );
    }
}
