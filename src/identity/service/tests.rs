#![cfg(test)] // test-only module: unwrap/expect below are on test data
//! The identity engine against a scripted authorization server and protected resource.

use super::*;
use crate::identity::guard::Rules;
use crate::identity::testserver::server;
use crate::token::KeySource;

fn sealer() -> Arc<Sealer> {
    Arc::new(Sealer::from_keys(&[vec![3u8; 32]], KeySource::File).expect("key"))
}

fn query(url: &str) -> HashMap<String, String> {
    let q = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    form_urlencoded::parse(q.as_bytes()).into_owned().collect()
}

async fn engine(token_answer: &'static str, dcr: bool) -> (Identity, String, Arc<Mutex<Vec<String>>>) {
    engine_with(token_answer, dcr, None).await
}

/// `configured`: a pre-registered client id and the issuer it was registered with (`None`:
/// the server's own).
async fn engine_with(
    token_answer: &'static str,
    dcr: bool,
    configured: Option<(&str, Option<&str>)>,
) -> (Identity, String, Arc<Mutex<Vec<String>>>) {
    let (base, seen) = server(move |base| {
        let prm = format!(r#"{{"resource":"{base}/mcp","authorization_servers":["{base}"],"scopes_supported":["files:read"]}}"#);
        let registration = if dcr { format!(r#","registration_endpoint":"{base}/register""#) } else { String::new() };
        let asm = format!(
            r#"{{"issuer":"{base}","authorization_endpoint":"{base}/authorize","token_endpoint":"{base}/token","code_challenge_methods_supported":["S256"],"token_endpoint_auth_methods_supported":["client_secret_post"],"authorization_response_iss_parameter_supported":true{registration}}}"#
        );
        vec![
            ("/.well-known/oauth-protected-resource/mcp", 200, vec![], prm),
            ("/.well-known/oauth-authorization-server", 200, vec![], asm),
            ("/register", 201, vec![], r#"{"client_id":"dyn-1","client_secret":"dyn-secret","token_endpoint_auth_method":"client_secret_post"}"#.into()),
            ("/token", 200, vec![], token_answer.into()),
        ]
    })
    .await;
    let settings = Settings {
        redirect_uri: "https://gw.example.com/oauth/callback".into(),
        client_metadata_url: "https://gw.example.com/oauth/client.json".into(),
        client_metadata_usable: true,
        consent_url: "https://gw.example.com/oauth/connect".into(),
    };
    let (client_id, client_issuer) = match configured {
        Some((id, issuer)) => (Some(id.to_string()), Some(issuer.map(str::to_string).unwrap_or_else(|| base.clone()))),
        None => (None, None),
    };
    let protected = Protected {
        upstream: "files".into(),
        resource: format!("{base}/mcp"),
        client_id,
        client_issuer,
        client_secret: Some("cfg-secret".into()).filter(|_| configured.is_some()),
        scopes: None,
        exchange: false,
    };
    let http = OAuthHttp::new(Rules { loopback: true });
    (Identity::new(settings, sealer(), Vault::in_memory(sealer()), http, vec![protected]), base, seen)
}

#[tokio::test]
async fn a_caller_consents_once_and_then_calls_with_its_own_token() {
    let (id, base, seen) =
        engine(r#"{"access_token":"alice-token","token_type":"Bearer","expires_in":3600,"refresh_token":"r1"}"#, true).await;
    assert_eq!(id.token("alice", "files").await, None, "no token before consent");
    let link = id.consent_link("alice", "files").expect("link");
    assert!(link.starts_with("https://gw.example.com/oauth/connect?grant="));
    let grant = query(&link)["grant"].clone();
    assert_eq!(id.grant(&grant), Some(("alice".into(), "files".into())));
    assert_eq!(id.grant("forged"), None);

    let authorize = id.begin(&grant, "browser-1").await.expect("begin");
    let q = query(&authorize);
    assert!(authorize.starts_with(&format!("{base}/authorize?")));
    assert_eq!(q["client_id"], "dyn-1", "registered dynamically: the server has no client metadata documents");
    assert_eq!(q["scope"], "files:read", "scopes from the resource metadata");
    assert_eq!(q["resource"], format!("{base}/mcp"));
    assert_eq!(q["redirect_uri"], "https://gw.example.com/oauth/callback");

    // The server sends the browser back; another browser, or no iss, does not complete it.
    let state = q["state"].clone();
    assert!(matches!(id.complete(&state, "code-1", Some(&base), Some("browser-2")).await, Err(CompleteError::Flow(_))));
    let authorize = id.begin(&grant, "browser-1").await.expect("begin again");
    let state = query(&authorize)["state"].clone();
    let done = id.complete(&state, "code-1", Some(&base), Some("browser-1")).await.expect("complete");
    assert_eq!(done, Completed { caller: "alice".into(), upstream: "files".into() });
    assert_eq!(id.token("alice", "files").await.as_deref(), Some("alice-token"));
    assert_eq!(id.token("bob", "files").await, None, "bob has not consented");

    let requests = seen.lock().unwrap().clone();
    let exchange = requests.iter().find(|r| r.starts_with("POST /token")).expect("a code exchange");
    assert!(exchange.contains("grant_type=authorization_code") && exchange.contains("code=code-1") && exchange.contains("code_verifier="));
    assert!(exchange.contains("client_id=dyn-1&client_secret=dyn-secret"), "client_secret_post as registered: {exchange}");
    let registration = requests.iter().find(|r| r.starts_with("POST /register")).expect("a registration");
    assert!(registration.contains("\"application_type\":\"web\"") && registration.contains("client_secret_post"), "{registration}");
    assert_eq!(requests.iter().filter(|r| r.starts_with("POST /register")).count(), 1, "one registration per issuer");
}

#[tokio::test]
async fn configured_credentials_go_only_to_their_own_server() {
    let answer = r#"{"access_token":"t","token_type":"Bearer"}"#;
    let (id, _, _) = engine_with(answer, true, Some(("cfg-id", None))).await;
    let grant = query(&id.consent_link("alice", "files").expect("link"))["grant"].clone();
    assert_eq!(query(&id.begin(&grant, "b").await.expect("begin"))["client_id"], "cfg-id");
    let (id, _, seen) = engine_with(answer, true, Some(("cfg-id", Some("https://another-as.example.com")))).await;
    let grant = query(&id.consent_link("alice", "files").expect("link"))["grant"].clone();
    assert_eq!(query(&id.begin(&grant, "b").await.expect("begin"))["client_id"], "dyn-1", "registered anew instead");
    assert!(!seen.lock().unwrap().iter().any(|r| r.contains("cfg-secret")), "the configured secret never left");
}

#[tokio::test]
async fn client_metadata_documents_come_first_and_expired_tokens_are_refreshed() {
    let (id, base, seen) = engine(r#"{"access_token":"fresh","token_type":"Bearer","expires_in":3600}"#, false).await;
    // A server that supports client metadata documents gets the gateway's URL as client_id.
    id.learn("files", None).await.expect("learn");
    lock(&id.known).get_mut("files").expect("known").server.client_id_metadata_document_supported = Some(true);
    let grant = query(&id.consent_link("alice", "files").expect("link"))["grant"].clone();
    let authorize = id.begin(&grant, "b").await.expect("begin");
    assert_eq!(query(&authorize)["client_id"], "https://gw.example.com/oauth/client.json");
    // An expired token with a refresh token is refreshed, and the refresh token kept.
    let key = VaultKey { caller: "alice".into(), upstream: "files".into(), issuer: base.clone() };
    let stale = TokenSet {
        access_token: "old".into(),
        refresh_token: Some("r-old".into()),
        expires_at: Some(1),
        scope: None,
        issued_at: 0,
        client: None,
    };
    id.vault().put(&key, &stale).expect("put");
    assert_eq!(id.token("alice", "files").await.as_deref(), Some("fresh"));
    assert_eq!(id.vault().get(&key).and_then(|t| t.refresh_token).as_deref(), Some("r-old"));
    let refresh = seen.lock().unwrap().iter().rev().find(|r| r.starts_with("POST /token")).cloned().expect("a refresh");
    assert!(refresh.contains("grant_type=refresh_token") && refresh.contains("refresh_token=r-old"), "{refresh}");
    assert!(
        refresh.contains(&format!("resource={}", form_urlencoded::byte_serialize(format!("{base}/mcp").as_bytes()).collect::<String>()))
    );
}
