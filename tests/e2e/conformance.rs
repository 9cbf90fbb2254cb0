//! The official MCP conformance suite (@modelcontextprotocol/conformance, pinned) runs through
//! the gateway: the project's fixture server (tests/py/conformance_fixture.py, on the official
//! Python SDK) sits behind mcpgate with `prefix = ""`, once over HTTP and once over stdio, and
//! the suite's server scenarios run against the gateway for the 2026-07-28 and the 2025-11-25
//! requirement sets. Failures must match tests/conformance/expected-failures.yml exactly, and no
//! unscored scenario (the tasks extension among them) may fail. The suite's client scenarios run
//! with mcpgate as the client: tests/py/conformance_client_driver.py makes the suite's mock server
//! an upstream of a fresh gateway and drives it with the official SDK client.

use crate::harness::*;
use std::process::Command;

/// Runs the suite's server scenarios of requirement set `revision` against the gateway: every
/// scored scenario must pass (or match the baseline), and so must every unscored one, the tasks
/// extension's `tasks-*` among them.
fn run_suite(gw: &Gateway, revision: &str, label: &str) {
    let node = tool("MCPGATE_NODE22", ".work/node22/node_modules/node/bin/node");
    let cli = tool("MCPGATE_CONFORMANCE_JS", ".work/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let out = tempfile::tempdir().expect("tempdir");
    let baseline = repo().join("tests/conformance/expected-failures.yml");
    let run = Command::new(node)
        .arg(cli)
        .args(["server", "--url", &gw.url, "--requirements", revision, "--expected-failures"])
        .arg(&baseline)
        .arg("-o")
        .arg(out.path())
        .current_dir(out.path())
        .output()
        .expect("run the conformance CLI");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let summary = stdout.find("=== SUMMARY ===").map(|i| &stdout[i..]).unwrap_or(&stdout);
    assert!(
        run.status.success(),
        "conformance {revision} through the gateway ({label} fixture) failed ({}):\n{summary}\n{}\ngateway log:\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr),
        gw.proc.log()
    );
    // The exit code covers scored scenarios; the unscored ones (the tasks extension,
    // json-schema-2020-12, the header scenarios) must pass through the gateway too.
    let failing: Vec<&str> = summary.lines().filter(|l| l.starts_with('✗')).collect();
    assert!(
        failing.is_empty(),
        "unscored scenarios fail through the gateway ({label} fixture, {revision}):\n{summary}\ngateway log:\n{}",
        gw.proc.log()
    );
    println!("conformance {revision} ({label} fixture):\n{summary}");
}

fn http_fixture_gateway() -> (Proc, Gateway) {
    let (fixture, url) = py_script_http("tests/py/conformance_fixture.py", &[]);
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"fixture\"\nurl = \"{url}\"\nprefix = \"\"\ntimeout = \"30s\"\n"
    ));
    (fixture, gw)
}

fn stdio_fixture_gateway() -> Gateway {
    let script = repo().join("tests/py/conformance_fixture.py");
    gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"fixture\"\ncommand = [{:?}, {:?}, \"--transport\", \"stdio\"]\nprefix = \"\"\ntimeout = \"30s\"\n",
        python(),
        script.display().to_string()
    ))
}

#[test]
fn conformance_2026_07_28_http_fixture() {
    let (_fixture, gw) = http_fixture_gateway();
    run_suite(&gw, "2026-07-28", "HTTP");
}

#[test]
fn conformance_2025_11_25_http_fixture() {
    let (_fixture, gw) = http_fixture_gateway();
    run_suite(&gw, "2025-11-25", "HTTP");
}

#[test]
fn conformance_2026_07_28_stdio_fixture() {
    let gw = stdio_fixture_gateway();
    run_suite(&gw, "2026-07-28", "stdio");
}

#[test]
fn conformance_2025_11_25_stdio_fixture() {
    let gw = stdio_fixture_gateway();
    run_suite(&gw, "2025-11-25", "stdio");
}

/// The everyday-SDK fixture (tests/py/sdk_conformance_fixture.py): tools that ask for input with
/// `ctx.elicit()`, `create_message()` and `list_roots()`, which work only in a 2025-11-25 session,
/// and the SDK's dual-era `Resolve` for the 2026-07-28 input-required tools. Clients of both eras
/// must get all of them through the gateway (era affinity, docs/protocol.md), over HTTP and over
/// stdio. It serves the tasks extension through the SDK's extension interface
/// (tests/py/sdk_fixture/tasks.py), so the `tasks-*` scenarios must pass too.
fn sdk_fixture_gateway(stdio: bool) -> (Option<Proc>, Gateway) {
    let head = "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"fixture\"\nprefix = \"\"\ntimeout = \"30s\"\n";
    if stdio {
        let script = repo().join("tests/py/sdk_conformance_fixture.py");
        let command = format!("command = [{:?}, {:?}, \"--transport\", \"stdio\"]\n", python(), script.display().to_string());
        return (None, gateway(&format!("{head}{command}")));
    }
    let (fixture, url) = py_script_http("tests/py/sdk_conformance_fixture.py", &[]);
    (Some(fixture), gateway(&format!("{head}url = \"{url}\"\n")))
}

#[test]
fn conformance_2025_11_25_http_sdk_fixture() {
    let (_fixture, gw) = sdk_fixture_gateway(false);
    run_suite(&gw, "2025-11-25", "HTTP everyday-SDK");
}

#[test]
fn conformance_2026_07_28_http_sdk_fixture() {
    let (_fixture, gw) = sdk_fixture_gateway(false);
    run_suite(&gw, "2026-07-28", "HTTP everyday-SDK");
}

#[test]
fn conformance_2025_11_25_stdio_sdk_fixture() {
    let (_, gw) = sdk_fixture_gateway(true);
    run_suite(&gw, "2025-11-25", "stdio everyday-SDK");
}

#[test]
fn conformance_2026_07_28_stdio_sdk_fixture() {
    let (_, gw) = sdk_fixture_gateway(true);
    run_suite(&gw, "2026-07-28", "stdio everyday-SDK");
}

/// The client scenarios of the suite that concern a gateway. In the `auth/*` ones the mock
/// server is OAuth-protected: the gateway is the OAuth client (per-user identity; the
/// `client-credentials-*` ones the client-credentials extension), and the driver plays the user.
const CLIENT_SCENARIOS: &[&str] = &[
    "initialize",
    "tools_call",
    "request-metadata",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
    "sep-2322-client-request-state",
    "sse-retry",
    "elicitation-sep1034-client-defaults",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
];

#[test]
fn client_scenarios_run_with_mcpgate_as_the_client() {
    let node = tool("MCPGATE_NODE22", ".work/node22/node_modules/node/bin/node");
    let cli = tool("MCPGATE_CONFORMANCE_JS", ".work/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let baseline = repo().join("tests/conformance/expected-failures.yml");
    let driver = repo().join("tests/py/conformance_client_driver.py");
    let command = format!("'{}' '{}'", python(), driver.display());
    let mut failed = Vec::new();
    for scenario in CLIENT_SCENARIOS {
        let out = tempfile::tempdir().expect("tempdir");
        let run = Command::new(&node)
            .arg(&cli)
            .args(["client", "--command", &command, "--scenario", scenario, "--timeout", "30000", "--expected-failures"])
            .arg(&baseline)
            .current_dir(out.path())
            .env("MCPGATE_BIN", env!("CARGO_BIN_EXE_mcpgate"))
            .output()
            .expect("run the conformance CLI");
        if !run.status.success() {
            failed.push(format!("{scenario}:\n{}\n{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr)));
        }
    }
    assert!(failed.is_empty(), "client scenarios off the baseline:\n{}", failed.join("\n"));
}
