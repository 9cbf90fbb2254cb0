//! Secrets kept out of results (`[secrets]`, docs/security.md): detectors for the common shapes of
//! credentials (cloud and SaaS keys, tokens, private keys) and the operator's own patterns, each
//! with an action: `redact` replaces what matched with `[REDACTED:<name>]`, `block` withholds the
//! whole result. They apply to every string a result carries to the model: text content, embedded
//! resource text and the values of structured content. A finding is reported by its detector's
//! name, never by what matched.

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

/// What the detectors did to a result.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// The detectors that redacted something (each once).
    pub redacted: Vec<String>,
    /// The first detector whose finding withholds the result.
    pub blocked: Option<String>,
}

/// Applies `detectors` to every string of a result that reaches the model, in place.
pub fn scrub(result: &mut Value, detectors: &[Detector]) -> Findings {
    let mut found = Findings::default();
    if let Some(content) = result.get_mut("content") {
        walk(content, detectors, &mut found, true);
    }
    if let Some(structured) = result.get_mut("structuredContent") {
        walk(structured, detectors, &mut found, false);
    }
    // resources/read and prompts/get carry their text elsewhere.
    for key in ["contents", "messages"] {
        if let Some(v) = result.get_mut(key) {
            walk(v, detectors, &mut found, true);
        }
    }
    found
}

/// `only_text`: within content blocks, only the members that carry text (not types, URIs,
/// MIME types or base64 blobs).
fn walk(v: &mut Value, detectors: &[Detector], found: &mut Findings, only_text: bool) {
    match v {
        Value::String(s) if !only_text => check(s, detectors, found),
        Value::Array(items) => items.iter_mut().for_each(|i| walk(i, detectors, found, only_text)),
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                match item {
                    Value::String(s) if !only_text || k == "text" => check(s, detectors, found),
                    other => walk(other, detectors, found, only_text),
                }
            }
        }
        _ => {}
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
}
