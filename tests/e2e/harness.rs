//! Test harness: starts real processes on loopback (the mcpgate binary, the Python SDK test
//! upstream) on ephemeral ports and talks to them over real HTTP. Processes are killed on drop.
//! A missing test dependency fails the test with the command that installs it; nothing skips.

#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const VERSION: &str = "2026-07-28";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv Python with the official `mcp` SDK.
pub fn python() -> String {
    let p = std::env::var("MCPGATE_VENV_PYTHON").map(PathBuf::from).unwrap_or_else(|_| repo().join(".work/venv/bin/python"));
    assert!(
        p.exists(),
        "the Python MCP SDK venv is missing at {}: run scripts/install-test-deps.sh (or scripts/test, which runs it) to install mcp==2.3.0",
        p.display()
    );
    p.display().to_string()
}

/// A tool path from the environment (set by scripts/test from .work/env.sh) or its default
/// location under .work/; missing means a failing test that says how to install it.
pub fn tool(var: &str, default: &str) -> String {
    let p = std::env::var(var).map(PathBuf::from).unwrap_or_else(|_| repo().join(default));
    assert!(
        p.exists(),
        "{var}: {} is missing: run scripts/install-test-deps.sh (scripts/test runs it) to install the pinned test dependencies",
        p.display()
    );
    p.display().to_string()
}

/// A child process killed (and reaped) on drop, with its stderr collected.
pub struct Proc {
    pub child: Child,
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// What the process has logged so far. The gateway writes its log every 20 ms (see
    /// `telemetry::logwriter`), so this first waits long enough for what was logged to arrive.
    pub fn log(&self) -> String {
        std::thread::sleep(std::time::Duration::from_millis(60));
        self.stderr.lock().map(|l| l.join("\n")).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn collect_stderr(child: &mut Child, notify: Option<std::sync::mpsc::Sender<String>>) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    if let Some(err) = child.stderr.take() {
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if let Some(n) = &notify {
                    let _ = n.send(line.clone());
                }
                if let Ok(mut l) = sink.lock() {
                    l.push(line);
                }
            }
        });
    }
    lines
}

/// Starts tests/py/upstream_server.py over HTTP; returns it and its MCP URL.
pub fn py_http(label: &str, extra: &[&str]) -> (Proc, String) {
    let mut args = vec!["--label", label];
    args.extend_from_slice(extra);
    py_script_http("tests/py/upstream_server.py", &args)
}

/// Starts a Python server script over HTTP on an ephemeral port; returns it and its MCP URL.
pub fn py_script_http(script: &str, extra: &[&str]) -> (Proc, String) {
    let mut child = Command::new(python())
        .arg(repo().join(script))
        .args(["--transport", "http", "--port", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Python upstream");
    let stderr = collect_stderr(&mut child, None);
    let stdout = child.stdout.take().expect("stdout");
    wait_listening(child, stderr, stdout)
}

/// Reads `LISTENING <port>` from a server's stdout (or stderr) and returns its MCP URL.
fn wait_listening(child: Child, stderr: Arc<Mutex<Vec<String>>>, stdout: impl std::io::Read + Send + 'static) -> (Proc, String) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(port) = line.strip_prefix("LISTENING ") {
                let _ = tx.send(port.trim().to_string());
            }
        }
    });
    let mut proc = Proc { child, stderr };
    let port = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("upstream server did not start:\n{}", proc.log()));
    let _ = proc.child.try_wait();
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}

/// @modelcontextprotocol/server-everything over Streamable HTTP, forced onto 127.0.0.1 and an
/// ephemeral port by tests/js/loopback.cjs.
pub fn everything_http() -> (Proc, String) {
    let js = tool("MCPGATE_EVERYTHING_JS", ".work/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let mut child = Command::new("node")
        .arg("-r")
        .arg(repo().join("tests/js/loopback.cjs"))
        .arg(js)
        .arg("streamableHttp")
        .env("PORT", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server-everything");
    let err = child.stderr.take().expect("stderr");
    wait_listening(child, Arc::default(), err)
}

/// The built-in demo upstream over Streamable HTTP on an ephemeral port.
pub fn demo_http(profile: &str) -> (Proc, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpgate"))
        .args(["demo-server", "--profile", profile, "--http", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the demo server");
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = collect_stderr(&mut child, Some(tx));
    let proc = Proc { child, stderr };
    loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => {
                if let Some(i) = line.find("listening on http://") {
                    return (proc, line[i + "listening on ".len()..].trim().to_string());
                }
            }
            Err(_) => panic!("the demo server did not start:\n{}", proc.log()),
        }
    }
}

/// The command line of @modelcontextprotocol/server-everything over stdio, as a TOML array.
pub fn everything_stdio_command() -> String {
    let js = tool("MCPGATE_EVERYTHING_JS", ".work/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    format!("[\"node\", {js:?}, \"stdio\"]")
}

/// The command line of tests/py/upstream_server.py over stdio, as TOML array items.
pub fn py_stdio_command(label: &str) -> String {
    let script = repo().join("tests/py/upstream_server.py");
    format!("[{:?}, {:?}, \"--transport\", \"stdio\", \"--label\", {:?}]", python(), script.display().to_string(), label)
}

pub struct Gateway {
    pub proc: Proc,
    pub url: String,
    pub base: String,
    /// The configuration file the gateway was started with (tests may rewrite it).
    pub config_path: PathBuf,
    _dir: tempfile::TempDir,
}

/// Starts the mcpgate binary on `config` (its `[server]` listen is forced to an ephemeral port)
/// and waits until it reports ready.
pub fn gateway(config: &str) -> Gateway {
    gateway_with_env(config, &[])
}

/// [`gateway`] with extra environment variables for the gateway process.
pub fn gateway_with_env(config: &str, env: &[(&str, &str)]) -> Gateway {
    start_gateway(config, env, true)
}

/// Starts the gateway and returns as soon as it listens, before its upstreams are probed.
pub fn gateway_listening(config: &str) -> Gateway {
    start_gateway(config, &[], false)
}

/// [`gateway`] started with its open-files limit (soft and hard) set to `limit`.
pub fn gateway_with_open_files(config: &str, limit: u32) -> Gateway {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!("ulimit -n {limit} && exec \"$0\" \"$@\""), env!("CARGO_BIN_EXE_mcpgate")]);
    launch(cmd, config, &[], true)
}

fn start_gateway(config: &str, env: &[(&str, &str)], wait_ready: bool) -> Gateway {
    launch(Command::new(env!("CARGO_BIN_EXE_mcpgate")), config, env, wait_ready)
}

/// [`gateway_with_env`] on a given loopback port (for configurations that name their own URL,
/// such as `[identity] public_url`).
pub fn gateway_on_port(config: &str, port: u16, env: &[(&str, &str)]) -> Gateway {
    launch_at(Command::new(env!("CARGO_BIN_EXE_mcpgate")), config, env, true, &format!("127.0.0.1:{port}"))
}

/// A free loopback port (bound and released: another process could take it first, which the
/// tests using it would report as a failure to start).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

fn launch(cmd: Command, config: &str, env: &[(&str, &str)], wait_ready: bool) -> Gateway {
    launch_at(cmd, config, env, wait_ready, "127.0.0.1:0")
}

fn launch_at(mut cmd: Command, config: &str, env: &[(&str, &str)], wait_ready: bool, listen: &str) -> Gateway {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, config).expect("write config");
    let mut child = cmd
        .args(["run", "-c"])
        .arg(&path)
        .args(["--listen", listen])
        .env("MCPGATE_LOG", "info,mcpgate=debug")
        .env_remove("MCPGATE_TOKEN_KEY")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mcpgate");
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = collect_stderr(&mut child, Some(tx));
    let proc = Proc { child, stderr };
    let deadline = Instant::now() + Duration::from_secs(30);
    let url = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(i) = line.find("listening on http") {
                    break line[i + "listening on ".len()..].trim().to_string();
                }
            }
            Err(_) => panic!("mcpgate did not start:\n{}", proc.log()),
        }
    };
    let base = url.trim_end_matches("/mcp").to_string();
    let gw = Gateway { proc, url, base, config_path: path, _dir: dir };
    if !wait_ready {
        return gw;
    }
    let addr = gw.base.trim_start_matches("http://").to_string();
    while Instant::now() < deadline {
        if raw_get_status(&addr, "/readyz") == Some(200) {
            return gw;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("mcpgate never became ready:\n{}", gw.proc.log());
}

/// A blocking `GET` over a plain socket (usable outside any async runtime); the status code.
pub fn raw_get_status(addr: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_whitespace().nth(1)?.parse().ok()
}

pub struct Resp {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn content_type(&self) -> &str {
        self.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    /// The JSON-RPC messages of an SSE body, in order.
    pub fn sse(&self) -> Vec<Value> {
        let text = String::from_utf8_lossy(&self.body);
        text.split("\n\n")
            .filter_map(|ev| {
                let data: Vec<&str> = ev.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
                (!data.is_empty()).then(|| serde_json::from_str(&data.join("\n")).expect("SSE data is JSON"))
            })
            .collect()
    }

    /// The final JSON-RPC message, whether the reply was JSON or SSE.
    pub fn message(&self) -> Value {
        if self.content_type().starts_with("text/event-stream") { self.sse().pop().expect("an SSE message") } else { self.json() }
    }
}

pub async fn send(req: http::Request<Full<Bytes>>) -> Result<Resp, String> {
    let client = mcpgate_net::http::new_http_client();
    let resp = tokio::time::timeout(Duration::from_secs(60), client.request(req))
        .await
        .map_err(|_| "timeout".to_string())?
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok(Resp { status, headers, body })
}

pub async fn get(url: &str) -> Result<Resp, String> {
    send(http::Request::get(url).body(Full::new(Bytes::new())).expect("request")).await
}

pub async fn post_raw(url: &str, headers: &[(&str, &str)], body: impl Into<Bytes>) -> Resp {
    let mut b = http::Request::post(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    send(b.body(Full::new(body.into())).expect("request")).await.expect("HTTP exchange")
}

pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "mcpgate-tests", "version": "0" }
    })
}

/// The headers a correct modern client sends for `method`/`params`.
pub fn modern_headers(method: &str, params: &Value) -> Vec<(String, String)> {
    let mut h = vec![
        ("Content-Type".to_string(), "application/json".to_string()),
        ("Accept".into(), "application/json, text/event-stream".into()),
        ("MCP-Protocol-Version".into(), VERSION.into()),
        ("Mcp-Method".into(), method.into()),
    ];
    let name = match method {
        "tools/call" | "prompts/get" => params["name"].as_str(),
        "resources/read" => params["uri"].as_str(),
        _ => None,
    };
    if let Some(n) = name {
        h.push(("Mcp-Name".into(), mcpgate_protocol::headers::encode(n)));
    }
    h
}

/// A well-formed modern request (with `_meta` added to `params`), plus extra headers.
pub async fn rpc_with(url: &str, method: &str, mut params: Value, extra: &[(&str, &str)]) -> Resp {
    if params.get("_meta").is_none() {
        params["_meta"] = meta();
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }).to_string();
    let mut headers = modern_headers(method, &params);
    for (k, v) in extra {
        headers.push((k.to_string(), v.to_string()));
    }
    let refs: Vec<(&str, &str)> = headers.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    post_raw(url, &refs, body).await
}

pub async fn rpc(url: &str, method: &str, params: Value) -> Resp {
    rpc_with(url, method, params, &[]).await
}

/// Calls a tool and returns the final JSON-RPC message.
pub async fn call(url: &str, name: &str, args: Value) -> Value {
    rpc(url, "tools/call", json!({ "name": name, "arguments": args })).await.message()
}

pub fn text_of(msg: &Value) -> String {
    msg["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content in {msg}")).to_string()
}

pub async fn tool_names(url: &str) -> Vec<String> {
    let r = rpc(url, "tools/list", json!({})).await.json();
    r["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {r}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Writes `config` as `gateway.toml` in a new temporary directory (kept while the value lives).
pub fn write_config(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("gateway.toml"), config).expect("write");
    dir
}

/// The `name` of every object in the array `list` (a list result's tools, prompts, …).
pub fn names_in(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Runs the official Python SDK client (tests/py/modern_client.py) in `mode` on `url` with `args`;
/// its last line of output, as JSON.
pub fn sdk(mode: &str, url: &str, args: &[&str]) -> Value {
    let lines = sdk_lines(&["--mode", mode], url, args);
    lines.last().cloned().unwrap_or_else(|| panic!("the client printed no JSON for {mode} {args:?}"))
}

/// Runs the Python SDK client with `options` (before the URL) on `url` with `args`; its output
/// lines (JSON each: questions it was asked, progress, the result last).
pub fn sdk_lines(options: &[&str], url: &str, args: &[&str]) -> Vec<Value> {
    let (out, lines) = sdk_run(options, url, args);
    assert!(
        out.status.success(),
        "{options:?} {args:?}: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    lines
}

/// Runs the Python SDK client (see [`sdk_lines`]) whatever its exit: the process output and its
/// JSON lines.
pub fn sdk_run(options: &[&str], url: &str, args: &[&str]) -> (std::process::Output, Vec<Value>) {
    let out = Command::new(python())
        .arg(repo().join("tests/py/modern_client.py"))
        .args(options)
        .arg(url)
        .args(args)
        .output()
        .expect("run the Python SDK client");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    (out, lines)
}

/// An executable installed by scripts/install-test-deps.sh into `.work/<folder>/node_modules/.bin`
/// (the folder's path comes from `var` when set).
fn installed(var: &str, folder: &str, name: &str) -> String {
    let dir = std::env::var(var).map(PathBuf::from).unwrap_or_else(|_| repo().join(folder).join("node_modules/.bin"));
    let path = dir.join(name);
    assert!(path.exists(), "{} is missing: run scripts/install-test-deps.sh (scripts/test runs it)", path.display());
    path.display().to_string()
}

/// A server people install (`.work/servers`): server-filesystem, the MCP Apps examples, …
pub fn installed_server(name: &str) -> String {
    installed("MCPGATE_SERVERS_BIN", ".work/servers", name)
}

/// A client people use (`.work/clients`): Claude Code, the MCP Inspector, mcp-remote.
pub fn installed_client(name: &str) -> String {
    installed("MCPGATE_CLIENTS_BIN", ".work/clients", name)
}

/// `mcpgate stdio` on `config` (written to a temporary folder, kept alive by the returned guard),
/// with its stdin and stdout piped and its stderr dropped.
pub fn mcpgate_stdio(config: &str) -> (std::process::Child, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, config).expect("config");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mcpgate"))
        .args(["stdio", "-c"])
        .arg(&path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("mcpgate stdio");
    (child, dir)
}

/// A GET with `Authorization: Bearer <key>`.
pub async fn get_as(url: &str, key: &str) -> Resp {
    let req = http::Request::get(url).header("Authorization", format!("Bearer {key}")).body(Full::new(Bytes::new())).expect("request");
    send(req).await.expect("HTTP exchange")
}

/// The console key a gateway without authentication logged at start (its console link,
/// `/console#key=…`); empty when it logged none.
pub fn console_key(gw: &Gateway) -> String {
    let log = gw.proc.log();
    log.split("/console#key=").nth(1).map(|rest| rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect()).unwrap_or_default()
}
