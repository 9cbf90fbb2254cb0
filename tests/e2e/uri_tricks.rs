//! Finding 12 of the second security review (suspected, confirmed): a caller whose policy denies
//! `vault+mem://secret/*` could read through the `mem://{kind}/{item}` template with `;` path
//! parameters (`secret;x=1`, `..;`) or whitespace around a segment (`secret%20`). The Python SDK
//! reads these as other items, but servers that strip `;` parameters (servlet containers, some
//! routers) or trim variables read the denied one. The upstream is tests/py/vault_server.py.

use crate::harness::*;
use crate::security::vault_http;
use serde_json::{Value, json};

/// Spellings that a server stripping path parameters or trimming whitespace reads as
/// `mem://secret/key` (or as a step up, for `..;`).
const TRICKS: [&str; 9] = [
    "vault+mem://secret;x=1/key",
    "vault+mem://secret;/key",
    "vault+mem://..;/key",
    "vault+mem://secret%3Bx=1/key",
    "vault+mem://secret%20/key",
    "vault+mem://%20secret/key",
    "vault+mem://secret%09/key",
    "vault+mem://secret /key",
    "vault+mem://secret%C2%A0/key",
];

async fn read(url: &str, key: &str, uri: &str) -> Value {
    rpc_with(url, "resources/read", json!({ "uri": uri }), &[("Authorization", &format!("Bearer {key}"))]).await.message()
}

#[tokio::test(flavor = "multi_thread")]
async fn path_parameters_and_whitespace_do_not_stretch_a_template_past_deny() {
    let (_vault, vault) = vault_http();
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"upstream:vault\"]\ndeny = [\"vault+mem://secret/*\"]\n\n\
         [[upstream]]\nid = \"vault\"\nurl = \"{vault}\"\n",
        crate::callers::hash("bob-key"),
    ));
    // The upstream really serves these URIs (to a gateway without callers, whose anonymous caller
    // may use everything), so a refusal below is the gateway's.
    let open = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"vault\"\nurl = \"{vault}\"\n"));
    let r = read(&open.url, "none", "vault+mem://secret;x=1/key").await;
    assert_eq!(r["result"]["contents"][0]["text"], "memo secret;x=1/key", "{r}");
    for uri in TRICKS {
        let r = read(&gw.url, "bob-key", uri).await;
        assert_eq!(r["error"]["code"], -32602, "{uri} reached the upstream: {r}");
        assert!(r["error"]["message"].as_str().unwrap_or_default().starts_with("Resource not found"), "{uri}: {r}");
    }
    // Plain expansions of the template still work for bob.
    let r = read(&gw.url, "bob-key", "vault+mem://notes/today").await;
    assert_eq!(r["result"]["contents"][0]["text"], "memo notes/today", "{r}");
}
