//! Virtual servers (Part 13): two endpoints over the same third-party upstreams (the official
//! Python SDK test upstream, FastMCP, and the SDK server whose tools change at runtime) show
//! different tools; a renamed tool is called by its new name and the upstream gets its own name
//! and the fixed argument (it echoes both back); a client cannot pass a fixed argument; a listen
//! stream on one endpoint hears a change only when that endpoint's view changed; a caller whose
//! grants exclude a selected tool never sees it; the official SDK client lists and calls
//! through an endpoint in both eras.

use crate::harness::*;
use crate::streams::*;
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

const CHANGED: &str = "notifications/tools/list_changed";
const ACK: &str = "notifications/subscriptions/acknowledged";

/// Two endpoints over three upstreams; with `callers`, API-key callers `all` and `nosql`.
fn config(py: &str, chg: &str, callers: bool) -> String {
    let fastmcp = repo().join("tests/py/fastmcp_server.py");
    let auth = if callers {
        format!(
            "[auth]\nmode = \"api_key\"\n\n\
             [[caller]]\nid = \"all\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\n\n\
             [[caller]]\nid = \"nosql\"\nkey_sha256 = \"{}\"\nallow = [\"*\"]\ndeny = [\"py__execute_sql\"]\n\n\
             [[rate_limit]]\ntools = \"py__execute_sql\"\nlimit = \"1/s\"\n\n",
            crate::callers::hash("all-key"),
            crate::callers::hash("nosql-key"),
        )
    } else {
        String::new()
    };
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n{auth}\
         [[upstream]]\nid = \"py\"\nurl = \"{py}\"\n\n\
         [[upstream]]\nid = \"fm\"\ncommand = [{:?}, {:?}]\ntimeout = \"20s\"\n\n\
         [[upstream]]\nid = \"chg\"\nurl = \"{chg}\"\n\n\
         [[endpoint]]\npath = \"/mcp/dev\"\ntitle = \"Engineering\"\ninstructions = \"Tools for the engineering team.\"\n\
         include = [\"py__echo\", \"py__execute_sql\", \"chg__*\"]\nexclude = [\"chg__confirm\"]\n\n\
         [[endpoint.tool]]\nname = \"py__echo\"\nrename = \"say\"\ndescription = \"Says the team greeting.\"\nfixed = {{ text = \"hello from dev\" }}\n\n\
         [[endpoint.tool]]\nname = \"py__execute_sql\"\nrename = \"query_eu\"\nannotations = {{ readOnlyHint = true }}\nfixed = {{ region = \"eu\" }}\n\n\
         [[endpoint]]\npath = \"/mcp/support\"\ntitle = \"Support\"\ninclude = [\"upstream:fm\"]\n",
        python(),
        fastmcp.display().to_string(),
    )
}

async fn list(url: &str, key: &str) -> Vec<Value> {
    let r = rpc_with(url, "tools/list", json!({}), &[("Authorization", &format!("Bearer {key}"))]).await.json();
    r["result"]["tools"].as_array().cloned().unwrap_or_else(|| panic!("{r}"))
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().filter_map(|t| t["name"].as_str()).collect()
}

async fn call_as(url: &str, key: &str, name: &str, args: Value) -> Value {
    rpc_with(url, "tools/call", json!({ "name": name, "arguments": args }), &[("Authorization", &format!("Bearer {key}"))]).await.message()
}

#[tokio::test(flavor = "multi_thread")]
async fn endpoints_present_curated_views_that_compose_with_policy() {
    let (_py, py) = py_http("alpha", &[]);
    let (_chg, chg) = py_script_http("tests/py/changing_server.py", &[]);
    let gw = gateway(&config(&py, &chg, true));
    let (dev, support) = (format!("{}/mcp/dev", gw.base), format!("{}/mcp/support", gw.base));

    let dev_tools = list(&dev, "all-key").await;
    assert_eq!(
        names(&dev_tools),
        ["say", "query_eu", "chg__base", "chg__add_tool", "chg__add_many", "chg__redescribe", "chg__touch"],
        "{}",
        gw.proc.log()
    );
    assert_eq!(names(&list(&support, "all-key").await), ["fm__add", "fm__shout"]);
    assert!(names(&list(&gw.url, "all-key").await).contains(&"py__whoami"), "the root keeps the whole catalogue");

    // The presentation: the new description, the annotation, and no fixed argument in the schema.
    let say = &dev_tools[0];
    assert_eq!(say["description"], "Says the team greeting.");
    assert!(say["inputSchema"]["properties"].get("text").is_none(), "{say}");
    assert_eq!(dev_tools[1]["annotations"]["readOnlyHint"], true, "{}", dev_tools[1]);
    assert!(dev_tools[1]["inputSchema"]["properties"].get("region").is_none(), "{}", dev_tools[1]);

    // Called by the new name: the upstream gets its own name and the fixed value (it echoes it,
    // and the mirrored header carries it too).
    assert_eq!(text_of(&call_as(&dev, "all-key", "say", json!({})).await), "hello from dev");
    assert_eq!(text_of(&call_as(&dev, "all-key", "query_eu", json!({ "query": "select 1" })).await), "region=eu header=eu at=alpha");
    let limited = call_as(&dev, "all-key", "query_eu", json!({ "query": "select 2" })).await;
    assert_eq!(limited["error"]["code"], 429, "rate limits apply by the catalogue name: {limited}");
    let forced = call_as(&dev, "all-key", "say", json!({ "text": "something else" })).await;
    assert_eq!(forced["error"]["code"], -32602, "a fixed argument cannot be passed: {forced}");
    for (url, name) in [(&dev, "py__echo"), (&support, "say"), (&support, "py__echo")] {
        let hidden = call_as(url, "all-key", name, json!({ "text": "x" })).await;
        assert_eq!(hidden["error"]["message"], format!("Unknown tool: {name}"), "{url}: {hidden}");
    }

    // Policy composes: a caller denied py__execute_sql sees it on no endpoint, under no name.
    assert_eq!(
        names(&list(&dev, "nosql-key").await),
        ["say", "chg__base", "chg__add_tool", "chg__add_many", "chg__redescribe", "chg__touch"]
    );
    let denied = call_as(&dev, "nosql-key", "query_eu", json!({ "query": "x" })).await;
    assert_eq!(denied["error"]["message"], "Unknown tool: query_eu", "{denied}");

    // Each endpoint describes itself.
    let d = rpc_with(&dev, "server/discover", json!({}), &[("Authorization", "Bearer all-key")]).await.json();
    assert_eq!(d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["title"], "Engineering", "{d}");
    assert!(d["result"]["instructions"].as_str().is_some_and(|i| i.starts_with("Tools for the engineering team.")), "{d}");

    // A change reaches the listeners of the endpoints whose view it changes, and no others.
    let auth = [("Authorization", "Bearer all-key")];
    let on_dev = listen(&dev, "D", json!({ "toolsListChanged": true }), &auth).await;
    let on_support = listen(&support, "S", json!({ "toolsListChanged": true }), &auth).await;
    assert_eq!(on_dev.wait_for(ACK, 1, Duration::from_secs(5)).await, 1);
    assert_eq!(on_support.wait_for(ACK, 1, Duration::from_secs(5)).await, 1);
    let added = call_as(&dev, "all-key", "chg__add_tool", json!({ "name": "fresh" })).await;
    assert_eq!(text_of(&added), "added fresh", "{added}");
    assert_eq!(on_dev.wait_for(CHANGED, 1, Duration::from_secs(3)).await, 1, "{}", gw.proc.log());
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(on_support.count(CHANGED), 0, "support's view did not change: {:#?}", on_support.all());
    assert!(names(&list(&dev, "all-key").await).contains(&"chg__fresh"));

    // Audit lines name the endpoint, and the tool by its catalogue name, with the name the endpoint presents beside it.
    assert!(
        gw.proc.log().contains("endpoint=/mcp/dev method=tools/call item=py__echo presented=say upstream=py outcome=ok"),
        "{}",
        gw.proc.log()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_client_uses_an_endpoint_in_both_eras() {
    let (_py, py) = py_http("alpha", &[]);
    let (_chg, chg) = py_script_http("tests/py/changing_server.py", &[]);
    let gw = gateway(&config(&py, &chg, false));
    let dev = format!("{}/mcp/dev", gw.base);
    for mode in ["2026-07-28", "legacy"] {
        let listed = sdk(mode, &dev, &["list"]);
        assert_eq!(listed["tools"][0], "say", "{mode}: {listed}");
        let said = sdk(mode, &dev, &["call", "say", "{}"]);
        assert_eq!(said["content"][0]["text"], "hello from dev", "{mode}: {said}");
    }
}

const CALC_ENDPOINTS: &str = "[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n\n\
    [[endpoint]]\npath = \"/mcp/calc\"\ninclude = [\"calc__*\"]\nexclude = [\"calc__divide\"]\n\n\
    [[endpoint.tool]]\nname = \"calc__add\"\nrename = \"plus_one\"\nfixed = { b = 1 }\n\n\
    [[endpoint.tool]]\nname = \"calc__echo\"\nfixed = { nope = 1 }\n\n\
    [[endpoint]]\npath = \"/mcp/empty\"\ninclude = [\"nothing__*\"]\n";

#[test]
fn check_shows_each_endpoint_and_what_it_cannot_apply() {
    let dir = write_config(CALC_ENDPOINTS);
    let cfg = dir.path().join("gateway.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgate")).arg("check").arg("-c").arg(&cfg).output().expect("check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Endpoint /mcp/calc: 2 tools"), "{text}");
    assert!(text.contains("calc__add (as plus_one), fixed: b"), "{text}");
    assert!(text.contains("fixed argument 'nope' is not in the tool's inputSchema"), "{text}");
    assert!(text.contains("on endpoint /mcp/empty: the selection matches nothing"), "{text}");

    // `mcpgate stdio --endpoint` serves that view to a local client, in both eras.
    let command = format!("{} stdio -c {} --endpoint /mcp/calc", env!("CARGO_BIN_EXE_mcpgate"), cfg.display());
    for mode in ["2026-07-28", "legacy"] {
        let run = |args: &[&str]| {
            let out = Command::new(python())
                .arg(repo().join("tests/py/modern_client.py"))
                .args(["--mode", mode, "--stdio", &command])
                .args(args)
                .output()
                .expect("run the Python SDK client");
            let stdout = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(out.status.success(), "{mode} {args:?}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
            serde_json::from_str::<Value>(stdout.lines().last().unwrap_or_default()).expect("JSON")
        };
        assert_eq!(run(&["list"])["tools"], json!(["plus_one", "calc__multiply"]), "{mode}");
        assert_eq!(run(&["call", "plus_one", r#"{"a": 41}"#])["content"][0]["text"], "42", "{mode}");
    }
    let wrong = Command::new(env!("CARGO_BIN_EXE_mcpgate"))
        .args(["stdio", "-c"])
        .arg(&cfg)
        .args(["--endpoint", "/mcp/nope"])
        .output()
        .expect("stdio");
    assert!(!wrong.status.success() && String::from_utf8_lossy(&wrong.stderr).contains("no [[endpoint]] has path '/mcp/nope'"));
}
