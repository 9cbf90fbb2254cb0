//! What the README says `scripts/test` installs is what `scripts/install-test-deps.sh` installs,
//! package for package and version for version; and the clients the docs tell people to run with
//! `npx` are pinned to the versions the docs tests run them at.

use crate::harness::*;

/// An npm `name@version` or pip `name==version` as the script pins it.
fn split_pin(pin: &str) -> (String, Option<String>) {
    if let Some((name, version)) = pin.split_once("==") {
        return (name.to_string(), Some(version.to_string()));
    }
    match pin.rfind('@') {
        Some(at) if at > 0 => (pin[..at].to_string(), Some(pin[at + 1..].to_string())),
        _ => (pin.to_string(), None),
    }
}

/// Every package the install script installs, with its pinned version (none for Debian's): the
/// quoted strings of its "pinned versions" block, and the packages of each `apt-get install`.
fn installed() -> Vec<(String, Option<String>)> {
    let script = std::fs::read_to_string(repo().join("scripts/install-test-deps.sh")).expect("scripts/install-test-deps.sh");
    let block = script.split("# ---- pinned versions").nth(1).expect("the script's pinned versions block");
    let block = block.split("\nNPM_BEFORE=").next().expect("the block ends with NPM_BEFORE");
    let mut out = Vec::new();
    for line in block.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let Some((key, value)) = line.split_once('=') else { continue };
        if !(key.ends_with("_PKG") || key.ends_with("_PKGS")) {
            continue;
        }
        for quoted in value.split('"').skip(1).step_by(2) {
            out.push(split_pin(quoted));
        }
    }
    for line in script.lines().filter(|l| l.contains("install -y --no-install-recommends ")) {
        let rest = line.split("install -y --no-install-recommends ").nth(1).unwrap_or("");
        for name in rest.split('>').next().unwrap_or("").split_whitespace() {
            out.push((name.to_string(), None));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The packages of the README's install list: the bullet list after the paragraph that begins
/// "`scripts/test` installs"; each is a name in backticks, its version (if any) right after it.
fn readme_list() -> Vec<(String, Option<String>)> {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let from = readme.find("`scripts/test` installs").expect("README.md: the paragraph beginning \"`scripts/test` installs\"");
    let list: Vec<&str> =
        readme[from..].lines().skip_while(|l| !l.starts_with("- ")).take_while(|l| l.starts_with("- ") || l.starts_with("  ")).collect();
    assert!(!list.is_empty(), "README.md: no bullet list after \"`scripts/test` installs\"");
    let mut out = Vec::new();
    for item in list {
        let parts: Vec<&str> = item.split('`').collect();
        for (i, name) in parts.iter().enumerate().skip(1).step_by(2) {
            let after = parts.get(i + 1).copied().unwrap_or("");
            let version = after
                .strip_prefix(' ')
                .map(|a| a.split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == ')').next().unwrap_or(""))
                .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()));
            out.push((name.to_string(), version.map(str::to_string)));
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn the_readme_lists_everything_the_test_command_installs() {
    let (script, readme) = (installed(), readme_list());
    assert!(script.len() >= 30, "the install script's packages were read: {script:?}");
    let show = |v: &Option<String>| v.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
    let missing: Vec<String> = script.iter().filter(|p| !readme.contains(p)).map(|(n, v)| format!("`{n}`{}", show(v))).collect();
    let extra: Vec<String> = readme.iter().filter(|p| !script.contains(p)).map(|(n, v)| format!("`{n}`{}", show(v))).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README.md's list of what `scripts/test` installs differs from scripts/install-test-deps.sh:\n  installed but not listed (or listed with another version): {}\n  listed but not installed (or not at that version): {}",
        missing.join(", "),
        extra.join(", ")
    );
}

/// `npx @modelcontextprotocol/inspector`, pinned or not (the docs tests run the installed one).
pub fn is_inspector(word: &str) -> bool {
    word == "@modelcontextprotocol/inspector" || word.starts_with("@modelcontextprotocol/inspector@")
}

/// A client the docs run through `npx` is named at the version the tests install: an unpinned
/// `npx` fetches whatever is newest, which the docs were not checked with.
#[test]
fn every_client_the_docs_run_with_npx_is_pinned_to_the_tested_version() {
    let script = installed();
    let mut checked = 0;
    let mut unpinned = Vec::new();
    for client in ["@modelcontextprotocol/inspector", "mcp-remote", "@anthropic-ai/claude-code"] {
        let pinned = script.iter().find(|(n, _)| n == client).and_then(|(_, v)| v.clone()).expect("the client is installed");
        let want = format!("{client}@{pinned}");
        for file in super::doc_files() {
            let text = std::fs::read_to_string(&file).expect("read a doc");
            for (n, line) in text.lines().enumerate() {
                // The package an `npx` (or `npx -y`, or a client file's `"args": ["-y", …]`) runs.
                let words: Vec<&str> =
                    line.split(|c: char| c.is_whitespace() || matches!(c, '"' | '`' | ',' | '[' | ']')).filter(|w| !w.is_empty()).collect();
                let run = words
                    .iter()
                    .enumerate()
                    .filter(|(_, w)| matches!(**w, "npx" | "-y"))
                    .filter_map(|(i, _)| words[i + 1..].iter().find(|w| !w.starts_with('-')));
                for word in run.filter(|w| **w == client || w.starts_with(&format!("{client}@"))) {
                    checked += 1;
                    if **word != want {
                        unpinned.push(format!("{}:{}: `{word}` (the tests run {want})", file.display(), n + 1));
                    }
                }
            }
        }
    }
    assert!(checked >= 5, "only {checked} npx commands of the clients found");
    assert!(unpinned.is_empty(), "write the version the tests install:\n{}", unpinned.join("\n"));
}
