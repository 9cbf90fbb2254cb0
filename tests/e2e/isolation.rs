//! What a sandboxed stdio upstream cannot reach (`[upstream.sandbox]`, `mcpgate_sandbox::exec`): a
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
        // The gateway's environment (where a token key may be given) through /proc.
        let environ = attempt(&gw, "read_file", json!({ "path": format!("/proc/{}/environ", gw.proc.child.id()) })).await;
        let secret = attempt(&gw, "read_file", json!({ "path": outside.path().join("secret.txt") })).await;
        let write = attempt(&gw, "write_file", json!({ "path": outside.path().join("dropped.txt"), "text": "x" })).await;
        let near = attempt(&gw, "connect", json!({ "port": forbidden_port })).await;
        let given = attempt(&gw, "connect", json!({ "port": allowed })).await;
        let forks = attempt(&gw, "fork_many", json!({ "count": 120 })).await;
        let memory = attempt(&gw, "allocate", json!({ "megabytes": 2048 })).await;
        let namespace = attempt(&gw, "kernel", json!({ "what": "new_user_namespace" })).await;
        let keystroke = attempt(&gw, "kernel", json!({ "what": "push_keystroke" })).await;
        let x32 = attempt(&gw, "kernel", json!({ "what": "x32_call" })).await;
        let home = attempt(&gw, "whereami", json!({})).await;
        let own = std::path::Path::new(home["home"].as_str().unwrap_or_default()).join("notes.txt");
        let own_write = attempt(&gw, "write_file", json!({ "path": own, "text": "mine" })).await;
        let results = [&vault, &environ, &secret, &write, &near, &forks, &memory];
        if !sandboxed {
            // Without a sandbox every attempt works: the tools really try.
            for r in results {
                assert_eq!(r["ok"], true, "unsandboxed, the attempt works: {r}");
            }
            std::fs::remove_file(outside.path().join("dropped.txt")).expect("it wrote outside");
            // Unsandboxed, the kernel answers for itself: a namespace (where user namespaces are
            // allowed), ENOTTY for a pipe, ENOSYS where x32 is off. Never the filter's EPERM.
            for r in [&keystroke, &x32] {
                assert_ne!(r["error"], "EPERM", "{r}");
            }
            continue;
        }
        for (what, r) in
            [("the vault", &vault), ("the gateway's environment", &environ), ("a file outside", &secret), ("a write outside", &write)]
        {
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
        for (what, r) in [("a new user namespace", &namespace), ("a keystroke into a terminal", &keystroke), ("an x32 call", &x32)] {
            assert_eq!((&r["ok"], &r["error"]), (&json!(false), &json!("EPERM")), "{what} is refused by the filter: {r}");
        }
        assert_eq!(own_write["ok"], true, "its own folder is writable: {own_write} (home {home})");
        assert!(home["home"].as_str().unwrap_or("").ends_with(".mcpgate-sandbox/hostile"), "its HOME is its private folder: {home}");
        // The gateway and the other upstream are still there, and the hostile one still answers.
        let calm = call(&gw.url, "calm__echo", json!({ "text": "still here" })).await;
        assert_eq!(text_of(&calm), "still here", "{calm}");
        assert_eq!(attempt(&gw, "whereami", json!({})).await["ok"], true);
    }
    drop((listener, forbidden));
}

/// `mcpgate check` names every stdio upstream that runs unsandboxed, what each sandbox allows, and
/// what this machine's kernel enforces of it.
#[test]
fn check_says_what_each_stdio_upstream_can_reach_and_what_is_enforced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gateway.toml");
    let server = repo().join("tests/py/hostile_server.py").display().to_string();
    let config = format!(
        "[[upstream]]\nid = \"plain\"\ncommand = [{py:?}, {server:?}]\n\n\
         [[upstream]]\nid = \"dock\"\ncommand = [\"docker\", \"run\", \"-i\", \"--rm\", \"mcp/time\"]\n\n\
         [[upstream]]\nid = \"boxed\"\ncommand = [{py:?}, {server:?}]\ninstances = \"per_caller\"\nmax_instances = 4\n\
         [upstream.sandbox]\nnetwork = [443]\nmemory = \"1GiB\"\n",
        py = python(),
    );
    std::fs::write(&path, config).expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpgate")).args(["check", "-c"]).arg(&path).output().expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("plain: NOT sandboxed"), "{text}");
    // What `mcpgate import` writes for a `docker run` command, said as it is (docs/isolation.md).
    assert!(text.contains("dock: NOT sandboxed by mcpgate: docker runs it as its command line's flags say"), "{text}");
    assert!(text.contains("boxed: sandboxed; TCP to ports [443] only") && text.contains("memory 1024 MiB"), "{text}");
    // UDP passes a ports allowance (Landlock's network rules are TCP's): said, not left to be found.
    assert!(text.contains("UDP is not limited (Landlock's network rules cover TCP only)"), "{text}");
    // Whether the sandbox keeps its signals to itself is the kernel's to say (Landlock ABI 6).
    assert!(text.contains("signals to processes outside the sandbox"), "{text}");
    // Without callers, "each caller" is one anonymous caller: said, not left to be found out.
    assert!(text.contains("one process per caller, BUT [auth] mode = \"none\""), "{text}");
    assert!(text.contains("this machine: files enforced (Landlock ABI"), "the kernel's Landlock is named: {text}");
    let with_callers = format!(
        "[auth]\nmode = \"api_key\"\n\n[[caller]]\nid = \"ann\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n{}",
        crate::callers::hash("ann-key"),
        std::fs::read_to_string(&path).expect("read")
    );
    std::fs::write(&path, with_callers).expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpgate")).args(["check", "-c"]).arg(&path).output().expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("one process per caller (at most 4"), "{text}");
}

async fn call_by(gw: &Gateway, key: &str, tool: &str, args: Value) -> Value {
    let auth = format!("Bearer {key}");
    rpc_with(&gw.url, "tools/call", json!({ "name": tool, "arguments": args }), &[("Authorization", &auth)]).await.message()
}

fn graph_of(reply: &Value) -> String {
    reply["result"]["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n")
}

/// `instances = "per_caller"` with the real server-memory: each caller's entities live in that
/// caller's own process and folder (`{instance_dir}`), invisible to the other; an idle process
/// stops, and the caller's next call starts it again on the same folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_callers_of_server_memory_each_have_their_own_and_an_idle_one_stops() {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[upstream]]\nid = \"memory\"\ncommand = [{:?}]\ntimeout = \"5s\"\ninstances = \"per_caller\"\ninstance_idle = \"2s\"\n\
         [upstream.env]\nMEMORY_FILE_PATH = \"{{instance_dir}}/memory.jsonl\"\n[upstream.sandbox]\n",
        crate::callers::hash("alice-key"),
        crate::callers::hash("bob-key"),
        installed_server("mcp-server-memory"),
    );
    let gw = gateway(&config);
    // Beside the shared process's own folder, not in it: the shared process (kept for the
    // catalogue) can write its folder and must not reach a caller's.
    let folder = gw.config_path.parent().expect("folder").join(".mcpgate-sandbox/memory@callers");
    for (key, entity) in [("alice-key", "alice-private-plan"), ("bob-key", "bob-shopping-list")] {
        let made = call_by(
            &gw,
            key,
            "memory__create_entities",
            json!({ "entities": [{ "name": entity, "entityType": "note", "observations": ["mine"] }] }),
        )
        .await;
        assert_ne!(made["result"]["isError"], true, "{made}\n{}", gw.proc.log());
    }
    let alice = graph_of(&call_by(&gw, "alice-key", "memory__read_graph", json!({})).await);
    let bob = graph_of(&call_by(&gw, "bob-key", "memory__read_graph", json!({})).await);
    assert!(alice.contains("alice-private-plan") && !alice.contains("bob-shopping-list"), "alice sees only hers: {alice}");
    assert!(bob.contains("bob-shopping-list") && !bob.contains("alice-private-plan"), "bob sees only his: {bob}");
    // Two folders, one per caller, each with its own memory file.
    let files: Vec<String> = std::fs::read_dir(&folder)
        .expect("the callers' folders")
        .flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("memory.jsonl")).ok())
        .collect();
    assert_eq!(files.len(), 2, "one memory file per caller under {}", folder.display());
    let shared = gw.config_path.parent().expect("folder").join(".mcpgate-sandbox/memory");
    let inside: Vec<_> = std::fs::read_dir(&shared).into_iter().flatten().flatten().map(|d| d.file_name()).collect();
    assert!(!inside.iter().any(|n| n.to_string_lossy().contains("callers")), "no caller's folder in the shared one: {inside:?}");

    // Idle: both processes stop.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while gw.proc.log().matches("stopped a caller's idle process").count() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(gw.proc.log().matches("stopped a caller's idle process").count(), 2, "{}", gw.proc.log());
    // A caller's process works in its own folder (the policy naming it is on no command line),
    // under this gateway's folder (other tests run callers of the same names at the same time).
    let mine = gw.config_path.parent().expect("folder").to_string_lossy().into_owned();
    let alive = |who: &str| {
        std::fs::read_dir("/proc").into_iter().flatten().flatten().any(|p| {
            std::fs::read_link(p.path().join("cwd")).is_ok_and(|cwd| {
                let cwd = cwd.to_string_lossy();
                cwd.starts_with(&mine) && cwd.contains(&format!("@callers/{who}-"))
            })
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while (alive("alice") || alive("bob")) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let left: Vec<String> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|p| std::fs::read_link(p.path().join("cwd")).is_ok_and(|cwd| cwd.to_string_lossy().contains("@callers/")))
        .map(|p| format!("{:?}: {}", p.file_name(), std::fs::read_to_string(p.path().join("stat")).unwrap_or_default()))
        .collect();
    assert!(!alive("alice") && !alive("bob"), "the idle processes are gone: {left:?}");
    // Alice comes back: a new process of hers, on her folder.
    let again = graph_of(&call_by(&gw, "alice-key", "memory__read_graph", json!({})).await);
    assert!(again.contains("alice-private-plan") && !again.contains("bob-shopping-list"), "{again}");
    assert!(alive("alice") && !alive("bob"));
}

/// `image = "…"`: the server runs under the container runtime, stdio over the runtime's, with the
/// sandbox's limits as its flags. Where an engine runs (`docker info` answers), that is the real
/// one; where none does (this project's CI machines), a stand-in `docker`
/// (tests/py/container_shim.py) records what mcpgate asked of the runtime and runs the command
/// on the host, which checks the flags and the stdio wiring, not the isolation — said on stdout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_upstream_is_run_by_the_runtime_with_the_sandboxs_limits() {
    let engine = std::process::Command::new("docker").arg("info").output().is_ok_and(|o| o.status.success());
    if engine {
        println!("a container engine answers: the shim is used anyway, the image test needs a registry this project cannot reach");
    } else {
        println!("no container engine runs here (docker info fails): checking mcpgate's runtime flags and stdio through a stand-in");
    }
    let shim = tempfile::tempdir().expect("tempdir");
    let docker = shim.path().join("docker");
    let log = shim.path().join("runs.jsonl");
    // The runtime gets the clean environment every child gets: the log's path is in the wrapper.
    std::fs::write(
        &docker,
        format!("#!/bin/sh\nCONTAINER_SHIM_LOG={:?} exec {:?} {:?} \"$@\"\n", log, python(), repo().join("tests/py/container_shim.py")),
    )
    .expect("shim");
    std::fs::set_permissions(&docker, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"boxed\"\ncommand = {}\ntimeout = \"30s\"\n\
         [upstream.env]\nGREETING = {{ env = \"SHIM_SECRET\" }}\n\
         [upstream.sandbox]\nimage = \"ghcr.io/example/upstream:1\"\nruntime = \"docker\"\nmemory = \"512MiB\"\nprocesses = 64\n",
        py_stdio_command("boxed"),
    );
    let path = format!("{}:{}", shim.path().display(), std::env::var("PATH").unwrap_or_default());
    let gw = gateway_with_env(&config, &[("PATH", &path), ("SHIM_SECRET", "s3cret-value")]);
    let reply = call(&gw.url, "boxed__echo", json!({ "text": "through the runtime" })).await;
    assert_eq!(text_of(&reply), "through the runtime", "{reply}\n{}", gw.proc.log());
    let runs = std::fs::read_to_string(&log).expect("the runtime was started");
    let first: Vec<String> = serde_json::from_str(runs.lines().next().unwrap_or("[]")).expect("args");
    let joined = first.join(" ");
    for flag in [
        "run -i --rm",
        "--network none",
        "--memory=536870912",
        "--memory-swap=536870912",
        "--pids-limit=64",
        "--cap-drop ALL",
        "no-new-privileges",
        "--read-only",
    ] {
        assert!(joined.contains(flag), "{flag} in {joined}");
    }
    assert!(joined.contains("ghcr.io/example/upstream:1"), "{joined}");
    assert!(first.windows(2).any(|w| w == ["--", "ghcr.io/example/upstream:1"]), "the image follows the options' end: {joined}");
    assert!(first.windows(2).any(|w| w == ["-e", "GREETING"]), "a variable is passed by name: {joined}");
    assert!(!joined.contains("s3cret-value"), "no secret on the runtime's command line: {joined}");
}

/// A caller's own process that announces a list change tells that caller's listeners only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_own_process_announces_its_changes_to_that_caller_only() {
    use crate::streams::listen;
    const CHANGED: &str = "notifications/tools/list_changed";
    const ACK: &str = "notifications/subscriptions/acknowledged";
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[upstream]]\nid = \"chg\"\ncommand = [{:?}, {:?}, \"--transport\", \"stdio\"]\ntimeout = \"10s\"\ninstances = \"per_caller\"\n\
         [upstream.sandbox]\n",
        crate::callers::hash("alice-key"),
        crate::callers::hash("bob-key"),
        python(),
        repo().join("tests/py/changing_server.py").display().to_string(),
    );
    let gw = gateway(&config);
    let (alice, bob) = ([("Authorization", "Bearer alice-key")], [("Authorization", "Bearer bob-key")]);
    let hers = listen(&gw.url, "A", json!({ "toolsListChanged": true }), &alice).await;
    let his = listen(&gw.url, "B", json!({ "toolsListChanged": true }), &bob).await;
    assert_eq!(hers.wait_for(ACK, 1, std::time::Duration::from_secs(5)).await, 1);
    assert_eq!(his.wait_for(ACK, 1, std::time::Duration::from_secs(5)).await, 1);
    // Alice's own process starts with her first call.
    let r = rpc_with(&gw.url, "tools/call", json!({ "name": "chg__base", "arguments": {} }), &alice).await.message();
    assert_eq!(text_of(&r), "base", "{r}");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let before = hers.count(CHANGED);
    let r = rpc_with(&gw.url, "tools/call", json!({ "name": "chg__add_tool", "arguments": { "name": "hers" } }), &alice).await.message();
    assert_eq!(text_of(&r), "added hers", "{r}");
    assert!(
        hers.wait_for(CHANGED, before + 1, std::time::Duration::from_secs(5)).await > before,
        "alice hears her process's change\n{}",
        gw.proc.log()
    );
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert_eq!(his.count(CHANGED), 0, "bob hears nothing of alice's process: {:#?}", his.all());
}

/// A caller's process busy with a call longer than `instance_idle` is in use, not idle: the idle
/// sweep (every 5 s) leaves it running until the call ends, and stops it afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_process_busy_with_a_long_call_is_not_stopped_as_idle() {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [[upstream]]\nid = \"long\"\ncommand = {}\ntimeout = \"30s\"\ninstances = \"per_caller\"\ninstance_idle = \"1s\"\n\
         [upstream.sandbox]\n",
        crate::callers::hash("alice-key"),
        py_stdio_command("long"),
    );
    let gw = gateway(&config);
    let reply = call_by(&gw, "alice-key", "long__slow", json!({ "seconds": 12 })).await;
    assert!(reply.get("result").is_some() && reply["result"]["isError"] != true, "the long call finished: {reply}\n{}", gw.proc.log());
    assert_eq!(gw.proc.log().matches("stopped a caller's idle process").count(), 0, "not stopped mid-call\n{}", gw.proc.log());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !gw.proc.log().contains("stopped a caller's idle process") && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(gw.proc.log().contains("stopped a caller's idle process"), "idle once the call ended\n{}", gw.proc.log());
}

/// A package runner (`npx` here, a stand-in that never answers, as one waiting on a download
/// does) under a sandbox without the network: `check` warns before anything starts, and the
/// reason it is down says what blocks it; without a sandbox, a first start that does not answer
/// in time says a download can take longer than the timeout (docs/troubleshooting.md).
#[test]
fn a_package_runner_kept_off_the_network_is_named_in_check_and_in_its_error() {
    let bin = tempfile::tempdir().expect("tempdir");
    let npx = bin.path().join("npx");
    std::fs::write(&npx, "#!/bin/sh\nexec sleep 30\n").expect("write npx");
    std::fs::set_permissions(&npx, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gateway.toml");
    let config = format!(
        "[[upstream]]\nid = \"memory\"\ncommand = [{npx:?}, \"-y\", \"@example/server\"]\ntimeout = \"1s\"\n\
         [upstream.sandbox]\nnetwork = \"none\"\nread = [{bin:?}]\n\n\
         [[upstream]]\nid = \"everything\"\ncommand = [{npx:?}, \"-y\", \"@example/server\"]\ntimeout = \"1s\"\n",
        npx = npx.display().to_string(),
        bin = bin.path().display().to_string(),
    );
    std::fs::write(&path, config).expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpgate")).args(["check", "-c"]).arg(&path).output().expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = |id: &str, section: &str| {
        let at = text.find(section).unwrap_or_else(|| panic!("no {section} in {text}"));
        text[at..].lines().find(|l| l.trim_start().starts_with(&format!("{id}:"))).map(str::to_string).unwrap_or_default()
    };
    let warned = line("memory", "Warnings:");
    assert!(warned.contains("npx downloads its package when it starts, but its sandbox has network = \"none\""), "{text}");
    assert!(!line("everything", "Warnings:").contains("npx"), "no warning with the network open: {text}");
    let blocked = line("memory", "Unavailable upstreams:");
    assert!(blocked.contains("did not answer within 1s") && blocked.contains("network = \"none\", which blocks the download"), "{text}");
    let slow = line("everything", "Unavailable upstreams:");
    assert!(slow.contains("did not answer within 1s") && slow.contains("first start") && slow.contains("raise timeout"), "{text}");
    // docs/troubleshooting.md quotes the three lines (with the default timeout).
    let doc = std::fs::read_to_string(repo().join("docs/troubleshooting.md")).expect("docs/troubleshooting.md");
    for l in [warned, blocked, slow] {
        let l = l.replace("within 1s", "within 30s").replace("(1s)", "(30s)");
        assert!(doc.contains(&l), "docs/troubleshooting.md should quote:\n{l}");
    }
}
