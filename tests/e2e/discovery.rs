//! Discovery (Part 36): the Server Card of the root, of a virtual server and of a renaming
//! endpoint validate against the extension's schema (tests/fixtures/server-card, pinned), and the
//! AI Catalog (at the well-known URI and the older one) lists the public ones; the answers carry
//! the CORS and caching headers the extension asks for (any Origin, ETag and 304, `Vary: Host`
//! without a public URL), refuse a rebinding Host, and never name an upstream (its URL, command or
//! id); a card's title and version are what `server/discover` answers on its endpoint; `[discovery]
//! enabled = false` serves none of it (until a reload turns it on); and a client written the way
//! the Python SDK's server-card PR reads them (tests/py/server_card_client.py) finds the endpoints
//! from the catalog and calls them with the official SDK, through the authentication the cards
//! declare.

use crate::harness::*;
use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};
use std::process::Command;

const CARD_TYPE: &str = "application/mcp-server-card+json";
const CATALOG_TYPE: &str = "application/ai-catalog+json";

/// A validator of `#/$defs/ServerCard` of the vendored schema (draft 2020-12, formats checked).
fn card_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(repo().join("tests/fixtures/server-card/schema.json")).expect("the vendored schema");
    let mut schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    schema["$ref"] = json!("#/$defs/ServerCard");
    jsonschema::options().should_validate_formats(true).build(&schema).expect("the Server Card schema compiles")
}

fn assert_card(v: &jsonschema::Validator, card: &Value) {
    let errors: Vec<String> = v.iter_errors(card).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "the card does not validate: {errors:?}\n{card:#}");
}

/// The root, a virtual server and an endpoint that renames and fixes tools, all public, over the
/// demo upstreams (stdio) and the Python SDK test upstream (HTTP, with an id and a port that must
/// not show); `extra` goes into `[discovery]`, `auth` before it.
fn config(py_url: &str, auth: &str, extra: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n{auth}\
         [discovery]\npublisher = \"com.example\"\nname = \"tools\"\ntitle = \"Example tools\"\n\
         description = \"The example company's MCP tools\"\nwebsite_url = \"https://example.com/mcp-help\"\n\
         public = [\"/mcp\", \"/mcp/dev\", \"/mcp/renamed\"]\n{extra}\n\
         [[discovery.icons]]\nsrc = \"https://example.com/icon.png\"\nmime_type = \"image/png\"\nsizes = [\"48x48\"]\n\n\
         [[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n\n\
         [[upstream]]\nid = \"hushhush\"\nurl = \"{py_url}\"\n\n\
         [[endpoint]]\npath = \"/mcp/dev\"\ntitle = \"Engineering\"\ninclude = [\"upstream:hushhush\"]\n\n\
         [[endpoint]]\npath = \"/mcp/renamed\"\ninclude = [\"calc__add\", \"calc__multiply\"]\n\n\
         [[endpoint.tool]]\nname = \"calc__add\"\nrename = \"plus\"\ndescription = \"Adds.\"\n\n\
         [[endpoint.tool]]\nname = \"calc__multiply\"\nrename = \"times_two\"\nfixed = {{ b = 2 }}\n"
    )
}

async fn get_with(url: &str, headers: &[(&str, &str)]) -> Resp {
    let mut b = http::Request::get(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    send(b.body(Full::new(Bytes::new())).expect("request")).await.expect("HTTP exchange")
}

async fn request(method: &str, url: &str, headers: &[(&str, &str)]) -> Resp {
    let mut b = http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    send(b.body(Full::new(Bytes::new())).expect("request")).await.expect("HTTP exchange")
}

fn header<'a>(r: &'a Resp, name: &str) -> &'a str {
    r.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// The `serverInfo` that `server/discover` answers at `url`.
async fn server_info(url: &str, auth: &[(&str, &str)]) -> Value {
    let d = rpc_with(url, "server/discover", json!({}), auth).await.json();
    d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn cards_and_the_catalog_validate_carry_no_upstream_and_agree_with_discover() {
    let (_py, py_url) = py_http("alpha", &[]);
    let gw = gateway(&config(&py_url, "", ""));
    let validator = card_validator();
    // The validator refuses what the extension's own invalid examples get wrong.
    let schema = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json";
    for bad in [
        json!({ "$schema": schema, "version": "1", "description": "no name" }),
        json!({ "$schema": schema, "name": "no-slash", "version": "1", "description": "a bad name" }),
        json!({ "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json", "name": "a/b", "version": "1", "description": "x" }),
        json!({ "$schema": schema, "name": "a/b", "version": "1", "description": "x", "remotes": [{ "type": "streamable-http", "url": "not a url" }] }),
    ] {
        assert!(!validator.is_valid(&bad), "{bad}");
    }

    // The catalog, at both paths: the same document, the public endpoints in order.
    let catalog = get_with(&format!("{}/.well-known/ai-catalog.json", gw.base), &[]).await;
    assert_eq!((catalog.status, catalog.content_type()), (200, CATALOG_TYPE), "{}", gw.proc.log());
    let older = get_with(&format!("{}/.well-known/mcp/catalog.json", gw.base), &[]).await;
    assert_eq!((older.status, older.content_type(), &older.body), (200, CATALOG_TYPE, &catalog.body));
    let cat = catalog.json();
    assert_eq!(cat["specVersion"], "1.0");
    let entries = cat["entries"].as_array().unwrap_or_else(|| panic!("{cat}"));
    let urls: Vec<&str> = entries.iter().filter_map(|e| e["url"].as_str()).collect();
    let expected: Vec<String> = ["/mcp", "/mcp/dev", "/mcp/renamed"].iter().map(|p| format!("{}{p}/server-card", gw.base)).collect();
    assert_eq!(urls, expected, "{cat}");
    for e in entries {
        assert_eq!(e["type"], CARD_TYPE);
        assert!(e["identifier"].as_str().is_some_and(|i| i.starts_with("urn:air:example.com:mcp:")), "{e}");
        assert!(e.get("data").is_none(), "{e}");
    }
    assert_eq!(entries[0]["identifier"], "urn:air:example.com:mcp:tools");

    // Every card validates, names its own endpoint and agrees with server/discover there.
    let mut documents = vec![String::from_utf8_lossy(&catalog.body).into_owned()];
    for (path, title) in [("/mcp", "Example tools"), ("/mcp/dev", "Engineering"), ("/mcp/renamed", "Example tools")] {
        let r = get_with(&format!("{}{path}/server-card", gw.base), &[("Accept", CARD_TYPE)]).await;
        assert_eq!((r.status, r.content_type()), (200, CARD_TYPE), "{path}");
        let card = r.json();
        assert_card(&validator, &card);
        assert_eq!(card["title"], title, "{card}");
        assert_eq!(card["remotes"][0]["url"], format!("{}{path}", gw.base));
        assert_eq!(card["remotes"][0]["type"], "streamable-http");
        assert!(card["remotes"][0]["supportedProtocolVersions"].as_array().is_some_and(|v| v.contains(&json!(VERSION))), "{card}");
        let info = server_info(&format!("{}{path}", gw.base), &[]).await;
        for key in ["title", "version", "description", "websiteUrl", "icons"] {
            assert_eq!(card[key], info[key], "{path}: the card's {key} is not server/discover's ({info})");
        }
        // The legacy initialize says the same.
        let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } } });
        let legacy = post_raw(
            &format!("{}{path}", gw.base),
            &[("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")],
            init.to_string(),
        )
        .await
        .message();
        assert_eq!(legacy["result"]["serverInfo"]["title"], title, "{legacy}");
        documents.push(String::from_utf8_lossy(&r.body).into_owned());
    }
    // The renaming endpoint really serves its renames (the card it has is its own).
    assert_eq!(tool_names(&format!("{}/mcp/renamed", gw.base)).await, ["plus", "times_two"]);

    // Nothing of an upstream: its URL, its port, its id, its command.
    let py_port = py_url.trim_start_matches("http://127.0.0.1:").split('/').next().unwrap_or("?").to_string();
    for doc in &documents {
        for secret in [
            py_url.as_str(),
            &format!(":{py_port}/"),
            &format!(":{py_port}\""),
            "hushhush",
            "calc",
            "demo-server",
            "upstream_server",
            "alpha",
        ] {
            assert!(!doc.contains(secret), "a discovery document names {secret:?}: {doc}");
        }
    }

    // Not a card: an unknown endpoint, and an endpoint's own path (a GET there is MCP's).
    assert_eq!(get_with(&format!("{}/nope/server-card", gw.base), &[]).await.status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn answers_are_public_cached_revalidated_and_keep_the_host_check() {
    let (_py, py_url) = py_http("alpha", &[]);
    let gw = gateway(&config(&py_url, "", ""));
    let card_url = format!("{}/mcp/dev/server-card", gw.base);

    // Any Origin may read it: CORS `*`, and the caching headers.
    let r = get_with(&card_url, &[("Origin", "https://any.example")]).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(header(&r, "access-control-allow-origin"), "*");
    assert_eq!(header(&r, "access-control-allow-methods"), "GET");
    assert_eq!(header(&r, "access-control-allow-headers"), "Content-Type, If-None-Match");
    assert_eq!(header(&r, "access-control-expose-headers"), "ETag");
    assert_eq!(header(&r, "cache-control"), "public, max-age=3600");
    assert_eq!(header(&r, "vary"), "Host", "the base URL came from Host");
    let etag = header(&r, "etag").to_string();
    assert!(etag.len() == 66 && etag.starts_with('"') && !etag.starts_with("W/"), "a strong ETag: {etag}");

    // Revalidation: 304 without a body, the same tag.
    let again = get_with(&card_url, &[("If-None-Match", &etag)]).await;
    assert_eq!((again.status, header(&again, "etag")), (304, etag.as_str()));
    assert!(again.body.is_empty());
    assert_eq!(header(&again, "access-control-allow-origin"), "*");
    assert_eq!(get_with(&card_url, &[("If-None-Match", "\"stale\"")]).await.status, 200);

    // Another accepted Host names another base URL (and so another tag): why `Vary: Host`.
    let port = gw.base.rsplit(':').next().unwrap_or("0");
    let localhost = get_with(&card_url, &[("Host", &format!("localhost:{port}"))]).await;
    assert_eq!(localhost.status, 200);
    assert_eq!(localhost.json()["remotes"][0]["url"], format!("http://localhost:{port}/mcp/dev"));
    assert_ne!(header(&localhost, "etag"), etag);

    // A Host the loopback listener does not accept is refused, as on every other path.
    let rebound = get_with(&card_url, &[("Host", "evil.example")]).await;
    assert_eq!(rebound.status, 403, "{}", String::from_utf8_lossy(&rebound.body));

    // The preflight, HEAD, and any other method.
    let pre = request(
        "OPTIONS",
        &card_url,
        &[("Origin", "https://any.example"), ("Access-Control-Request-Method", "GET"), ("Access-Control-Request-Headers", "if-none-match")],
    )
    .await;
    assert_eq!((pre.status, header(&pre, "access-control-allow-origin")), (204, "*"));
    assert_eq!(header(&pre, "access-control-allow-headers"), "Content-Type, If-None-Match");
    let head = request("HEAD", &card_url, &[]).await;
    assert_eq!((head.status, header(&head, "etag"), head.content_type()), (200, etag.as_str(), CARD_TYPE));
    assert!(head.body.is_empty());
    let full = get_with(&card_url, &[]).await;
    assert_eq!(header(&head, "content-length"), full.body.len().to_string(), "HEAD says the length GET sends");
    let post = request("POST", &card_url, &[("Content-Type", "application/json")]).await;
    assert_eq!((post.status, header(&post, "allow")), (405, "GET, HEAD, OPTIONS"));
    let cat_post = request("DELETE", &format!("{}/.well-known/ai-catalog.json", gw.base), &[]).await;
    assert_eq!(cat_post.status, 405);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_public_url_is_the_base_and_cards_need_no_credential_but_say_one_is_needed() {
    let (_py, py_url) = py_http("alpha", &[]);
    let auth = format!(
        "[auth]\nmode = \"api_key\"\n\n[[caller]]\nid = \"dev\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n",
        crate::callers::hash("dev-key")
    );
    let gw = gateway(&config(&py_url, &auth, "public_url = \"https://mcp.example.com/tools/\"\n"));
    // No credential needed for the documents, whatever the Host.
    let cat = get_with(&format!("{}/.well-known/ai-catalog.json", gw.base), &[]).await;
    assert_eq!(cat.status, 200, "{}", String::from_utf8_lossy(&cat.body));
    assert_eq!(header(&cat, "vary"), "", "a configured public URL does not depend on Host");
    assert_eq!(cat.json()["entries"][1]["url"], "https://mcp.example.com/tools/mcp/dev/server-card");
    let card = get_with(&format!("{}/mcp/dev/server-card", gw.base), &[]).await.json();
    assert_card(&card_validator(), &card);
    assert_eq!(card["remotes"][0]["url"], "https://mcp.example.com/tools/mcp/dev");
    let declared = &card["remotes"][0]["headers"][0];
    assert_eq!((declared["name"].as_str(), declared["isRequired"].as_bool()), (Some("Authorization"), Some(true)), "{card}");
    // The endpoint itself still needs one; and its serverInfo is the card's once the key is sent.
    assert_eq!(rpc(&format!("{}/mcp/dev", gw.base), "tools/list", json!({})).await.status, 401);
    let info = server_info(&format!("{}/mcp/dev", gw.base), &[("Authorization", "Bearer dev-key")]).await;
    assert_eq!((&info["title"], &info["version"]), (&card["title"], &card["version"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn discovery_off_serves_no_card_and_no_catalog_until_a_reload_turns_it_on() {
    let gw = crate::demo_gateway("\n[discovery]\nenabled = false\n");
    for path in ["/mcp/server-card", "/.well-known/ai-catalog.json", "/.well-known/mcp/catalog.json"] {
        let r = get_with(&format!("{}{path}", gw.base), &[]).await;
        assert_eq!(r.status, 404, "{path}: {}", String::from_utf8_lossy(&r.body));
        assert!(r.headers.get("access-control-allow-origin").is_none(), "{path}");
    }
    assert!(!tool_names(&gw.url).await.is_empty(), "the endpoint itself is served");

    // Turned on by a reload, with a title: the next request has the card, and the title shows in
    // server/discover too.
    let text = std::fs::read_to_string(&gw.config_path).expect("the config").replace("enabled = false", "title = \"Reloaded\"");
    std::fs::write(&gw.config_path, text).expect("rewrite the config");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let card = loop {
        let r = get_with(&format!("{}/mcp/server-card", gw.base), &[]).await;
        if r.status == 200 {
            break r.json();
        }
        assert!(std::time::Instant::now() < deadline, "no card after the reload:\n{}", gw.proc.log());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(card["title"], "Reloaded");
    assert_eq!(server_info(&gw.url, &[]).await["title"], "Reloaded");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_written_like_the_sdk_pr_discovers_and_calls_every_public_endpoint() {
    let (_py, py_url) = py_http("alpha", &[]);
    let auth = format!(
        "[auth]\nmode = \"api_key\"\n\n[[caller]]\nid = \"dev\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n",
        crate::callers::hash("dev-key")
    );
    let gw = gateway(&config(&py_url, &auth, ""));
    let out = Command::new(python())
        .arg(repo().join("tests/py/server_card_client.py"))
        .arg(&gw.base)
        .args(["--bearer", "dev-key"])
        .output()
        .expect("run the server-card client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}\n{}\n{}", out.status, String::from_utf8_lossy(&out.stderr), gw.proc.log());
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    for line in &lines {
        assert_eq!(line["contentType"], CARD_TYPE);
        assert_eq!(line["disagreements"], json!([]), "{line}");
        assert_eq!(line["serverInfo"]["title"], line["card"]["title"]);
    }
    let tools = |i: usize| lines[i]["tools"].as_array().map(|t| t.iter().filter_map(Value::as_str).map(str::to_string).collect::<Vec<_>>());
    assert!(tools(0).is_some_and(|t| t.iter().any(|n| n == "calc__add") && t.iter().any(|n| n.starts_with("hushhush__"))), "{stdout}");
    assert!(tools(1).is_some_and(|t| !t.is_empty() && t.iter().all(|n| n.starts_with("hushhush__"))), "{stdout}");
    assert_eq!(tools(2), Some(vec!["plus".to_string(), "times_two".to_string()]), "{stdout}");
    assert_eq!(lines[1]["serverInfo"]["title"], "Engineering");

    // Without the credential the card asks for, the client says so.
    let out = Command::new(python()).arg(repo().join("tests/py/server_card_client.py")).arg(&gw.base).output().expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs header Authorization"), "{}", String::from_utf8_lossy(&out.stderr));
}
