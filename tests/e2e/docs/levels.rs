//! The log levels the documentation quotes are the ones the code logs at. Every "at `LEVEL`" and
//! "`LEVEL` line" in the prose of README.md and docs/*.md (fenced blocks aside) must be claimed
//! by one entry of [`CLAIMS`], found by a phrase of the same sentence: either a fragment of the
//! `tracing` macro calls that log it, whose level must be the one the sentence says, or the
//! reason the level is not a log line's. A new sentence quoting a level without an entry fails,
//! and so does an entry no sentence uses any more.

use super::{doc_files, rust_files};
use crate::harness::repo;

const LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error"];

enum Check {
    /// Every `tracing` macro call in `src/` and `crates/` whose arguments contain this text (at
    /// least one) logs at the level the sentence says.
    Logged(&'static str),
    /// The level is not a log line's (a filter setting, say); why.
    NotALogLine(&'static str),
}

/// (doc file, a phrase of the sentence that quotes the level, what to check).
const CLAIMS: &[(&str, &str, Check)] = &[
    // "The server's own stderr is in the gateway's log (at `info`, …)".
    ("docs/troubleshooting.md", "stderr", Check::Logged("\"stderr: ")),
    // "Each refused request is logged at `info` as `refused a request` …".
    ("docs/troubleshooting.md", "refused a request", Check::Logged("\"refused a request\")")),
    // "Failed authentications are logged as `refused a request` at `INFO`."
    ("docs/auth-and-policy.md", "refused a request", Check::Logged("\"refused a request\")")),
    // "… writes one `INFO` line with the target `mcpgate::audit` …".
    ("docs/auth-and-policy.md", "mcpgate::audit", Check::Logged("target: \"mcpgate::audit\"")),
    // "49.2 µs at `info`, … 42.0 µs at `warn`": the MCPGATE_LOG filter a benchmark ran with.
    ("docs/performance.md", "µs", Check::NotALogLine("the log filter a measurement ran with")),
    // "when the log shows `debug` lines …, each request runs in a span": the filter that makes
    // request spans (`telemetry::request_spans`), not a line logged at that level.
    ("docs/operations.md", "A span per request, when something reads it", Check::NotALogLine("the log filter that makes request spans")),
];

/// One sentence that quotes a level.
struct Quote {
    line: usize,
    level: &'static str,
    sentence: String,
}

pub fn check() {
    let mut used = vec![0usize; CLAIMS.len()];
    let mut checked = 0;
    for path in doc_files() {
        let name = path.strip_prefix(repo()).unwrap_or(&path).display().to_string();
        let text = std::fs::read_to_string(&path).expect("read doc");
        for q in quotes(&text) {
            let at = format!("{name}:{}", q.line);
            let matching: Vec<usize> = CLAIMS
                .iter()
                .enumerate()
                .filter(|(_, (file, phrase, _))| *file == name && q.sentence.contains(phrase))
                .map(|(i, _)| i)
                .collect();
            let i = match matching.as_slice() {
                [i] => *i,
                [] => panic!(
                    "{at}: this sentence says something is logged at `{}`, and the docs test cannot check it: add an entry to CLAIMS in tests/e2e/docs/levels.rs (a phrase of the sentence and a fragment of the tracing macro that logs it):\n{}",
                    q.level, q.sentence
                ),
                _ => panic!("{at}: several CLAIMS entries match this sentence; make their phrases tell it apart:\n{}", q.sentence),
            };
            used[i] += 1;
            match &CLAIMS[i].2 {
                Check::Logged(fragment) => {
                    for (place, level) in macro_levels(fragment) {
                        assert_eq!(
                            level, q.level,
                            "{at}: the docs say `{}`, but {place} logs it with `{level}!`; say `{level}` in the docs (or change the code):\n{}",
                            q.level, q.sentence
                        );
                    }
                    checked += 1;
                }
                Check::NotALogLine(why) => assert!(!why.is_empty(), "{at}: say why this level is not a log line's"),
            }
        }
    }
    for (i, (file, phrase, _)) in CLAIMS.iter().enumerate() {
        assert!(
            used[i] > 0,
            "CLAIMS entry ({file}, {phrase:?}) matches no sentence that quotes a log level any more: remove it, or fix its phrase"
        );
    }
    assert!(checked >= 4, "log levels checked against the code: {checked}");
}

/// The sentences of a Markdown text's prose that quote a level: "at `LEVEL`" or "`LEVEL` line".
fn quotes(text: &str) -> Vec<Quote> {
    let mut out = Vec::new();
    for (lines, para) in paragraphs(text) {
        let lower = para.to_ascii_lowercase();
        let mut found: Vec<(usize, &'static str)> = Vec::new();
        for level in LEVELS {
            for pattern in [format!("at `{level}`"), format!("`{level}` line")] {
                for (i, _) in lower.match_indices(pattern.as_str()) {
                    // "at" as a word: not the end of "that" or "format".
                    if pattern.starts_with("at ") && lower[..i].chars().next_back().is_some_and(|c| c.is_alphanumeric()) {
                        continue;
                    }
                    found.push((i, *level));
                }
            }
        }
        found.sort_unstable();
        for (i, level) in found {
            let (start, end) = sentence_around(&para, i);
            let line = lines.iter().take_while(|(offset, _)| *offset <= i).last().map_or(0, |(_, l)| *l);
            out.push(Quote { line, level, sentence: para[start..end].to_string() });
        }
    }
    out
}

/// A paragraph: where each of its lines starts (byte offset, line number), and its text.
type Paragraph = (Vec<(usize, usize)>, String);

fn flush(cur: &mut Paragraph, out: &mut Vec<Paragraph>) {
    let p = std::mem::take(cur);
    if !p.1.is_empty() {
        out.push(p);
    }
}

/// The prose paragraphs (fenced blocks left out; each table row, list item and heading on its
/// own), each joined into one line, with the byte offset where each of its lines starts and that
/// line's number.
fn paragraphs(text: &str) -> Vec<Paragraph> {
    let mut out = Vec::new();
    let mut cur: Paragraph = (Vec::new(), String::new());
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with("```") {
            fenced = !fenced;
            flush(&mut cur, &mut out);
            continue;
        }
        if fenced {
            continue;
        }
        let item = t.starts_with("- ")
            || t.starts_with("* ")
            || t.starts_with('|')
            || t.starts_with('#')
            || t.split_once(". ").is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if t.is_empty() || item {
            flush(&mut cur, &mut out);
        }
        if t.is_empty() {
            continue;
        }
        if !cur.1.is_empty() {
            cur.1.push(' ');
        }
        cur.0.push((cur.1.len(), n + 1));
        cur.1.push_str(t);
        if t.starts_with('|') || t.starts_with('#') {
            flush(&mut cur, &mut out);
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// The byte range of the sentence of `para` that holds byte `at`: sentences end at ". " before
/// a capital letter (so "e.g. `debug`" does not end one).
fn sentence_around(para: &str, at: usize) -> (usize, usize) {
    let b = para.as_bytes();
    let ends: Vec<usize> =
        (0..b.len().saturating_sub(2)).filter(|&i| b[i] == b'.' && b[i + 1] == b' ' && b[i + 2].is_ascii_uppercase()).collect();
    let start = ends.iter().rev().find(|&&e| e < at).map_or(0, |e| e + 2);
    let end = ends.iter().find(|&&e| e >= at).map_or(b.len(), |e| e + 1);
    (start, end)
}

/// For each `tracing` macro call in `src/` and `crates/` whose arguments hold `fragment`: where
/// it is and its level. At least one is required.
fn macro_levels(fragment: &str) -> Vec<(String, &'static str)> {
    let mut files = Vec::new();
    for dir in ["src", "crates"] {
        rust_files(&repo().join(dir), &mut files);
    }
    let mut out = Vec::new();
    for file in files {
        let Ok(src) = std::fs::read_to_string(&file) else { continue };
        for (at, _) in src.match_indices(fragment) {
            let before = &src[..at];
            let Some((start, level)) =
                LEVELS.iter().filter_map(|l| before.rfind(&format!("{l}!(")).map(|i| (i, *l))).max_by_key(|(i, _)| *i)
            else {
                continue;
            };
            // From the call's `(` to the fragment, the call must stay open (else the fragment is
            // outside it: in a test's assertion, a comment, another call).
            if !still_open(&src[start + level.len() + 1..at]) {
                continue;
            }
            let line = before.matches('\n').count() + 1;
            let name = file.strip_prefix(repo()).unwrap_or(&file).display().to_string();
            out.push((format!("{name}:{line}"), level));
        }
    }
    assert!(!out.is_empty(), "no tracing macro in src/ or crates/ holds `{fragment}` any more: update CLAIMS in tests/e2e/docs/levels.rs");
    out
}

/// True when `s`, which starts at a call's `(`, does not close that call (string literals skipped).
fn still_open(s: &str) -> bool {
    let mut depth = 0i32;
    let mut in_str = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (in_str, c) {
            (true, '\\') => {
                chars.next();
            }
            (true, '"') => in_str = false,
            (true, _) => {}
            (false, '"') => in_str = true,
            (false, '(') => depth += 1,
            (false, ')') => {
                depth -= 1;
                if depth == 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth > 0
}
