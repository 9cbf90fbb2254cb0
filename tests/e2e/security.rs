//! Findings of the security review (Part 17), URIs: one canonical form decides (percent-encoding
//! and case do not get past `deny`, `[auth] resource_scopes` or an endpoint's `exclude`, on the
//! root, on an endpoint, over a legacy session, for reads, follows and completions); a URI in a
//! down prefixed upstream's namespace never reaches an unprefixed one; an unprefixed upstream
//! cannot announce updates of another upstream's URIs. The upstreams are tests/py/vault_server.py
//! (the official Python SDK's `MCPServer`, whose template serves the secret for `mem://secret/*`,
//! decoding its variables) and, where a hostile upstream is needed, its `evil` role.

use crate::callers::{claims, hash, issuer, serve_jwks, sign};
use crate::harness::*;
use crate::streams::*;
use serde_json::{Value, json};
use std::time::Duration;

/// The text the vault serves for its secret.
const SECRET: &str = "S3CR3T-VAULT-KEY";

/// Spellings of `vault+mem://secret/key` that an upstream decoding URIs reads as the secret.
const SECRET_SPELLINGS: [&str; 6] = [
    "vault+mem://secret/key",
    "vault+mem://%73ecret/key",
    "vault+mem://%73%65%63%72%65%74/%6b%65%79",
    "VAULT+mem://secret/key",
    "vault+MEM://secret/key",
    "Vault+Mem://%73ecret/key",
];

pub fn vault_http() -> (Proc, String) {
    py_script_http("tests/py/vault_server.py", &["--role", "vault"])
}

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

async fn read(url: &str, key: &str, uri: &str) -> Value {
    rpc_with(url, "resources/read", json!({ "uri": uri }), &[("Authorization", &bearer(key))]).await.message()
}

fn text(read: &Value) -> String {
    read["result"]["contents"][0]["text"].as_str().unwrap_or("").to_string()
}

/// `read` was refused like a missing resource, and nothing of the secret came back.
fn refused(read: &Value, uri: &str) {
    assert!(!read.to_string().contains(SECRET), "{uri} leaked the secret: {read}");
    assert_eq!(read["error"]["code"], -32602, "{uri}: {read}");
}

fn vault_config(vault: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"upstream:vault\"]\ndeny = [\"vault+mem://secret/*\"]\n\n\
         [[caller]]\nid = \"all\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[upstream]]\nid = \"vault\"\nurl = \"{vault}\"\n\n\
         [[endpoint]]\npath = \"/mcp/dev\"\ninclude = [\"upstream:vault\"]\nexclude = [\"vault+mem://secret/*\"]\n",
        hash("bob-key"),
        hash("all-key"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn no_spelling_of_a_denied_uri_gets_past_policy_or_an_endpoints_selection() {
    let (_vault, vault) = vault_http();
    let gw = gateway(&vault_config(&vault));
    let dev = format!("{}/mcp/dev", gw.base);

    // The fixture really serves the secret for every spelling (so the refusals below are the
    // gateway's doing): a caller without restrictions on the root reads it.
    for uri in SECRET_SPELLINGS {
        assert_eq!(text(&read(&gw.url, "all-key", uri).await), SECRET, "{uri}: {}", gw.proc.log());
    }

    // bob: allow upstream:vault, deny vault+mem://secret/*.
    for uri in SECRET_SPELLINGS.iter().chain(&["vault+mem://secret/%zz", "vault+mem://secret%2Fkey"]) {
        refused(&read(&gw.url, "bob-key", uri).await, uri);
    }
    assert_eq!(text(&read(&gw.url, "bob-key", "vault+mem://public/readme").await), "public readme");
    assert_eq!(text(&read(&gw.url, "bob-key", "vault+mem://%70ublic/readme").await), "public readme", "an allowed URI in any spelling");
    assert_eq!(text(&read(&gw.url, "bob-key", "vault+mem://notes/today").await), "memo notes/today", "through the template");

    // The endpoint excludes vault+mem://secret/*: its template does not reach it either.
    let listed: Vec<String> = rpc_with(&dev, "resources/list", json!({}), &[("Authorization", &bearer("all-key"))]).await.json()["result"]
        ["resources"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["uri"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    assert_eq!(listed, ["vault+mem://public/readme"], "{}", gw.proc.log());
    for uri in SECRET_SPELLINGS {
        refused(&read(&dev, "all-key", uri).await, uri);
    }
    assert_eq!(text(&read(&dev, "all-key", "vault+mem://notes/today").await), "memo notes/today");

    // Completions: a reference to an excluded URI is not forwarded; the template's is.
    let complete = |uri: &'static str| {
        let params = json!({ "ref": { "type": "ref/resource", "uri": uri }, "argument": { "name": "item", "value": "k" } });
        let dev = dev.clone();
        async move { rpc_with(&dev, "completion/complete", params, &[("Authorization", &bearer("all-key"))]).await.message() }
    };
    for uri in ["vault+mem://secret/key", "vault+mem://%73ecret/key"] {
        let r = complete(uri).await;
        assert_eq!(r["error"]["code"], -32602, "{uri}: {r}");
    }
    let r = complete("vault+mem://{kind}/{item}").await;
    assert_eq!(r["result"]["completion"]["values"][0], "completed-item-for-mem://{kind}/{item}", "{r}");

    // Following: a listen honours only what the caller may read, whatever the spelling.
    let on_root = listen(
        &gw.url,
        "L",
        json!({ "resourceSubscriptions": ["vault+mem://%73ecret/key", "VAULT+mem://secret/key", "vault+mem://public/readme"] }),
        &[("Authorization", &bearer("bob-key"))],
    )
    .await;
    let ack = on_root
        .wait_until(|m| m["method"] == "notifications/subscriptions/acknowledged", Duration::from_secs(5))
        .await
        .unwrap_or_else(|| panic!("no acknowledgement: {}", gw.proc.log()));
    assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"], json!(["vault+mem://public/readme"]), "{ack}");

    // A legacy session: the same decision for reads and subscriptions.
    let auth = [("Authorization", "Bearer bob-key")];
    let session = legacy_session(&gw.url, &auth).await;
    for uri in SECRET_SPELLINGS {
        refused(&legacy_request(&gw.url, &session, "resources/read", json!({ "uri": uri }), &auth).await, uri);
        let sub = legacy_request(&gw.url, &session, "resources/subscribe", json!({ "uri": uri }), &auth).await;
        assert_eq!(sub["error"]["code"], -32602, "{uri}: {sub}");
    }
    let ok = legacy_request(&gw.url, &session, "resources/read", json!({ "uri": "vault+mem://public/readme" }), &auth).await;
    assert_eq!(text(&ok), "public readme", "{ok}");

    // The audit names the URI that was decided on.
    let log = gw.proc.log();
    assert!(log.contains("item=vault+mem://secret/key upstream=- outcome=unknown_or_denied"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn resource_scopes_hold_whatever_the_spelling() {
    let (_vault, vault) = vault_http();
    let iss = issuer("k1");
    let jwks_url = serve_jwks(iss.jwks.to_string()).await;
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"jwt\"\nissuer = \"https://issuer.test\"\nresource = \"https://gw.test/mcp\"\n\
         jwks_url = \"{jwks_url}\"\nscopes_supported = [\"mcp\", \"secrets\"]\n[auth.resource_scopes]\n\"vault+mem://secret/*\" = [\"secrets\"]\n\n\
         [[caller]]\nid = \"ops\"\nclaims = {{ groups = \"ops\" }}\nallow = [\"*\"]\n\n\
         [[upstream]]\nid = \"vault\"\nurl = \"{vault}\"\n"
    ));
    let plain = sign(&iss, "k1", claims("alice", "mcp"));
    let strong = sign(&iss, "k1", claims("carol", "mcp secrets"));
    for uri in SECRET_SPELLINGS {
        let r = rpc_with(&gw.url, "resources/read", json!({ "uri": uri }), &[("Authorization", &bearer(&plain))]).await;
        assert_eq!(r.status, 403, "{uri}: {}", String::from_utf8_lossy(&r.body));
        let challenge = r.headers.get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or("");
        assert!(challenge.contains("insufficient_scope") && challenge.contains("secrets"), "{uri}: {challenge}");
        assert!(!String::from_utf8_lossy(&r.body).contains(SECRET));
        assert_eq!(text(&read(&gw.url, &strong, uri).await), SECRET, "{uri}: with the scope it reads");
    }
    assert_eq!(text(&read(&gw.url, &plain, "vault+mem://%70ublic/readme").await), "public readme");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_uri_in_a_down_upstreams_namespace_never_reaches_an_unprefixed_one() {
    let (_evil, evil) = py_script_http("tests/py/vault_server.py", &["--role", "evil"]);
    // `vault` points at a port nothing listens on: it is configured, and down.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}/mcp", l.local_addr().expect("addr"))
    };
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"vault\"\nurl = \"{dead}\"\ntimeout = \"2s\"\n\n\
         [[upstream]]\nid = \"evil\"\nurl = \"{evil}\"\nprefix = \"\"\n"
    ));
    assert_eq!(text(&rpc(&gw.url, "resources/read", json!({ "uri": "evil://own/page" })).await.message()), "evil read evil://own/page");
    assert_eq!(
        text(&rpc(&gw.url, "resources/read", json!({ "uri": "other://x" })).await.message()),
        "evil read other://x",
        "URIs outside every prefix still go to the unprefixed upstream"
    );
    for uri in ["vault+mem://secret/key", "VAULT+mem://secret/key", "vault+mem://%73ecret/key"] {
        let r = rpc(&gw.url, "resources/read", json!({ "uri": uri })).await.message();
        assert!(!r.to_string().contains("evil read"), "{uri} reached the unprefixed upstream: {r}");
        assert!(r.get("error").is_some(), "{uri}: {r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unprefixed_upstream_cannot_announce_updates_of_another_upstreams_uris() {
    let (_vault, vault) = vault_http();
    let (_evil, evil) = py_script_http("tests/py/vault_server.py", &["--role", "evil"]);
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"vault\"\nurl = \"{vault}\"\n\n\
         [[upstream]]\nid = \"evil\"\nurl = \"{evil}\"\nprefix = \"\"\n"
    ));
    let inbox = listen(&gw.url, "L", json!({ "resourceSubscriptions": ["vault+mem://secret/key", "evil://own/page"] }), &[]).await;
    let ack = inbox
        .wait_until(|m| m["method"] == "notifications/subscriptions/acknowledged", Duration::from_secs(5))
        .await
        .unwrap_or_else(|| panic!("no acknowledgement: {}", gw.proc.log()));
    assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"].as_array().map(Vec::len), Some(2), "{ack}");
    let updated = |uri: &'static str| move |m: &Value| m["method"] == "notifications/resources/updated" && m["params"]["uri"] == uri;

    // Give the gateway a moment to follow both URIs upstream.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let spoof = call(&gw.url, "announce", json!({ "uri": "vault+mem://secret/key" })).await;
    assert_eq!(text_of(&spoof), "announced vault+mem://secret/key", "{spoof}");
    // The same upstream announcing its own URI is delivered: the relay works.
    let own = call(&gw.url, "announce", json!({ "uri": "evil://own/page" })).await;
    assert_eq!(text_of(&own), "announced evil://own/page", "{own}");
    assert!(inbox.wait_until(updated("evil://own/page"), Duration::from_secs(5)).await.is_some(), "{}", gw.proc.log());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(inbox.all().iter().all(|m| !updated("vault+mem://secret/key")(m)), "a spoofed update was delivered: {:#?}", inbox.all());
    assert!(gw.proc.log().contains("ignored a resource update for a URI another upstream owns"), "{}", gw.proc.log());
}
