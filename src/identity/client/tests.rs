//! The identity client against a loopback server: discovery order, token requests, refusals,
//! registration, the 2025-03-26 fallback.
use super::*;
use crate::identity::testserver::server;
use std::sync::{Arc, Mutex};

/// The metadata of a server at `base` with its token endpoint at `/token`.
fn metadata(base: &str) -> ServerMetadata {
    ServerMetadata { registration_endpoint: None, ..discovery::legacy_defaults(base) }
}

fn http() -> OAuthHttp {
    OAuthHttp::new(Rules { loopback: true })
}

fn first_lines(seen: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    seen.lock().unwrap().iter().map(|r| r.lines().next().unwrap_or("").to_string()).collect()
}

#[tokio::test]
async fn discovery_follows_the_spec_order_and_checks_what_it_finds() {
    let (base, seen) = server(|base| {
        let prm = format!(r#"{{"resource":"{base}/mcp","authorization_servers":["{base}/tenant"],"scopes_supported":["read"]}}"#);
        let asm = format!(
            r#"{{"issuer":"{base}/tenant","authorization_endpoint":"{base}/authorize","token_endpoint":"{base}/token","code_challenge_methods_supported":["S256"]}}"#
        );
        vec![
            ("/.well-known/oauth-protected-resource", 200, vec![], prm),
            ("/tenant/.well-known/openid-configuration", 200, vec![], asm),
            ("/moved", 302, vec![("location", "/.well-known/oauth-protected-resource".into())], String::new()),
        ]
    })
    .await;
    let http = http();
    let prm = http.resource_metadata(&format!("{base}/mcp"), None).await.expect("resource metadata");
    assert_eq!(prm.authorization_servers, [format!("{base}/tenant")]);
    let md = http.server_metadata(&prm.authorization_servers[0]).await.expect("server metadata");
    assert_eq!(md.token_endpoint, format!("{base}/token"));
    assert_eq!(
        first_lines(&seen),
        [
            "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1",
            "GET /.well-known/oauth-protected-resource HTTP/1.1",
            "GET /.well-known/oauth-authorization-server/tenant HTTP/1.1",
            "GET /.well-known/openid-configuration/tenant HTTP/1.1",
            "GET /tenant/.well-known/openid-configuration HTTP/1.1"
        ]
    );
    // The challenge's resource_metadata is used as given, redirects followed.
    let challenge = Challenge { resource_metadata: Some(format!("{base}/moved")), ..Default::default() };
    assert!(http.resource_metadata(&format!("{base}/mcp"), Some(&challenge)).await.is_ok());
    // A document about another resource is refused, not trusted.
    let err = http.resource_metadata(&format!("{base}/other"), Some(&challenge)).await.expect_err("mismatch");
    assert!(matches!(err, IdentityError::Discovery(discovery::DiscoveryError::ResourceMismatch { .. })), "{err}");
    // An issuer that does not match the one asked for is refused.
    let err = http.server_metadata(&format!("{base}/tenant/")).await.expect_err("no such issuer");
    assert!(matches!(err, IdentityError::Discovery(_) | IdentityError::NotFound(_)), "{err}");
}

#[tokio::test]
async fn token_requests_authenticate_as_configured_and_parse_the_answer() {
    let answer = r#"{"access_token":"at-1","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-1","scope":"read"}"#.to_string();
    let (base, seen) = server(|_| vec![("/token", 200, vec![("content-type", "application/json".into())], answer)]).await;
    let md = metadata(&base);
    let http = http();
    let basic = ClientAuth::Basic { client_id: "gw id".into(), secret: "s&cret".into() };
    let t = http.token(&md, &basic, "grant_type=authorization_code&code=c".into()).await.expect("token");
    assert_eq!((t.access_token.as_str(), t.refresh_token.as_deref(), t.scope.as_deref()), ("at-1", Some("rt-1"), Some("read")));
    assert!(t.expires_at.is_some_and(|e| e > now() + 3500));
    let post = ClientAuth::Post { client_id: "gw".into(), secret: "s".into() };
    http.token(&md, &post, "grant_type=authorization_code&code=c".into()).await.expect("token");
    let public = ClientAuth::None { client_id: "https://gw.example.com/client".into() };
    http.token(&md, &public, "grant_type=authorization_code&code=c".into()).await.expect("token");
    let seen = seen.lock().unwrap().clone();
    let expected = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "gw%20id:s%26cret");
    assert!(seen[0].to_ascii_lowercase().contains(&format!("authorization: basic {}", expected.to_ascii_lowercase())), "{}", seen[0]);
    assert!(!seen[0].contains("client_secret"), "basic keeps the secret out of the body");
    assert!(seen[0].ends_with("grant_type=authorization_code&code=c&client_id=gw+id"), "and names the client there: {}", seen[0]);
    assert!(seen[1].ends_with("grant_type=authorization_code&code=c&client_id=gw&client_secret=s"), "{}", seen[1]);
    assert!(
        seen[2].ends_with("&client_id=https%3A%2F%2Fgw.example.com%2Fclient") && !seen[2].to_ascii_lowercase().contains("authorization:")
    );
    assert!(!format!("{basic:?}").contains("s&cret"));
}

#[tokio::test]
async fn refusals_and_private_targets_do_not_leak_or_pass() {
    let (base, _) =
        server(|_| vec![("/token", 400, vec![], r#"{"error":"invalid_grant","error_description":"code c0de is bad"}"#.into())]).await;
    let md = metadata(&base);
    let auth = ClientAuth::None { client_id: "c".into() };
    let err = http().token(&md, &auth, "code=c0de".into()).await.expect_err("refused");
    assert_eq!(
        err,
        IdentityError::TokenRefused {
            status: 400,
            error: Some("invalid_grant".into()),
            description: Some("code [redacted] is bad".into())
        }
    );
    assert!(!err.to_string().contains("c0de") && !err.to_string().contains("is bad"), "{err}");
    let strict = OAuthHttp::new(Rules::default());
    assert!(matches!(strict.token(&md, &auth, String::new()).await, Err(IdentityError::Refused(_))));
    assert!(matches!(strict.server_metadata("https://10.0.0.1").await, Err(IdentityError::Refused(_))));
}

/// A server on the 2025-03-26 rules that answers its well-known paths with 401 (everything
/// behind its own authorization) still gets its origin's authorization server.
#[tokio::test]
async fn metadata_behind_authorization_falls_back_to_the_origin() {
    let (base, _) = server(|_| {
        vec![
            ("/.well-known/oauth-protected-resource/mcp", 401, vec![], String::new()),
            ("/.well-known/oauth-protected-resource", 401, vec![], String::new()),
        ]
    })
    .await;
    let (md, prm) = http().authorization_server(&format!("{base}/mcp"), None).await.expect("the origin's defaults");
    assert!(prm.is_none());
    assert_eq!((md.issuer.as_str(), md.token_endpoint.clone()), (base.as_str(), format!("{base}/token")));
    // A challenge that names its metadata is trusted to: no guessing past it.
    let named = Challenge { resource_metadata: Some(format!("{base}/.well-known/oauth-protected-resource")), ..Default::default() };
    assert!(http().authorization_server(&format!("{base}/mcp"), Some(&named)).await.is_err());
}

#[test]
fn locations_are_made_absolute() {
    assert_eq!(absolute("https://a.example/x/y", "/z"), "https://a.example/z");
    assert_eq!(absolute("https://a.example/x/y", "https://b.example/"), "https://b.example/");
    assert_eq!(absolute("https://a.example", "z"), "https://a.example/z");
    assert_eq!(absolute("https://a.example/x/y", "z"), "https://a.example/x/z");
    assert_eq!(absolute("https://a.example/x", "//b.example/p"), "https://b.example/p");
    assert_eq!(absolute("https://a.example/x", "/p?u=https://c.example"), "https://a.example/p?u=https://c.example");
}
