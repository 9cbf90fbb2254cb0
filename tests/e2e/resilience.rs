//! Isolation: a dead or slow upstream fails its own calls with an error that names it, within its
//! timeout, while the other upstream keeps working; a dead one then leaves the lists.

use crate::harness::*;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_upstream_fails_clearly_and_the_other_keeps_working() {
    let (mut alpha, _url, gw) = crate::two_upstreams("3s");
    assert_eq!(text_of(&call(&gw.url, "alpha__whoami", json!({})).await), "alpha");
    alpha.kill();
    let started = Instant::now();
    let r = call(&gw.url, "alpha__whoami", json!({})).await;
    assert!(started.elapsed() < Duration::from_secs(4), "failed within the upstream timeout: {:?}", started.elapsed());
    let message = r["error"]["message"].as_str().unwrap_or_else(|| panic!("expected an error: {r}"));
    assert!(message.contains("'alpha'"), "the error names the upstream: {message}");
    assert_eq!(r["error"]["data"]["upstream"], "alpha");
    assert_eq!(text_of(&call(&gw.url, "beta__whoami", json!({})).await), "beta");
    // The gateway notices (its listen stream to alpha dropped) and takes alpha's tools off the
    // list; beta's stay.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let names = tool_names(&gw.url).await;
        assert!(names.contains(&"beta__whoami".to_string()), "{names:?}");
        if !names.contains(&"alpha__whoami".to_string()) {
            break;
        }
        assert!(Instant::now() < deadline, "alpha's tools stay listed: {names:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_call_times_out_with_an_error_naming_the_upstream() {
    let (_alpha, _url, gw) = crate::two_upstreams("2s");
    for tool in ["alpha__slow", "beta__slow"] {
        let started = Instant::now();
        let r = call(&gw.url, tool, json!({ "seconds": 30 })).await;
        let took = started.elapsed();
        assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(5), "{tool}: {took:?}");
        let message = r["error"]["message"].as_str().unwrap_or_else(|| panic!("{tool}: expected an error: {r}"));
        assert!(message.contains("did not answer within 2s"), "{tool}: {message}");
    }
    // Both upstreams still answer afterwards (the stdio one was told to cancel).
    assert_eq!(text_of(&call(&gw.url, "alpha__whoami", json!({})).await), "alpha");
    assert_eq!(text_of(&call(&gw.url, "beta__whoami", json!({})).await), "beta");
    // Concurrent calls on the shared stdio process are multiplexed.
    let calls = (0..8).map(|i| {
        let url = gw.url.clone();
        tokio::spawn(async move { text_of(&call(&url, "beta__echo", json!({ "text": format!("n{i}") })).await) })
    });
    for (i, h) in calls.enumerate() {
        assert_eq!(h.await.expect("join"), format!("n{i}"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_the_client_abandons_is_audited_as_abandoned() {
    let (_alpha, _url, gw) = crate::two_upstreams("20s");
    let abandoned = tokio::time::timeout(Duration::from_millis(700), call(&gw.url, "alpha__slow", json!({ "seconds": 5 }))).await;
    assert!(abandoned.is_err(), "the client gave up first");
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let log = gw.proc.log();
        if log.lines().any(|l| l.contains("mcpgate::audit") && l.contains("item=alpha__slow") && l.contains("outcome=abandoned")) {
            break;
        }
        assert!(Instant::now() < deadline, "no abandoned audit line:\n{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn readyz_reflects_the_upstreams() {
    let (mut alpha, url) = py_http("alpha", &[]);
    let config = |rule: &str| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nready_when = \"{rule}\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\ntimeout = \"2s\"\n\n[[upstream]]\nid = \"gone\"\nurl = \"http://127.0.0.1:9/mcp\"\ntimeout = \"1s\"\n"
        )
    };
    let readyz = |gw: &Gateway| raw_get_status(gw.base.trim_start_matches("http://"), "/readyz");
    let any = gateway(&config("any"));
    assert_eq!(readyz(&any), Some(200), "one upstream is up");
    let all = gateway_listening(&config("all"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !all.proc.log().contains("catalogue ready") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(readyz(&all), Some(503), "not every upstream is up");
    // When the last upstream goes, `any` is not ready either; SIGHUP does not kill it.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(any.proc.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    alpha.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    while readyz(&any) != Some(503) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(readyz(&any), Some(503), "{}", any.proc.log());
    assert!(any.proc.log().contains("SIGHUP"), "the gateway lives on after SIGHUP");
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_that_keep_failing_take_a_dead_upstream_out_of_the_lists() {
    // Re-listing is rare here and alpha announces nothing: only failing calls can reveal it.
    let (mut alpha, url) = py_http("alpha", &[]);
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[catalog]\nttl_min = \"5m\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{url}\"\ntimeout = \"2s\"\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n"
    ));
    alpha.kill();
    for _ in 0..3 {
        let r = call(&gw.url, "alpha__whoami", json!({})).await;
        assert!(r["error"]["message"].as_str().unwrap_or("").contains("'alpha'"), "{r}");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while tool_names(&gw.url).await.contains(&"alpha__whoami".to_string()) {
        assert!(Instant::now() < deadline, "the dead upstream stays listed\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gw.proc.log().contains("calls keep failing"), "{}", gw.proc.log());
}
