//! Secrets kept out of results (`[secrets]`, docs/security.md): detectors for the common shapes of
//! credentials (cloud and SaaS keys, tokens, private keys) and the operator's own patterns, each
//! with an action: `redact` replaces what matched with `[REDACTED:<name>]`, `block` withholds the
//! whole message. One walker ([`scrub`]) applies them to every string a message from an upstream
//! carries to a client or its model (results, errors, notifications, questions), but the
//! protocol's opaque identifiers; a message it cannot read is withheld, never passed. A finding is
//! reported by its detector's name, never by what matched.

use regex::Regex;
use serde_json::Value;

/// What a detector does when it finds something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Redact,
    Block,
}

/// One detector.
#[derive(Debug, Clone)]
pub struct Detector {
    pub name: String,
    pub pattern: Regex,
    pub action: Action,
}

/// The built-in detectors: (name, pattern). Shapes with a fixed, recognisable prefix, so that
/// ordinary text does not match.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ("gitlab-token", r"\bglpat-[A-Za-z0-9_\-]{20,}\b"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"),
    ("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    // Before the generic `sk-` shape below, which would take it too.
    ("anthropic-key", r"\bsk-ant-[A-Za-z0-9_\-]{32,}\b"),
    ("openai-key", r"\bsk-(?:proj-)?[A-Za-z0-9_\-]{32,}\b"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("private-key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
];

/// The built-in detectors with `action`.
pub fn built_in(action: Action) -> Vec<Detector> {
    BUILT_IN
        .iter()
        .filter_map(|(name, p)| Regex::new(p).ok().map(|pattern| Detector { name: (*name).to_string(), pattern, action }))
        .collect()
}

/// What the detectors did to a message.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// The detectors that redacted something (each once).
    pub redacted: Vec<String>,
    /// The first detector whose finding withholds the message ([`UNREADABLE`] for a message the
    /// walker cannot read).
    pub blocked: Option<String>,
}

/// The name a message is withheld under when it cannot be read: not JSON, nested deeper than
/// [`MAX_DEPTH`] levels, or larger than [`MAX_BYTES`]. What cannot be read cannot be shown clean.
pub const UNREADABLE: &str = "unreadable";

/// The deepest nesting a message may have to be read (serde_json's own limit when parsing).
pub const MAX_DEPTH: usize = 127;

/// The largest message the walker reads (an upstream message is 16 MiB at most by default).
pub const MAX_BYTES: usize = 64 * 1024 * 1024;

/// Members that name or identify rather than say something: the protocol's own identifiers and
/// opaque values (a URI, a MIME type, base64 data, task ids, request states, cursors, progress
/// tokens), left as they are wherever the protocol puts them. Inside free-form values (below)
/// every member is read.
const OPAQUE: &[&str] = &["uri", "mimeType", "blob", "taskId", "requestState", "progressToken", "nextCursor", "cursor"];

/// Members whose whole value is free-form data an upstream chose (structured output, the data
/// of an error or a log message, a schema shown to a person): every key and string in them is
/// read, whatever its name.
const FREE_FORM: &[&str] = &["structuredContent", "data", "requestedSchema", "inputSchema", "outputSchema"];

/// Applies `detectors` to every string of a message that reaches a client or its model: every
/// string value and every object key (a result's text, names, descriptions and titles of content
/// blocks and resource links, completion values, error messages and data, log and progress
/// messages, the questions an upstream asks), but the [`OPAQUE`] members outside free-form values.
/// The walk is iterative, so its cost is linear in the message whatever its depth, and it stops
/// at the first finding that blocks.
pub fn scrub(message: &mut Value, detectors: &[Detector]) -> Findings {
    let mut found = Findings::default();
    if detectors.is_empty() {
        return found;
    }
    let mut stack: Vec<(&mut Value, bool)> = vec![(message, false)];
    while let Some((v, free)) = stack.pop() {
        match v {
            Value::String(s) => check(s, detectors, &mut found),
            Value::Array(items) => stack.extend(items.iter_mut().map(|i| (i, free))),
            Value::Object(map) => {
                rename_keys(map, detectors, &mut found);
                for (k, item) in map.iter_mut() {
                    if free || !OPAQUE.contains(&k.as_str()) {
                        stack.push((item, free || FREE_FORM.contains(&k.as_str())));
                    }
                }
            }
            _ => {}
        }
        if found.blocked.is_some() {
            break;
        }
    }
    found
}

/// Reads one message (JSON text), scrubs it, and writes it again when something was redacted:
/// `Ok(None)` when nothing was found, `Ok(Some(text))` redacted, `Err(name)` withheld (by a
/// detector, or [`UNREADABLE`]). Every redacting detector is in `redacted`.
pub fn scrub_json(text: &str, detectors: &[Detector], redacted: &mut Vec<String>) -> Result<Option<String>, String> {
    if detectors.is_empty() {
        return Ok(None);
    }
    if text.len() > MAX_BYTES || too_deep(text) {
        return Err(UNREADABLE.to_string());
    }
    let mut v: Value = serde_json::from_str(text).map_err(|_| UNREADABLE.to_string())?;
    let found = scrub(&mut v, detectors);
    if let Some(name) = found.blocked {
        return Err(name);
    }
    if found.redacted.is_empty() {
        return Ok(None);
    }
    for name in found.redacted {
        if !redacted.contains(&name) {
            redacted.push(name);
        }
    }
    serde_json::to_string(&v).map(Some).map_err(|_| UNREADABLE.to_string())
}

/// Whether `text` nests arrays and objects deeper than [`MAX_DEPTH`] (one linear pass over the
/// bytes, brackets inside strings skipped).
fn too_deep(text: &str) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Object keys are strings a client shows too: a key that holds a secret is redacted (renamed)
/// or blocks the message.
fn rename_keys(map: &mut serde_json::Map<String, Value>, detectors: &[Detector], found: &mut Findings) {
    let hits: Vec<String> = map.keys().filter(|k| detectors.iter().any(|d| d.pattern.is_match(k))).cloned().collect();
    for key in hits {
        let mut renamed = key.clone();
        check(&mut renamed, detectors, found);
        if renamed != key
            && let Some(v) = map.remove(&key)
        {
            map.insert(renamed, v);
        }
    }
}

fn check(s: &mut String, detectors: &[Detector], found: &mut Findings) {
    for d in detectors {
        if !d.pattern.is_match(s) {
            continue;
        }
        match d.action {
            Action::Block => {
                found.blocked.get_or_insert_with(|| d.name.clone());
            }
            Action::Redact => {
                *s = d.pattern.replace_all(s, format!("[REDACTED:{}]", d.name).as_str()).into_owned();
                if !found.redacted.contains(&d.name) {
                    found.redacted.push(d.name.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_built_in_shape_is_found_and_ordinary_text_is_not() {
        let samples = [
            ("aws-access-key", "AKIAIOSFODNN7EXAMPLE"),
            ("github-token", "ghp_0123456789abcdefghijABCDEFGHIJ012345"),
            ("gitlab-token", "glpat-abcdefghij0123456789"),
            ("slack-token", "xoxb-1234567890-abcdefghij"),
            ("stripe-key", "sk_live_0123456789abcdefABCD"),
            ("google-api-key", "AIzaSyA0123456789abcdefghijklmnopqrstuv"),
            ("openai-key", "sk-proj-0123456789abcdefghij0123456789abcdef"),
            ("anthropic-key", "sk-ant-api03-0123456789abcdefghij0123456789ab"),
            ("jwt", "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz"),
            ("private-key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----"),
        ];
        let detectors = built_in(Action::Redact);
        for (name, secret) in samples {
            let mut r = json!({ "content": [{ "type": "text", "text": format!("here: {secret} (done)") }] });
            let f = scrub(&mut r, &detectors);
            assert!(f.redacted.contains(&name.to_string()), "{name}: {f:?}");
            let text = r["content"][0]["text"].as_str().unwrap_or_default();
            assert!(!text.contains(secret) && text.contains(&format!("[REDACTED:{name}]")), "{name}: {text}");
        }
        let mut plain =
            json!({ "content": [{ "type": "text", "text": "ask for a key at the desk; sk is short for sketch; AKIA is a name" }] });
        assert_eq!(scrub(&mut plain, &detectors), Findings::default());
    }

    #[test]
    fn structured_content_and_resources_are_scrubbed_blobs_and_uris_are_not() {
        let detectors = built_in(Action::Redact);
        let mut r = json!({
            "content": [{ "type": "resource", "resource": { "uri": "mem://AKIAIOSFODNN7EXAMPLE", "text": "key AKIAIOSFODNN7EXAMPLE" } }],
            "structuredContent": { "creds": { "id": "AKIAIOSFODNN7EXAMPLE" }, "n": 1 },
        });
        scrub(&mut r, &detectors);
        assert_eq!(r["content"][0]["resource"]["uri"], "mem://AKIAIOSFODNN7EXAMPLE", "a URI is not text for the model");
        assert_eq!(r["content"][0]["resource"]["text"], "key [REDACTED:aws-access-key]");
        assert_eq!(r["structuredContent"]["creds"]["id"], "[REDACTED:aws-access-key]");
        let block = built_in(Action::Block);
        let mut r = json!({ "contents": [{ "uri": "x", "text": "AKIAIOSFODNN7EXAMPLE" }] });
        assert_eq!(scrub(&mut r, &block).blocked.as_deref(), Some("aws-access-key"));
    }

    /// Every string a client sees, whichever member holds it: text, resource links, completion
    /// values, errors, log data, questions and their schemas, `_meta`, and object keys.
    #[test]
    fn every_string_kind_is_read() {
        let (aws, gh) = ("AKIAIOSFODNN7EXAMPLE", "ghp_0123456789abcdefghijABCDEFGHIJ012345");
        let mut m = json!({
            "content": [
                { "type": "resource_link", "uri": "file:///x", "name": aws, "title": aws, "description": gh },
                { "type": "image", "data": "aGVsbG8=", "mimeType": "image/png", "annotations": { "audience": [aws] } }
            ],
            "completion": { "values": [aws, gh] },
            "error": { "code": -32000, "message": aws, "data": { "nested": [[{ "deep": gh }]] } },
            "params": { "level": "info", "logger": aws, "data": { "config": { "token": gh } }, "message": aws },
            "inputRequests": { "q": { "method": "elicitation/create", "params": {
                "message": aws,
                "requestedSchema": { "properties": { aws: { "type": "string", "description": gh, "enum": [aws], "default": gh } } }
            } } },
            "_meta": { "note": aws },
            "structuredContent": { gh: 1 },
            "statusMessage": aws,
        });
        let mut found = scrub(&mut m, &built_in(Action::Redact));
        let text = m.to_string();
        assert!(!text.contains(aws) && !text.contains(gh), "{text}");
        found.redacted.sort();
        assert_eq!(found.redacted, ["aws-access-key", "github-token"]);
        assert!(text.contains("\"[REDACTED:github-token]\":1"), "a key is renamed: {text}");
    }

    #[test]
    fn opaque_members_are_kept_outside_free_form_values() {
        let aws = "AKIAIOSFODNN7EXAMPLE";
        let mut m = json!({
            "contents": [{ "uri": format!("mem://{aws}"), "mimeType": "text/plain", "blob": aws }],
            "taskId": aws, "requestState": aws, "nextCursor": aws,
            "_meta": { "progressToken": aws },
            "structuredContent": { "uri": aws, "taskId": aws },
        });
        let found = scrub(&mut m, &built_in(Action::Redact));
        assert_eq!(found.redacted, ["aws-access-key"]);
        assert_eq!(m["contents"][0]["uri"], format!("mem://{aws}"));
        assert_eq!(
            (&m["contents"][0]["blob"], &m["taskId"], &m["requestState"], &m["nextCursor"]),
            (&json!(aws), &json!(aws), &json!(aws), &json!(aws))
        );
        assert_eq!(m["_meta"]["progressToken"], aws);
        assert_eq!(
            m["structuredContent"],
            json!({ "uri": "[REDACTED:aws-access-key]", "taskId": "[REDACTED:aws-access-key]" }),
            "free-form: read whatever the name"
        );
    }

    /// `depth` arrays around `inner`, as JSON text.
    fn nested(depth: usize, inner: &str) -> String {
        format!("{}{inner}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn what_is_too_deep_or_not_json_is_withheld_and_the_rest_is_read_at_any_depth() {
        let redact = built_in(Action::Redact);
        let mut names = Vec::new();
        let deep = nested(MAX_DEPTH - 1, r#"{"k":"AKIAIOSFODNN7EXAMPLE"}"#);
        let out = scrub_json(&deep, &redact, &mut names).expect("readable").expect("redacted");
        assert!(out.contains("[REDACTED:aws-access-key]") && names == ["aws-access-key"], "{out}");
        for unreadable in [nested(MAX_DEPTH, r#"{"k":1}"#), nested(100_000, "1"), "{\"a\":".to_string(), "not json".to_string()] {
            assert_eq!(
                scrub_json(&unreadable, &redact, &mut Vec::new()),
                Err(UNREADABLE.to_string()),
                "{}",
                &unreadable[..20.min(unreadable.len())]
            );
        }
        // Brackets inside strings are not nesting.
        let brackets = format!(r#"{{"text":"{}"}}"#, "[".repeat(1000));
        assert_eq!(scrub_json(&brackets, &redact, &mut Vec::new()), Ok(None));
        assert_eq!(scrub_json(r#"{"text":"\"[[["}"#, &redact, &mut Vec::new()), Ok(None));
        // Nothing is read without a detector, not even a broken message.
        assert_eq!(scrub_json("not json", &[], &mut Vec::new()), Ok(None));
    }

    #[test]
    fn a_block_stops_the_walk_and_wins_over_redactions() {
        let mut detectors = built_in(Action::Redact);
        detectors.push(Detector { name: "internal".into(), pattern: Regex::new("itk_[a-z0-9]{12}").unwrap(), action: Action::Block });
        let text = r#"{"content":[{"type":"text","text":"AKIAIOSFODNN7EXAMPLE"},{"type":"text","text":"itk_abcdefabcdef"}]}"#;
        assert_eq!(scrub_json(text, &detectors, &mut Vec::new()), Err("internal".to_string()));
        // Wide messages are walked without recursion, each string once.
        let wide = serde_json::to_string(&json!({ "content": vec![json!({ "type": "text", "text": "plain" }); 50_000] })).unwrap();
        assert_eq!(scrub_json(&wide, &detectors, &mut Vec::new()), Ok(None));
    }
}
