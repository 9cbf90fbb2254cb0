//! Per-user upstream identity, end to end: a real authorization server (npm `oidc-provider`,
//! OpenID-certified, tests/js/oidc-as) and an OAuth-protected MCP server written with the Python
//! SDK (tests/py/protected_server.py, which validates every token by introspection and answers
//! `whoami` from it), with the gateway as the OAuth client of each caller. Two callers consent in
//! headless Chromium and each call reaches the upstream with that caller's own token; revoking one
//! caller's accounts sends only that caller back to consent; and none of the issued tokens ever
//! shows in the gateway's log, metrics, console, token API or vault file. A second test covers
//! RFC 8693 token exchange for JWT callers (tests/py/idp.py).

use super::harness::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A server that prints `LISTENING <port>` on stdout once ready: its MCP URL.
pub fn listening(mut cmd: Command, what: &str) -> (Proc, String) {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let err = child.stderr.take().expect("stderr");
    let sink = stderr.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if let Ok(mut l) = sink.lock() {
                l.push(line);
            }
        }
    });
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let port = line.strip_prefix("LISTENING ").map(|p| p.trim().to_string());
            let url = line.find("listening on http://").map(|i| line[i + "listening on ".len()..].trim().to_string());
            if let Some(found) = port.map(|p| format!("http://127.0.0.1:{p}")).or(url) {
                let _ = tx.send(found);
            }
        }
    });
    let proc = Proc { child, stderr };
    let base = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("{what} did not start:\n{}", proc.log()));
    (proc, base)
}

/// The authorization server on `port`, issuing tokens for `resource`.
fn authorization_server(port: u16, resource: &str) -> Proc {
    let node = tool("MCPGATE_NODE22", ".work/node22/node_modules/node/bin/node");
    let script = tool("MCPGATE_OIDC_AS", "tests/js/oidc-as/server.mjs");
    let mut cmd = Command::new(node);
    cmd.arg(script).arg(port.to_string()).arg(resource);
    if let Ok(modules) = std::env::var("MCPGATE_OIDC_NODE_MODULES") {
        cmd.env("MCPGATE_OIDC_NODE_MODULES", modules);
    }
    listening(cmd, "the authorization server").0
}

/// The protected MCP server trusting `issuer`; writes the tokens it accepted to `seen`.
pub fn protected_server(issuer: &str, seen: &std::path::Path) -> (Proc, String) {
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/protected_server.py")).arg("0").arg(issuer).arg(seen);
    let (proc, base) = listening(cmd, "the protected MCP server");
    (proc, format!("{base}/mcp"))
}

/// A caller JWT for `sub` from tests/py/idp.py at `issuer` (audience `mcpgate-test`).
pub fn mint(issuer: &str, sub: &str) -> String {
    let url = format!("{issuer}/mint?sub={sub}&aud=mcpgate-test");
    let out = Command::new(python())
        .args(["-c", "import sys,urllib.request;print(urllib.request.urlopen(sys.argv[1]).read().decode())", &url])
        .output()
        .expect("mint a token");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a minted token");
    v["token"].as_str().unwrap_or_default().to_string()
}

/// Every line of `path` (empty when it does not exist).
fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).filter(|l| !l.is_empty()).collect()
}

async fn get_text(url: &str, key: &str) -> String {
    let req = http::Request::get(url)
        .header("authorization", format!("Bearer {key}"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    send(req).await.map(|r| String::from_utf8_lossy(&r.body).to_string()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_callers_connect_an_oauth_upstream_each_with_their_own_account() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seen = dir.path().join("seen-tokens");
    let as_port = free_port();
    let issuer = format!("http://127.0.0.1:{as_port}");
    let (_rs, rs_url) = protected_server(&issuer, &seen);
    let _as = authorization_server(as_port, &rs_url);
    let gw_port = free_port();
    let vault = dir.path().join("vault.json");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nadmin = true\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"mallory\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [console]\nenabled = true\n\n\
         [identity]\npublic_url = \"http://127.0.0.1:{gw_port}\"\nvault = {vault:?}\nallow_loopback = true\n\n\
         [[upstream]]\nid = \"files\"\nurl = \"{rs_url}\"\ntimeout = \"20s\"\n[upstream.user_auth]\n",
        crate::callers::hash("alice-key"),
        crate::callers::hash("bob-key"),
        crate::callers::hash("mallory-key"),
    );
    let key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let gw = gateway_on_port(&config, gw_port, &[("MCPGATE_TOKEN_KEY", key)]);
    let shots = repo().join(".work/screenshots");
    let out = Command::new(python())
        .arg(repo().join("tests/browser/consent_test.py"))
        .args([gw.base.as_str(), "alice-key", "bob-key", "mallory-key"])
        .arg(&shots)
        .output()
        .expect("run the browser test");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the browser test failed:\n{stdout}\n{stderr}\ngateway log:\n{}", gw.proc.log());
    assert!(stdout.contains(r#""whoami": "you are alice""#) && stdout.contains(r#""whoami": "you are bob""#), "{stdout}");
    assert!(stdout.lines().last() == Some("ok"), "{stdout}");
    assert!(stdout.contains(r#""step": "phishing refused""#) && stdout.contains(r#""step": "single use""#), "{stdout}");
    let early = gw.proc.log();
    assert!(early.contains("refused a consent link opened by someone who is not its caller"), "{early}");
    for shot in ["consent-sign-in.png", "consent-page.png", "consent-done.png"] {
        let size = std::fs::metadata(shots.join(shot)).map(|m| m.len()).unwrap_or(0);
        assert!(size > 5_000, "a real screenshot of {shot}: {size} bytes");
    }

    // At the upstream: each caller's calls came with a token of its own (the server saw at least
    // two different tokens, and answered each caller as itself, above).
    let tokens: std::collections::BTreeSet<String> = lines(&seen).into_iter().collect();
    assert!(tokens.len() >= 2, "each caller's own token reached the upstream: {tokens:?}");

    // Bob's account is still there, alice's is gone; the token API shows neither token.
    let listed = get_text(&format!("{}/oauth/tokens", gw.base), "alice-key").await;
    assert!(listed.contains(r#""caller":"bob""#) && !listed.contains(r#""caller":"alice""#), "{listed}");
    let own = get_text(&format!("{}/oauth/tokens", gw.base), "bob-key").await;
    assert!(own.contains(r#""caller":"bob""#), "{own}");
    let refused = get_text(&format!("{}/oauth/tokens?caller=alice", gw.base), "bob-key").await;
    assert!(refused.contains("only an admin caller"), "{refused}");

    // Nothing the upstream accepted ever shows: the log (audit lines included), the metrics, the
    // console's state, the token API, the vault file.
    let metrics = get_text(&format!("{}/metrics", gw.base), "alice-key").await;
    let console = get_text(&format!("{}/console/api/state", gw.base), "alice-key").await;
    let calls = get_text(&format!("{}/console/api/calls", gw.base), "alice-key").await;
    assert!(calls.contains("files__whoami"), "the console's feed of calls: {calls}");
    assert!(console.contains(r#""upstream":"files""#), "the console lists the connected account: {console}");
    // The vault lives in the state database beside the configuration (its WAL included).
    let db = gw.config_path.with_file_name("mcpgate-state.db");
    let vault_text = String::from_utf8_lossy(
        &[std::fs::read(&db).unwrap_or_default(), std::fs::read(db.with_extension("db-wal")).unwrap_or_default()].concat(),
    )
    .to_string();
    assert!(vault_text.contains("bob"), "the vault keeps bob's account: {vault_text}");
    let log = gw.proc.log();
    for token in &tokens {
        let places = [
            ("log", &log),
            ("metrics", &metrics),
            ("console", &console),
            ("console calls", &calls),
            ("token API", &listed),
            ("vault", &vault_text),
        ];
        for (place, text) in places {
            assert!(!text.contains(token.as_str()), "an issued token leaked into the {place}");
        }
        assert!(!stdout.contains(token.as_str()) && !stderr.contains(token.as_str()), "an issued token reached the client");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jwt_callers_token_is_exchanged_for_one_to_the_upstream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (seen, exchanges) = (dir.path().join("seen-tokens"), dir.path().join("exchanges"));
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/idp.py")).arg("0").arg(&exchanges);
    let (_idp, issuer) = listening(cmd, "the identity provider");
    let (_rs, rs_url) = protected_server(&issuer, &seen);
    let secret = dir.path().join("client-secret");
    std::fs::write(&secret, "gw-secret").expect("write the secret");
    let gw_port = free_port();
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n\
         [auth]\nmode = \"jwt\"\nissuer = \"{issuer}\"\naudience = [\"mcpgate-test\"]\njwks_url = \"{issuer}/jwks\"\n\n\
         [identity]\npublic_url = \"http://127.0.0.1:{gw_port}\"\nvault = {:?}\nallow_loopback = true\n\n\
         [[upstream]]\nid = \"files\"\nurl = \"{rs_url}\"\ntimeout = \"20s\"\n\
         [upstream.user_auth]\nexchange = true\nclient_id = \"gw-client\"\nissuer = \"{issuer}\"\nclient_secret = {{ file = {secret:?} }}\n",
        dir.path().join("vault.json"),
    );
    let gw = gateway_on_port(&config, gw_port, &[]);
    let (alice, bob) = (mint(&issuer, "alice"), mint(&issuer, "bob"));
    for (who, jwt) in [("alice", &alice), ("bob", &bob)] {
        let auth = format!("Bearer {jwt}");
        let list = rpc_with(&gw.url, "tools/list", serde_json::json!({}), &[("authorization", &auth)]).await.message();
        let names = names_in(&list["result"]["tools"]);
        assert!(names.contains(&"files__whoami".to_string()), "{who}'s own view lists the upstream's tools: {names:?}\n{}", gw.proc.log());
        let reply =
            rpc_with(&gw.url, "tools/call", serde_json::json!({ "name": "files__whoami", "arguments": {} }), &[("authorization", &auth)])
                .await
                .message();
        assert_eq!(text_of(&reply), format!("you are {who}"), "{reply}");
    }
    // What the identity provider was asked: an access-token subject, for the upstream's URI.
    let asked = lines(&exchanges);
    assert!(asked.len() >= 2, "{asked:?}");
    for line in &asked {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        assert_eq!((v["resource"].as_str(), v["audience"].as_str()), (Some(rs_url.as_str()), Some(rs_url.as_str())), "{v}");
        assert_eq!(v["subject_token_type"], "urn:ietf:params:oauth:token-type:access_token");
    }
    // The upstream saw only exchanged tokens, never a caller's own JWT.
    let tokens = lines(&seen);
    assert!(!tokens.is_empty() && tokens.iter().all(|t| t.starts_with("tok-")), "{tokens:?}");
    let log = gw.proc.log();
    for secret in tokens.iter().chain([&alice, &bob]) {
        assert!(!log.contains(secret.as_str()), "a token leaked into the log");
    }
}

/// The gateway's workload JWT (`[upstream.oauth] grant = "jwt_bearer"`, SEP-1933) goes only to an
/// authorization server its audience names: the one the upstream's metadata points at gets it
/// when the JWT is meant for it, and never sees one meant for another server
/// (`https://honest-as.example.com`), whose call fails with the reason.
#[tokio::test(flavor = "multi_thread")]
async fn a_workload_jwt_goes_only_to_the_authorization_server_its_audience_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (seen, requests) = (dir.path().join("seen-tokens"), dir.path().join("token-requests"));
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/idp.py")).arg("0").arg(&requests);
    let (_idp, issuer) = listening(cmd, "the identity provider");
    let (_rs, rs_url) = protected_server(&issuer, &seen);
    let workload = |aud: &str| {
        let url = format!("{issuer}/mint?sub=workload&aud={aud}");
        let out = Command::new(python())
            .args(["-c", "import sys,urllib.request;print(urllib.request.urlopen(sys.argv[1]).read().decode())", &url])
            .output()
            .expect("mint a workload JWT");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the minted token");
        v["token"].as_str().expect("a token").to_string()
    };
    for (aud, meant_for_it) in [("https://honest-as.example.com", false), (issuer.as_str(), true)] {
        let file = dir.path().join("workload.jwt");
        std::fs::write(&file, workload(aud)).expect("write the workload JWT");
        let config = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n\n\
             [[upstream]]\nid = \"files\"\nurl = \"{rs_url}\"\ntimeout = \"20s\"\n\
             [upstream.oauth]\nclient_id = \"workload-client\"\ngrant = \"jwt_bearer\"\nassertion = {{ file = {file:?} }}\n"
        );
        let gw = gateway(&config);
        let reply = call(&gw.url, "files__whoami", serde_json::json!({})).await;
        let presented = lines(&requests).iter().filter(|l| l.contains("jwt-bearer")).count();
        if meant_for_it {
            assert_eq!(text_of(&reply), "you are workload", "{reply}\n{}", gw.proc.log());
            assert_eq!(presented, 1, "presented once");
        } else {
            assert!(reply.get("result").is_none_or(|r| r["isError"] == true), "{reply}");
            assert_eq!(presented, 0, "the server the metadata names received an assertion meant for another");
            let log = gw.proc.log();
            assert!(log.contains("honest-as.example.com") && log.contains("not sent"), "the reason is logged:\n{log}");
        }
    }
}
