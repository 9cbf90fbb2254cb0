//! Nothing spent is given back (docs/production.md, "What a crash can lose"): a quota's use is
//! in the state database before the call it pays for is forwarded, so `kill -9` in the middle of
//! a concurrent burst never lets a caller past its quota once the gateway is started again, on
//! the embedded SQLite and on PostgreSQL; and two replicas on one PostgreSQL, without `[cluster]`,
//! share one count.

use crate::harness::*;
use crate::state_db::{PG_ENV, Postgres};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const CALC: &str = "[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n";

fn config(state: &str, limit: u64) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n{state}\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[quota]]\ncallers = [\"alice\"]\ntools = \"calc__*\"\nlimit = \"{limit}/day\"\n\n{CALC}",
        crate::callers::hash("alice-key")
    )
}

/// Whether one call of alice's was answered (`Some(true)`), refused by the quota (`Some(false)`),
/// or lost with the gateway (`None`).
async fn add(url: &str) -> Option<bool> {
    let params = json!({ "name": "calc__add", "arguments": { "a": 1, "b": 2 }, "_meta": meta() });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params });
    let mut req = http::Request::post(url).header("authorization", "Bearer alice-key");
    for (k, v) in modern_headers("tools/call", &params) {
        req = req.header(k, v);
    }
    let resp = send(req.body(http_body_util::Full::new(bytes::Bytes::from(body.to_string()))).ok()?).await.ok()?;
    let text = String::from_utf8_lossy(&resp.body).into_owned();
    if text.contains(r#""text":"3""#) {
        Some(true)
    } else if text.contains("uota") {
        Some(false)
    } else {
        None
    }
}

/// Ten calls, then `kill -9` during an 8-way burst, then calls on a new process until the quota
/// refuses: how many were answered in all.
async fn answered_across_a_crash(config: &str, env: &[(&str, &str)]) -> u64 {
    let mut first = gateway_with_env(config, env);
    for _ in 0..10 {
        assert_eq!(add(&first.url).await, Some(true));
    }
    let answered = Arc::new(AtomicU64::new(10));
    let burst: Vec<_> = (0..8)
        .map(|_| {
            let (url, answered) = (first.url.clone(), answered.clone());
            tokio::spawn(async move {
                while let Some(ok) = add(&url).await {
                    if ok {
                        answered.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    // SIGKILL: no shutdown, no final flush.
    first.proc.kill();
    for b in burst {
        let _ = b.await;
    }
    let again = gateway_with_env(config, env);
    while add(&again.url).await == Some(true) {
        answered.fetch_add(1, Ordering::SeqCst);
    }
    answered.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_in_a_burst_gives_no_quota_back_on_sqlite_and_postgresql() {
    let folder = tempfile::tempdir().expect("tempdir");
    let sqlite = config(&format!("[state]\npath = {:?}\n", folder.path().join("state.db")), 30);
    let answered = answered_across_a_crash(&sqlite, &[]).await;
    assert!(answered <= 30, "SQLite: {answered} calls answered on a quota of 30 a day");
    assert!(
        answered >= 20,
        "SQLite: {answered} of the 30 calls the quota allows were answered across the crash, fewer than 20: at most the 8 calls in flight at the kill may be spent unanswered, so the quota was taken for calls that never ran, or the restarted gateway refused calls it should have answered (this does not depend on the machine's speed: the calls go on until the quota refuses)"
    );

    let pg = Postgres::start();
    let url = pg.url();
    let env = [(PG_ENV, url.as_str())];
    let on_pg = config(&format!("[state]\npostgres_env = \"{PG_ENV}\"\n"), 30);
    let answered = answered_across_a_crash(&on_pg, &env).await;
    assert!(answered <= 30, "PostgreSQL: {answered} calls answered on a quota of 30 a day");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_on_one_postgresql_share_a_quota_without_redis() {
    let pg = Postgres::start();
    let url = pg.url();
    let env = [(PG_ENV, url.as_str())];
    let on_pg = config(&format!("[state]\npostgres_env = \"{PG_ENV}\"\n"), 20);
    let (a, b) = (gateway_with_env(&on_pg, &env), gateway_with_env(&on_pg, &env));
    let mut answered = 0;
    for i in 0..40 {
        let replica = if i % 2 == 0 { &a } else { &b };
        if add(&replica.url).await == Some(true) {
            answered += 1;
        }
    }
    assert_eq!(answered, 20, "a quota of 20 a day, taken through two replicas");
}
