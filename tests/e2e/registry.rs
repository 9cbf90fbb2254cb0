//! Part 36: the read-only MCP Registry API (`/v0.1/servers`), per caller. Every answer validates
//! against the registry's OpenAPI description (vendored at a pinned commit,
//! tests/fixtures/registry/); two callers with different grants get two different lists with
//! their own live counts; a caller without a key gets what `[auth]` gives an anonymous caller
//! (a 401 with API keys, the anonymous caller's view without authentication); paging, filters
//! and 404s are as the description has them; and no upstream's URL or command appears.

use crate::harness::*;
use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A validator for the registry's component schema `name` (`ServerList`, `ServerResponse`),
/// formats checked: the description's YAML read as JSON, its `#/components/schemas/…`
/// references moved under `$defs`.
fn schema(name: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(repo().join("tests/fixtures/registry/openapi.yaml")).expect("the vendored OpenAPI");
    let doc = mcpgate_model::yaml::to_json(&text, mcpgate_model::yaml::Keys::Scalars, "the registry's OpenAPI").expect("YAML");
    let defs: Value =
        serde_json::from_str(&doc["components"]["schemas"].to_string().replace("#/components/schemas/", "#/$defs/")).expect("JSON");
    let document = json!({ "$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": defs, "$ref": format!("#/$defs/{name}") });
    jsonschema::options().should_validate_formats(true).build(&document).expect("the schema builds")
}

fn assert_valid(v: &jsonschema::Validator, what: &str, instance: &Value) {
    let errors: Vec<String> = v.iter_errors(instance).map(|e| format!("{e} (at {})", e.instance_path())).collect();
    assert!(errors.is_empty(), "{what}: {errors:?}\n{instance}");
}

async fn get_with(url: &str, headers: &[(&str, &str)]) -> Resp {
    let mut b = http::Request::get(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    send(b.body(Full::new(Bytes::new())).expect("request")).await.expect("HTTP exchange")
}

fn names(list: &Value) -> Vec<String> {
    list["servers"].as_array().expect("servers").iter().filter_map(|s| s["server"]["name"].as_str().map(str::to_string)).collect()
}

fn header<'a>(r: &'a Resp, name: &str) -> &'a str {
    r.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// What a caller's tools/list (and prompts/list) at `url` show, all pages.
async fn listed(url: &str, auth: &[(&str, &str)], method: &str, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut params = json!({});
    loop {
        let r = rpc_with(url, method, params.clone(), auth).await.json();
        let Some(result) = r.get("result") else { return out };
        out.extend(names_in(&result[key]));
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(c) => params = json!({ "cursor": c }),
            None => return out,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_callers_see_two_registries_that_validate() {
    let (_calc, calc_url) = demo_http("calc");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[auth]\nmode = \"api_key\"\n\n\
         [discovery]\npublisher = \"com.example\"\nname = \"gateway\"\n\n\
         [[caller]]\nid = \"alice\"\nkey_sha256 = \"{}\"\nallow = [\"calc__*\"]\ndeny = [\"calc__divide\"]\n\n\
         [[caller]]\nid = \"bob\"\nkey_sha256 = \"{}\"\nallow = [\"upstream:text\"]\n\n\
         [[upstream]]\nid = \"calc\"\nurl = \"{calc_url}\"\n\n\
         [[upstream]]\nid = \"text\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"text\"]\n\n\
         [[endpoint]]\npath = \"/eng\"\ntitle = \"Engineering\"\ninclude = [\"calc__*\"]\n",
        mcpgate::auth::hash_key("alice-key"),
        mcpgate::auth::hash_key("bob-key"),
    );
    let gw = gateway(&config);
    let servers = format!("{}/v0.1/servers", gw.base);
    let (list_schema, server_schema) = (schema("ServerList"), schema("ServerResponse"));
    // The validators are not vacuous.
    assert!(!list_schema.is_valid(&json!({ "servers": [{ "server": { "name": "no-slash", "description": "d", "version": "1" } }] })));
    assert!(!server_schema.is_valid(&json!({ "server": { "name": "a/b", "description": "d", "version": "1" }, "_meta": { "io.modelcontextprotocol.registry/official": { "extra": 1 } } })));

    // Without a key: the 401 the MCP endpoint gives, with its challenge, as the registry's error.
    for auth in [vec![], vec![("Authorization", "Bearer wrong-key")]] {
        let r = get_with(&servers, &auth).await;
        assert_eq!(r.status, 401, "{}", String::from_utf8_lossy(&r.body));
        assert!(header(&r, "www-authenticate").starts_with("Bearer "), "{:?}", r.headers);
        assert!(r.json()["error"].as_str().is_some_and(|e| e.starts_with("Unauthorized")), "{}", r.json());
    }

    let mut seen = Vec::new();
    let mut lists = Vec::new();
    for (key, expected) in [("alice-key", vec!["com.example/eng", "com.example/gateway"]), ("bob-key", vec!["com.example/gateway"])] {
        let bearer = format!("Bearer {key}");
        let auth = [("Authorization", bearer.as_str())];
        let r = get_with(&servers, &auth).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert!(r.content_type().starts_with("application/json"));
        assert_eq!(header(&r, "cache-control"), "private, no-store");
        assert!(r.headers.get_all("vary").iter().any(|v| v.to_str().is_ok_and(|v| v.contains("Authorization"))), "{:?}", r.headers);
        let list = r.json();
        assert_valid(&list_schema, key, &list);
        assert_eq!(names(&list), expected, "{key}: {list}");
        assert_eq!(list["metadata"]["count"], expected.len());
        // Each server's counts and names are the caller's own lists at that endpoint.
        for s in list["servers"].as_array().expect("servers") {
            let remote = s["server"]["remotes"][0]["url"].as_str().expect("a remote").to_string();
            assert!(remote == gw.url || remote == format!("{}/eng", gw.base), "{remote}");
            let view = &s["_meta"]["io.mcpgate/view"];
            let tools = listed(&remote, &auth, "tools/list", "tools").await;
            assert_eq!(view["toolNames"], json!(tools), "{key} at {remote}");
            assert_eq!(view["tools"], tools.len());
            assert_eq!(view["prompts"], listed(&remote, &auth, "prompts/list", "prompts").await.len(), "{key} at {remote}");
            assert_eq!(s["_meta"]["io.modelcontextprotocol.registry/official"]["status"], "active");
        }
        seen.push(r.body.clone());
        lists.push(list);
    }
    assert_ne!(lists[0]["servers"][1]["_meta"], lists[1]["servers"][0]["_meta"], "the root, seen by two callers");
    assert!(!lists[0]["servers"][1]["_meta"]["io.mcpgate/view"]["toolNames"].to_string().contains("calc__divide"));

    // One server, by its encoded name; `latest` and the exact version; unknown and hidden: 404.
    let alice = [("Authorization", "Bearer alice-key")];
    let bob = [("Authorization", "Bearer bob-key")];
    let version = lists[0]["servers"][0]["server"]["version"].as_str().expect("a version").to_string();
    for v in ["latest", version.as_str()] {
        let r = get_with(&format!("{servers}/com.example%2Feng/versions/{v}"), &alice).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_valid(&server_schema, "versions/{v}", &r.json());
        assert_eq!(r.json()["server"]["title"], "Engineering");
        seen.push(r.body.clone());
    }
    let versions = get_with(&format!("{servers}/com.example%2Feng/versions"), &alice).await;
    assert_eq!(versions.status, 200);
    assert_valid(&list_schema, "versions", &versions.json());
    for (url, who) in [
        (format!("{servers}/com.example%2Feng/versions/latest"), &bob),
        (format!("{servers}/com.example%2Feng/versions"), &bob),
        (format!("{servers}/com.example%2Fnope/versions/latest"), &alice),
        (format!("{servers}/com.example%2Feng/versions/0.0.0-nope"), &alice),
    ] {
        let r = get_with(&url, who).await;
        assert_eq!((r.status, r.json()), (404, json!({ "error": "Server not found" })), "{url}");
    }

    // Paging: one at a time, with the cursor given; a cursor that is not one is refused.
    let mut url = format!("{servers}?limit=1");
    let mut paged = Vec::new();
    for _ in 0..3 {
        let page = get_with(&url, &alice).await.json();
        assert_valid(&list_schema, "a page", &page);
        assert_eq!(page["metadata"]["count"], 1);
        paged.extend(names(&page));
        match page["metadata"]["nextCursor"].as_str() {
            Some(c) => url = format!("{servers}?limit=1&cursor={}", form(c)),
            None => break,
        }
    }
    assert_eq!(paged, names(&lists[0]));
    assert_eq!(get_with(&format!("{servers}?cursor=not-a-cursor"), &alice).await.status, 400);
    assert_eq!(get_with(&format!("{servers}?limit=zero"), &alice).await.status, 400);

    // Filters: a name part, a version, a time after the configuration was loaded.
    let by = |q: &str| format!("{servers}?{q}");
    assert_eq!(names(&get_with(&by("search=ENG"), &alice).await.json()), ["com.example/eng"]);
    assert_eq!(names(&get_with(&by("version=latest"), &alice).await.json()).len(), 2);
    let future = get_with(&by("updated_since=2999-01-01T00%3A00%3A00Z"), &alice).await.json();
    assert_valid(&list_schema, "updated_since in the future", &future);
    assert_eq!((names(&future).len(), &future["metadata"]["count"]), (0, &json!(0)));
    assert_eq!(names(&get_with(&by("updated_since=2000-01-01T00%3A00%3A00%2B02%3A00"), &alice).await.json()).len(), 2);
    assert_eq!(get_with(&by("updated_since=yesterday"), &alice).await.status, 400);

    // A browser page from an origin the listener accepts may read it (CORS, as the endpoint).
    let origin = [("Authorization", "Bearer alice-key"), ("Origin", "http://localhost:5173")];
    let r = get_with(&servers, &origin).await;
    assert_eq!((r.status, header(&r, "access-control-allow-origin")), (200, "http://localhost:5173"));
    let pre = http::Request::options(&servers)
        .header("Origin", "http://localhost:5173")
        .header("Access-Control-Request-Method", "GET")
        .header("Access-Control-Request-Headers", "authorization")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let pre = send(pre).await.expect("preflight");
    assert_eq!((pre.status, header(&pre, "access-control-allow-origin")), (204, "http://localhost:5173"));
    assert_eq!(get_with(&servers, &[("Authorization", "Bearer alice-key"), ("Origin", "http://evil.example")]).await.status, 403);

    // Read-only, and nothing of an upstream's address or command.
    let post = post_raw(&servers, &[("Authorization", "Bearer alice-key")], "{}").await;
    assert_eq!((post.status, header(&post, "allow")), (405, "GET"));
    for body in &seen {
        let text = String::from_utf8_lossy(body);
        for secret in [calc_url.as_str(), calc_url.trim_end_matches("/mcp"), "demo-server", "--profile"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
}

/// A query value, percent-encoded.
fn form(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn without_authentication_it_is_the_anonymous_view_and_can_be_turned_off() {
    let config = |registry: bool| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[discovery]\npublisher = \"com.example\"\nname = \"gateway\"\nregistry = {registry}\n\n\
             [[rule]]\nname = \"no-divide\"\neffect = \"deny\"\ntools = [\"calc__divide\"]\n\n\
             [[rule]]\nname = \"ops-closed\"\neffect = \"deny\"\nendpoints = [\"/ops\"]\n\n\
             [[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n\n\
             [[endpoint]]\npath = \"/ops\"\ninclude = [\"calc__*\"]\n"
        )
    };
    let gw = gateway(&config(true));
    let servers = format!("{}/v0.1/servers", gw.base);
    // Anyone is the anonymous caller, a credential or not: what the rules leave it, and /ops,
    // where it may use nothing, is not there.
    for auth in [vec![], vec![("Authorization", "Bearer anything")]] {
        let r = get_with(&servers, &auth).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let list = r.json();
        assert_valid(&schema("ServerList"), "anonymous", &list);
        assert_eq!(names(&list), ["com.example/gateway"]);
        let tools = listed(&gw.url, &[], "tools/list", "tools").await;
        assert!(!tools.is_empty() && !tools.contains(&"calc__divide".to_string()), "{tools:?}");
        assert_eq!(list["servers"][0]["_meta"]["io.mcpgate/view"]["toolNames"], json!(tools));
    }
    assert_eq!(get_with(&format!("{servers}/com.example%2Fops/versions/latest"), &[]).await.status, 404);
    let before =
        get_with(&servers, &[]).await.json()["servers"][0]["_meta"]["io.modelcontextprotocol.registry/official"]["updatedAt"].clone();

    // `[discovery] registry = false`, by a reload: the API is gone; back on, it says when.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(gw.proc.child.id()).expect("pid"));
    for (on, status) in [(false, 404), (true, 200)] {
        std::fs::write(&gw.config_path, config(on)).expect("write the configuration");
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
        let deadline = Instant::now() + Duration::from_secs(15);
        while get_with(&servers, &[]).await.status != status {
            assert!(Instant::now() < deadline, "still not {status} after the reload:\n{}", gw.proc.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let after =
        get_with(&servers, &[]).await.json()["servers"][0]["_meta"]["io.modelcontextprotocol.registry/official"]["updatedAt"].clone();
    assert!(after.as_str() > before.as_str(), "{before} then {after}");
}
