//! One order for every merged list (the conformance suite's `tools-list-deterministic-order`, and
//! what a cursor needs to hold across replicas): in front of a server that lists in a new random
//! order on every request, two gateways (replicas) answer `tools/list`, `prompts/list` and
//! `resources/list` in the same order, request after request, and after a reload.

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

fn sighup(gw: &Gateway) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_merged_list_keeps_one_order_across_requests_replicas_and_reloads() {
    let (_up, url) = py_script_http("tests/py/shuffled_server.py", &[]);
    let (_demo, demo) = demo_http("calc");
    // The shuffling upstream second in config order: config order first, then by name.
    let config = format!("[[upstream]]\nid = \"calc\"\nurl = \"{demo}\"\n\n[[upstream]]\nid = \"mix\"\nurl = \"{url}\"\n");
    let a = gateway(&config);
    let b = gateway(&config);
    let first = all_lists(&a.url).await;
    let tools = &first[0];
    assert_eq!(tools.iter().filter(|n| n.starts_with("mix__")).count(), 12, "{tools:?}");
    let mix: Vec<&String> = tools.iter().filter(|n| n.starts_with("mix__")).collect();
    let mut sorted = mix.clone();
    sorted.sort();
    assert_eq!(mix, sorted, "one upstream's tools in the order of their names");
    assert!(tools.iter().position(|n| n.starts_with("calc__")) < tools.iter().position(|n| n.starts_with("mix__")), "{tools:?}");
    for _ in 0..5 {
        assert_eq!(all_lists(&a.url).await, first, "request after request");
        assert_eq!(all_lists(&b.url).await, first, "replica after replica");
    }
    // A reload re-lists every upstream: the shuffled answers give the same merged order.
    let reloads = a.proc.log().matches("configuration reloaded").count();
    sighup(&a);
    let deadline = Instant::now() + Duration::from_secs(15);
    while a.proc.log().matches("configuration reloaded").count() == reloads {
        assert!(Instant::now() < deadline, "no reload in the log:\n{}", a.proc.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(all_lists(&a.url).await, first, "after a reload");
}
