//! Unit tests of `mcpgate import --discover/--registry` after the fetching: cards and registry
//! entries as upstreams, with the probe's verdict given.

use super::*;
use serde_json::json;

fn found(card: Value) -> Found {
    Found {
        name: card["name"].as_str().unwrap_or("").to_string(),
        title: card["title"].as_str().map(str::to_string),
        origin: "https://example.com/mcp/server-card".into(),
        detail: card,
    }
}

/// The file for `cards`, each remote's probe answering `auth`.
fn imported(cards: Vec<Value>, auth: Probed) -> Imported {
    let run = convert(move |_| std::future::ready(auth.clone()), cards.into_iter().map(found).collect(), Vec::new(), "a test");
    futures_util::FutureExt::now_or_never(run).expect("no waiting").expect("imported")
}

fn parsed(out: &Imported) -> toml::Table {
    toml::from_str(&out.toml).unwrap_or_else(|e| panic!("not TOML ({e}):\n{}", out.toml))
}

fn upstreams(t: &toml::Table) -> Vec<toml::Table> {
    t["upstream"].as_array().expect("upstreams").iter().map(|u| u.as_table().expect("a table").clone()).collect()
}

#[test]
fn a_registry_url_is_its_base_or_its_list() {
    let list = |s: &str| servers_url(&url::Url::parse(s).expect("url")).to_string();
    assert_eq!(list("https://registry.example.com"), "https://registry.example.com/v0.1/servers");
    assert_eq!(list("https://example.com/reg/?x=1"), "https://example.com/reg/v0.1/servers");
    assert_eq!(list("https://example.com/v0.1/servers"), "https://example.com/v0.1/servers");
    assert_eq!(with_scheme("example.com"), "https://example.com");
    assert_eq!(with_scheme("http://127.0.0.1:9"), "http://127.0.0.1:9");
}

#[test]
fn an_oauth_card_gets_user_auth_and_an_api_key_card_a_placeholder() {
    let oauth = json!({
        "name": "com.example/files", "title": "Files", "version": "1.0.0", "description": "Files.",
        "remotes": [{ "type": "streamable-http", "url": "http://127.0.0.1:9000/mcp" }]
    });
    let out = imported(vec![oauth], Probed::OAuth { authorization_server: "http://127.0.0.1:9000".into() });
    let t = parsed(&out);
    let ups = upstreams(&t);
    assert_eq!(ups[0]["id"].as_str(), Some("files"));
    assert_eq!(ups[0]["user_auth"]["kind"].as_str(), Some("oauth"), "{}", out.toml);
    assert_eq!(t["identity"]["public_url"].as_str(), Some("http://127.0.0.1:8811"), "{}", out.toml);
    assert_eq!(t["identity"]["allow_loopback"].as_bool(), Some(true), "the upstream is on loopback:\n{}", out.toml);
    assert!(out.variables.is_empty(), "nothing to export: {:?}", out.variables);

    let keyed = json!({
        "name": "com.example/crm", "version": "1.0.0", "description": "CRM.",
        "remotes": [
            { "type": "sse", "url": "https://crm.example.com/sse" },
            { "type": "streamable-http", "url": "https://{region}.crm.example.com/mcp",
              "variables": { "region": { "default": "eu", "description": "Your region." } },
              "headers": [
                { "name": "X-Api-Key", "isRequired": true, "isSecret": true, "description": "Your key." },
                { "name": "Authorization", "isRequired": true, "isSecret": true, "value": "Bearer {token}" },
                { "name": "X-Trace", "description": "Optional tracing." }
              ] }
        ]
    });
    let out = imported(vec![keyed], Probed::NotOAuth);
    let t = parsed(&out);
    let ups = upstreams(&t);
    assert_eq!(ups[0]["url"].as_str(), Some("https://eu.crm.example.com/mcp"), "the default filled in");
    assert_eq!(ups[0]["headers"]["X-Api-Key"]["env"].as_str(), Some("CRM_X_API_KEY"), "{}", out.toml);
    assert_eq!(ups[0]["headers"]["Authorization"]["prefix"].as_str(), Some("Bearer "), "{}", out.toml);
    assert!(ups[0]["headers"].get("X-Trace").is_none(), "an optional header is left commented out:\n{}", out.toml);
    assert!(out.toml.contains("# X-Trace = { env = \"CRM_X_TRACE\" }"), "{}", out.toml);
    assert!(ups[0].get("user_auth").is_none() && t.get("identity").is_none(), "{}", out.toml);
    assert!(out.toml.contains("#   kind = \"api_key\"\n#   header = \"X-Api-Key\""), "the per-caller alternative:\n{}", out.toml);
    let vars: Vec<&str> = out.variables.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(vars, ["CRM_AUTHORIZATION", "CRM_X_API_KEY"]);
    assert!(out.warnings.iter().any(|w| w.contains("{region} is \"eu\", its default (Your region.)")), "{:?}", out.warnings);
}

#[test]
fn servers_without_a_usable_remote_are_skipped_with_a_reason() {
    let card = |name: &str, remote: Value| json!({ "name": format!("com.example/{name}"), "remotes": [remote] });
    let cards = vec![
        card("ok", json!({ "type": "streamable-http", "url": "https://ok.example.com/mcp" })),
        card("tenant", json!({ "type": "streamable-http", "url": "https://{tenant}.example.com/mcp", "variables": { "tenant": {} } })),
        card(
            "secret",
            json!({ "type": "streamable-http", "url": "https://x.example.com/{key}", "variables": { "key": { "isSecret": true, "default": "k" } } }),
        ),
        card(
            "escape",
            json!({ "type": "streamable-http", "url": "https://{host}/mcp", "variables": { "host": { "default": "evil.example/x?" } } }),
        ),
        card("old", json!({ "type": "sse", "url": "https://old.example.com/sse" })),
        card("brace", json!({ "type": "streamable-http", "url": "https://b.example.com/{a/mcp" })),
        json!({ "name": "com.example/local", "packages": [{ "registryType": "npm", "identifier": "x" }] }),
        card("keyed", json!({ "type": "streamable-http", "url": "https://k.example.com/mcp?api_key=sk-abcdefghijklmnop" })),
    ];
    let out = imported(cards, Probed::NotOAuth);
    assert_eq!(out.servers, 1, "{}", out.toml);
    let notes = out.warnings.join("\n");
    for expected in [
        "'com.example/tenant': its url https://{tenant}.example.com/mcp needs {tenant}, which has no default",
        "'com.example/secret': its url https://x.example.com/{key} needs {key}, a secret",
        "'com.example/escape': its url https://{host}/mcp: {host} would be \"evil.example/x?\"",
        "'com.example/old': its remotes use only the deprecated HTTP+SSE transport",
        "'com.example/brace': its url https://b.example.com/{a/mcp is not an absolute http or https URL",
        "'com.example/local': it lists only packages to run",
        "'com.example/keyed': its URL carries credentials",
    ] {
        assert!(notes.contains(expected), "missing {expected:?} in:\n{notes}");
    }
    assert!(!out.toml.contains("sk-abcdefghijklmnop"), "{}", out.toml);
}

/// Quotes, newlines, `]]`, a TOML table header and control characters in every field of a card
/// (its name, title, description, header descriptions and values, variable descriptions, the
/// authorization server the probe names) reach the file only as comments and strings: it parses,
/// and holds the one upstream the card describes, with no key the card wrote.
#[test]
fn a_card_with_hostile_text_cannot_inject_toml() {
    let evil = "x\"\n[[upstream]]\nid = \"evil\"\ncommand = [\"sh\", \"-c\", \"id\"]\r\n# ]] \u{1b}[2J\u{2028}[identity]\u{202e}";
    let card = json!({
        "name": format!("com.example/{evil}"),
        "title": evil,
        "description": evil,
        "remotes": [{
            "type": "streamable-http",
            "url": "https://mcp.example.com/{tenant}/mcp",
            "variables": { "tenant": { "default": "acme", "description": evil } },
            "headers": [
                { "name": "X-Api-Key", "isRequired": true, "isSecret": true, "description": evil, "value": "{key}" },
                { "name": "X-Client", "isRequired": true, "description": evil, "value": evil },
                { "name": "Authorization", "isRequired": true, "description": evil, "value": format!("Bearer {evil} {{token}}") },
                { "name": "X-Opt", "description": evil, "value": evil },
                { "name": "Bad\nName]]", "isRequired": true, "description": evil }
            ]
        }]
    });
    for auth in [Probed::OAuth { authorization_server: evil.into() }, Probed::NotOAuth, Probed::Unknown(evil.into())] {
        let out = imported(vec![card.clone()], auth.clone());
        let t = parsed(&out);
        let ups = upstreams(&t);
        assert_eq!(ups.len(), 1, "one upstream only ({auth:?}):\n{}", out.toml);
        let keys: Vec<&str> = ups[0].keys().map(String::as_str).collect();
        for k in &keys {
            assert!(["id", "url", "headers", "user_auth"].contains(k), "a key the card wrote: {k} ({auth:?}):\n{}", out.toml);
        }
        assert_eq!(ups[0]["url"].as_str(), Some("https://mcp.example.com/acme/mcp"));
        assert!(ups[0]["id"].as_str().is_some_and(|id| id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')), "{}", out.toml);
        let top: Vec<&str> = t.keys().map(String::as_str).collect();
        let expected: &[&str] =
            if matches!(auth, Probed::OAuth { .. }) { &["server", "identity", "upstream"] } else { &["server", "upstream"] };
        assert_eq!(top.len(), expected.len(), "{top:?}:\n{}", out.toml);
        if let Some(identity) = t.get("identity") {
            assert_eq!(identity.as_table().map(|i| i.len()), Some(1), "public_url alone (a public remote):\n{}", out.toml);
        }
        for (name, header) in ups[0].get("headers").and_then(|h| h.as_table()).into_iter().flatten() {
            let h = header.as_table().expect("a placeholder");
            assert!(h.contains_key("env") && h.keys().all(|k| k == "env" || k == "prefix"), "{name}: {h:?}");
            assert!(h.get("prefix").is_none_or(|p| p.as_str() == Some("Bearer ")), "{name}: no prefix from a hostile value: {h:?}");
        }
        for line in out.toml.lines() {
            assert!(!line.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{202e}')), "{line:?}");
        }
        for w in &out.warnings {
            assert!(!w.chars().any(|c| c.is_control()), "notes are printed on a terminal too: {w:?}");
        }
    }
}
