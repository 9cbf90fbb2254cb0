//! One order for every merged list across requests and re-lists (the conformance suite's
//! `tools-list-deterministic-order`): in front of a server that lists in a new random order on
//! every request, the gateway keeps the order its catalogue had whenever a re-list brings the
//! same items, so `tools/list`, `prompts/list` and `resources/list` answer the same order request
//! after request, while the gateway re-lists the server on its schedule.

use crate::harness::*;
use serde_json::json;
use std::time::{Duration, Instant};

async fn names(url: &str, method: &str, member: &str, key: &str) -> Vec<String> {
    let r = rpc(url, method, json!({})).await.json();
    r["result"][member]
        .as_array()
        .unwrap_or_else(|| panic!("{method}: {r}"))
        .iter()
        .map(|i| i[key].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn all_lists(url: &str) -> Vec<Vec<String>> {
    vec![
        names(url, "tools/list", "tools", "name").await,
        names(url, "prompts/list", "prompts", "name").await,
        names(url, "resources/list", "resources", "uri").await,
    ]
}

async fn listed(url: &str) -> u64 {
    text_of(&call(url, "mix__lists", json!({})).await).parse().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_merged_list_keeps_its_order_across_requests_and_re_lists() {
    let (_up, url) = py_script_http("tests/py/shuffled_server.py", &[]);
    let gw = gateway(&format!("[catalog]\nttl_min = \"1s\"\n\n[[upstream]]\nid = \"mix\"\nurl = \"{url}\"\n"));
    let first = all_lists(&gw.url).await;
    assert_eq!(first[0].len(), 13, "{first:?}");
    let before = listed(&gw.url).await;
    let started = Instant::now();
    while listed(&gw.url).await < before + 3 {
        assert_eq!(all_lists(&gw.url).await, first, "the same order while the server is re-listed in new orders");
        assert!(started.elapsed() < Duration::from_secs(20), "re-listed on the catalogue's schedule\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(all_lists(&gw.url).await, first, "after three re-lists");
}
