//! Per-user identity against an authorization server made of the official MCP Python SDK's own
//! `mcp.server.auth` handlers (tests/py/sdk_auth_server.py: `create_auth_routes` with an in-memory
//! provider that approves at once, and an `MCPServer` resource at `/mcp` that checks each token
//! with that provider). Its token endpoint authenticates the way the SDK does: it reads the
//! client from `client_id` in the form body, HTTP Basic or not (401 "Missing client_id" without
//! it), and accepts only the method the client registered with (`client_secret_basic` here). Two
//! API-key callers connect through the consent pages, played over plain HTTP (cookies kept,
//! redirects followed by hand): once with a client the gateway registers itself (RFC 7591), once
//! with a client registered in advance (`[upstream.user_auth] client_id/issuer/client_secret`).
//! Each caller's calls then reach the server with that caller's own token, for the server's
//! `/mcp`, issued to the expected client.

use crate::browser::{body, field, heading, signed_in_at_link};
use crate::harness::*;
use crate::identity::listening;
use crate::identity_cluster::{call_as, get_with, header};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The client registered in advance, and its secret (characters Basic must form-encode).
const PRE_ID: &str = "mcpgate-preregistered";
const PRE_SECRET: &str = "pre:secret&1/x";

/// The caller `who` (API key `key`) connects the upstream `files` as a person would: asks for the
/// consent link, opens it, signs in with the key, allows, is sent to the authorization server
/// (which approves at once, as the user `login_hint` names: `who`) and back to the gateway, where
/// the code is exchanged at the SDK's token endpoint. The page it ends on.
async fn connect(gw: &Gateway, gateway: &str, who: &str, key: &str) -> String {
    connect_upstream(gw, gateway, who, key, "files").await
}

/// [`connect`] for the upstream `upstream`: the authorization server approves at once as the
/// user `login_hint` names.
pub(crate) async fn connect_upstream(gw: &Gateway, gateway: &str, who: &str, key: &str, upstream: &str) -> String {
    let (mut b, page) = signed_in_at_link(&gw.url, gateway, who, key, &format!("{upstream}__connect")).await;

    // Back at the link: the consent page, naming the authorization server.
    assert_eq!((page.status, heading(&page)), (200, format!("Connect {upstream}")), "{}\n{}", body(&page), gw.proc.log());
    let html = body(&page);
    let allowed =
        b.post(&format!("{gateway}/oauth/connect"), &[("grant", &field(&html, "grant")), ("csrf", &field(&html, "csrf"))], gateway).await;
    assert_eq!(allowed.status, 303, "{}\n{}", body(&allowed), gw.proc.log());

    // At the SDK's /authorize (no cookies of the gateway's go there): straight back with a code.
    let authorize = header(&allowed, "location");
    assert!(authorize.contains("/authorize?") && authorize.contains("code_challenge_method=S256"), "{authorize}");
    let at_server = get_with(&format!("{authorize}&login_hint={who}"), &[]).await;
    assert_eq!(at_server.status, 302, "the authorize handler: {}", body(&at_server));
    let back = header(&at_server, "location");
    assert!(back.starts_with(&format!("{gateway}/oauth/callback")) && back.contains("code="), "{back}");

    // The redirect URI: the gateway exchanges the code at the SDK's token endpoint.
    let done = b.get(&back).await;
    let text = body(&done);
    assert_eq!(
        (done.status, heading(&done)),
        (200, format!("Connected {upstream}")),
        "the code exchange at the SDK's token endpoint:\n{text}\ngateway log:\n{}",
        gw.proc.log()
    );
    text
}

/// What the server's `whoami` says of the token `key`'s call came with (retried while the
/// caller's own connection opens).
async fn whoami(gw: &Gateway, who: &str, key: &str) -> Value {
    let mut reply = Value::Null;
    for _ in 0..50 {
        reply = call_as(&gw.url, key, "files__whoami").await;
        if reply["result"]["isError"] != true && reply["result"]["content"][0]["text"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = reply["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{who}'s whoami: {reply}\n{}", gw.proc.log()));
    assert_ne!(reply["result"]["isError"], true, "{who}'s whoami: {reply}");
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{who}'s whoami is not JSON ({e}): {text}"))
}

/// The server's log: its registrations, authorizations and issued tokens, one JSON object each.
fn events(path: &Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .filter(|v| v["event"] == kind)
        .collect()
}

/// Starts the SDK's authorization server (with the client registered in advance when
/// `preregistered`) and a gateway with callers alice and bob in front of it; both connect; what
/// each one's `whoami` says, checked against what the server issued. Returns alice's and bob's
/// answers and the server's log.
async fn two_callers_connect(preregistered: Option<&str>) -> (Value, Value, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("sdk-as.jsonl");
    let gw_port = free_port();
    let gateway = format!("http://127.0.0.1:{gw_port}");
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/sdk_auth_server.py")).arg("--port").arg("0").arg("--log").arg(&log);
    if let Some(method) = preregistered {
        // Registered in advance with the gateway's plain redirect URI (a configured client's).
        cmd.args(["--client-id", PRE_ID, "--client-secret", PRE_SECRET, "--client-auth", method, "--redirect-uri"])
            .arg(format!("{gateway}/oauth/callback"));
    }
    let (server, issuer) = listening(cmd, "the SDK's authorization server");
    let rs_url = format!("{issuer}/mcp");
    let extra = if let Some(method) = preregistered {
        let secret = dir.path().join("client-secret");
        std::fs::write(&secret, PRE_SECRET).expect("write the secret");
        format!("client_id = \"{PRE_ID}\"\nissuer = \"{issuer}\"\nclient_secret = {{ file = {secret:?} }}\nclient_auth = \"{method}\"\n")
    } else {
        String::new()
    };
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [identity]\npublic_url = \"{gateway}\"\nvault = {:?}\nallow_loopback = true\n\n\
         [[upstream]]\nid = \"files\"\nurl = \"{rs_url}\"\ntimeout = \"20s\"\n[upstream.user_auth]\n{extra}",
        crate::callers::hash("alice-key"),
        crate::callers::hash("bob-key"),
        dir.path().join("vault.json"),
    );
    let gw = gateway_on_port(&config, gw_port, &[("MCPGATE_TOKEN_KEY", &"6f".repeat(32))]);

    for (who, key) in [("alice", "alice-key"), ("bob", "bob-key")] {
        let page = connect(&gw, &gateway, who, key).await;
        assert!(page.contains(&format!("files is connected for {who}")), "{page}");
    }
    let (alice, bob) = (whoami(&gw, "alice", "alice-key").await, whoami(&gw, "bob", "bob-key").await);

    // Each caller's call reached the server with a token of its own, for this server's /mcp.
    assert_eq!((alice["subject"].as_str(), bob["subject"].as_str()), (Some("alice"), Some("bob")), "{alice}\n{bob}");
    let (a_token, b_token) = (alice["token_sha256"].as_str().unwrap_or_default(), bob["token_sha256"].as_str().unwrap_or_default());
    assert!(a_token.len() == 64 && b_token.len() == 64 && a_token != b_token, "two different tokens: {alice}\n{bob}");
    for v in [&alice, &bob] {
        assert_eq!(v["resource"].as_str(), Some(rs_url.as_str()), "a token for the server's own /mcp (RFC 8707): {v}");
        assert_eq!(v["scopes"], serde_json::json!(["user"]), "{v}");
    }
    // And again: each keeps its own.
    let again = whoami(&gw, "alice", "alice-key").await;
    assert_eq!((again["subject"].as_str(), again["token_sha256"].as_str()), (Some("alice"), Some(a_token)), "{again}");

    // What the server issued: one code exchange per caller, each by a client that authenticated
    // the way it was registered (the only way the SDK accepts), and exactly the token each
    // caller's whoami reported.
    let tokens = events(&log, "token");
    assert_eq!(tokens.len(), 2, "one code exchange per caller: {tokens:?}");
    for (who, seen) in [("alice", &alice), ("bob", &bob)] {
        let issued = tokens.iter().find(|t| t["subject"] == who).unwrap_or_else(|| panic!("no token issued for {who}: {tokens:?}"));
        assert_eq!(issued["grant_type"], "authorization_code", "{issued}");
        assert_eq!(issued["token_endpoint_auth_method"], preregistered.unwrap_or("client_secret_basic"), "{issued}");
        assert_eq!(issued["token_sha256"], seen["token_sha256"], "{who}'s calls carry the token issued to {who}: {issued}\n{seen}");
        assert_eq!(issued["client_id"], seen["client_id"], "{issued}\n{seen}");
    }
    let log_text = gw.proc.log();
    assert!(!log_text.contains("token request refused"), "{log_text}");
    drop(server);
    (alice, bob, log, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_authorization_server_with_dynamic_registration_connects_two_callers() {
    let (alice, bob, log, _dir) = two_callers_connect(None).await;
    // The gateway registered itself (RFC 7591) asking for client_secret_basic, which the SDK's
    // metadata lists, and both callers' tokens went to that registered client.
    let registered = events(&log, "register");
    assert!(!registered.is_empty(), "the gateway registered at the SDK's /register");
    for v in [&alice, &bob] {
        let client = registered
            .iter()
            .find(|r| r["client_id"] == v["client_id"])
            .unwrap_or_else(|| panic!("the token's client {} was registered dynamically: {registered:?}", v["client_id"]));
        assert_eq!(client["token_endpoint_auth_method"], "client_secret_basic", "{client}");
        let uris = client["redirect_uris"].as_array().cloned().unwrap_or_default();
        assert!(uris.iter().any(|u| u.as_str().is_some_and(|u| u.contains("/oauth/callback/"))), "the per-server redirect URI: {client}");
    }
    assert_ne!(alice["client_id"].as_str(), Some(PRE_ID));
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_authorization_server_with_a_preregistered_client_connects_two_callers() {
    preregistered_client_connects_two_callers("client_secret_basic").await;
}

/// A client registered to send its secret in the body, at a server that lists both methods and
/// takes only the registered one (`user_auth.client_auth`).
#[tokio::test(flavor = "multi_thread")]
async fn sdk_authorization_server_with_a_preregistered_post_client_connects_two_callers() {
    preregistered_client_connects_two_callers("client_secret_post").await;
}

async fn preregistered_client_connects_two_callers(method: &str) {
    let (alice, bob, log, _dir) = two_callers_connect(Some(method)).await;
    // The configured client, not a registration of its own (the server offers one, too).
    for v in [&alice, &bob] {
        assert_eq!(v["client_id"].as_str(), Some(PRE_ID), "the configured client_id: {v}");
    }
    let registered = events(&log, "register");
    assert!(registered.is_empty(), "no dynamic registration with a configured client: {registered:?}");
    let authorized = events(&log, "authorize");
    assert!(authorized.len() == 2 && authorized.iter().all(|a| a["client_id"] == PRE_ID), "{authorized:?}");
}

/// `mcpgate check` on a `user_auth` upstream runs the discovery a caller's first call would
/// (without registering anything) and says what a caller will meet; an upstream whose
/// authorization cannot be discovered fails the check.
#[test]
fn check_runs_the_discovery_a_caller_would_meet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("sdk-as.jsonl");
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/sdk_auth_server.py")).arg("--port").arg("0").arg("--log").arg(&log);
    let (_server, issuer) = listening(cmd, "the SDK's authorization server");
    let gone = format!("http://127.0.0.1:{}/mcp", free_port());
    let check = |url: &str| {
        let config = dir.path().join("gateway.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
                 [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
                 [identity]\npublic_url = \"http://127.0.0.1:8811\"\nvault = {:?}\nallow_loopback = true\n\n\
                 [[upstream]]\nid = \"files\"\nurl = \"{url}\"\ntimeout = \"5s\"\n[upstream.user_auth]\n",
                crate::callers::hash("alice-key"),
                dir.path().join("vault.json"),
            ),
        )
        .expect("write the config");
        let out = Command::new(env!("CARGO_BIN_EXE_mcpgate"))
            .args(["check", "-c"])
            .arg(&config)
            .env("MCPGATE_TOKEN_KEY", "6f".repeat(32))
            .output()
            .expect("run mcpgate check");
        (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    };
    let (ok, out) = check(&format!("{issuer}/mcp"));
    assert!(ok, "{out}");
    assert!(out.lines().any(|l| l.starts_with("files") && l.contains("per caller")), "not `pending`:\n{out}");
    for expected in [
        "files (each caller's own authorization):".to_string(),
        format!("authorization server {issuer}"),
        format!("callers sign in at {issuer}/authorize"),
        format!("a client it registers on first use at {issuer}/register (token endpoint authentication: client_secret_basic)"),
    ] {
        assert!(out.contains(&expected), "missing {expected:?}:\n{out}");
    }
    assert!(events(&log, "register").is_empty(), "check registers nothing");

    let (ok, out) = check(&gone);
    assert!(!ok, "an upstream whose authorization cannot be discovered fails the check:\n{out}");
    assert!(out.contains("files (each caller's own authorization): callers cannot sign in:"), "{out}");
}
