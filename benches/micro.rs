//! Micro-benchmarks of the pure functions on the request path (divan): the envelope split, the
//! `_meta` check, the `Mcp-*` header value codec, the policy decision over a view, tool search and the
//! argument check against a tool schema. Run with
//! `cargo bench --bench micro`; CI runs each once in test mode (`cargo test --benches`), which
//! checks that they work and asserts no timings. divan also counts allocations per iteration
//! (`AllocProfiler`), the figure to watch on a noisy 2-core machine.

#[path = "support/synthetic.rs"]
mod synthetic;

use bytes::Bytes;
use mcpgate_model::catalog::Kind;
use mcpgate_model::catalog::view;
use mcpgate_model::policy::Grants;
use mcpgate_protocol::jsonrpc::Message;
use mcpgate_protocol::{headers, meta};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

const CALL: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calc__add","arguments":{"a":2,"b":40,"text":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":"p-1"}}}"#;

#[divan::bench]
fn envelope_split() -> usize {
    let msg = Message::parse_bytes(&Bytes::from_static(CALL)).expect("parses");
    let (params, meta) = meta::split_params(divan::black_box(msg.params.as_ref())).expect("splits");
    params.0.len() + meta.fields.len()
}

#[divan::bench]
fn meta_check(bencher: divan::Bencher) {
    let fields: serde_json::Map<String, serde_json::Value> = serde_json::from_str(
        r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":"p-1"}"#,
    )
    .expect("meta");
    bencher.with_inputs(|| fields.clone()).bench_values(|f| meta::check_meta(f).is_ok());
}

#[divan::bench]
fn header_codec() -> usize {
    let encoded = headers::encode(divan::black_box("Grüße aus Köln, région=eu-west"));
    headers::decode(encoded.as_bytes()).map(|d| d.len()).unwrap_or(0)
}

#[divan::bench(args = [false, true])]
fn policy_view_of_10000_tools(bencher: divan::Bencher, remembered: bool) {
    let synthetic = synthetic::Synthetic::new(100, 100).expect("tools");
    let cat = synthetic.build();
    let ids = &synthetic.ids;
    let globs: Vec<String> = (0..100).map(|i| format!("u{i}__t{}*", i % 10)).collect();
    let allow: Vec<&str> = globs.iter().map(String::as_str).collect();
    let grants = Grants::from_patterns(&allow, &["*__t99"]);
    let id_of = |i: usize| ids[i].as_str();
    if remembered {
        view::visible(&cat, Kind::Tool, &grants, &id_of);
        bencher.bench_local(|| view::visible(&cat, Kind::Tool, &grants, &id_of).len());
    } else {
        // The decision itself, for every tool (what a snapshot's first list under these grants costs).
        bencher.bench_local(|| {
            cat.tools().iter().filter(|e| mcpgate_model::policy::allows(&grants, &view::item(Kind::Tool, e, &id_of))).count()
        });
    }
}

/// Tool search over 10,000 tools: indexing a snapshot (once per catalogue version) and one
/// ranked query against the index.
#[divan::bench(args = [false, true])]
fn tool_search_of_10000_tools(bencher: divan::Bencher, indexed: bool) {
    use mcpgate_model::catalog::search::{Query, ToolIndex};
    let synthetic = synthetic::Synthetic::new(100, 100).expect("tools");
    let cat = synthetic.build();
    let tools = || cat.tools().iter().map(|e| e.json.get());
    if indexed {
        let index = ToolIndex::build(tools());
        let all: Vec<usize> = (0..index.docs.len()).collect();
        bencher.bench_local(|| Query::parse("echo the text of tool 42").map_or(0, |q| index.rank(&all, &q, 10).len()));
    } else {
        bencher.bench_local(|| ToolIndex::build(tools()).docs.len());
    }
}

/// Indexing one tool whose description holds 40,000 distinct words: an upstream writes its own
/// descriptions and can force a rebuild of the index with `list_changed`.
#[divan::bench]
fn tool_search_index_of_a_40000_word_description(bencher: divan::Bencher) {
    use mcpgate_model::catalog::search::ToolIndex;
    let description: String = (0..40_000).map(|i| format!("word{i} ")).collect();
    let tool = serde_json::json!({ "name": "big", "description": description, "inputSchema": { "type": "object" } }).to_string();
    bencher.bench_local(|| ToolIndex::build(std::iter::once(tool.as_str())).docs.len());
}

/// One long query over 2,000 tools: 32 distinct words (within the limits), and a 448 KB one
/// (refused before any word is read).
#[divan::bench(args = ["32 words", "448 KB"])]
fn tool_search_long_query_over_2000_tools(bencher: divan::Bencher, size: &str) {
    use mcpgate_model::catalog::search::{Query, ToolIndex};
    let synthetic = synthetic::Synthetic::new(20, 100).expect("tools");
    let cat = synthetic.build();
    let index = ToolIndex::build(cat.tools().iter().map(|e| e.json.get()));
    let all: Vec<usize> = (0..index.docs.len()).collect();
    let query: String = match size {
        "32 words" => (0..16).map(|i| format!("u{i} t{i} ")).collect(),
        _ => (0..)
            .map(|i| format!("word{i} "))
            .scan(0, |n, w| {
                (*n < 448 * 1024).then(|| {
                    *n += w.len();
                    w
                })
            })
            .collect(),
    };
    bencher.bench_local(|| Query::parse(&query).map_or(0, |q| index.rank(&all, &q, 10).len()));
}

/// A `tools/call`'s arguments checked against a typical tool schema (types, required, an enum,
/// `additionalProperties: false`, a `$ref`), with the validator compiled once as the catalogue
/// keeps it: the per-call cost of `validate_arguments`.
#[divan::bench]
fn argument_check(bencher: divan::Bencher) {
    let tool = mcpgate_protocol::json::Json::to_json(&serde_json::json!({
        "name": "create_issue",
        "inputSchema": {
            "type": "object",
            "properties": {
                "repo": { "type": "string", "pattern": "^[a-z0-9-]+/[a-z0-9-]+$" },
                "title": { "type": "string", "minLength": 1 },
                "labels": { "type": "array", "items": { "$ref": "#/$defs/label" } },
                "priority": { "enum": ["low", "normal", "high"] },
            },
            "required": ["repo", "title"],
            "additionalProperties": false,
            "$defs": { "label": { "type": "string", "maxLength": 50 } },
        },
    }))
    .expect("tool");
    let check = mcpgate_model::catalog::args::ArgCheck::new(tool);
    let args = serde_json::json!({ "repo": "acme/web", "title": "Fix the login", "labels": ["bug", "p1"], "priority": "high" });
    let _ = check.check(&args);
    bencher.bench_local(|| check.check(divan::black_box(&args)).is_ok());
}

/// A `user_auth` upstream's per-call token lookup: one caller's tokens taken out of a vault that
/// holds 10,000 callers' (the map lookup, the sealed entry opened and read), as
/// `Identity::token` does on every call before the token is fresh enough to send.
#[divan::bench]
fn per_caller_token_lookup(bencher: divan::Bencher) {
    use mcpgate::identity::vault::{TokenSet, Vault, VaultKey};
    let sealer = std::sync::Arc::new(mcpgate_model::token::Sealer::random().expect("sealer"));
    let vault = Vault::in_memory(sealer);
    let key = |i: usize| VaultKey { caller: format!("user-{i}"), upstream: "github".into(), issuer: "https://idp.example.com".into() };
    for i in 0..10_000 {
        let tokens: TokenSet = serde_json::from_value(serde_json::json!({
            "access_token": format!("gho_{i:036}"),
            "refresh_token": format!("ghr_{i:036}"),
            "expires_at": 4_000_000_000u64,
            "scope": "repo read:org",
            "issued_at": 1_700_000_000u64,
        }))
        .expect("tokens");
        vault.put(&key(i), &tokens).expect("put");
    }
    let wanted = key(4321);
    bencher.bench_local(|| vault.get(&wanted).map_or(0, |t| t.access_token.len()));
}

/// The decision on one `tools/call` under 50 `[[rule]]`s with CEL conditions (a team's policy:
/// each rule targets its own tools, a tenth apply to every tool), with the call's facts bound
/// once: `targeted` evaluates the rules naming the called tool and the general ones; `all`
/// makes every rule target every tool (the engine skips allows once one holds); `all_denies`
/// is the worst case, 50 denies on every tool, none holding, so every condition is evaluated.
#[divan::bench(args = ["targeted", "all", "all_denies"])]
fn policy_rules_50_per_call(bencher: divan::Bencher, shape: &str) {
    use mcpgate_model::policy::Item;
    use mcpgate_model::policy::expr::Condition;
    use mcpgate_model::policy::facts::{CallerFacts, Facts, RequestFacts};
    use mcpgate_model::policy::rules::{Effect, Rule, Source};
    use std::sync::Arc;
    let conditions = [
        r#"has(args.path) && args.path.startsWith("/workspace/")"#,
        r#""oncall" in caller.groups"#,
        "now.hour >= 9 && now.hour < 17",
        r#"request.endpoint == "/mcp""#,
        "size(args) < 20",
    ];
    let rules = (0..50).map(|i| {
        let tools = match (shape, i % 10) {
            ("all" | "all_denies", _) | (_, 0) => vec!["*".to_string()],
            _ => vec![format!("svc{i}__*")],
        };
        let effect = if i % 3 == 0 || shape == "all_denies" { Effect::Deny } else { Effect::Allow };
        let when = conditions[i % conditions.len()];
        let when = if effect == Effect::Deny { format!("!({when})") } else { when.to_string() };
        Condition::compile(&when).map(|c| Arc::new(Rule::new(format!("rule-{i}"), effect, Source::Rule).on(&[Kind::Tool], &tools).when(c)))
    });
    let rules: Vec<Arc<Rule>> = rules.collect::<Result<_, _>>().unwrap_or_default();
    assert_eq!(rules.len(), 50, "every condition compiles");
    let caller = Arc::new(CallerFacts::new("alice", &["staff".to_string()], serde_json::json!({"groups": ["oncall"]}), &[]));
    let grants = Grants::new(false, rules, caller);
    let args = serde_json::json!({"path": "/workspace/a.txt", "content": "hello"});
    let request =
        RequestFacts { method: "tools/call", name: "svc1__write", upstream: "svc1", endpoint: "/mcp", era: "2026-07-28", client: None };
    let item = Item { kind: Kind::Tool, name: "svc1__write", upstream: "svc1", json: Some(r#"{"name":"write","annotations":{}}"#) };
    bencher.bench(|| {
        let facts =
            Facts { caller: grants.caller(), request: Some(&request), item: item.json, args: Some(&args), now: Some(1_796_292_000) };
        divan::black_box(grants.decide(&item, &facts, None))
    });
}

/// The built-in detectors (the `secrets`, `pii` and `injection` groups, redacting) over a tool
/// result of ordinary text of 10 KB and 1 MB in ten content blocks, nothing found: the cost of a
/// `result` guard (or `[secrets]`) on every call. The text is mostly ASCII with some accented
/// words, as real results are, so the normalised reading runs too.
#[divan::bench(args = ["10 KB", "1 MB"])]
fn detectors_on_a_result(bencher: divan::Bencher, size: &str) {
    detectors(bencher, size, mcpgate_model::policy::secrets::Action::Redact);
}

/// The same with every detector blocking: a blocking or flagging detector also reads every
/// string of the result joined (an instruction split between two strings).
#[divan::bench(args = ["10 KB", "1 MB"])]
fn blocking_detectors_on_a_result(bencher: divan::Bencher, size: &str) {
    detectors(bencher, size, mcpgate_model::policy::secrets::Action::Block);
}

fn detectors(bencher: divan::Bencher, size: &str, action: mcpgate_model::policy::secrets::Action) {
    use mcpgate_model::policy::secrets::{Group, group, scrub_json};
    let bytes = if size == "1 MB" { 1 << 20 } else { 10 << 10 };
    let sentence = "The quarterly report lists 42 items shipped to Zürich, São Paulo and Kraków on 2026-12-03; see section 4.2. ";
    let block = sentence.repeat(bytes / 10 / sentence.len() + 1);
    let content: Vec<serde_json::Value> = (0..10).map(|_| serde_json::json!({ "type": "text", "text": block })).collect();
    let result = serde_json::json!({ "content": content, "isError": false }).to_string();
    let mut detectors = group(Group::Secrets, &[], action);
    detectors.extend(group(Group::Pii, &[], action));
    detectors.extend(group(Group::Injection, &[], action));
    bencher.bench(|| {
        let mut found = Vec::new();
        let out = scrub_json(&result, &detectors, &mut found);
        divan::black_box((out, found))
    });
}
