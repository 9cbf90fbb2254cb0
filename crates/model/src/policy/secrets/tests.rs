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
    let mut plain = json!({ "content": [{ "type": "text", "text": "ask for a key at the desk; sk is short for sketch; AKIA is a name" }] });
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
    let more = [r#"{"text":"\ud800"}"#, r#"{"n":1e400}"#, r#"{"text":"a","text":"AKIAIOSFODNN7EXAMPLE"}"#].map(String::from);
    for unreadable in
        [nested(MAX_DEPTH, r#"{"k":1}"#), nested(100_000, "1"), "{\"a\":".to_string(), "not json".to_string()].into_iter().chain(more)
    {
        assert_eq!(
            scrub_json(&unreadable, &redact, &mut Vec::new()),
            Err(Withheld::Unreadable),
            "{}",
            &unreadable[..20.min(unreadable.len())]
        );
    }
    // Brackets inside strings are not nesting.
    let brackets = format!(r#"{{"text":"{}"}}"#, "[".repeat(1000));
    assert_eq!(scrub_json(&brackets, &redact, &mut Vec::new()), Ok(None));
    assert_eq!(scrub_json(r#"{"text":"\"[[["}"#, &redact, &mut Vec::new()), Ok(None));
    // Withheld under the name the log, the audit and the metrics show.
    assert_eq!(Withheld::Unreadable.to_string(), UNREADABLE);
    assert_eq!(Withheld::named(UNREADABLE.into()), Withheld::Unreadable);
    // Nothing is read without a detector, not even a broken message.
    assert_eq!(scrub_json("not json", &[], &mut Vec::new()), Ok(None));
}

#[test]
fn a_block_stops_the_walk_and_wins_over_redactions() {
    let mut detectors = built_in(Action::Redact);
    detectors.push(Detector::new("internal", Regex::new("itk_[a-z0-9]{12}").unwrap(), Action::Block));
    let text = r#"{"content":[{"type":"text","text":"AKIAIOSFODNN7EXAMPLE"},{"type":"text","text":"itk_abcdefabcdef"}]}"#;
    assert_eq!(scrub_json(text, &detectors, &mut Vec::new()), Err(Withheld::Blocked("internal".to_string())));
    // Wide messages are walked without recursion, each string once.
    let wide = serde_json::to_string(&json!({ "content": vec![json!({ "type": "text", "text": "plain" }); 50_000] })).unwrap();
    assert_eq!(scrub_json(&wide, &detectors, &mut Vec::new()), Ok(None));
}
