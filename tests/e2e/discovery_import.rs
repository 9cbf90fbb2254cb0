//! Consuming discovery: `mcpgate import --discover` against a local "domain"
//! (tests/py/discovery_domain.py) serving an AI Catalog with two MCP servers, one that asks for
//! OAuth (tests/py/sdk_auth_server.py, its own authorization server: a 401 naming its
//! protected-resource metadata; its card inline in the catalog) and one that takes an API key in
//! `X-Api-Key` (tests/py/api_key_server.py, its card behind a URL, and published by the server
//! itself at `/mcp/server-card` too), beside an entry of another type. The config it writes has
//! `user_auth` for the first and a placeholder for the key of the second, names the one variable
//! to export, and `mcpgate check` accepts it once that variable is set; `check` also compares the
//! card the API-key server publishes with what it answers (its version differs: a note, not a
//! failure). `--registry` reads a two-page registry list (the registry OpenAPI's shape) the same
//! way, skipping a server with packages only and a deleted one, and keeping each name's latest.

use crate::harness::*;
use crate::identity::listening;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

const CARD_TYPE: &str = "application/mcp-server-card+json";
const SCHEMA: &str = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json";
/// The API key the test's server takes.
const KEY: &str = "crm-key-0123456789";

fn mcpgate(args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate")).args(args).envs(envs.iter().copied()).output().expect("run mcpgate");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// The two servers: the OAuth one (its base URL) and the API-key one (its base URL), which
/// publishes `card` at its own `/mcp/server-card`.
struct Servers {
    _oauth: Proc,
    oauth: String,
    _crm: Proc,
    crm: String,
}

fn servers(dir: &Path) -> Servers {
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/sdk_auth_server.py")).args(["--port", "0", "--log"]).arg(dir.join("sdk-as.jsonl"));
    let (oauth_proc, oauth) = listening(cmd, "the OAuth server");
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/api_key_server.py"))
        .args(["--port", "0", "--keys", &format!("ops={KEY}"), "--card"])
        .arg(dir.join("crm-card.json"));
    let (crm_proc, crm) = listening(cmd, "the API-key server");
    Servers { _oauth: oauth_proc, oauth, _crm: crm_proc, crm }
}

fn files_card(s: &Servers) -> Value {
    json!({
        "$schema": SCHEMA, "name": "local.test/files", "version": "1.0.0", "title": "Files",
        "description": "Files, each user's own.",
        "remotes": [{ "type": "streamable-http", "url": format!("{}/mcp", s.oauth) }]
    })
}

fn crm_card(s: &Servers) -> Value {
    json!({
        "$schema": SCHEMA, "name": "local.test/crm", "version": "9.9.9", "title": "CRM",
        "description": "The CRM.",
        "remotes": [{
            "type": "streamable-http", "url": format!("{}/mcp", s.crm),
            "headers": [{ "name": "X-Api-Key", "description": "Your CRM key.", "isRequired": true, "isSecret": true }],
            "supportedProtocolVersions": ["2026-07-28", "1999-01-01"]
        }]
    })
}

/// Starts the domain serving `routes` (path → document); its base URL and its request log.
fn domain(dir: &Path, routes: Value) -> (Proc, String, std::path::PathBuf) {
    let file = dir.join("routes.json");
    std::fs::write(&file, routes.to_string()).expect("write the routes");
    let log = dir.join("domain.jsonl");
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/py/discovery_domain.py")).arg("--routes").arg(&file).arg("--log").arg(&log);
    let (proc, base) = listening(cmd, "the domain");
    (proc, base, log)
}

/// `mcpgate check -c config` with the key exported: its output, after asserting it succeeded.
fn check_passes(config: &Path, toml: &str) -> String {
    let (code, out, err) = mcpgate(&["check", "-c", &config.display().to_string()], &[("CRM_X_API_KEY", KEY)]);
    assert_eq!(code, 0, "check refused the imported config:\n{out}\n{err}\n{toml}");
    assert!(out.lines().any(|l| l.starts_with("crm") && l.contains("ready")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("files") && l.contains("per caller")), "{out}");
    assert!(out.contains("files (each caller's own authorization):"), "{out}");
    out
}

#[test]
fn import_discover_writes_a_config_that_check_accepts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = servers(dir.path());
    std::fs::write(dir.path().join("crm-card.json"), crm_card(&s).to_string()).expect("write the card");
    let catalog = json!({
        "specVersion": "1.0",
        "entries": [
            { "identifier": "urn:air:test.local:mcp:files", "type": CARD_TYPE, "data": files_card(&s) },
            { "identifier": "urn:air:test.local:mcp:crm", "type": CARD_TYPE, "url": "/cards/crm" },
            { "identifier": "urn:air:test.local:agent:helper", "type": "application/a2a-agent-card+json", "url": "/agents/helper" }
        ]
    });
    let routes = json!({
        "/.well-known/ai-catalog.json": { "type": "application/ai-catalog+json", "json": catalog },
        "/cards/crm": { "type": CARD_TYPE, "json": crm_card(&s) }
    });
    let (_domain, base, log) = domain(dir.path(), routes);

    let config = dir.path().join("gateway.toml");
    let (code, _, err) = mcpgate(&["import", "--discover", &base, "-o", &config.display().to_string()], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("imported 2 servers from the AI Catalog of {base}")), "{err}");
    assert!(err.lines().any(|l| l == "export before running: CRM_X_API_KEY"), "one variable, the key's: {err}");
    assert!(err.contains("1 catalog entry of another type than MCP Server Card left out"), "{err}");
    let toml = std::fs::read_to_string(&config).expect("written");
    let t: toml::Table = toml::from_str(&toml).unwrap_or_else(|e| panic!("not TOML ({e}):\n{toml}"));
    let ups = t["upstream"].as_array().expect("upstreams");
    let by_id = |id: &str| ups.iter().find(|u| u["id"].as_str() == Some(id)).unwrap_or_else(|| panic!("no {id}:\n{toml}"));
    assert_eq!(by_id("files")["url"].as_str(), Some(format!("{}/mcp", s.oauth).as_str()));
    assert_eq!(by_id("files")["user_auth"]["kind"].as_str(), Some("oauth"), "{toml}");
    assert_eq!(by_id("crm")["headers"]["X-Api-Key"]["env"].as_str(), Some("CRM_X_API_KEY"), "{toml}");
    assert!(by_id("crm").get("user_auth").is_none(), "{toml}");
    assert_eq!(t["identity"]["allow_loopback"].as_bool(), Some(true), "{toml}");
    assert!(!toml.contains(KEY), "{toml}");

    // The card behind a URL was asked for as a card; the catalog at the well-known place.
    let requests = std::fs::read_to_string(&log).expect("the domain's log");
    let asked: Vec<Value> = requests.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(asked.iter().any(|r| r["path"] == "/.well-known/ai-catalog.json"), "{requests}");
    assert!(asked.iter().any(|r| r["path"] == "/cards/crm" && r["accept"] == CARD_TYPE), "{requests}");
    assert!(!asked.iter().any(|r| r["path"] == "/agents/helper"), "another type's entry is not fetched: {requests}");

    let out = check_passes(&config, &toml);
    // The card crm publishes itself differs from what the server says: notes, not a failure.
    let cards = out.split("Server cards").nth(1).unwrap_or_else(|| panic!("no card section:\n{out}"));
    assert!(cards.contains("crm: its card gives the version \"9.9.9\", the server \"1.0.0\""), "{out}");
    assert!(cards.contains("crm: its card lists protocol versions the server does not support: \"1999-01-01\""), "{out}");
    assert!(cards.contains("crm: its card names it \"local.test/crm\", the server \"api-key-server\""), "{out}");
    let (code, _, err) = mcpgate(&["check", "-c", &config.display().to_string()], &[]);
    assert_eq!(code, 2, "without the key exported, the config says which is missing: {err}");
    assert!(err.contains("CRM_X_API_KEY") && err.contains("is not set"), "{err}");

    // Plain http is for loopback only; an existing file is never overwritten.
    let (code, _, err) = mcpgate(&["import", "--discover", "http://example.com"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("only https URLs are fetched"), "{err}");
    let (code, _, err) = mcpgate(&["import", "--discover", &base, "-o", &config.display().to_string()], &[]);
    assert_ne!(code, 0, "{err}");
}

#[test]
fn import_registry_reads_every_page_and_keeps_each_latest_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = servers(dir.path());
    let official = |latest: bool, status: &str| {
        json!({ "io.modelcontextprotocol.registry/official": {
            "status": status, "isLatest": latest,
            "publishedAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"
        } })
    };
    let server = |card: Value, version: &str| {
        let mut c = card;
        c["version"] = json!(version);
        c.as_object_mut().map(|o| o.remove("$schema"));
        c
    };
    let mut old_crm = crm_card(&s);
    old_crm["remotes"][0]["url"] = json!("https://crm.old.example.com/mcp");
    let page1 = json!({
        "servers": [
            { "server": server(old_crm, "0.9.0"), "_meta": official(false, "active") },
            { "server": server(files_card(&s), "1.0.0"), "_meta": official(true, "active") },
            { "server": { "name": "local.test/local-only", "description": "Runs locally.", "version": "1.0.0",
                          "packages": [{ "registryType": "npm", "identifier": "@test/local", "version": "1.0.0", "transport": { "type": "stdio" } }] },
              "_meta": official(true, "active") }
        ],
        "metadata": { "nextCursor": "p2", "count": 3 }
    });
    let page2 = json!({
        "servers": [
            { "server": server(crm_card(&s), "1.0.0"), "_meta": official(true, "active") },
            { "server": { "name": "local.test/gone", "description": "Gone.", "version": "1.0.0",
                          "remotes": [{ "type": "streamable-http", "url": "https://gone.example.com/mcp" }] },
              "_meta": official(true, "deleted") }
        ],
        "metadata": { "count": 2 }
    });
    let routes = json!({
        "/v0.1/servers": { "json": page1 },
        "/v0.1/servers?cursor=p2": { "json": page2 }
    });
    let (_domain, base, _log) = domain(dir.path(), routes);

    let config = dir.path().join("gateway.toml");
    let (code, _, err) = mcpgate(&["import", "--registry", &base, "-o", &config.display().to_string()], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("imported 2 servers"), "{err}");
    assert!(err.contains("server 'local.test/local-only': it lists only packages to run"), "{err}");
    let toml = std::fs::read_to_string(&config).expect("written");
    assert!(!toml.contains("crm.old.example.com") && !toml.contains("gone"), "the latest crm only, no deleted server:\n{toml}");
    assert!(toml.contains(&format!("url = \"{}/mcp\"", s.crm)), "{toml}");
    check_passes(&config, &toml);
}

/// The two halves together: one gateway publishes (its AI Catalog, its cards, its registry API),
/// and `mcpgate import` on another machine turns each into a configuration whose upstreams are
/// that gateway's endpoints, which `mcpgate check` then reaches.
#[test]
fn a_gateway_imports_another_gateways_catalog_and_registry() {
    let (_demo, demo) = demo_http("calc");
    let front = gateway(&format!(
        "[discovery]\npublisher = \"com.example\"\nname = \"front\"\npublic = [\"/mcp\", \"/calc\"]\n\n\
         [[upstream]]\nid = \"calc\"\nurl = \"{demo}\"\n\n[[endpoint]]\npath = \"/calc\"\ntitle = \"Calculator\"\ninclude = [\"calc__*\"]\n"
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    for (how, file) in [("--discover", "from-catalog.toml"), ("--registry", "from-registry.toml")] {
        let config = dir.path().join(file);
        let (code, _, err) = mcpgate(&["import", how, &front.base, "-o", &config.display().to_string()], &[]);
        assert_eq!(code, 0, "{how}: {err}");
        let toml = std::fs::read_to_string(&config).expect("written");
        for path in ["/mcp", "/calc"] {
            assert!(toml.contains(&format!("url = \"{}{path}\"", front.base)), "{how}: the endpoint {path}:\n{toml}");
        }
        assert!(!toml.contains(&demo), "{how}: the front gateway's upstream is never named:\n{toml}");
        let (code, out, err) = mcpgate(&["check", "-c", &config.display().to_string()], &[]);
        assert_eq!(code, 0, "{how}: check refused the imported config:\n{out}\n{err}\n{toml}");
    }
}
