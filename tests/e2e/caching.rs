//! The catalogue's caching (Part 7): lists are re-read on the schedule the upstream's `ttlMs`
//! sets and never per client request; the `ttlMs` served is what remains of it; a list that
//! cannot be re-read is served stale (counted in `/metrics`) with `ttlMs: 0`; and whatever a
//! caller under a policy is given is `cacheScope: "private"`, reads included (what one caller may
//! see, another may not: a shared cache must not hand one's answer to the other).

use crate::callers::hash;
use crate::harness::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn as_key(url: &str, key: &str, method: &str, params: Value) -> Value {
    rpc_with(url, method, params, &[("Authorization", &format!("Bearer {key}"))]).await.json()
}

async fn rpc_json(url: &str, method: &str, params: Value) -> Value {
    rpc(url, method, params).await.json()
}

async fn lists_served(url: &str) -> u64 {
    let r = call(url, "cache__lists", json!({})).await;
    text_of(&r).parse().unwrap_or_else(|_| panic!("a count: {r}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn lists_follow_the_upstream_ttl_and_never_promise_more_than_is_left() {
    let (_up, url) = py_script_http("tests/py/caching_server.py", &["--ttl-ms", "4000"]);
    let upstream = format!("[[upstream]]\nid = \"cache\"\nurl = \"{url}\"\n");
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[catalog]\nttl_min = \"1s\"\n\n{upstream}"));
    let before = lists_served(&gw.url).await;
    let first = rpc_json(&gw.url, "tools/list", json!({})).await;
    let t1 = first["result"]["ttlMs"].as_u64().unwrap_or_else(|| panic!("{first}"));
    assert!(t1 > 0 && t1 <= 4000, "{first}");
    assert_eq!(first["result"]["cacheScope"], "public", "{first}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..5 {
        rpc_json(&gw.url, "tools/list", json!({})).await;
    }
    let second = rpc_json(&gw.url, "tools/list", json!({})).await;
    let t2 = second["result"]["ttlMs"].as_u64().unwrap_or_else(|| panic!("{second}"));
    assert!(t2 + 400 <= t1, "the served ttlMs shrinks with the list's age: {t1} then {t2}");
    assert_eq!(lists_served(&gw.url).await, before, "within the TTL no client list reaches the upstream");

    // After the TTL the gateway re-reads the list, once.
    let started = Instant::now();
    while lists_served(&gw.url).await == before {
        assert!(started.elapsed() < Duration::from_secs(10), "re-listed after the TTL\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Without a policy, a read the upstream calls public stays public.
    let read = rpc_json(&gw.url, "resources/read", json!({ "uri": "cache+mem://note" })).await;
    assert_eq!(read["result"]["cacheScope"], "public", "{read}");

    // A caller under a policy is never told that what it got may be shared.
    let with_policy = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"reader\"\nkey_sha256 = \"{}\"\nallow = [\"cache__lists\", \"cache+mem://note\"]\n\n{upstream}",
        hash("reader-key")
    ));
    let narrowed = as_key(&with_policy.url, "reader-key", "tools/list", json!({})).await;
    assert_eq!(narrowed["result"]["cacheScope"], "private", "{narrowed}");
    let read = as_key(&with_policy.url, "reader-key", "resources/read", json!({ "uri": "cache+mem://note" })).await;
    assert_eq!(read["result"]["contents"][0]["text"], "a public note", "{read}");
    assert_eq!(read["result"]["cacheScope"], "private", "the upstream said public, but the caller's view is narrowed: {read}");
    drop(with_policy);

    // A list that cannot be re-read is served from the last answer, promising no freshness.
    rpc_json(&gw.url, "tools/call", json!({ "name": "cache__break_lists", "arguments": {} })).await;
    let started = Instant::now();
    loop {
        let metrics = get(&format!("{}/metrics", gw.base)).await.expect("metrics");
        if String::from_utf8_lossy(&metrics.body).contains("mcpgate_stale_lists_total{upstream=\"cache\"}") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(12), "a stale list is counted\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let stale = rpc_json(&gw.url, "tools/list", json!({})).await;
    let names: Vec<&str> =
        stale["result"]["tools"].as_array().map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect()).unwrap_or_default();
    assert_eq!(names, ["cache__lists", "cache__break_lists"], "{stale}");
    assert_eq!(stale["result"]["ttlMs"], 0, "{stale}");
    assert!(gw.proc.log().contains("serving the previous one"), "logged\n{}", gw.proc.log());
}
