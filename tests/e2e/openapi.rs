//! REST APIs nobody here wrote, served as tools through `openapi` upstreams and driven by the
//! official Python SDK client: httpbin (PyPI; it serves its own Swagger 2.0 description, naming
//! `https://httpbin.org` as its server) and the Prism mock server (npm) serving the public Train
//! Travel API (OpenAPI 3.1, from ReadMe's `oas-examples`). Path, query, body, header credentials
//! and HTTP errors are checked where they land (httpbin echoes the request); `mcpgate check` says
//! how many operations became tools and why the others did not; a description whose server is on
//! another origin is refused, and a remote `$ref` is never fetched.

use crate::harness::*;
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Waits until `url` answers 200.
async fn wait_ok(url: &str, proc: &Proc) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if get(url).await.is_ok_and(|r| r.status == 200) {
            return;
        }
        assert!(Instant::now() < deadline, "{url} never answered:\n{}", proc.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Starts `program` with `args` on a free loopback port (`PORT` in `args`): the process, the port
/// and its base URL.
fn serve(program: String, args: &[&str], what: &str) -> (Proc, u16, String) {
    let port = free_port();
    let args: Vec<String> = args.iter().map(|a| a.replace("PORT", &port.to_string())).collect();
    let mut child = Command::new(program)
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let stderr = collect_stderr(&mut child, None);
    (Proc { child, stderr }, port, format!("http://127.0.0.1:{port}"))
}

/// httpbin on loopback; its base URL.
async fn httpbin() -> (Proc, String) {
    let python = tool("MCPGATE_REST_PYTHON", ".work/rest/venv/bin/python");
    let (proc, _, base) = serve(python, &["-m", "httpbin.core", "--host", "127.0.0.1", "--port", "PORT"], "httpbin");
    wait_ok(&format!("{base}/spec.json"), &proc).await;
    (proc, base)
}

/// Prism mocking `doc` on loopback; its base URL.
async fn prism(doc: &str) -> (Proc, String) {
    let prism = tool("MCPGATE_PRISM", ".work/rest/npm/node_modules/.bin/prism");
    let (proc, port, base) = serve(prism, &["mock", "--host", "127.0.0.1", "--port", "PORT", doc], "prism");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "prism never listened:\n{}", proc.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (proc, base)
}

fn examples(path: &str) -> String {
    let dir = std::env::var("MCPGATE_OAS_EXAMPLES")
        .unwrap_or_else(|_| repo().join(".work/rest/npm/node_modules/@readme/oas-examples").display().to_string());
    let p = std::path::Path::new(&dir).join(path);
    assert!(p.exists(), "{} is missing: run scripts/install-test-deps.sh (scripts/test runs it)", p.display());
    p.display().to_string()
}

/// `mcpgate check` on `config`: exit code and output.
fn check(config: &str, env: &[(&str, &str)]) -> (i32, String) {
    let dir = write_config(config);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpgate"));
    cmd.arg("check").arg("-c").arg(dir.path().join("gateway.toml"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run mcpgate check");
    (out.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn structured(r: &Value) -> &Value {
    &r["structuredContent"]
}

#[tokio::test(flavor = "multi_thread")]
async fn httpbin_operations_are_tools_the_python_sdk_calls() {
    let (_bin, base) = httpbin().await;
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"bin\"\nopenapi = \"{base}/spec.json\"\nbase_url = \"{base}\"\n\
         headers = {{ X-Api-Key = {{ env = \"BIN_KEY\" }} }}\n"
    );
    let gw = gateway_with_env(&config, &[("BIN_KEY", "k-123")]);
    let steps = [
        json!({ "action": "list" }),
        json!({ "action": "call", "name": "bin__get_base64_value", "arguments": { "value": "SFRUUEJJTiBpcyBhd2Vzb21l" } }),
        json!({ "action": "call", "name": "bin__get_anything_anything", "arguments": { "anything": "x?y=1#z" } }),
        json!({ "action": "call", "name": "bin__get_response-headers", "arguments": { "freeform": { "X-Probe": "hello world" } } }),
        json!({ "action": "call", "name": "bin__get_status_codes", "arguments": { "codes": "418" } }),
        json!({ "action": "call", "name": "bin__get_headers", "arguments": {} }),
        json!({ "action": "call", "name": "bin__get_bytes_n", "arguments": { "n": 16 } }),
    ];
    let out = crate::real_servers::sdk_script("2026-07-28", &gw.url, &steps);
    let tools: Vec<&str> = out[0]["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    for t in ["bin__get_base64_value", "bin__get_status_codes", "bin__get_anything_anything", "bin__get_uuid"] {
        assert!(tools.contains(&t), "{t} in {tools:?}");
    }
    assert!(!tools.iter().any(|t| t.starts_with("bin__post")), "only GET by default: {tools:?}");
    // Path.
    assert_eq!(out[1]["content"][0]["text"], "HTTPBIN is awesome", "{}", out[1]);
    // A path value stays in its segment: nothing of it became a query.
    let echoed = structured(&out[2]);
    assert_eq!(echoed["args"], json!({}), "{echoed}");
    assert!(echoed["url"].as_str().is_some_and(|u| u.contains("/anything/x%3Fy")), "{echoed}");
    // Query (an exploded form object).
    assert_eq!(structured(&out[3])["X-Probe"], "hello world", "{}", out[3]);
    // An HTTP error is a tool error with its status.
    assert_eq!(out[4]["isError"], true, "{}", out[4]);
    assert!(out[4]["content"][0]["text"].as_str().is_some_and(|t| t.starts_with("HTTP 418")), "{}", out[4]);
    // The upstream's own credential goes with every call; the caller's never does.
    let headers = &structured(&out[5])["headers"];
    assert_eq!(headers["X-Api-Key"], "k-123", "{headers}");
    assert!(headers.get("Authorization").is_none() && headers.get("Mcp-Method").is_none(), "{headers}");
    // Binary answers are embedded resources.
    assert_eq!(out[6]["content"][0]["type"], "resource", "{}", out[6]);

    // `mcpgate check` counts the tools and says why the rest are not.
    let (code, report) = check(&config, &[("BIN_KEY", "k")]);
    assert_eq!(code, 0, "{report}");
    let line = report.lines().find(|l| l.starts_with("OpenAPI bin:")).unwrap_or_else(|| panic!("{report}"));
    assert!(line.contains("operations are tools") && line.contains(&base), "{line}");
    assert!(report.contains("not tools (method POST is not selected"), "{report}");
    // Without base_url the description's own server (https://httpbin.org) is not trusted.
    let untrusted = format!("[[upstream]]\nid = \"bin\"\nopenapi = \"{base}/spec.json\"\n");
    let (code, report) = check(&untrusted, &[]);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("https://httpbin.org") && report.contains("set base_url"), "{report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openapi_3_1_api_mocked_by_prism_with_bodies_paths_and_errors() {
    let doc = examples("3.1/json/train-travel.json");
    let (_prism, base) = prism(&doc).await;
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"trains\"\nopenapi = {doc:?}\nbase_url = \"{base}\"\n\
         headers = {{ Authorization = {{ env = \"TRAINS_TOKEN\" }} }}\n\
         [upstream.operations]\nmethods = [\"GET\", \"POST\", \"DELETE\"]\nexclude = [\"*payment*\"]\n"
    );
    let gw = gateway_with_env(&config, &[("TRAINS_TOKEN", "Bearer test-token")]);
    let booking =
        json!({ "trip_id": "4f4e4e1c-c824-4d63-b37a-d8d698862f1d", "passenger_name": "Ada", "has_bicycle": false, "has_dog": false });
    let steps = [
        json!({ "action": "list" }),
        json!({ "action": "call", "name": "trains__get-stations", "arguments": {} }),
        json!({ "action": "call", "name": "trains__create-booking", "arguments": { "body": booking } }),
        json!({ "action": "call", "name": "trains__get-booking", "arguments": { "bookingId": "1725ff48-ab45-4bb5-9d02-88745177dedb" } }),
        json!({ "action": "call", "name": "trains__get-trips", "arguments": { "origin": "efdbb9d1-02c2-4bc3-afb7-6788d8782b1e", "destination": "b2e783e1-c824-4d63-b37a-d8d698862f1d", "date": "2024-02-01T09:00:00Z" } }),
        json!({ "action": "call", "name": "trains__get-booking", "arguments": { "bookingId": "not-a-uuid" } }),
    ];
    let out = crate::real_servers::sdk_script("2026-07-28", &gw.url, &steps);
    let tools: Vec<&str> = out[0]["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    assert_eq!(tools.len(), 6, "GET, POST and DELETE operations but the payment one: {tools:?}");
    assert!(tools.contains(&"trains__delete-booking") && !tools.iter().any(|t| t.contains("payment")), "{tools:?}");
    assert!(structured(&out[1])["data"].as_array().is_some_and(|d| !d.is_empty()), "stations: {}", out[1]);
    assert_ne!(out[2]["isError"], true, "a booking is created: {}", out[2]);
    assert!(structured(&out[2])["id"].is_string(), "{}", out[2]);
    assert!(structured(&out[3])["passenger_name"].is_string(), "{}", out[3]);
    assert!(structured(&out[4])["data"].is_array(), "trips: {}", out[4]);
    // Prism refuses a bookingId that is no UUID: a tool error with the status and its reason.
    assert_eq!(out[5]["isError"], true, "{}", out[5]);
    assert!(out[5]["content"][0]["text"].as_str().is_some_and(|t| t.starts_with("HTTP 4")), "{}", out[5]);

    // The tool definitions carry what the description says.
    let listed = crate::harness::sdk("2026-07-28", &gw.url, &["tools"]);
    let tool = |n: &str| {
        listed["tools"].as_array().and_then(|a| a.iter().find(|t| t["name"] == n)).cloned().unwrap_or_else(|| panic!("{n}: {listed}"))
    };
    let create = tool("trains__create-booking");
    assert_eq!(create["inputSchema"]["required"], json!(["body"]), "{create}");
    assert!(create["inputSchema"]["properties"]["body"]["properties"]["passenger_name"].is_object(), "$refs inlined: {create}");
    assert_eq!(tool("trains__delete-booking")["annotations"]["destructiveHint"], true);
    assert_eq!(tool("trains__get-stations")["annotations"]["readOnlyHint"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_remote_ref_is_never_fetched_and_a_foreign_server_is_refused() {
    // Anything connecting here is counted.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    listener.set_nonblocking(true).expect("nonblocking");
    let (_bin, base) = httpbin().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let doc = dir.path().join("api.yaml");
    std::fs::write(
        &doc,
        format!(
            "openapi: 3.0.3\ninfo: {{ title: Echo, version: '1' }}\nservers: [{{ url: 'http://127.0.0.1:{port}' }}]\npaths:\n  /anything/echo:\n    get:\n      operationId: echo\n      \
             parameters:\n        - {{ name: q, in: query, schema: {{ $ref: 'http://127.0.0.1:{port}/schema.json' }} }}\n      responses:\n        '200':\n          description: ok\n"
        ),
    )
    .expect("write the description");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"echo\"\nopenapi = {:?}\nbase_url = \"{base}\"\n",
        doc.display().to_string()
    );
    let gw = gateway(&config);
    let r = call(&gw.url, "echo__echo", json!({ "q": "hi" })).await;
    assert_eq!(r["result"]["structuredContent"]["args"]["q"], "hi", "{r}");
    let (code, report) = check(&config, &[]);
    assert_eq!(code, 0, "{report}");
    assert!(report.contains("never fetched"), "the note says so: {report}");
    assert!(listener.accept().is_err(), "something fetched the remote $ref");
    // A file naming its own server is trusted when base_url is left out (here: the counting port).
    let own = format!("[[upstream]]\nid = \"echo\"\nopenapi = {:?}\ntimeout = \"3s\"\n", doc.display().to_string());
    let (_, report) = check(&own, &[]);
    assert!(report.contains(&format!("calls go to http://127.0.0.1:{port}")), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_reaches_a_rest_api_with_their_own_key() {
    let (_bin, base) = httpbin().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (gw, gateway) = alices_gateway(
        &format!(
            "[[upstream]]\nid = \"crm\"\nopenapi = \"{base}/spec.json\"\nbase_url = \"{base}\"\n\
             [upstream.operations]\ninclude = [\"get_headers\"]\n\
             [upstream.user_auth]\nkind = \"api_key\"\nheader = \"X-Api-Key\"\nhelp = \"Create a key under Settings → API keys.\"\n"
        ),
        dir.path(),
    );
    crate::identity_keys::enter_key(&gw, &gateway, "alice", "alice-key", "rest-key-alice-77").await;
    let reply = alice_calls(&gw, "crm__get_headers", "headers").await;
    let headers = &reply["result"]["structuredContent"]["headers"];
    assert_eq!(headers["X-Api-Key"], "rest-key-alice-77", "alice's own key reaches the API: {reply}\n{}", gw.proc.log());
    assert!(headers.get("Authorization").is_none(), "and not her key to the gateway: {headers}");
}

/// A gateway with the API-key caller alice, `[identity]` (vault in `dir`) and `upstreams`; and
/// its public URL.
fn alices_gateway(upstreams: &str, dir: &std::path::Path) -> (Gateway, String) {
    let gw_port = free_port();
    let gateway = format!("http://127.0.0.1:{gw_port}");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
         [identity]\npublic_url = \"{gateway}\"\nvault = {:?}\nallow_loopback = true\n\n{upstreams}",
        crate::callers::hash("alice-key"),
        dir.join("vault.json"),
    );
    (gateway_on_port(&config, gw_port, &[("MCPGATE_TOKEN_KEY", &"5e".repeat(32))]), gateway)
}

/// The DPoP-only REST API (tests/py/dpop_rest_server.py, its own authorization server, tokens of
/// `lifetime` seconds) behind a gateway as `proof`, alice connected. The API's log, the gateway.
async fn dpop_api_connected(lifetime: u32, dir: &std::path::Path) -> (Proc, Gateway, std::path::PathBuf) {
    let log = dir.join("api.jsonl");
    let mut cmd = std::process::Command::new(python());
    cmd.arg(repo().join("tests/py/dpop_rest_server.py"))
        .args(["--port", "0", "--token-lifetime", &lifetime.to_string(), "--log"])
        .arg(&log);
    let (api, base) = crate::identity::listening(cmd, "the DPoP REST API");
    let (gw, gateway) = alices_gateway(
        &format!(
            "[[upstream]]\nid = \"proof\"\nopenapi = \"{base}/openapi.json\"\nbase_url = \"{base}/api\"\ntimeout = \"20s\"\n\
             [upstream.user_auth]\n"
        ),
        dir,
    );
    crate::identity_sdk_as::connect_upstream(&gw, &gateway, "alice", "alice-key", "proof").await;
    (api, gw, log)
}

/// Alice's call of `tool` through the gateway, retried while her connection opens (until the
/// structured result has `field`).
async fn alice_calls(gw: &Gateway, tool: &str, field: &str) -> Value {
    let mut reply = Value::Null;
    for _ in 0..50 {
        reply = crate::identity_cluster::call_as(&gw.url, "alice-key", tool).await;
        if !reply["result"]["structuredContent"][field].is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    reply
}

async fn dpop_whoami(gw: &Gateway) -> Value {
    alice_calls(gw, "proof__whoami", "subject").await
}

fn api_events(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// A REST API that takes only DPoP-bound tokens and asks for its own nonce: a caller connects
/// once, and the call that meets `use_dpop_nonce` is sent again with the API's nonce, the caller's
/// token kept (one token issued, no new consent), its proof signed by the key the token is bound to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_api_that_asks_for_a_dpop_nonce_gets_one_retry_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_api, gw, log) = dpop_api_connected(3600, dir.path()).await;
    let reply = dpop_whoami(&gw).await;
    let events = api_events(&log);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(reply["result"]["structuredContent"]["subject"], "alice", "{reply}\nAPI: {kinds:?}\n{}", gw.proc.log());
    let token = events.iter().find(|e| e["event"] == "token").expect("a token was issued");
    assert_eq!(reply["result"]["structuredContent"]["jkt"], token["jkt"], "the proof is signed by the key the token is bound to");
    assert_eq!(kinds.iter().filter(|k| **k == "token").count(), 1, "one token, kept through the nonce: {kinds:?}");
    let asked = kinds.iter().position(|k| *k == "nonce_asked").expect("the API asked for its nonce");
    assert_eq!(kinds.get(asked + 1), Some(&"served"), "and the same call was served next: {kinds:?}");
    assert!(!kinds.contains(&"refused"), "{events:?}");
}

/// The token endpoint's DPoP nonce is remembered: with tokens that expire at once, every call
/// refreshes, and only the first token request of all meets `use_dpop_nonce`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_endpoints_dpop_nonce_is_remembered_across_refreshes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_api, gw, log) = dpop_api_connected(1, dir.path()).await;
    for _ in 0..3 {
        let reply = dpop_whoami(&gw).await;
        assert_eq!(reply["result"]["structuredContent"]["subject"], "alice", "{reply}\n{:?}\n{}", api_events(&log), gw.proc.log());
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let events = api_events(&log);
    let refreshed = events.iter().filter(|e| e["event"] == "token" && e["grant_type"] == "refresh_token").count();
    let asked = events.iter().filter(|e| e["event"] == "token_nonce_asked").count();
    assert!(refreshed >= 2, "the short tokens were refreshed: {events:?}");
    assert_eq!(asked, 1, "only the first token request paid for the nonce: {events:?}");
}

/// The API's requests as it received them (raw paths).
fn paths_seen(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["path"].as_str().map(str::to_string))
        .collect()
}

/// A path value `.` or `..` goes as `%2E` / `%2E%2E`, never as a dot-segment a server or proxy
/// would remove (reading another operation with the upstream's credentials); a redirect is
/// followed only to the called path itself, never to another path of the same API (here a 302 to
/// `/v2/secret`, and the 301 a Go server answers for `/v1/users/..`).
#[tokio::test(flavor = "multi_thread")]
async fn dot_segments_stay_values_and_a_redirect_to_another_path_is_not_followed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("requests.jsonl");
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/path_rest_server.py")).args(["--port", "0", "--log"]).arg(&log);
    let (_api, base) = crate::identity::listening(cmd, "the path REST API");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"api\"\nopenapi = \"{base}/openapi.json\"\n\
         headers = {{ Authorization = {{ env = \"API_TOKEN\", prefix = \"Bearer \" }} }}\n"
    );
    let gw = gateway_with_env(&config, &[("API_TOKEN", "upstream-secret")]);
    for (tool, args, sent) in [
        ("api__get_image", json!({ "name": ".." }), "/v1/files/%2E%2E/image"),
        ("api__get_image", json!({ "name": "." }), "/v1/files/%2E/image"),
        ("api__get_image", json!({ "name": "..." }), "/v1/files/.../image"),
    ] {
        let r = call(&gw.url, tool, args.clone()).await;
        assert_eq!(r["result"]["structuredContent"]["path"], sent, "{args}: {r}");
    }
    let seen = paths_seen(&log);
    assert!(!seen.iter().any(|p| p.split('/').any(|s| s == "." || s == "..")), "a dot-segment reached the API: {seen:?}");

    // A Go-style clean of `..`, and a redirect to another path: a tool error naming the origin
    // only, and the other path never asked.
    for (tool, args) in [("api__get_user", json!({ "username": ".." })), ("api__get_moved", json!({ "id": "1" }))] {
        let r = call(&gw.url, tool, args.clone()).await;
        let text = r["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string();
        assert_eq!(r["result"]["isError"], true, "{args}: {r}");
        assert!(text.contains("was not followed") && text.contains(&base) && !text.contains("/v2"), "{text}");
    }
    let seen = paths_seen(&log);
    assert!(!seen.iter().any(|p| p == "/v1" || p.starts_with("/v2")), "a redirect to another path was followed: {seen:?}");
    // The same path with a trailing `/` is the same operation: followed.
    let r = call(&gw.url, "api__get_slash", json!({})).await;
    assert_eq!(r["result"]["structuredContent"]["path"], "/v1/slash/", "{r}");
}

/// A description over the 16 MiB the gateway reads is refused with a reason that names the
/// limit, fetched (17 MiB from a plain HTTP server) or read from a file; and one fetched that
/// names no server is called at the origin it came from (docs/openapi.md).
#[tokio::test(flavor = "multi_thread")]
async fn a_description_over_the_limit_names_it_and_one_without_servers_is_called_at_its_origin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut big = String::from("{\"openapi\": \"3.0.3\", \"info\": {\"title\": \"Big\", \"version\": \"1\"}, \"paths\": {}, \"x-pad\": \"");
    big.push_str(&"x".repeat(17 << 20));
    big.push_str("\"}");
    std::fs::write(dir.path().join("big.json"), &big).expect("write the description");
    let python = tool("MCPGATE_REST_PYTHON", ".work/rest/venv/bin/python");
    let folder = dir.path().display().to_string();
    let (server, _, base) = serve(python, &["-m", "http.server", "--bind", "127.0.0.1", "--directory", &folder, "PORT"], "http.server");
    wait_ok(&format!("{base}/big.json"), &server).await;
    let fetched = format!("[[upstream]]\nid = \"big\"\nopenapi = \"{base}/big.json\"\ntimeout = \"20s\"\n");
    let file =
        format!("[[upstream]]\nid = \"big\"\nopenapi = {:?}\nbase_url = \"{base}\"\n", dir.path().join("big.json").display().to_string());
    for config in [fetched, file] {
        let (code, report) = check(&config, &[]);
        assert_eq!(code, 1, "{report}");
        assert!(report.contains("is larger than 16 MiB, the most the gateway reads of a description"), "{report}");
        assert!(!report.contains("length limit exceeded"), "{report}");
    }
    let doc = std::fs::read_to_string(repo().join("docs/openapi.md")).expect("docs/openapi.md");
    assert!(doc.contains("is larger than 16 MiB, the most the gateway reads of a\ndescription"), "docs/openapi.md quotes the refusal");
    // A fetched description that names no server is called at the origin it came from (docs/openapi.md).
    std::fs::write(dir.path().join("small.yaml"), "openapi: 3.0.3\ninfo: { title: Small, version: '1' }\npaths: {}\n").expect("write");
    let (_, report) = check(&format!("[[upstream]]\nid = \"small\"\nopenapi = \"{base}/small.yaml\"\n"), &[]);
    assert!(report.contains(&format!("calls go to {base}/")), "{report}");
    let hostless = "{\"swagger\": \"2.0\", \"info\": {\"title\": \"S\", \"version\": \"1\"}, \"basePath\": \"/v2\", \"paths\": {}}";
    std::fs::write(dir.path().join("hostless.json"), hostless).expect("write");
    let (_, report) = check(&format!("[[upstream]]\nid = \"small\"\nopenapi = \"{base}/hostless.json\"\n"), &[]);
    assert!(report.contains(&format!("calls go to {base}/v2")), "{report}");
}
