//! The official MCP conformance suite (@modelcontextprotocol/conformance, pinned) runs through
//! the gateway: the project's fixture server (tests/py/conformance_fixture.py, on the official
//! Python SDK) sits behind mcpgate with `prefix = ""`, once over HTTP and once over stdio, and
//! the suite's server scenarios run against the gateway for the 2026-07-28 and the 2025-11-25
//! requirement sets. Failures must match tests/conformance/expected-failures.yml exactly, and no
//! unscored scenario (the tasks extension among them) may fail. The suite's client scenarios run
//! with mcpgate as the client: tests/py/conformance_client_driver.py makes the suite's mock server
//! an upstream of a fresh gateway and drives it with the official SDK client. The Agent Skills
//! extension scenarios (`sep-2640-*`) run against the gateway in front of two FastMCP
//! `SkillsExtension` upstreams whose skill names overlap (tests/py/skills_server.py).

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

/// The suite's Agent Skills server scenarios (SEP-2640, an extension: not in a revision's
/// requirement set, so each runs by name).
const SKILLS_SCENARIOS: &[&str] = &["sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory"];

/// The one warning merging adds: two upstreams serve a skill of the same name (SEP-2640: names
/// "SHOULD be unique, but they are not guaranteed to be"; the `skill://<prefix>/` URIs tell them
/// apart, as hosts must).
const MERGE_WARNING: &str = "sep-2640-names-should-be-unique";

/// Runs one server scenario against `url`: whether it exited cleanly, the ids of its failed and
/// of its warning checks, and its output.
fn scenario_checks(url: &str, scenario: &str) -> (bool, Vec<String>, Vec<String>, String) {
    let node = tool("MCPGATE_NODE22", ".work/node22/node_modules/node/bin/node");
    let cli = tool("MCPGATE_CONFORMANCE_JS", ".work/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let out = tempfile::tempdir().expect("tempdir");
    let run = Command::new(&node)
        .arg(&cli)
        .args(["server", "--url", url, "--scenario", scenario])
        .current_dir(out.path())
        .output()
        .expect("run the conformance CLI");
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    let ids = |status: &str| -> Vec<String> {
        stdout
            .lines()
            .filter(|l| l.contains(status))
            .filter_map(|l| l.split_once(" [sep-").map(|(_, rest)| format!("sep-{}", rest.split(']').next().unwrap_or_default().trim())))
            .collect()
    };
    let (failed, warned) = (ids("FAILURE"), ids("WARNING"));
    (run.status.success(), failed, warned, format!("{stdout}\n{}", String::from_utf8_lossy(&run.stderr)))
}

/// Through the gateway, each scenario has no failed check, and no warning the upstream does not
/// show when spoken to directly (FastMCP's own SKILL.md resource metadata draws SHOULD-level
/// warnings either way), but for [`MERGE_WARNING`].
#[test]
fn skills_scenarios_pass_through_the_gateway_in_front_of_two_fastmcp_skill_servers() {
    let roots = crate::skills::skill_roots();
    // Two per page: the merged skills/list (three skills) takes two pages of the gateway's cursors.
    let gw = gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[catalog]\npage_size = 2\n\n{}",
        crate::skills::skill_upstreams(roots.path(), [true, true])
    ));
    let a = roots.path().join("a").display().to_string();
    let (_direct, direct_url) = py_script_http("tests/py/skills_server.py", &["--root", &a, "--directory-read"]);
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let first = rt.block_on(rpc(&gw.url, "skills/list", serde_json::json!({}))).json();
    let cursor = first["result"]["nextCursor"].as_str().unwrap_or_else(|| panic!("a second page: {first}")).to_string();
    let second = rt.block_on(rpc(&gw.url, "skills/list", serde_json::json!({ "cursor": cursor }))).json();
    let count = |page: &serde_json::Value| page["result"]["skills"].as_array().map_or(0, Vec::len);
    assert_eq!((count(&first), count(&second), second["result"].get("nextCursor")), (2, 1, None), "{first}\n{second}");
    for scenario in SKILLS_SCENARIOS {
        let (ok, failed, warned, out) = scenario_checks(&gw.url, scenario);
        assert!(ok && failed.is_empty(), "{scenario} through the gateway: failed {failed:?}\n{out}\ngateway log:\n{}", gw.proc.log());
        assert!(out.contains("SUCCESS") && !out.contains("SKIPPED"), "{scenario} ran its checks (none skipped):\n{out}");

        let (_, _, direct_warned, _) = scenario_checks(&direct_url, scenario);
        let added: Vec<&String> = warned.iter().filter(|w| *w != MERGE_WARNING && !direct_warned.contains(w)).collect();
        assert!(added.is_empty(), "{scenario}: the gateway adds warnings {added:?} (directly: {direct_warned:?})\n{out}");
        println!("{scenario}: no failure; warnings {warned:?} (directly: {direct_warned:?})");
    }
}

/// The client scenarios of the suite that concern a gateway. In the `auth/*` ones the mock
/// server is OAuth-protected: the gateway is the OAuth client (per-user identity, DPoP-bound
/// where the server binds; the `client-credentials-*` ones the client-credentials extension, the
/// `wif-*` and `enterprise-managed-*` ones the assertion grants), and the driver plays the user.
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
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/wif-jwt-bearer",
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
];

#[test]
fn client_scenarios_run_with_mcpgate_as_the_client() {
    run_client_scenarios(CLIENT_SCENARIOS);
}

/// The suite's Agent Skills client scenarios: mcpgate lists the mock's skills and fetches no file
/// ahead of need, and relays no skill file whose size, digest or (for `SKILL.md`) frontmatter
/// differs from the listing, so the driver, a host that trusts the gateway, never goes on to
/// a tampered skill's other files.
const SKILLS_CLIENT_SCENARIOS: &[&str] =
    &["sep-2640-client-no-prefetch", "sep-2640-client-verify-digest", "sep-2640-client-verify-size", "sep-2640-client-verify-frontmatter"];

#[test]
fn skills_client_scenarios_run_with_mcpgate_as_the_client() {
    run_client_scenarios(SKILLS_CLIENT_SCENARIOS);
}

fn run_client_scenarios(scenarios: &[&str]) {
    let node = tool("MCPGATE_NODE22", ".work/node22/node_modules/node/bin/node");
    let cli = tool("MCPGATE_CONFORMANCE_JS", ".work/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let baseline = repo().join("tests/conformance/expected-failures.yml");
    let driver = repo().join("tests/py/conformance_client_driver.py");
    let command = format!("'{}' '{}'", python(), driver.display());
    let mut failed = Vec::new();
    for scenario in scenarios {
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
