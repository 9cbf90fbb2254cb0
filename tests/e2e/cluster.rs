//! Part 10: replicas sharing state through a real `redis-server`. Three gateway processes with one
//! token key and one Redis: a rate limit holds across them, a legacy session ended on one is
//! refused by the others, a cursor from one pages on another, and Redis stopped mid-test gives
//! each limit its configured fail-open or fail-closed behaviour, then recovery when it returns.
//! Key rotation: tokens sealed with an old key open while it is still listed, not after.

use crate::harness::*;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` on a loopback port, without persistence, killed on drop.
pub struct Redis {
    proc: Option<Proc>,
    port: u16,
}

fn redis_binary() -> String {
    let from_env = std::env::var("MCPGATE_REDIS_SERVER").ok().filter(|p| std::path::Path::new(p).exists());
    from_env.or_else(|| which("redis-server")).unwrap_or_else(|| {
        panic!("redis-server is missing: run scripts/install-test-deps.sh (scripts/test runs it; on Debian it installs the redis-server package)")
    })
}

fn which(name: &str) -> Option<String> {
    std::env::var("PATH").ok()?.split(':').map(|d| std::path::Path::new(d).join(name)).find(|p| p.exists()).map(|p| p.display().to_string())
}

impl Redis {
    pub fn start() -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let mut r = Redis { proc: None, port };
        r.restart();
        r
    }

    fn restart(&mut self) {
        let child = Command::new(redis_binary())
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.proc = Some(Proc { child, stderr: Default::default() });
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.ping() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not answer PING on port {}", self.port);
    }

    fn stop(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else { return false };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// `FLUSHALL`: everything Redis holds is gone (what a restart without persistence does).
    pub fn flushall(&self) {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect to redis");
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let mut buf = [0u8; 5];
        s.write_all(b"FLUSHALL\r\n").expect("FLUSHALL");
        s.read_exact(&mut buf).expect("the answer to FLUSHALL");
        assert_eq!(&buf, b"+OK\r\n");
    }
}

fn replica_config(redis: &Redis, sessions: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[catalog]\npage_size = 2\n\n\
         [cluster]\nredis = \"{}\"\ntimeout = \"200ms\"\nsessions_on_redis_error = \"{sessions}\"\n\n\
         [[rate_limit]]\ntools = \"calc__add\"\nlimit = \"5/s\"\n\n\
         [[rate_limit]]\ntools = \"calc__multiply\"\nlimit = \"1000/s\"\non_redis_error = \"closed\"\n\n\
         [[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n",
        redis.url()
    )
}

async fn call_status(url: &str, tool: &str) -> (u16, Value) {
    let r = rpc(url, "tools/call", json!({ "name": tool, "arguments": { "a": 2, "b": 3 } })).await;
    let status = r.status;
    (status, r.json())
}

async fn legacy_initialize(url: &str) -> String {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let r =
        post_raw(url, &[("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")], body.to_string()).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("Mcp-Session-Id").to_string()
}

async fn legacy_list(url: &str, session: &str) -> u16 {
    let body = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {} });
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-06-18"),
        ("Mcp-Session-Id", session),
    ];
    post_raw(url, &headers, body.to_string()).await.status
}

async fn delete_session(url: &str, session: &str) -> u16 {
    let req = http::Request::delete(url)
        .header("Mcp-Session-Id", session)
        .header("MCP-Protocol-Version", "2025-06-18")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    send(req).await.expect("DELETE").status
}

async fn open_get_stream(url: &str, session: &str) -> hyper::body::Incoming {
    let req = http::Request::get(url)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", session)
        .header("MCP-Protocol-Version", "2025-06-18")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let resp = mcpgate_net::http::new_http_client().request(req).await.expect("GET stream");
    assert_eq!(resp.status(), 200);
    resp.into_body()
}

async fn metric(base: &str, line_start: &str) -> Option<f64> {
    let text = String::from_utf8_lossy(&get(&format!("{base}/metrics")).await.ok()?.body).to_string();
    text.lines().find(|l| l.starts_with(line_start)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn replicas_share_limits_sessions_and_cursors_through_redis() {
    let mut redis = Redis::start();
    let key = "3c".repeat(32);
    let env = [("MCPGATE_TOKEN_KEY", key.as_str())];
    let open = replica_config(&redis, "open");
    let replicas =
        [gateway_with_env(&open, &env), gateway_with_env(&open, &env), gateway_with_env(&replica_config(&redis, "closed"), &env)];
    let urls: Vec<&str> = replicas.iter().map(|g| g.url.as_str()).collect();

    // A 5/s limit holds across the three: a burst spread over them gets 5 (plus what refills
    // while it runs), where three separate buckets would let 15 through.
    let started = Instant::now();
    let mut accepted = 0u32;
    for i in 0..30 {
        let (status, body) = call_status(urls[i % 3], "calc__add").await;
        match status {
            200 => {
                assert_eq!(text_of(&body), "5", "{body}");
                accepted += 1;
            }
            429 => assert_eq!(body["error"]["code"], 429, "{body}"),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    let refilled = (started.elapsed().as_secs_f64() * 5.0).ceil() as u32;
    assert!(accepted >= 5, "the burst allowance is honoured: {accepted}");
    assert!(accepted <= 5 + refilled, "{accepted} accepted in {:?}: the limit is not shared", started.elapsed());

    // A legacy session ended on one replica is refused on the others at once.
    let session = legacy_initialize(urls[0]).await;
    assert_eq!(legacy_list(urls[1], &session).await, 200, "the session opens on every replica");
    assert_eq!(delete_session(urls[0], &session).await, 200);
    assert_eq!(legacy_list(urls[1], &session).await, 404, "ended on replica 0, refused on replica 1");
    assert_eq!(legacy_list(urls[2], &session).await, 404, "and on replica 2");
    assert_eq!(legacy_list(urls[0], &session).await, 404);

    // A GET stream of a session open on one replica ends when another replica ends the session.
    let streamed = legacy_initialize(urls[0]).await;
    let mut body = open_get_stream(urls[2], &streamed).await;
    assert_eq!(delete_session(urls[0], &streamed).await, 200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(None) | Ok(Some(Err(_))) => break,
            Ok(Some(Ok(_))) => continue,
            Err(_) => panic!("the GET stream on replica 2 outlived its session by 3 s"),
        }
    }

    // A cursor from one replica pages on another.
    let first = rpc(urls[0], "tools/list", json!({})).await.json();
    let cursor = first["result"]["nextCursor"].as_str().unwrap_or_else(|| panic!("a second page: {first}")).to_string();
    let second = rpc(urls[1], "tools/list", json!({ "cursor": cursor })).await.json();
    let page = second["result"]["tools"].as_array().unwrap_or_else(|| panic!("{second}"));
    assert!(!page.is_empty());
    assert_ne!(page[0]["name"], first["result"]["tools"][0]["name"], "the second page, not the first again");

    // Redis stops: the fail-open limit falls back to each replica's own bucket, the fail-closed
    // one refuses; sessions fail open on replicas 0-1 and closed on replica 2.
    let live = legacy_initialize(urls[0]).await;
    redis.stop();
    let (status, body) = call_status(urls[0], "calc__add").await;
    assert_eq!(status, 200, "fail open: {body}");
    let (status, body) = call_status(urls[1], "calc__multiply").await;
    assert_eq!(status, 429, "fail closed: {body}");
    assert!(body["error"]["data"]["retryAfterMs"].as_u64().is_some(), "{body}");
    assert_eq!(legacy_list(urls[1], &live).await, 200, "sessions fail open on this replica");
    assert_eq!(legacy_list(urls[2], &live).await, 503, "and closed on this one");
    let base = &replicas[1].base;
    assert_eq!(metric(base, "mcpgate_cluster_redis_up").await, Some(0.0));
    assert!(metric(base, "mcpgate_cluster_fallbacks_total{mode=\"closed\"}").await.unwrap_or(0.0) >= 1.0);
    assert!(metric(&replicas[0].base, "mcpgate_cluster_fallbacks_total{mode=\"open\"}").await.unwrap_or(0.0) >= 1.0);
    let log = replicas[1].proc.log();
    assert!(log.contains("Redis does not answer"), "one clear line when Redis goes away:\n{log}");
    assert!(!log.contains(&format!(":{}@", redis.port)), "no credentials in the log");

    // Redis returns: the shared limits and sessions work again without a restart.
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, body) = call_status(urls[1], "calc__multiply").await;
        if status == 200 {
            assert_eq!(text_of(&body), "6");
            break;
        }
        assert!(Instant::now() < deadline, "no recovery after Redis returned: {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(legacy_list(urls[2], &live).await, 200, "sessions are confirmed again");
    assert_eq!(metric(base, "mcpgate_cluster_redis_up").await, Some(1.0));
    assert!(replicas[1].proc.log().contains("Redis answers"), "and one line when it returns");
}

#[tokio::test(flavor = "multi_thread")]
async fn rotated_keys_open_old_tokens_until_the_old_key_is_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (old, new) = (dir.path().join("old.key"), dir.path().join("new.key"));
    std::fs::write(&old, "a1".repeat(32)).expect("write");
    std::fs::write(&new, format!("# rotated in on 2026-12-01\n{}\n", "b2".repeat(32))).expect("write");
    let config = |files: &[&std::path::Path]| {
        let list: Vec<String> = files.iter().map(|p| format!("{:?}", p.display().to_string())).collect();
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\ntoken_key_file = [{}]\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n",
            list.join(", ")
        )
    };
    let before = gateway(&config(&[&old]));
    let during = gateway(&config(&[&new, &old]));
    let after = gateway(&config(&[&new]));
    let old_session = legacy_initialize(&before.url).await;
    assert_eq!(legacy_list(&during.url, &old_session).await, 200, "old tokens open while both keys are configured");
    assert_eq!(legacy_list(&after.url, &old_session).await, 404, "and not once the old key is removed");
    let new_session = legacy_initialize(&during.url).await;
    assert_eq!(legacy_list(&after.url, &new_session).await, 200, "new tokens are sealed with the first key");
    assert_eq!(legacy_list(&before.url, &new_session).await, 404);
}

/// A legacy client's own upstream session, opened by whichever replica served its call, is ended
/// upstream when the client ends its session on another replica (docs/protocol.md, "Which era
/// each upstream is spoken to in").
#[tokio::test(flavor = "multi_thread")]
async fn a_session_ended_on_one_replica_ends_its_upstream_sessions_on_the_others() {
    use crate::affinity::{field, open_session, whoami, whoami_direct};
    let redis = Redis::start();
    let key = "5d".repeat(32);
    let env = [("MCPGATE_TOKEN_KEY", key.as_str())];
    let (_fixture, upstream) = py_script_http("tests/py/sdk_conformance_fixture.py", &[]);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[cluster]\nredis = \"{}\"\n\n[[upstream]]\nid = \"app\"\nurl = \"{upstream}\"\n",
        redis.url()
    );
    let (a, b) = (gateway_with_env(&config, &env), gateway_with_env(&config, &env));
    let session = open_session(&a.url, "client-a").await;
    let who = whoami(&b.url, &session).await;
    let upstream_session = field(&who, "session").to_string();
    assert_eq!(whoami_direct(&upstream, &upstream_session).await, 200, "replica b opened the client's upstream session: {who}");
    let end = http::Request::delete(&a.url)
        .header("Mcp-Session-Id", &session)
        .header("MCP-Protocol-Version", "2025-11-25")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    assert_eq!(send(end).await.expect("DELETE").status, 200);
    let mut ended = false;
    for _ in 0..50 {
        if whoami_direct(&upstream, &upstream_session).await == 404 {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ended, "the client ended its session on replica a; replica b ends the upstream session it kept for it");
}
