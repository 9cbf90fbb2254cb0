//! Part 3: callers. API-key and JWT authentication, per-caller grants that make lists and calls
//! agree (a denied tool answers exactly like a missing one), RFC 9728 challenges, rate limits,
//! the audit log, and no client credential ever reaching an upstream.

use crate::harness::*;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const DEMO: &str = "[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n\n[[upstream]]\nid = \"text\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"text\"]\n";

pub fn hash(key: &str) -> String {
    mcpgate::auth::hash_key(key)
}

async fn rpc_as(url: &str, key: &str, method: &str, params: Value) -> Resp {
    rpc_with(url, method, params, &[("Authorization", &format!("Bearer {key}"))]).await
}

async fn names_as(url: &str, key: &str) -> Vec<String> {
    let r = rpc_as(url, key, "tools/list", json!({})).await.json();
    assert_eq!(r["result"]["cacheScope"], "private", "filtered lists are private: {r}");
    names_in(&r["result"]["tools"])
}

#[tokio::test(flavor = "multi_thread")]
async fn api_key_callers_see_and_reach_only_their_grants() {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"calc__*\"]\ndeny = [\"calc__divide\"]\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"upstream:text\"]\ndeny = [\"*__now\"]\n\n\
         [[caller]]\nid = \"carol\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\nrate_limit = \"3/s\"\n\n\
         [[rate_limit]]\ntools = \"calc__multiply\"\nlimit = \"1/s\"\n\n{DEMO}",
        hash("alice-key"),
        hash("bob-key"),
        hash("carol-key")
    );
    let gw = gateway(&config);

    let anonymous = rpc(&gw.url, "tools/list", json!({})).await;
    assert_eq!(anonymous.status, 401, "{}", String::from_utf8_lossy(&anonymous.body));
    assert!(anonymous.headers.get("www-authenticate").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("Bearer ")));
    assert_eq!(rpc_as(&gw.url, "wrong-key", "tools/list", json!({})).await.status, 401);

    let alice = names_as(&gw.url, "alice-key").await;
    assert_eq!(alice, ["calc__add", "calc__multiply", "calc__echo"]);
    let bob = names_as(&gw.url, "bob-key").await;
    assert_eq!(bob, ["text__echo", "text__upper", "text__word_count", "text__greet", "text__countdown"]);

    // Outside the grants answers exactly like a tool that does not exist.
    let unknown = rpc_as(&gw.url, "alice-key", "tools/call", json!({ "name": "no__such", "arguments": {} })).await;
    for denied in ["text__echo", "calc__divide"] {
        let r = rpc_as(&gw.url, "alice-key", "tools/call", json!({ "name": denied, "arguments": { "a": 1, "b": 1, "text": "x" } })).await;
        assert_eq!(r.status, unknown.status);
        let (e, u) = (r.json()["error"].clone(), unknown.json()["error"].clone());
        assert_eq!(e["code"], u["code"]);
        assert_eq!(e["message"], format!("Unknown tool: {denied}"));
        assert_eq!(e.as_object().map(|o| o.len()), u.as_object().map(|o| o.len()), "same shape: {e} vs {u}");
    }
    // server/discover describes only the upstreams a caller may use.
    for (key, sees, hidden) in [("alice-key", "## calc", "## text"), ("bob-key", "## text", "## calc")] {
        let d = rpc_as(&gw.url, key, "server/discover", json!({})).await.json();
        let text = d["result"]["instructions"].as_str().unwrap_or_default().to_string();
        assert!(text.contains(sees) && !text.contains(hidden), "{key}: {text}");
        assert_eq!(d["result"]["cacheScope"], "private");
    }
    let sum = rpc_as(&gw.url, "alice-key", "tools/call", json!({ "name": "calc__add", "arguments": { "a": 2, "b": 2 } })).await.json();
    assert_eq!(text_of(&sum), "4");

    // Rate limits: carol may burst 3 requests, then waits; recovered after the window.
    for _ in 0..3 {
        assert_eq!(rpc_as(&gw.url, "carol-key", "tools/list", json!({})).await.status, 200);
    }
    let limited = rpc_as(&gw.url, "carol-key", "tools/list", json!({})).await;
    assert_eq!(limited.status, 429, "{}", String::from_utf8_lossy(&limited.body));
    let retry: u64 = limited.headers.get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok()).expect("Retry-After");
    assert!((1..=2).contains(&retry));
    assert_eq!(limited.json()["error"]["code"], 429);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(rpc_as(&gw.url, "carol-key", "tools/list", json!({})).await.status, 200, "recovered after the window");
    // A per-tool limit.
    let mul = json!({ "name": "calc__multiply", "arguments": { "a": 2, "b": 3 } });
    assert_eq!(rpc_as(&gw.url, "alice-key", "tools/call", mul.clone()).await.status, 200);
    assert_eq!(rpc_as(&gw.url, "alice-key", "tools/call", mul.clone()).await.status, 429);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(text_of(&rpc_as(&gw.url, "alice-key", "tools/call", mul).await.json()), "6");

    // Legacy clients authenticate too.
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    assert_eq!(post_raw(&gw.url, &[("Content-Type", "application/json")], init.to_string()).await.status, 401);

    // One audit line per call, without arguments.
    std::thread::sleep(Duration::from_millis(100));
    let log = gw.proc.log();
    let line =
        log.lines().find(|l| l.contains("mcpgate::audit") && l.contains("calc__add")).unwrap_or_else(|| panic!("no audit line:\n{log}"));
    for field in ["caller=alice", "upstream=calc", "outcome=ok", "duration_ms="] {
        assert!(line.contains(field), "{field} missing: {line}");
    }
    assert!(!log.contains("alice-key") && !line.contains("arguments"), "no secrets or arguments in the log");
}

pub(crate) struct Issuer {
    pkcs8: Vec<u8>,
    pub(crate) jwks: Value,
}

pub(crate) fn issuer(kid: &str) -> Issuer {
    let doc = Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new()).expect("key");
    let pair = Ed25519KeyPair::from_pkcs8(doc.as_ref()).expect("pair");
    let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
    Issuer {
        pkcs8: doc.as_ref().to_vec(),
        jwks: json!({ "keys": [{ "kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig" }] }),
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

pub(crate) fn sign(iss: &Issuer, kid: &str, claims: Value) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, &claims, &jsonwebtoken::EncodingKey::from_ed_der(&iss.pkcs8)).expect("sign")
}

pub(crate) fn claims(sub: &str, scope: &str) -> Value {
    json!({ "iss": "https://issuer.test", "aud": "https://gw.test/mcp", "sub": sub, "scope": scope, "groups": ["ops"], "exp": now() + 300, "iat": now() })
}

/// Serves one fixed body over HTTP on loopback (the issuer's JWKS endpoint).
pub(crate) async fn serve_jwks(body: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else { return };
            let body = body.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/jwks.json")
}

#[tokio::test(flavor = "multi_thread")]
async fn jwt_tokens_are_checked_and_scopes_challenged() {
    let iss = issuer("k1");
    let jwks_url = serve_jwks(iss.jwks.to_string()).await;
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"jwt\"\nissuer = \"https://issuer.test\"\nresource = \"https://gw.test/mcp\"\njwks_url = \"{jwks_url}\"\n\
         required_scopes = [\"mcp\"]\nscopes_supported = [\"mcp\", \"calc\"]\n[auth.tool_scopes]\n\"calc__*\" = [\"calc\"]\n\n\
         [[caller]]\nid = \"ops\"\nclaims = {{ groups = \"ops\" }}\nallow = [\"*\"]\n\n[[caller]]\nid = \"viewer\"\nsubject = \"viewer\"\nallow = [\"text__echo\"]\n\n{DEMO}\n\
         [[endpoint]]\npath = \"/mcp/text\"\ninclude = [\"text__*\"]\n"
    );
    let gw = gateway(&config);
    let good = sign(&iss, "k1", claims("alice", "mcp calc"));
    assert_eq!(names_as(&gw.url, &good).await.len(), 10);
    assert_eq!(
        text_of(&rpc_as(&gw.url, &good, "tools/call", json!({ "name": "calc__add", "arguments": { "a": 1, "b": 2 } })).await.json()),
        "3"
    );

    let mut viewer = claims("viewer", "mcp");
    viewer["groups"] = json!([]);
    assert_eq!(names_as(&gw.url, &sign(&iss, "k1", viewer)).await, ["text__echo"]);

    let metadata = "resource_metadata=\"https://gw.test/.well-known/oauth-protected-resource/mcp\"";
    let mut expired = claims("alice", "mcp");
    expired["exp"] = json!(now() - 600);
    let mut wrong_aud = claims("alice", "mcp");
    wrong_aud["aud"] = json!("https://other.test/mcp");
    let mut wrong_iss = claims("alice", "mcp");
    wrong_iss["iss"] = json!("https://evil.test");
    let forged = sign(&issuer("k1"), "k1", claims("alice", "mcp"));
    // Without a subject every such token would share one identity (sessions, rate limits, logs).
    let mut no_subject = claims("alice", "mcp");
    no_subject.as_object_mut().map(|c| c.remove("sub"));
    let mut empty_subject = claims("", "mcp");
    empty_subject["groups"] = json!(["ops"]);
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &claims("alice", "mcp"),
        &jsonwebtoken::EncodingKey::from_secret(b"guess").expect("hs key"),
    )
    .expect("hs");
    for (why, token) in [
        ("expired", sign(&iss, "k1", expired)),
        ("wrong audience", sign(&iss, "k1", wrong_aud)),
        ("wrong issuer", sign(&iss, "k1", wrong_iss)),
        ("badly signed", forged),
        ("no subject", sign(&iss, "k1", no_subject)),
        ("empty subject", sign(&iss, "k1", empty_subject)),
        ("symmetric algorithm", hs),
        ("not a JWT", "garbage".to_string()),
    ] {
        let r = rpc_as(&gw.url, &token, "tools/list", json!({})).await;
        assert_eq!(r.status, 401, "{why}: {}", String::from_utf8_lossy(&r.body));
        let challenge = r.headers.get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        assert!(challenge.contains(metadata), "{why}: {challenge}");
    }
    let r = rpc(&gw.url, "tools/list", json!({})).await;
    assert_eq!(r.status, 401);

    let no_scope = rpc_as(&gw.url, &sign(&iss, "k1", claims("alice", "other")), "tools/list", json!({})).await;
    assert_eq!(no_scope.status, 403);
    let challenge = no_scope.headers.get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"mcp\"") && challenge.contains(metadata),
        "{challenge}"
    );
    let tool_scope = rpc_as(
        &gw.url,
        &sign(&iss, "k1", claims("alice", "mcp")),
        "tools/call",
        json!({ "name": "calc__add", "arguments": { "a": 1, "b": 1 } }),
    )
    .await;
    assert_eq!(tool_scope.status, 403, "{}", String::from_utf8_lossy(&tool_scope.body));
    let challenge = tool_scope.headers.get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    assert!(challenge.contains("insufficient_scope") && challenge.contains("scope=\"calc\""), "{challenge}");
    // Scopes join the policy decision: without `calc` the calc tools are not listed either.
    let listed = |scope: &'static str| {
        let (url, token) = (gw.url.clone(), sign(&iss, "k1", claims("alice", scope)));
        async move {
            let r = rpc_as(&url, &token, "tools/list", json!({})).await.json();
            let names: Vec<String> = r["result"]["tools"]
                .as_array()
                .map(|t| t.iter().filter_map(|t| t["name"].as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            (names, r["result"]["cacheScope"].clone())
        }
    };
    let (without, scope) = listed("mcp").await;
    assert!(!without.is_empty() && without.iter().all(|n| !n.starts_with("calc__")), "{without:?}");
    assert_eq!(scope, "private", "a list filtered by scope is private");
    let (with, _) = listed("mcp calc").await;
    assert!(with.iter().any(|n| n == "calc__add"), "{with:?}");

    let prm = get(&format!("{}/.well-known/oauth-protected-resource/mcp", gw.base)).await.expect("PRM");
    assert_eq!(prm.status, 200);
    let doc = prm.json();
    assert_eq!(doc["resource"], "https://gw.test/mcp");
    assert_eq!(doc["authorization_servers"], json!(["https://issuer.test"]));
    assert_eq!(doc["scopes_supported"], json!(["mcp", "calc"]));
    assert_eq!(get(&format!("{}/.well-known/oauth-protected-resource", gw.base)).await.expect("PRM").status, 200);
    // A virtual server is a protected resource of its own, and its challenges say so.
    let prm = get(&format!("{}/.well-known/oauth-protected-resource/mcp/text", gw.base)).await.expect("PRM");
    assert_eq!(prm.json()["resource"], "https://gw.test/mcp/text");
    let r = rpc(&format!("{}/mcp/text", gw.base), "tools/list", json!({})).await;
    assert_eq!(r.status, 401);
    let challenge = r.headers.get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    assert!(challenge.contains("resource_metadata=\"https://gw.test/.well-known/oauth-protected-resource/mcp/text\""), "{challenge}");
    assert_eq!(get(&format!("{}/.well-known/oauth-protected-resource/mcp/nope", gw.base)).await.expect("PRM").status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn client_credentials_never_reach_an_upstream() {
    let (_up, url) = py_http("alpha", &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("upstream.key"), "file-secret\n").expect("write");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n[[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n[upstream.headers]\nAuthorization = {{ env = \"UPSTREAM_TOKEN\", prefix = \"Bearer \" }}\nX-Upstream-Key = {{ file = {:?} }}\n\
         [upstream.caller_headers.alice]\nX-User-Token = {{ env = \"ALICE_UPSTREAM_TOKEN\" }}\n",
        hash("alice-client-key"),
        hash("bob-client-key"),
        dir.path().join("upstream.key").display().to_string()
    );
    let gw = gateway_with_env(&config, &[("UPSTREAM_TOKEN", "upstream-token"), ("ALICE_UPSTREAM_TOKEN", "alice-at-upstream")]);
    let secrets = ["alice-client-key", "bob-client-key", "session=s3cret", "hunter2", "Basic"];
    for (key, user_token) in [("alice-client-key", Some("alice-at-upstream")), ("bob-client-key", None)] {
        let r = rpc_with(
            &gw.url,
            "tools/call",
            json!({ "name": "alpha__headers", "arguments": {} }),
            &[
                ("Authorization", &format!("Bearer {key}")),
                ("Cookie", "session=s3cret"),
                ("X-Secret", "hunter2"),
                ("Proxy-Authorization", "Basic eA=="),
            ],
        )
        .await
        .message();
        let seen: Value = serde_json::from_str(&text_of(&r)).expect("headers JSON");
        assert_eq!(seen["authorization"], "Bearer upstream-token", "{seen}");
        assert_eq!(seen["x-upstream-key"], "file-secret", "{seen}");
        assert_eq!(seen.get("x-user-token").and_then(Value::as_str), user_token, "{seen}");
        for absent in ["cookie", "x-secret", "proxy-authorization", "origin"] {
            assert!(seen.get(absent).is_none(), "{absent} reached the upstream: {seen}");
        }
        let all = seen.to_string();
        for s in secrets {
            assert!(!all.contains(s), "client secret {s:?} reached the upstream: {all}");
        }
    }
    assert!(!gw.proc.log().contains("upstream-token") && !gw.proc.log().contains("file-secret"), "secrets are never logged");
}

#[tokio::test(flavor = "multi_thread")]
async fn uri_grants_cannot_be_stretched_and_logs_cannot_be_forged() {
    let (_fixture, url) = py_script_http("tests/py/conformance_fixture.py", &[]);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n[[caller]]\nid = \"reader\"\nkey_sha256 = \"{}\"\nallow = [\"fx+test://template/*\", \"fx__test_simple_text\"]\n\n[[upstream]]\nid = \"fx\"\nurl = \"{url}\"\n",
        hash("reader-key")
    );
    let gw = gateway(&config);
    let read = |uri: &'static str| {
        let url = gw.url.clone();
        async move { rpc_as(&url, "reader-key", "resources/read", json!({ "uri": uri })).await.json() }
    };
    let ok = read("fx+test://template/42/data").await;
    assert!(ok["result"]["contents"][0]["uri"].as_str().is_some_and(|u| u.starts_with("fx+test://template/42")), "{ok}");
    for denied in [
        "fx+test://static-text",
        "fx+test://template/../static-text",
        "fx+test://template/%2e%2e/static-text",
        "fx+test://template//x/data",
    ] {
        let r = read(denied).await;
        assert_eq!(r["error"]["code"], -32602, "{denied}: {r}");
        assert!(r["error"]["message"].as_str().unwrap_or_default().starts_with("Resource not found"), "{denied}: {r}");
    }
    // A client-chosen name cannot start a forged audit line.
    let forged = "nope\n2026-11-30T00:00:00Z  INFO mcpgate::audit: audit caller=admin outcome=ok";
    let r = rpc_with(&gw.url, "tools/call", json!({ "name": forged, "arguments": {} }), &[("Authorization", "Bearer reader-key")]).await;
    assert_eq!(r.json()["error"]["code"], -32602);
    std::thread::sleep(Duration::from_millis(100));
    assert!(!gw.proc.log().lines().any(|l| l.contains("caller=admin") && !l.contains("caller=reader")), "{}", gw.proc.log());
}

/// A token endpoint on loopback: checks the client-credentials request and counts tokens issued.
pub async fn token_endpoint(
    expires_in: u64,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let issued = std::sync::Arc::new(AtomicUsize::new(0));
    let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (count, seen) = (issued.clone(), requests.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else { return };
            let (count, seen) = (count.clone(), seen.clone());
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = vec![0u8; 8192];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let text = String::from_utf8_lossy(&buf[..n]).to_string();
                seen.lock().expect("lock").push(text);
                let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                let body = format!(r#"{{"access_token":"tok-{n}","token_type":"Bearer","expires_in":{expires_in}}}"#);
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    (format!("http://{addr}/oauth/token"), issued, requests)
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_tokens_come_from_client_credentials_and_are_cached() {
    use std::sync::atomic::Ordering;
    let (_up, url) = py_http("alpha", &[]);
    // Long-lived: one token serves the probe, the list and every call. Short-lived (expiring
    // within the refresh margin): a new token for each request (probe, list, 3 calls).
    for (expires_in, calls, want_tokens) in [(3600u64, 3, 1usize), (1, 3, 5)] {
        let (token_url, issued, requests) = token_endpoint(expires_in).await;
        let config = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\n[upstream.oauth]\ntoken_url = \"{token_url}\"\nclient_id = \"mcpgate\"\nclient_secret = {{ env = \"ALPHA_CLIENT_SECRET\" }}\nscope = \"tools:call\"\n"
        );
        let gw = gateway_with_env(&config, &[("ALPHA_CLIENT_SECRET", "s3cret")]);
        let mut last = String::new();
        for _ in 0..calls {
            let r = rpc_with(
                &gw.url,
                "tools/call",
                json!({ "name": "alpha__headers", "arguments": {} }),
                &[("Authorization", "Bearer client-token")],
            )
            .await
            .message();
            let seen: Value = serde_json::from_str(&text_of(&r)).expect("headers JSON");
            last = seen["authorization"].as_str().unwrap_or_default().to_string();
            assert!(last.starts_with("Bearer tok-"), "the upstream gets the gateway's own token, never the client's: {seen}");
        }
        assert_eq!(issued.load(Ordering::SeqCst), want_tokens, "expires_in {expires_in}: tokens fetched for {calls} calls (last {last})");
        let req = requests.lock().expect("lock").last().cloned().unwrap_or_default();
        let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("mcpgate:s3cret"));
        assert!(req.contains(&basic) || req.to_ascii_lowercase().contains(&basic.to_ascii_lowercase()), "client authentication: {req}");
        assert!(req.contains("grant_type=client_credentials") && req.contains("scope=tools%3Acall"), "{req}");
        assert!(req.contains(&format!("resource={}", url.replace(':', "%3A").replace('/', "%2F"))), "RFC 8707 resource: {req}");
        assert!(!gw.proc.log().contains("s3cret") && !gw.proc.log().contains("tok-1"), "no secret or token in the log");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_session_serves_only_the_caller_that_opened_it() {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n[[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n",
        hash("alice-key"),
        hash("bob-key")
    );
    let gw = gateway(&config);
    let alice = [("Authorization", "Bearer alice-key")];
    let bob = [("Authorization", "Bearer bob-key")];
    let session = crate::streams::legacy_session(&gw.url, &alice).await;
    let mine = crate::streams::legacy_request(&gw.url, &session, "tools/list", json!({}), &alice).await;
    assert!(mine["result"]["tools"].is_array(), "{mine}");
    // Bob holds Alice's session id: it is unknown to him (404), for POSTs and the GET stream.
    let body = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {} }).to_string();
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Mcp-Session-Id", session.as_str()),
        bob[0],
    ];
    let theirs = post_raw(&gw.url, &headers, body).await;
    assert_eq!(theirs.status, 404, "{}", String::from_utf8_lossy(&theirs.body));
    let req = http::Request::get(&gw.url)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &session)
        .header("Authorization", "Bearer bob-key")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let r = send(req).await.expect("GET");
    assert_eq!(r.status, 404);
}
