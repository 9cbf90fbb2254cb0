#![cfg(test)] // test-only module: unwrap/expect below are on test data
//! The identity engine against a scripted authorization server and protected resource.

use super::*;
use crate::identity::reach::Rules;
use crate::identity::testserver::server;
use mcpgate_model::token::KeySource;

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
        sign_in: None,
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
        secret_in_body: false,
        scopes: None,
        exchange: false,
        api_key: None,
        id_jag: None,
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
    let redirect = format!("https://gw.example.com/oauth/callback/{}", grant::server_id(&base));
    assert_eq!(q["redirect_uri"], redirect, "a redirect URI of this authorization server's own");
    assert!(id.redirect_uris().contains(&redirect), "the client metadata document lists it");

    // A consent link starts one authorization only.
    assert!(matches!(id.begin(&grant, "browser-1").await, Err(IdentityError::Spent)), "a link is single-use");

    // The server sends the browser back; another browser, or no iss, does not complete it.
    let state = q["state"].clone();
    assert!(matches!(id.complete(&state, "code-1", Some(&base), Some("browser-2"), &redirect).await, Err(CompleteError::Flow(_))));
    let fresh = |id: &Identity| query(&id.consent_link("alice", "files").expect("link"))["grant"].clone();
    // A response that reaches another server's redirect URI is a mix-up: refused (and spent).
    let state = query(&id.begin(&fresh(&id), "browser-1").await.expect("begin"))["state"].clone();
    let elsewhere = "https://gw.example.com/oauth/callback/another-server";
    assert!(matches!(id.complete(&state, "code-1", Some(&base), Some("browser-1"), elsewhere).await, Err(CompleteError::MixUp)));
    assert!(matches!(id.complete(&state, "code-1", Some(&base), Some("browser-1"), &redirect).await, Err(CompleteError::Flow(_))));
    let state = query(&id.begin(&fresh(&id), "browser-1").await.expect("begin again"))["state"].clone();
    let done = id.complete(&state, "code-1", Some(&base), Some("browser-1"), &redirect).await.expect("complete");
    assert_eq!(done, Completed::Connected { caller: "alice".into(), upstream: "files".into() });
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
        dpop: None,
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

/// A server that accepts connections and never answers (a stalled authorization server).
async fn stalled() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    base
}

#[tokio::test]
async fn one_stalled_authorization_server_holds_only_its_own_upstream() {
    let (id, _, _) = engine(r#"{"access_token":"t","token_type":"Bearer"}"#, true).await;
    let slow_base = stalled().await;
    let mut protected: Vec<Protected> = id.protected.values().cloned().collect();
    protected.push(Protected {
        upstream: "slow".into(),
        resource: format!("{slow_base}/mcp"),
        client_id: None,
        client_issuer: None,
        client_secret: None,
        secret_in_body: false,
        scopes: None,
        exchange: false,
        api_key: None,
        id_jag: None,
    });
    let id = Arc::new(Identity::new(
        id.settings.clone(),
        sealer(),
        Vault::in_memory(sealer()),
        OAuthHttp::new(Rules { loopback: true }),
        protected,
    ));
    let stuck = tokio::spawn({
        let id = id.clone();
        async move { id.discover("slow").await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Another upstream's discovery, and a consent link's start there, do not wait for the stalled one.
    let other = tokio::time::timeout(Duration::from_secs(8), id.discover("files")).await;
    assert!(matches!(other, Ok(Ok(()))), "the healthy upstream's discovery went on: {:?}", other.map(|r| r.map_err(|e| e.to_string())));
    assert!(!stuck.is_finished(), "the stalled server is still being waited for");
    stuck.abort();
}

#[tokio::test]
async fn metadata_that_sends_browsers_to_another_origin_needs_iss() {
    // A hostile authorization server names an honest one's authorization endpoint (mix-up).
    let (honest, _) = server(|_| vec![]).await;
    let (id, _, _) = {
        let honest = honest.clone();
        let (base, seen) = server(move |base| {
            let prm = format!(r#"{{"resource":"{base}/mcp","authorization_servers":["{base}"]}}"#);
            let asm = format!(
                r#"{{"issuer":"{base}","authorization_endpoint":"{honest}/authorize","token_endpoint":"{base}/token","code_challenge_methods_supported":["S256"],"registration_endpoint":"{base}/register"}}"#
            );
            vec![
                ("/.well-known/oauth-protected-resource/mcp", 200, vec![], prm),
                ("/.well-known/oauth-authorization-server", 200, vec![], asm),
                ("/register", 201, vec![], r#"{"client_id":"dyn-1"}"#.into()),
            ]
        })
        .await;
        let (template, _, _) = engine("{}", true).await;
        let p = Protected {
            upstream: "files".into(),
            resource: format!("{base}/mcp"),
            client_id: None,
            client_issuer: None,
            client_secret: None,
            secret_in_body: false,
            scopes: None,
            exchange: false,
            api_key: None,
            id_jag: None,
        };
        (
            Identity::new(
                template.settings.clone(),
                sealer(),
                Vault::in_memory(sealer()),
                OAuthHttp::new(Rules { loopback: true }),
                vec![p],
            ),
            base,
            seen,
        )
    };
    let grant = query(&id.consent_link("alice", "files").expect("link"))["grant"].clone();
    let refused = id.begin(&grant, "b").await.expect_err("refused");
    assert!(refused.to_string().contains("mix-up"), "{refused}");
}

/// An ID-JAG (unsigned here: the gateway only reads its audience) for the server `aud`.
fn jag_for(aud: &str) -> String {
    crate::identity::assertion::tests::jwt(serde_json::json!({ "aud": aud, "sub": "alice" }))
}

#[tokio::test]
async fn a_callers_jwt_becomes_an_id_jag_and_the_id_jag_an_upstream_token() {
    // One server plays the enterprise identity provider (issuer: the root) and the upstream with
    // its own authorization server (issuer: /as).
    let (base, seen) = server(|base| {
        let idp = format!(
            r#"{{"issuer":"{base}","authorization_endpoint":"{base}/authorize","token_endpoint":"{base}/idp-token","code_challenge_methods_supported":["S256"]}}"#
        );
        let prm = format!(r#"{{"resource":"{base}/mcp","authorization_servers":["{base}/as"]}}"#);
        let asm = format!(
            r#"{{"issuer":"{base}/as","authorization_endpoint":"{base}/as/authorize","token_endpoint":"{base}/as-token","code_challenge_methods_supported":["S256"],"grant_types_supported":["urn:ietf:params:oauth:grant-type:jwt-bearer"]}}"#
        );
        vec![
            ("/.well-known/oauth-authorization-server", 200, vec![], idp),
            ("/.well-known/oauth-protected-resource/mcp", 200, vec![], prm),
            ("/.well-known/oauth-authorization-server/as", 200, vec![], asm),
            (
                "/idp-token",
                200,
                vec![],
                serde_json::json!({"access_token": jag_for(&format!("{base}/as")), "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"}).to_string(),
            ),
            ("/as-token", 200, vec![], r#"{"access_token":"upstream-token","token_type":"Bearer","expires_in":3600}"#.into()),
        ]
    })
    .await;
    let (template, _, _) = engine("{}", false).await;
    let id = id_jag_identity(&template, &base);
    let token = id.exchanged("alice", "files", "alice.id.token").await.expect("an upstream token");
    assert_eq!(token, "upstream-token");
    let log = seen.lock().unwrap().clone();
    let posted = |path: &str| log.iter().find(|r| r.starts_with(&format!("POST {path} "))).cloned().unwrap_or_default();
    let form = |req: &str| -> HashMap<String, String> {
        form_urlencoded::parse(req.split("\r\n\r\n").nth(1).unwrap_or("").as_bytes()).into_owned().collect()
    };
    let basic = |id: &str, secret: &str| {
        format!("authorization: basic {}", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("{id}:{secret}")))
            .to_ascii_lowercase()
    };
    let exchange = posted("/idp-token");
    let x = form(&exchange);
    assert_eq!(x["subject_token"], "alice.id.token");
    assert_eq!(x["subject_token_type"], "urn:ietf:params:oauth:token-type:id_token");
    assert_eq!(x["requested_token_type"], "urn:ietf:params:oauth:token-type:id-jag");
    assert_eq!(
        (x["audience"].clone(), x["resource"].clone()),
        (format!("{base}/as"), format!("{base}/mcp")),
        "for the upstream's own server"
    );
    assert!(exchange.to_ascii_lowercase().contains(&basic("gw-at-idp", "idp-secret")), "{exchange}");
    let redeem = posted("/as-token");
    let r = form(&redeem);
    let jag = jag_for(&format!("{base}/as"));
    assert_eq!((r["grant_type"].as_str(), r["assertion"].as_str()), ("urn:ietf:params:oauth:grant-type:jwt-bearer", jag.as_str()));
    assert!(redeem.to_ascii_lowercase().contains(&basic("gw-at-files", "files-secret")), "the upstream's client, not the IdP's: {redeem}");
    // Kept for the same subject token; another subject token exchanges again.
    let before = seen.lock().unwrap().len();
    assert_eq!(id.exchanged("alice", "files", "alice.id.token").await.as_deref(), Ok("upstream-token"));
    assert_eq!(seen.lock().unwrap().len(), before, "no new request");
    id.exchanged("alice", "files", "alice.new.token").await.expect("again");
    assert!(seen.lock().unwrap().len() > before);
}

/// An ID-JAG whose audience is another authorization server than the one the upstream's metadata
/// names is not presented there: the call fails with the reason, and that server gets nothing.
#[tokio::test]
async fn an_id_jag_meant_for_another_server_is_not_presented() {
    let (base, seen) = server(|base| {
        let s256 = r#""code_challenge_methods_supported":["S256"]"#;
        let idp = format!(r#"{{"issuer":"{base}","authorization_endpoint":"{base}/authorize","token_endpoint":"{base}/idp-token",{s256}}}"#);
        let prm = format!(r#"{{"resource":"{base}/mcp","authorization_servers":["{base}/as"]}}"#);
        let asm =
            format!(r#"{{"issuer":"{base}/as","authorization_endpoint":"{base}/as/authorize","token_endpoint":"{base}/as-token",{s256}}}"#);
        vec![
            ("/.well-known/oauth-authorization-server", 200, vec![], idp),
            ("/.well-known/oauth-protected-resource/mcp", 200, vec![], prm),
            ("/.well-known/oauth-authorization-server/as", 200, vec![], asm),
            (
                "/idp-token",
                200,
                vec![],
                serde_json::json!({"access_token": jag_for("https://honest-as.example.com"), "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"}).to_string(),
            ),
            ("/as-token", 200, vec![], r#"{"access_token":"upstream-token","token_type":"Bearer","expires_in":3600}"#.into()),
        ]
    })
    .await;
    let (template, _, _) = engine("{}", false).await;
    let id = id_jag_identity(&template, &base);
    let refused = id.exchanged("alice", "files", "alice.id.token").await.expect_err("not presented");
    assert!(refused.to_string().contains("honest-as.example.com") && refused.to_string().contains("not sent"), "{refused}");
    let log = seen.lock().unwrap().clone();
    assert!(!log.iter().any(|r| r.starts_with("POST /as-token ")), "the other server got the ID-JAG: {log:?}");
}

/// The per-caller identity of an upstream `files` behind the IdP at `base` that exchanges the
/// caller's token for an ID-JAG (`user_auth.exchange` with `id_jag`).
fn id_jag_identity(template: &Identity, base: &str) -> Identity {
    let p = Protected {
        upstream: "files".into(),
        resource: format!("{base}/mcp"),
        client_id: Some("gw-at-idp".into()),
        client_issuer: Some(base.to_string()),
        client_secret: Some("idp-secret".into()),
        secret_in_body: false,
        scopes: None,
        exchange: true,
        api_key: None,
        id_jag: Some(("gw-at-files".into(), Some("files-secret".into()))),
    };
    Identity::new(template.settings.clone(), sealer(), Vault::in_memory(sealer()), OAuthHttp::new(Rules { loopback: true }), vec![p])
}
