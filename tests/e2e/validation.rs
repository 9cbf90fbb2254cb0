//! Brief §2.3 header/body validation and the modern error codes, through the real binary.

use crate::harness::*;
use serde_json::json;

fn base(method: &str) -> Vec<(&'static str, String)> {
    vec![("Content-Type", "application/json".into()), ("MCP-Protocol-Version", VERSION.into()), ("Mcp-Method", method.into())]
}

async fn send_with(url: &str, method: &str, params: serde_json::Value, headers: Vec<(&str, String)>) -> Resp {
    let mut params = params;
    if params.get("_meta").is_none() {
        params["_meta"] = meta();
    }
    let body = json!({ "jsonrpc": "2.0", "id": 9, "method": method, "params": params }).to_string();
    let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    post_raw(url, &refs, body).await
}

fn assert_error(r: &Resp, status: u16, code: i64, why: &str) -> serde_json::Value {
    assert_eq!(r.status, status, "{why}: {}", String::from_utf8_lossy(&r.body));
    let m = r.json();
    assert_eq!(m["error"]["code"], code, "{why}: {m}");
    m
}

#[tokio::test(flavor = "multi_thread")]
async fn every_header_mismatch_is_400_and_32020() {
    let gw = crate::demo_gateway("");
    let call = json!({ "name": "calc__add", "arguments": { "a": 1, "b": 2 } });
    type Case<'a> = (&'a str, &'a str, serde_json::Value, Vec<(&'a str, String)>);
    let mut cases: Vec<Case> = Vec::new();
    let without = |name: &str| base("tools/list").into_iter().filter(|(k, _)| *k != name).collect::<Vec<_>>();
    cases.push(("missing MCP-Protocol-Version", "tools/list", json!({}), without("MCP-Protocol-Version")));
    cases.push(("missing Mcp-Method", "tools/list", json!({}), without("Mcp-Method")));
    let mut h = base("tools/list");
    h[1].1 = "2025-11-25".into();
    cases.push(("version header differs from _meta", "tools/list", json!({}), h));
    cases.push(("Mcp-Method differs", "tools/list", json!({}), base("tools/call")));
    cases.push(("Mcp-Method differs in case", "tools/list", json!({}), base("TOOLS/LIST")));
    cases.push(("missing Mcp-Name", "tools/call", call.clone(), base("tools/call")));
    let with = |extra: Vec<(&'static str, &str)>| {
        let mut h = base("tools/call");
        h.extend(extra.into_iter().map(|(k, v)| (k, v.to_string())));
        h
    };
    cases.push(("Mcp-Name differs", "tools/call", call.clone(), with(vec![("Mcp-Name", "calc__multiply")])));
    cases.push(("Mcp-Name invalid Base64", "tools/call", call.clone(), with(vec![("Mcp-Name", "=?base64?%%%?=")])));
    cases.push((
        "Mcp-Name uppercase sentinel is a literal",
        "tools/call",
        call.clone(),
        with(vec![("Mcp-Name", "=?BASE64?Y2FsY19fYWRk?=")]),
    ));
    let greet = json!({ "name": "text__greet", "arguments": { "name": "Ada", "lang": "fr" } });
    cases.push(("missing Mcp-Param-Lang", "tools/call", greet.clone(), with(vec![("Mcp-Name", "text__greet")])));
    cases.push(("Mcp-Param-Lang differs", "tools/call", greet.clone(), with(vec![("Mcp-Name", "text__greet"), ("Mcp-Param-Lang", "de")])));
    cases.push((
        "Mcp-Param-Lang invalid Base64",
        "tools/call",
        greet.clone(),
        with(vec![("Mcp-Name", "text__greet"), ("Mcp-Param-Lang", "=?base64?***?=")]),
    ));
    for (why, method, params, headers) in cases {
        let r = send_with(&gw.url, method, params, headers).await;
        let m = assert_error(&r, 400, -32020, why);
        assert_eq!(m["id"], 9, "{why}: errors carry the request id");
        assert!(m["error"]["message"].as_str().unwrap_or_default().starts_with("Header mismatch"), "{why}: {m}");
    }
    // The same calls with correct headers succeed; Base64 and padding whitespace are decoded first.
    let ok = send_with(
        &gw.url,
        "tools/call",
        greet.clone(),
        with(vec![("Mcp-Name", "=?base64?dGV4dF9fZ3JlZXQ=?="), ("Mcp-Param-Lang", " fr ")]),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", String::from_utf8_lossy(&ok.body));
    assert_eq!(text_of(&ok.json()), "Bonjour, Ada!");
    let m = assert_error(
        &send_with(&gw.url, "tools/call", greet, with(vec![("Mcp-Name", "text__greet"), ("Mcp-Param-Lang", "de")])).await,
        400,
        -32020,
        "message",
    );
    let msg = m["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("Mcp-Param-Lang") && msg.contains("'de'") && msg.contains("'fr'"), "names the header and both values: {msg}");
}

#[tokio::test(flavor = "multi_thread")]
async fn version_meta_and_method_errors() {
    let gw = crate::demo_gateway("");
    let mut m = meta();
    m["io.modelcontextprotocol/protocolVersion"] = json!("2027-01-01");
    let mut h = base("tools/list");
    h[1].1 = "2027-01-01".into();
    let r = send_with(&gw.url, "tools/list", json!({ "_meta": m }), h).await;
    let e = assert_error(&r, 400, -32022, "unsupported version");
    assert_eq!(e["error"]["data"]["supported"], json!([VERSION]));
    assert_eq!(e["error"]["data"]["requested"], "2027-01-01");

    let body = json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {} }).to_string();
    let refs = [("Content-Type", "application/json"), ("MCP-Protocol-Version", VERSION), ("Mcp-Method", "tools/list")];
    assert_error(&post_raw(&gw.url, &refs, body).await, 400, -32602, "missing _meta");
    let mut m = meta();
    m.as_object_mut().map(|o| o.remove("io.modelcontextprotocol/clientCapabilities"));
    assert_error(
        &send_with(&gw.url, "tools/list", json!({ "_meta": m }), base("tools/list")).await,
        400,
        -32602,
        "missing clientCapabilities",
    );

    assert_error(&send_with(&gw.url, "no/such/method", json!({}), base("no/such/method")).await, 404, -32601, "unknown method");
    for removed in ["initialize", "ping", "logging/setLevel", "resources/subscribe"] {
        assert_error(&send_with(&gw.url, removed, json!({}), base(removed)).await, 404, -32601, removed);
    }
    let r = rpc(&gw.url, "tools/call", json!({ "name": "nope__tool", "arguments": {} })).await;
    let e = assert_error(&r, 200, -32602, "unknown tool");
    assert_eq!(e["error"]["message"], "Unknown tool: nope__tool");

    let d = rpc(&gw.url, "server/discover", json!({})).await.json();
    let res = &d["result"];
    assert_eq!(res["resultType"], "complete");
    assert_eq!(res["supportedVersions"], json!([VERSION]));
    assert!(res["capabilities"]["tools"].is_object());
    assert_eq!(res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpgate");
    assert!(res["ttlMs"].is_u64() && res["cacheScope"] == "public");
    let instructions = res["instructions"].as_str().unwrap_or_default();
    assert!(instructions.contains("## calc") && instructions.contains("## text"), "one labelled section per upstream: {instructions}");
}

#[tokio::test(flavor = "multi_thread")]
async fn lists_are_paged_both_ways() {
    // The upstream pages its list (2 per page): the gateway follows every cursor, then serves
    // the merged list in its own pages (3 per page) with its own cursors.
    let gw = gateway(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[catalog]\npage_size = 3\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--page-size\", \"2\"]\n\n[[upstream]]\nid = \"cut\"\ncommand = [\"mcpgate\", \"demo-server\", \"--page-size\", \"1\"]\nmax_pages = 2\n",
    );
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let page = rpc(&gw.url, "tools/list", params).await.json();
        let tools = page["result"]["tools"].as_array().expect("tools").clone();
        assert!(tools.len() <= 3, "{page}");
        names.extend(tools.iter().map(|t| t["name"].as_str().unwrap_or_default().to_string()));
        match page["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(
        names,
        ["calc__add", "calc__multiply", "calc__divide", "calc__echo", "cut__add", "cut__multiply"],
        "the page limit cut 'cut' at 2 pages"
    );
    assert!(gw.proc.log().contains("page limit reached"), "{}", gw.proc.log());
    let bad = rpc(&gw.url, "tools/list", json!({ "cursor": "not-a-cursor" })).await.json();
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    // Cursors are sealed: one changed by the client is refused, not followed to another offset.
    let first = rpc(&gw.url, "tools/list", json!({})).await.json();
    let issued = first["result"]["nextCursor"].as_str().expect("a cursor").to_string();
    let mut forged = issued.clone().into_bytes();
    let last = forged.len() - 1;
    forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).expect("ascii");
    let bad = rpc(&gw.url, "tools/list", json!({ "cursor": forged })).await.json();
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let ok = rpc(&gw.url, "tools/list", json!({ "cursor": issued })).await.json();
    assert_eq!(ok["result"]["tools"][0]["name"], "calc__echo", "{ok}");
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_that_do_not_fit_the_tool_schema_never_reach_the_upstream() {
    let (_up, url) = py_http("alpha", &[]);
    let config = |validate: bool| {
        format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"py\"\nurl = \"{url}\"\nvalidate_arguments = {validate}\n")
    };
    let gw = gateway(&config(true));
    // What a model sees through a real client (the official Python SDK): the tool, the failing
    // path and what is wrong, as the spec's invalid-params error.
    let (out, lines) = sdk_run(&[], &gw.url, &["call", "py__execute_sql", r#"{"region":"eu","query":7}"#]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!out.status.success(), "{stdout}");
    let error = lines.last().cloned().unwrap_or_default();
    assert_eq!(error["error"]["code"], -32602, "{stdout}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("Invalid arguments for tool py__execute_sql:") && message.contains("7"), "{message}");
    // Refused before the upstream: its call counter saw none of them.
    let missing = rpc_with(
        &gw.url,
        "tools/call",
        json!({ "name": "py__execute_sql", "arguments": { "region": "eu" } }),
        &[("Mcp-Param-Region", "eu")],
    )
    .await
    .json();
    assert_eq!(missing["error"]["data"]["errors"][0]["path"], "", "{missing}");
    assert!(missing["error"]["message"].as_str().unwrap_or_default().contains("\"query\""), "{missing}");
    let extra = rpc(&gw.url, "tools/call", json!({ "name": "py__calls", "arguments": { "unexpected": 1 } })).await.json();
    assert_eq!(extra["error"]["code"], -32602, "additionalProperties: false: {extra}");
    assert_eq!(text_of(&call(&gw.url, "py__calls", json!({})).await), "0", "no refused call reached the upstream");
    let ok = rpc_with(
        &gw.url,
        "tools/call",
        json!({ "name": "py__execute_sql", "arguments": { "region": "eu", "query": "select 1" } }),
        &[("Mcp-Param-Region", "eu")],
    )
    .await
    .json();
    assert!(ok["result"].is_object(), "{ok}");
    let audit = gw.proc.log();
    assert!(audit.contains("outcome=refused:invalid_arguments") || audit.contains("invalid_arguments"), "audited: {audit}");
    // Switched off per upstream: the upstream decides.
    let open = gateway(&config(false));
    let passed = rpc(&open.url, "tools/call", json!({ "name": "py__calls", "arguments": { "unexpected": 1 } })).await.json();
    assert!(passed["result"].is_object(), "{passed}");
}
