//! Finding 10 of the second security review: the audit's text line is read by logfmt parsers
//! (Loki, Vector, `hl`, go-logfmt), so every value a client or an upstream chose (a tool name, the
//! arguments, an `x-request-id`) must be quoted where it could be read as more fields. The lines
//! here are parsed with a logfmt parser written to go-logfmt's grammar, and must give back
//! exactly the fields the gateway wrote.

use crate::harness::*;
use serde_json::json;
use std::time::Duration;

/// A parsed line: its keys, each with its value when it has one.
type Pairs = Vec<(String, Option<String>)>;

/// One line as a logfmt reader sees it: `key=value` pairs (a bare value runs to the next space; a
/// quoted one to the next unescaped `"`, with `\"`, `\\`, `\n`, `\t`, `\r` escapes), and bare
/// words as keys without a value. The grammar of go-logfmt's decoder.
pub fn logfmt(line: &str) -> Pairs {
    let chars: Vec<char> = line.chars().collect();
    let (mut i, mut out) = (0, Vec::new());
    while i < chars.len() {
        if chars[i] <= ' ' {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i] > ' ' && chars[i] != '=' && chars[i] != '"' {
            i += 1;
        }
        let key: String = chars[start..i].iter().collect();
        if i >= chars.len() || chars[i] != '=' {
            if i < chars.len() && chars[i] == '"' {
                i += 1; // a stray quote: skipped, as a lenient reader does
            }
            if !key.is_empty() {
                out.push((key, None));
            }
            continue;
        }
        i += 1;
        let mut value = String::new();
        if i < chars.len() && chars[i] == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    i += 1;
                    value.push(match chars[i] {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        c => c,
                    });
                } else {
                    value.push(chars[i]);
                }
                i += 1;
            }
            i += 1;
        } else {
            while i < chars.len() && chars[i] > ' ' {
                value.push(chars[i]);
                i += 1;
            }
        }
        out.push((key, Some(value)));
    }
    out
}

/// The values of `key` in a parsed line.
fn values<'a>(pairs: &'a [(String, Option<String>)], key: &str) -> Vec<&'a str> {
    pairs.iter().filter(|(k, _)| k == key).filter_map(|(_, v)| v.as_deref()).collect()
}

/// The audit line whose event fields (after the target) name `item`, parsed whole.
fn audit_line(log: &str, item: &str) -> Option<(String, Pairs)> {
    log.lines().filter(|l| l.contains("mcpgate::audit: audit ")).find_map(|l| {
        let pairs = logfmt(l.split_once("mcpgate::audit: audit ").map(|(_, e)| e).unwrap_or(""));
        values(&pairs, "item").contains(&item).then(|| (l.to_string(), logfmt(l)))
    })
}

#[test]
fn the_parser_reads_go_logfmt() {
    let pairs = logfmt(r#"a=1 b="x y=2" c= d e="q\"uote\\" f=é"#);
    let want = [("a", Some("1")), ("b", Some("x y=2")), ("c", Some("")), ("d", None), ("e", Some("q\"uote\\")), ("f", Some("é"))];
    assert_eq!(pairs, want.map(|(k, v)| (k.to_string(), v.map(str::to_string))));
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_lines_read_back_as_exactly_the_fields_written() {
    let (_up, url) = py_http("alpha", &[]);
    // At `info` no request span is made (nothing reads it): the audit line names the request's
    // id itself. At `debug` every line of the request carries the span too.
    for (log, span) in [("info", false), ("info,mcpgate=debug", true)] {
        audit_lines_at(&url, log, span).await;
    }
}

async fn audit_lines_at(url: &str, log: &str, span: bool) {
    let gw = gateway_with_env(
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[audit]\ninclude_arguments = true\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n"
        ),
        &[("MCPGATE_LOG", log)],
    );
    let id = [("x-request-id", "req-1 caller=admin outcome=ok")];

    // An unknown tool whose name spells other fields: refused, and audited under its whole name.
    let forged = "nope upstream=evil outcome=ok caller=admin";
    let r = rpc_with(&gw.url, "tools/call", json!({ "name": forged, "arguments": {} }), &id).await;
    assert_eq!(r.json()["error"]["code"], -32602, "{}", r.json());
    // A forwarded call whose arguments spell other fields, with quotes and backslashes.
    let text = "x\" caller=admin outcome=ok \\\" item=evil";
    let r = rpc_with(&gw.url, "tools/call", json!({ "name": "alpha__echo", "arguments": { "text": text } }), &id).await;
    assert_eq!(text_of(&r.message()), text);

    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let (refused, echoed) = loop {
        let log = gw.proc.log();
        if let (Some(a), Some(b)) = (audit_line(&log, forged), audit_line(&log, "alpha__echo")) {
            break (a, b);
        }
        assert!(std::time::Instant::now() < deadline, "no audit lines: {log}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for (line, pairs) in [&refused, &echoed] {
        assert_eq!(values(pairs, "caller").iter().filter(|v| **v != "anonymous").count(), 0, "{line}\n{pairs:?}");
        assert!(!values(pairs, "upstream").contains(&"evil"), "{line}");
        assert!(!values(pairs, "item").contains(&"evil"), "{line}");
        // The request's id is the line's own field, one value.
        assert_eq!(values(pairs, "request_id"), ["req-1 caller=admin outcome=ok"], "the request id is one value: {line}");
        if span {
            // The request's span comes first, as `request{id=… caller=…}:`.
            assert_eq!(values(pairs, "request{id"), ["req-1 caller=admin outcome=ok"], "the span's id is one value: {line}");
        } else {
            assert!(!line.contains("request{"), "no request span at {log}: {line}");
        }
    }
    let (line, pairs) = &refused;
    assert_eq!(values(pairs, "outcome"), ["unknown_or_denied"], "{line}");
    assert_eq!(values(pairs, "upstream"), ["-"], "{line}");
    let (line, pairs) = &echoed;
    assert_eq!(values(pairs, "outcome"), ["ok"], "{line}");
    let args = values(pairs, "arguments");
    assert_eq!(args.len(), 1, "{line}");
    let args: serde_json::Value = serde_json::from_str(args[0]).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(args["text"], text, "the arguments read back as written: {line}");
}
