//! Part 11: tool search. 500 tools across 5 real (Python SDK) upstreams; in tool-search mode a
//! caller lists two meta-tools, finds a tool by its purpose in the top 3, and calls it through
//! `call_tool`; a caller never finds or calls a tool its policy hides; a caller with search off
//! sees the whole list.

use crate::harness::*;
use serde_json::{Value, json};

const DOMAINS: [&str; 5] = ["code", "calendar", "files", "payments", "crm"];

async fn as_caller(url: &str, key: &str, method: &str, params: Value) -> Value {
    rpc_with(url, method, params, &[("Authorization", &format!("Bearer {key}"))]).await.json()
}

async fn search(url: &str, key: &str, query: &str) -> Vec<String> {
    let r = as_caller(url, key, "tools/call", json!({ "name": "search_tools", "arguments": { "query": query, "limit": 5 } })).await;
    names_in(&r["result"]["structuredContent"]["tools"])
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_find_tools_by_purpose_within_their_policy() {
    let servers: Vec<(Proc, String)> = DOMAINS.iter().map(|d| py_script_http("tests/py/domain_server.py", &["--domain", d])).collect();
    let mut config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[catalog]\ntool_search = true\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"agent\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"limited\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\ndeny = [\"upstream:payments\", \"crm__score_*\"]\n\n\
         [[caller]]\nid = \"classic\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\ntool_search = false\n",
        mcpgate::auth::hash_key("agent-key"),
        mcpgate::auth::hash_key("limited-key"),
        mcpgate::auth::hash_key("classic-key")
    );
    for (d, (_, url)) in DOMAINS.iter().zip(&servers) {
        config.push_str(&format!("\n[[upstream]]\nid = \"{d}\"\nurl = \"{url}\"\n"));
    }
    let gw = gateway(&config);

    let listed = as_caller(&gw.url, "agent-key", "tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["search_tools", "call_tool"], "{listed}");
    assert_eq!(listed["result"]["cacheScope"], "private");
    let classic = as_caller(&gw.url, "classic-key", "tools/list", json!({})).await;
    assert_eq!(classic["result"]["tools"].as_array().map(Vec::len), Some(500), "search off for this caller: the whole list");

    for (query, wanted) in [
        ("give a customer their money back", "payments__refund_charge"),
        ("when is everyone free for a meeting", "calendar__find_free_time"),
        ("merge an approved pull request", "code__merge_pull_request"),
        ("turn a spreadsheet into a pdf", "files__convert_to_pdf"),
        ("how likely is a lead to buy", "crm__score_lead"),
    ] {
        let found = search(&gw.url, "agent-key", query).await;
        assert!(found.iter().take(3).any(|n| n == wanted), "'{query}': {wanted} not in the top 3 of {found:?}");
    }
    let found =
        as_caller(&gw.url, "agent-key", "tools/call", json!({ "name": "search_tools", "arguments": { "query": "refund a card charge" } }))
            .await;
    assert!(found["result"]["content"][0]["text"].as_str().unwrap_or("").contains("payments__refund_charge"), "{found}");
    assert!(found["result"]["structuredContent"]["tools"][0]["inputSchema"]["properties"]["id"].is_object(), "{found}");

    let called = as_caller(
        &gw.url,
        "agent-key",
        "tools/call",
        json!({ "name": "call_tool", "arguments": { "name": "payments__refund_charge", "arguments": { "id": "ch_1" } } }),
    )
    .await;
    assert_eq!(called["result"]["content"][0]["text"], "refund_charge done", "{called}");
    let direct = as_caller(&gw.url, "agent-key", "tools/call", json!({ "name": "crm__score_lead", "arguments": {} })).await;
    assert_eq!(direct["result"]["content"][0]["text"], "score_lead done", "tools may still be called by name: {direct}");

    // A caller never finds or calls what its policy hides.
    for query in ["give a customer their money back", "refund charge payment invoice", "how likely is a lead to buy"] {
        let found = search(&gw.url, "limited-key", query).await;
        assert!(found.iter().all(|n| !n.starts_with("payments__") && n != "crm__score_lead"), "'{query}': {found:?}");
    }
    let hidden = as_caller(
        &gw.url,
        "limited-key",
        "tools/call",
        json!({ "name": "call_tool", "arguments": { "name": "payments__refund_charge", "arguments": {} } }),
    )
    .await;
    let missing = as_caller(
        &gw.url,
        "limited-key",
        "tools/call",
        json!({ "name": "call_tool", "arguments": { "name": "payments__no_such_tool", "arguments": {} } }),
    )
    .await;
    assert_eq!(hidden["error"]["code"], missing["error"]["code"], "a hidden tool answers like a missing one: {hidden} {missing}");
    assert_eq!(hidden["error"]["message"], "Unknown tool: payments__refund_charge");
    let empty = as_caller(&gw.url, "agent-key", "tools/call", json!({ "name": "search_tools", "arguments": { "query": " " } })).await;
    assert_eq!(empty["result"]["isError"], true, "{empty}");
}

/// `search_tools` bounds what one query may cost: a query over 1,024 bytes or 32 distinct words
/// is refused with a tool error that names the limit (repeated words count once), and searches
/// running at once do not hold up the gateway's other requests.
#[tokio::test(flavor = "multi_thread")]
async fn oversized_queries_are_refused_and_searches_do_not_hold_up_the_gateway() {
    let (_payments, url) = py_script_http("tests/py/domain_server.py", &["--domain", "payments"]);
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[catalog]\ntool_search = true\n\n[[upstream]]\nid = \"payments\"\nurl = \"{url}\"\n"
    ));
    let search = |query: String| {
        let url = gw.url.clone();
        async move { call(&url, "search_tools", json!({ "query": query, "limit": 5 })).await }
    };

    let long = search("refund a card charge ".repeat(60)).await;
    assert_eq!(long["result"]["isError"], true, "{long}");
    let text = text_of(&long);
    assert!(text.contains("1260 bytes") && text.contains("at most 1024 bytes"), "{text}");

    let wordy: Vec<String> = (0..40).map(|i| format!("thing{i}")).collect();
    let wordy = search(wordy.join(" ")).await;
    assert_eq!(wordy["result"]["isError"], true, "{wordy}");
    let text = text_of(&wordy);
    assert!(text.contains("40 different words") && text.contains("at most 32"), "{text}");

    // Repeated words count once; a query at both limits is answered.
    let repeated = search("refund charge ".repeat(70)).await;
    assert_eq!(
        names_in(&repeated["result"]["structuredContent"]["tools"]).first().map(String::as_str),
        Some("payments__refund_charge"),
        "{repeated}"
    );
    let mut words: Vec<String> = (0..30).map(|i| format!("invoice{i:0>20}")).collect();
    words.extend(["refund".into(), "charge".into()]);
    let full = words.join(" ");
    assert!(full.len() <= 1024, "{}", full.len());
    let at_limits = search(full.clone()).await;
    assert_ne!(at_limits["result"]["isError"], true, "{at_limits}");
    assert!(names_in(&at_limits["result"]["structuredContent"]["tools"]).contains(&"payments__refund_charge".to_string()), "{at_limits}");

    // Many searches at once, while health checks keep being answered.
    let searches: Vec<_> = (0..16)
        .map(|_| {
            let (url, query) = (gw.url.clone(), full.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                for _ in 0..5 {
                    answers.push(call(&url, "search_tools", json!({ "query": query, "limit": 5 })).await);
                }
                answers
            })
        })
        .collect();
    for _ in 0..20 {
        let health = get(&format!("{}/healthz", gw.base)).await.expect("healthz answers while searches run");
        assert_eq!(health.status, 200);
    }
    for task in searches {
        for answer in task.await.expect("search task") {
            assert_ne!(answer["result"]["isError"], true, "{answer}");
        }
    }
}
