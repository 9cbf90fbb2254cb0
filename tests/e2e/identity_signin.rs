//! The consent link of a JWT caller: before the consent page, the person in the browser signs in
//! at the callers' own issuer (tests/py/idp.py, which approves at once as the user `login_hint`
//! names), and the token it gives must be one the gateway accepts from that very caller. Someone
//! who signs in as another user is refused, and nothing is connected for the link's caller; the
//! link's own caller connects, and their calls reach the upstream with their own token. The browser
//! is played over plain HTTP (redirects followed by hand, cookies kept), as the identity cluster
//! test does. Every OAuth page checks Host, and a form's Origin.

use crate::browser::{Browser, field, heading};
use crate::harness::*;
use crate::identity::{listening, mint, protected_server};
use crate::identity_cluster::{call_as, get_with, header, link_in};
use std::process::Command;

/// The person signs in at the issuer as `user` from the sign-in page of `link`: where that ends.
async fn sign_in_at_issuer(b: &mut Browser, link: &str, user: &str, gateway: &str) -> Resp {
    let (page, _) = b.open(link, gateway).await;
    let html = String::from_utf8_lossy(&page.body).to_string();
    assert!(heading(&page).starts_with("Sign in as") && html.contains("Sign in at http://127.0.0.1:"), "{html}");
    let cookie = b.cookie();
    let posted = post_raw(
        &format!("{gateway}/oauth/signin"),
        &[("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", &cookie), ("Origin", gateway)],
        form_urlencoded::Serializer::new(String::new())
            .append_pair("grant", &field(&html, "grant"))
            .append_pair("csrf", &field(&html, "csrf"))
            .finish(),
    )
    .await;
    assert_eq!(posted.status, 303, "{}", String::from_utf8_lossy(&posted.body));
    // The issuer signs in whoever `login_hint` names.
    let authorize = format!("{}&login_hint={user}", header(&posted, "location"));
    b.open(&authorize, gateway).await.0
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jwt_callers_link_needs_a_sign_in_as_that_caller_at_its_issuer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw_port = free_port();
    let gateway = format!("http://127.0.0.1:{gw_port}");
    let resource = format!("{gateway}/mcp");
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/idp.py")).arg("0").arg(dir.path().join("issued")).arg(&resource);
    let (_idp, issuer) = listening(cmd, "the identity provider");
    let (_rs, rs_url) = protected_server(&issuer, &dir.path().join("seen"));
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n\
         [auth]\nmode = \"jwt\"\nissuer = \"{issuer}\"\naudience = [\"mcpgate-test\", \"{resource}\"]\njwks_url = \"{issuer}/jwks\"\n\n\
         [identity]\npublic_url = \"{gateway}\"\nvault = {:?}\nallow_loopback = true\n\n\
         [[upstream]]\nid = \"files\"\nurl = \"{rs_url}\"\ntimeout = \"20s\"\n[upstream.user_auth]\n",
        dir.path().join("vault.json"),
    );
    let gw = gateway_on_port(&config, gw_port, &[("MCPGATE_TOKEN_KEY", &"5a".repeat(32))]);
    let (alice, mallory) = (mint(&issuer, "alice"), mint(&issuer, "mallory"));

    // Every page checks Host, like the MCP endpoint (a rebound name reaches none of them).
    for path in ["/oauth/connect?grant=x", "/oauth/callback?state=s&code=c", "/oauth/callback/abc?state=s&code=c", "/oauth/client.json"] {
        let r = get_with(&format!("{gateway}{path}"), &[("Host", "evil.example")]).await;
        assert_eq!(r.status, 403, "{path} with a foreign Host: {}", String::from_utf8_lossy(&r.body));
        let r = get_with(&format!("{gateway}{path}"), &[]).await;
        assert_ne!(r.status, 403, "{path} with the gateway's own Host");
    }
    // A form posted from another origin is refused before anything else.
    let r = post_raw(
        &format!("{gateway}/oauth/signin"),
        &[("Origin", "http://evil.example"), ("Content-Type", "application/x-www-form-urlencoded")],
        "grant=x&csrf=y",
    )
    .await;
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));

    // Mallory's link, opened by bob, who signs in at the issuer as himself: refused.
    let link = link_in(&text_of(&call_as(&gw.url, &mallory, "files__connect").await));
    let mut bobs = Browser::default();
    let refused = sign_in_at_issuer(&mut bobs, &link, "bob", &gateway).await;
    assert_eq!((refused.status, heading(&refused).as_str()), (403, "Not your link"), "{}", String::from_utf8_lossy(&refused.body));
    let (page, _) = bobs.open(&link, &gateway).await;
    assert_eq!(heading(&page), "Sign in as mallory", "bob's browser is still not mallory's");
    let html = String::from_utf8_lossy(&page.body).to_string();
    let (posted, _) = bobs
        .submit(&format!("{gateway}/oauth/connect"), &[("grant", &field(&html, "grant")), ("csrf", &field(&html, "csrf"))], &gateway)
        .await;
    assert_eq!((posted.status, heading(&posted).as_str()), (403, "Not signed in"), "the consent form refuses him too");
    let still = call_as(&gw.url, &mallory, "files__connect").await;
    assert!(text_of(&still).contains("/oauth/connect?grant="), "nothing was connected for mallory: {still}");

    // Alice's own link, signed in as alice: the consent page, the upstream's sign-in, connected.
    let link = link_in(&text_of(&call_as(&gw.url, &alice, "files__connect").await));
    let mut hers = Browser::default();
    let back = sign_in_at_issuer(&mut hers, &link, "alice", &gateway).await;
    assert_eq!(heading(&back), "Connect files", "{}\n{}", String::from_utf8_lossy(&back.body), gw.proc.log());
    let html = String::from_utf8_lossy(&back.body).to_string();
    let (done, _) = hers
        .submit(&format!("{gateway}/oauth/connect"), &[("grant", &field(&html, "grant")), ("csrf", &field(&html, "csrf"))], &gateway)
        .await;
    assert_eq!((done.status, heading(&done).as_str()), (200, "Connected files"), "{}", String::from_utf8_lossy(&done.body));
    let who = call_as(&gw.url, &alice, "files__whoami").await;
    assert_eq!(text_of(&who), "you are alice", "{who}");
    assert!(gw.proc.log().contains("refused a consent link opened by someone who is not its caller"));
}

/// A server that accepts connections and never answers: a stalled upstream and authorization server.
fn stalled() -> (String, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let held = std::thread::spawn(move || {
        let mut sockets = Vec::new();
        listener.set_nonblocking(true).expect("nonblocking");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < until {
            match listener.accept() {
                Ok((s, _)) => sockets.push(s),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    });
    (base, held)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_authorization_server_does_not_hold_the_catalogue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (slow, _held) = stalled();
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n\
         [identity]\npublic_url = \"http://127.0.0.1:1\"\nvault = {:?}\nallow_loopback = true\n\n\
         [[upstream]]\nid = \"files\"\nurl = \"{slow}/mcp\"\ntimeout = \"20s\"\n[upstream.user_auth]\n\n\
         [[upstream]]\nid = \"demo\"\ncommand = [{:?}, \"demo-server\", \"--profile\", \"calc\"]\n",
        dir.path().join("vault.json"),
        env!("CARGO_BIN_EXE_mcpgate"),
    );
    let started = std::time::Instant::now();
    let gw = gateway(&config);
    // Ready as soon as the other upstream is: discovery at the stalled server goes on behind.
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "ready only after {:?}:\n{}", started.elapsed(), gw.proc.log());
    assert!(gw.proc.log().contains("catalogue ready"), "{}", gw.proc.log());
    let list = rpc_with(&gw.url, "tools/list", serde_json::json!({}), &[]).await.message();
    let names = names_in(&list["result"]["tools"]);
    assert!(names.contains(&"files__connect".to_string()) && names.iter().any(|n| n.starts_with("demo__")), "{names:?}");
}
