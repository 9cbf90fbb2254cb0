#[cfg(test)] // test-only module: unwrap/expect below are on test data
use super::*;
use serde_json::json;

fn caller(id: &str, subject: Option<&str>, claims: &[(&str, &str)], scopes: &[&str]) -> CallerConfig {
    CallerConfig {
        id: id.into(),
        key_sha256: None,
        subject: subject.map(str::to_string),
        claims: claims.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        allow: vec!["*".into()],
        deny: vec![],
        rate_limit: None,
        admin: false,
        tool_search: None,
    }
}

#[test]
fn reads_bearer_credentials() {
    let mut h = HeaderMap::new();
    assert_eq!(bearer(&h), None);
    h.insert("authorization", "Bearer abc".parse().unwrap());
    assert_eq!(bearer(&h), Some("abc"));
    h.insert("authorization", "bearer   xyz ".parse().unwrap());
    assert_eq!(bearer(&h), Some("xyz"));
    h.insert("authorization", "Basic abc".parse().unwrap());
    assert_eq!(bearer(&h), None);
}

#[test]
fn token_scopes_and_caller_matching() {
    let claims = json!({"sub": "alice", "scope": "read write", "groups": ["ops", "dev"], "tier": "gold"});
    let scopes = token_scopes(&claims);
    assert_eq!(scopes, vec!["read", "write"]);
    assert_eq!(token_scopes(&json!({"scp": ["a", "b"]})), vec!["a", "b"]);
    assert!(caller_matches(&caller("a", Some("alice"), &[], &[]), "alice", &claims, &scopes));
    assert!(!caller_matches(&caller("a", Some("bob"), &[], &[]), "alice", &claims, &scopes));
    assert!(caller_matches(&caller("ops", None, &[("groups", "ops")], &[]), "alice", &claims, &scopes));
    assert!(caller_matches(&caller("gold", None, &[("tier", "gold")], &["read"]), "alice", &claims, &scopes));
    assert!(!caller_matches(&caller("admin", None, &[], &["admin"]), "alice", &claims, &scopes));
}

#[test]
fn hashes_keys_like_sha256sum() {
    assert_eq!(hash_key("secret"), "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b");
}
