//! docs/auth-and-policy.md, "Each caller as themselves" (per-user upstream identity), says all a
//! newcomer needs to connect a real authorization server: every key of `[upstream.user_auth]`,
//! `[upstream.user_auth.id_jag]` and `[identity]` (read from the file model's
//! `UserAuthSection`, `IdJagSection` and `IdentitySection` in crates/config/src/identity.rs and file.rs)
//! is named in its prose, not only shown in a snippet; the token-endpoint authentication methods
//! the gateway uses (the `client_secret_*` names in src/identity/) are named, since no key chooses
//! one; a TOML example of a local trial sets `[identity] allow_loopback = true` in front of an
//! upstream on a loopback address; and it does not promise that nothing else is ever needed.

use super::config_keys::fields_of;
use super::markdown::{blocks, prose, section};
use crate::harness::*;
use std::path::Path;

/// Every `"client_secret_…"` string of the Rust sources under `dir`.
fn methods_in(dir: &Path, out: &mut Vec<String>) {
    let mut files = Vec::new();
    super::rust_files(dir, &mut files);
    for p in files {
        let Ok(src) = std::fs::read_to_string(&p) else { continue };
        for (at, _) in src.match_indices("\"client_secret_") {
            let name: String = src[at + 1..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
}

#[test]
fn per_user_identity_names_every_key_and_how_the_gateway_authenticates() {
    let doc = std::fs::read_to_string(repo().join("docs/auth-and-policy.md")).expect("docs/auth-and-policy.md");
    let text = section(&doc, "Each caller as themselves").expect("docs/auth-and-policy.md: the \"Each caller as themselves\" section");
    let flat = prose(&text).split_whitespace().collect::<Vec<&str>>().join(" ");
    let mut problems = Vec::new();

    let mut keys = Vec::new();
    for strukt in ["UserAuthSection", "IdJagSection", "IdentitySection"] {
        keys.extend(fields_of(strukt).into_iter().map(|(key, _)| (strukt, key)));
    }
    assert!(keys.len() >= 12, "the keys of per-user identity in crates/config/src: {keys:?}");
    for (strukt, key) in &keys {
        let forms = [format!("`{key}`"), format!("`{key} ="), format!(".{key}]"), format!("] {key}")];
        let named = forms.iter().any(|f| flat.contains(f.as_str()));
        if !named {
            problems.push(format!("`{key}` ({strukt}) is not named in the prose (as `{key}` or `{key} = …`)"));
        }
    }

    let mut methods = Vec::new();
    methods_in(&repo().join("src/identity"), &mut methods);
    assert!(methods.len() >= 2, "the token-endpoint authentication methods in src/identity/: {methods:?}");
    for m in &methods {
        if !flat.contains(&format!("`{m}`")) {
            problems.push(format!("the token-endpoint authentication method `{m}` is not named"));
        }
    }

    let local = blocks(&text, "toml").into_iter().any(|b| {
        let Ok(v) = toml::from_str::<toml::Value>(&b) else { return false };
        let loopback = v.get("identity").and_then(|i| i.get("allow_loopback")).and_then(toml::Value::as_bool) == Some(true);
        let upstreams = v.get("upstream").and_then(toml::Value::as_array).cloned().unwrap_or_default();
        loopback
            && upstreams.iter().any(|u| {
                u.get("user_auth").is_some()
                    && u.get("url")
                        .and_then(toml::Value::as_str)
                        .is_some_and(|url| url.contains("://127.0.0.1") || url.contains("://localhost") || url.contains("://[::1]"))
            })
    });
    if !local {
        problems.push(
            "no TOML example of a local trial: [identity] allow_loopback = true with a user_auth upstream on a loopback URL".to_string(),
        );
    }

    if flat.contains("nothing else is needed") {
        problems.push("it says \"nothing else is needed\", which an authorization server built on the Python SDK disproves".to_string());
    }
    assert!(problems.is_empty(), "docs/auth-and-policy.md, \"Each caller as themselves\":\n{}", problems.join("\n"));
}
