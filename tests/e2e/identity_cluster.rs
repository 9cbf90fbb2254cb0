//! Per-user identity across replicas sharing one Redis (`[cluster]`): a consent started on one
//! replica finishes on another (the started authorization is shared, and spent once), the tokens
//! are in the shared vault, so the caller is connected on every replica, and a revocation on one
//! reaches the others. Along the way, the two other shapes of "consent needed": a 2025-11-25 client
//! that declared URL elicitation gets `-32042` and, once the consent is done,
//! `notifications/elicitation/complete` on its stream; a client that declared none gets a tool
//! result carrying the link. The authorization server is tests/py/idp.py (it approves at once, as
//! the user `login_hint` names), the upstream tests/py/protected_server.py.

use crate::cluster::Redis;
use crate::harness::*;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

const LEGACY: &str = "2025-11-25";

fn cookie_of(r: &Resp) -> String {
    r.headers.get("set-cookie").and_then(|v| v.to_str().ok()).and_then(|c| c.split(';').next()).unwrap_or_default().to_string()
}

pub(crate) fn header(r: &Resp, name: &str) -> String {
    r.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

pub(crate) async fn get_with(url: &str, headers: &[(&str, &str)]) -> Resp {
    let mut b = http::Request::get(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    send(b.body(http_body_util::Full::new(bytes::Bytes::new())).expect("request")).await.expect("GET")
}

/// A person with the consent `link` in a browser: opens the page (on whichever replica the link
/// names), submits it, signs in at the authorization server (which approves at once), and is sent
/// back; the redirect back is delivered to `callback_base` instead (another replica behind the
/// same public URL).
pub(crate) async fn consent(link: &str, key: &str, callback_base: &str) -> String {
    let origin = link.split("/oauth/").next().expect("a base").to_string();
    let field = |html: &str, name: &str| {
        let at = html.find(&format!("name=\"{name}\" value=\"")).unwrap_or_else(|| panic!("no {name} in the page: {html}"));
        let rest = &html[at + name.len() + 15..];
        rest[..rest.find('"').expect("a closing quote")].to_string()
    };
    // First the sign-in as the link's caller, with its key.
    let page = get(link).await.expect("the sign-in page");
    let html = String::from_utf8_lossy(&page.body).to_string();
    assert!(page.status == 200 && html.contains("Sign in as"), "{html}");
    let nonce = cookie_of(&page);
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant", &field(&html, "grant"))
        .append_pair("csrf", &field(&html, "csrf"))
        .append_pair("key", key)
        .finish();
    let signed =
        post_raw(&format!("{origin}/oauth/signin"), &[("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", &nonce)], form)
            .await;
    assert_eq!(signed.status, 303, "{}", String::from_utf8_lossy(&signed.body));
    let cookie = format!("{nonce}; {}", cookie_of(&signed));
    let page = get_with(link, &[("Cookie", &cookie)]).await;
    assert_eq!(page.status, 200, "{}", String::from_utf8_lossy(&page.body));
    let html = String::from_utf8_lossy(&page.body).to_string();
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant", &field(&html, "grant"))
        .append_pair("csrf", &field(&html, "csrf"))
        .finish();
    let posted =
        post_raw(&format!("{origin}/oauth/connect"), &[("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", &cookie)], form)
            .await;
    assert_eq!(posted.status, 303, "{}", String::from_utf8_lossy(&posted.body));
    let at_server = get(&header(&posted, "location")).await.expect("the authorization server");
    assert_eq!(at_server.status, 302, "{}", String::from_utf8_lossy(&at_server.body));
    let back = header(&at_server, "location");
    let path = &back[back.find("/oauth/callback").expect("the redirect URI")..];
    let done = get_with(&format!("{callback_base}{path}"), &[("Cookie", &cookie)]).await;
    let text = String::from_utf8_lossy(&done.body).to_string();
    assert_eq!(done.status, 200, "{text}");
    text
}

async fn legacy_post(url: &str, key: &str, session: Option<&str>, body: Value) -> Resp {
    let auth = format!("Bearer {key}");
    let mut h =
        vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"), ("Authorization", auth.as_str())];
    if let Some(s) = session {
        h.push(("Mcp-Session-Id", s));
        h.push(("MCP-Protocol-Version", LEGACY));
    }
    post_raw(url, &h, body.to_string()).await
}

pub(crate) async fn call_as(url: &str, key: &str, tool: &str) -> Value {
    let auth = format!("Bearer {key}");
    rpc_with(url, "tools/call", json!({ "name": tool, "arguments": {} }), &[("authorization", &auth)]).await.message()
}

pub(crate) fn link_in(text: &str) -> String {
    let at = text.find("http://").unwrap_or_else(|| panic!("no link in {text}"));
    text[at..].split_whitespace().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_consent_started_on_one_replica_connects_the_caller_on_all_of_them() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/idp.py")).arg("0").arg(dir.path().join("token-requests"));
    let (_idp, issuer) = crate::identity::listening(cmd, "the identity provider");
    let (_rs, rs_url) = crate::identity::protected_server(&issuer, &dir.path().join("seen"));
    let public = free_port();
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[cluster]\nredis = \"{}\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [identity]\npublic_url = \"http://127.0.0.1:{public}\"\nallow_loopback = true\n\n\
         [[upstream]]\nid = \"files\"\nurl = \"{rs_url}\"\ntimeout = \"20s\"\n[upstream.user_auth]\n",
        redis.url(),
        crate::callers::hash("alice-key"),
        crate::callers::hash("bob-key"),
    );
    let key = "6e".repeat(32);
    let env = [("MCPGATE_TOKEN_KEY", key.as_str())];
    // Replica b is where the public URL points; replica a is another one behind it.
    let b = gateway_on_port(&config, public, &env);
    let a = gateway_with_env(&config, &env);

    // A 2025-11-25 client of alice's on replica a, which declared URL elicitation.
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": { "elicitation": { "url": {} } }, "clientInfo": { "name": "t", "version": "1" } } });
    let r = legacy_post(&a.url, "alice-key", None, init).await;
    let session = header(&r, "mcp-session-id");
    assert!(!session.is_empty(), "{}", String::from_utf8_lossy(&r.body));
    let _ = legacy_post(&a.url, "alice-key", Some(&session), json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).await;
    let stream_req = http::Request::get(&a.url)
        .header("Accept", "text/event-stream")
        .header("Authorization", "Bearer alice-key")
        .header("Mcp-Session-Id", &session)
        .header("MCP-Protocol-Version", LEGACY)
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let stream = mcpgate_net::http::new_http_client().request(stream_req).await.expect("the GET stream");
    assert_eq!(stream.status(), 200);
    let mut stream = stream.into_body();
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "files__connect", "arguments": {} } });
    let refused = legacy_post(&a.url, "alice-key", Some(&session), call).await.message();
    assert_eq!(refused["error"]["code"], -32042, "URLElicitationRequiredError: {refused}");
    let elicitation = &refused["error"]["data"]["elicitations"][0];
    assert_eq!(elicitation["mode"], "url", "{refused}");
    let (id, link) = (elicitation["elicitationId"].as_str().expect("an id"), elicitation["url"].as_str().expect("a link"));
    assert!(link.starts_with(&format!("http://127.0.0.1:{public}/oauth/connect?grant=")), "{link}");

    // The consent page and its form on replica b; the redirect back reaches replica a.
    let page = consent(link, "alice-key", &a.base).await;
    assert!(page.contains("Connected files"), "{page}");

    // Replica a announces the end of the elicitation to the legacy client that was sent to it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    while Instant::now() < deadline && !seen.contains("notifications/elicitation/complete") {
        if let Ok(Some(Ok(frame))) = tokio::time::timeout(Duration::from_millis(500), stream.frame()).await
            && let Ok(data) = frame.into_data()
        {
            seen.push_str(&String::from_utf8_lossy(&data));
        }
    }
    assert!(seen.contains("notifications/elicitation/complete") && seen.contains(id), "{seen}");

    // Alice is connected on replica b too (the vault is shared): her call goes through there.
    let mut who = Value::Null;
    for _ in 0..50 {
        who = call_as(&b.url, "alice-key", "files__whoami").await;
        if who["result"]["isError"] != true && who["result"]["content"][0]["text"] == "you are alice" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(who["result"]["content"][0]["text"], "you are alice", "{who}\nreplica b:\n{}", b.proc.log());

    // Bob's client declared no URL elicitation: a tool result carrying the link.
    let bob = call_as(&b.url, "bob-key", "files__connect").await;
    assert_eq!(bob["result"]["isError"], true, "{bob}");
    assert!(link_in(&text_of(&bob)).contains("/oauth/connect?grant="), "{bob}");

    // A revocation on replica b reaches replica a: alice is sent to consent again there.
    let revoke = post_raw(
        &format!("{}/oauth/tokens/revoke", b.base),
        &[("Authorization", "Bearer alice-key"), ("Content-Type", "application/json")],
        "{}",
    )
    .await;
    assert_eq!(revoke.json()["revoked"], 1, "{}", String::from_utf8_lossy(&revoke.body));
    let mut again = Value::Null;
    for _ in 0..50 {
        again = call_as(&a.url, "alice-key", "files__whoami").await;
        if again["result"]["isError"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(link_in(&text_of(&again)).contains("/oauth/connect?grant="), "{again}\nreplica a:\n{}", a.proc.log());
}
