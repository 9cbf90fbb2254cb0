//! Each caller's own API key (`[upstream.user_auth] kind = "api_key"`), against a server that
//! takes personal keys in `X-Api-Key` (tests/py/api_key_server.py, on the Python SDK's
//! `MCPServer`). Two API-key callers of the gateway each ask for the consent link, prove on the
//! page that they are that caller, and type their own key for the upstream; each one's calls then
//! reach the upstream with that caller's key and no other credential. A consent link keeps one
//! key only (a replayed form is refused), the key is sealed in the vault and never listed, and
//! revoking one caller's key leaves the other's.

use crate::browser::{body, field, heading, signed_in_at_link};
use crate::harness::*;
use crate::identity::listening;
use crate::identity_cluster::{call_as, get_with};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

const KEYS: [(&str, &str, &str); 2] = [("alice", "alice-key", "crm-key-alice-8d2f"), ("bob", "bob-key", "crm-key-bob-41c7")];

/// The caller `who` (gateway key `key`) enters `own` as its key for `crm`, as a person would.
pub(crate) async fn enter_key(gw: &Gateway, gateway: &str, who: &str, key: &str, own: &str) {
    let (mut b, page) = signed_in_at_link(&gw.url, gateway, who, key, "crm__connect").await;

    // The key page: a password field, the configured help line, no authorization server.
    let html = body(&page);
    assert_eq!((page.status, heading(&page).as_str()), (200, "Connect crm"), "{html}");
    assert!(html.contains("type=\"password\" id=\"api_key\" name=\"api_key\""), "{html}");
    assert!(html.contains("Create a key under Settings"), "the configured help line: {html}");
    let form = [("grant", field(&html, "grant")), ("csrf", field(&html, "csrf")), ("api_key", own.to_string())];
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let done = b.post(&format!("{gateway}/oauth/connect"), &fields, gateway).await;
    assert_eq!((done.status, heading(&done).as_str()), (200, "Connected crm"), "{}\n{}", body(&done), gw.proc.log());
    assert!(!body(&done).contains(own), "the key is not shown back");

    // The same form again (a replay, or a second key on one link): refused, nothing replaced.
    let again = b.post(&format!("{gateway}/oauth/connect"), &fields, gateway).await;
    assert_eq!(again.status, 400, "a consent link keeps one key: {}", body(&again));
}

/// What the upstream's `whoami` says of `key`'s call (retried while the caller's own connection
/// opens).
async fn whoami(gw: &Gateway, who: &str, key: &str) -> Value {
    let mut reply = Value::Null;
    for _ in 0..50 {
        reply = call_as(&gw.url, key, "crm__whoami").await;
        if reply["result"]["isError"] != true && reply["result"]["content"][0]["text"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = reply["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{who}'s whoami: {reply}\n{}", gw.proc.log()));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{who}'s whoami is not JSON ({e}): {text}"))
}

fn sha256(text: &str) -> String {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes()).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_callers_each_enter_their_own_api_key_and_revoking_one_leaves_the_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("requests.jsonl");
    let pairs = KEYS.iter().map(|(who, _, own)| format!("{who}={own}")).collect::<Vec<_>>().join(",");
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/api_key_server.py")).args(["--port", "0", "--keys", &pairs]).arg("--log").arg(&log);
    let (server, base) = listening(cmd, "the API-key server");
    let gw_port = free_port();
    let gateway = format!("http://127.0.0.1:{gw_port}");
    let vault = dir.path().join("vault.json");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [identity]\npublic_url = \"{gateway}\"\nvault = {vault:?}\nallow_loopback = true\n\n\
         [[upstream]]\nid = \"crm\"\nurl = \"{base}/mcp\"\ntimeout = \"20s\"\n\
         [upstream.user_auth]\nkind = \"api_key\"\nheader = \"X-Api-Key\"\nhelp = \"Create a key under Settings → API keys.\"\n",
        crate::callers::hash("alice-key"),
        crate::callers::hash("bob-key"),
    );
    let gw = gateway_on_port(&config, gw_port, &[("MCPGATE_TOKEN_KEY", &"5e".repeat(32))]);

    for (who, key, own) in KEYS {
        enter_key(&gw, &gateway, who, key, own).await;
    }
    for (who, key, own) in KEYS {
        let seen = whoami(&gw, who, key).await;
        assert_eq!(
            (seen["owner"].as_str(), seen["key_sha256"].as_str()),
            (Some(who), Some(sha256(own).as_str())),
            "{who}'s calls carry {who}'s own key: {seen}"
        );
    }
    // The upstream saw only these two keys, never an Authorization header of the gateway's.
    let requests: Vec<Value> =
        std::fs::read_to_string(&log).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(!requests.is_empty());
    let own_digests: Vec<String> = KEYS.iter().map(|(_, _, own)| sha256(own)).collect();
    for r in &requests {
        let d = r["key_sha256"].as_str().unwrap_or_default().to_string();
        assert!(own_digests.contains(&d), "every request carried one of the callers' keys: {r}");
        assert_eq!(r["authorization"], false, "{r}");
    }
    // Sealed at rest, and never listed.
    let db = gw.config_path.with_file_name("mcpgate-state.db");
    let at_rest = String::from_utf8_lossy(
        &[std::fs::read(&db).expect("the state database"), std::fs::read(db.with_extension("db-wal")).unwrap_or_default()].concat(),
    )
    .to_string();
    assert!(at_rest.contains("crm"), "the vault's rows are in the state database");
    let listed = get_with(&format!("{gateway}/oauth/tokens"), &[("Authorization", "Bearer alice-key")]).await;
    assert_eq!(listed.status, 200, "{}", body(&listed));
    let listing = body(&listed);
    assert!(listing.contains("\"crm\""), "alice's connection is listed: {listing}");
    for (_, _, own) in KEYS {
        assert!(!at_rest.contains(own) && !listing.contains(own) && !gw.proc.log().contains(own), "a key never appears");
    }

    // Alice revokes hers: she is asked again, Bob's key still works.
    let revoked = post_raw(
        &format!("{gateway}/oauth/tokens/revoke"),
        &[("Authorization", "Bearer alice-key"), ("Content-Type", "application/json")],
        "{\"upstream\":\"crm\"}".to_string(),
    )
    .await;
    assert_eq!((revoked.status, body(&revoked).as_str()), (200, "{\"revoked\":1}"), "{}", body(&revoked));
    let mut asked = Value::Null;
    for _ in 0..50 {
        asked = call_as(&gw.url, "alice-key", "crm__connect").await;
        if text_of(&asked).contains("/oauth/connect?grant=") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(text_of(&asked).contains("/oauth/connect?grant="), "alice is asked for a key again: {asked}");
    let still = whoami(&gw, "bob", "bob-key").await;
    assert_eq!(still["owner"].as_str(), Some("bob"), "bob's key is untouched: {still}");
    drop(server);
}
