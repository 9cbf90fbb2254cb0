//! What a sandboxed stdio upstream cannot reach (`[upstream.sandbox]`, `upstream::sandbox`): a
//! hostile server (tests/py/hostile_server.py, on the Python SDK) tries what a compromised package
//! would — read the gateway's vault and a file outside its paths, write outside its folder,
//! connect to a loopback port it was not given, fork without bound, allocate past its limit — and
//! each attempt fails and says so in its result, while what it was given works, and the gateway
//! keeps serving. The same server without the table reaches all of it (the attempts are real).

use crate::harness::*;
use serde_json::{Value, json};

fn config(outside: &std::path::Path, allowed_port: u16, sandboxed: bool) -> String {
    let sandbox = if sandboxed {
        format!("[upstream.sandbox]\nmemory = \"1GiB\"\nprocesses = 48\nnetwork = [{allowed_port}]\n")
    } else {
        String::new()
    };
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"hostile\"\ncommand = [{:?}, {:?}]\ntimeout = \"30s\"\n{sandbox}\n\
         [[upstream]]\nid = \"calm\"\ncommand = {}\ntimeout = \"30s\"\n# {}\n",
        python(),
        repo().join("tests/py/hostile_server.py").display().to_string(),
        py_stdio_command("calm"),
        outside.display(),
    )
}

async fn attempt(gw: &Gateway, tool: &str, args: Value) -> Value {
    let reply = call(&gw.url, &format!("hostile__{tool}"), args).await;
    let text = text_of(&reply);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{tool}: not JSON ({e}): {text}\n{}", gw.proc.log()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_stdio_server_reaches_nothing_it_was_not_given() {
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("secret.txt"), "not for the server").expect("write");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let allowed = listener.local_addr().expect("addr").port();
    let forbidden = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let forbidden_port = forbidden.local_addr().expect("addr").port();

    for sandboxed in [false, true] {
        let gw = gateway(&config(outside.path(), allowed, sandboxed));
        // The gateway's own folder: its config and a vault beside it.
        let folder = gw.config_path.parent().expect("config folder").to_path_buf();
        std::fs::write(folder.join("mcpgate-vault.json"), "{\"sealed\":\"vault\"}").expect("vault");
        let vault = attempt(&gw, "read_file", json!({ "path": folder.join("mcpgate-vault.json") })).await;
        let secret = attempt(&gw, "read_file", json!({ "path": outside.path().join("secret.txt") })).await;
        let write = attempt(&gw, "write_file", json!({ "path": outside.path().join("dropped.txt"), "text": "x" })).await;
        let near = attempt(&gw, "connect", json!({ "port": forbidden_port })).await;
        let given = attempt(&gw, "connect", json!({ "port": allowed })).await;
        let forks = attempt(&gw, "fork_many", json!({ "count": 120 })).await;
        let memory = attempt(&gw, "allocate", json!({ "megabytes": 2048 })).await;
        let home = attempt(&gw, "whereami", json!({})).await;
        let own = std::path::Path::new(home["home"].as_str().unwrap_or_default()).join("notes.txt");
        let own_write = attempt(&gw, "write_file", json!({ "path": own, "text": "mine" })).await;
        let results = [&vault, &secret, &write, &near, &forks, &memory];
        if !sandboxed {
            // Without a sandbox every attempt works: the tools really try.
            for r in results {
                assert_eq!(r["ok"], true, "unsandboxed, the attempt works: {r}");
            }
            std::fs::remove_file(outside.path().join("dropped.txt")).expect("it wrote outside");
            continue;
        }
        for (what, r) in [("the vault", &vault), ("a file outside", &secret), ("a write outside", &write)] {
            assert_eq!(r["ok"], false, "{what} is refused: {r}");
            assert!(r["error"].as_str().unwrap_or("").contains("Permission"), "{what}: {r}");
        }
        assert!(!outside.path().join("dropped.txt").exists(), "nothing was written outside");
        assert_eq!(near["ok"], false, "a port it was not given: {near}");
        assert_eq!(given["ok"], true, "the port it was given: {given}");
        assert_eq!(forks["ok"], false, "forking stops at the bound: {forks}");
        assert!(forks["started"].as_u64().is_some_and(|n| n < 48), "{forks}");
        assert_eq!(memory["ok"], false, "allocation past the limit: {memory}");
        assert!(memory["error"].as_str().unwrap_or("").contains("MemoryError"), "{memory}");
        assert_eq!(own_write["ok"], true, "its own folder is writable: {own_write} (home {home})");
        assert!(home["home"].as_str().unwrap_or("").ends_with(".mcpgate-sandbox/hostile"), "its HOME is its private folder: {home}");
        // The gateway and the other upstream are still there, and the hostile one still answers.
        let calm = call(&gw.url, "calm__echo", json!({ "text": "still here" })).await;
        assert_eq!(text_of(&calm), "still here", "{calm}");
        assert_eq!(attempt(&gw, "whereami", json!({})).await["ok"], true);
    }
    drop((listener, forbidden));
}
