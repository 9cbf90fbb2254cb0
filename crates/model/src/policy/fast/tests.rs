//! The fast path against the interpreter: over generated arguments, callers and clocks, every
//! answer the fast path gives is the interpreter's, and it gives one for the usual shapes.

use super::Scope;
use crate::policy::expr::Condition;
use crate::policy::facts::{CallerFacts, Facts, RequestFacts};
use proptest::prelude::*;
use serde_json::{Value, json};

const CONDITIONS: &[&str] = &[
    r#"has(args.path) && args.path.startsWith("/workspace/")"#,
    r#"args.path.startsWith("/workspace/") || args.path.endsWith(".md")"#,
    r#"!(args.path.contains(".."))"#,
    r#""oncall" in caller.groups && caller.claims.org == "acme""#,
    r#"caller.id == "alice" || "admin" in caller.rules"#,
    "now.hour >= 9 && now.hour < 17 && now.weekday >= 1 && now.weekday <= 5",
    r#"request.tool == "fs__write" && request.endpoint != "/ops""#,
    r#"request.uri.startsWith("file:///") || request.method == "tools/call""#,
    "size(args) < 3",
    "args.n > 10",
    "args.n == 3",
    "args.n <= 2.5",
    r#"args.tags.size() > 1 && "x" in args.tags"#,
    r#"args.to in ["a@acme.com", "b@acme.com"]"#,
    r#""path" in args"#,
    "args.flag",
    "args.flag == true ? args.n > 0 : size(args.path) > 3",
    r#"args["path"] == "/etc/passwd""#,
    "args.tags[0] == \"x\"",
    "args.nested.deep.value == 1",
    "has(args.nested.deep)",
    "tool.annotations.readOnlyHint == true",
    "has(tool.annotations.destructiveHint) && tool.annotations.destructiveHint",
    "args.n != null",
    r#"request.client.name == "claude""#,
];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-20i64..20).prop_map(|n| json!(n)),
        (0.0f64..5.0).prop_map(|f| json!(f)),
        Just(json!(u64::MAX)),
        prop::sample::select(vec!["/workspace/a.md", "/etc/passwd", "../x", "x", "", "a@acme.com", "é"]).prop_map(|s| json!(s)),
    ]
}

fn arguments() -> impl Strategy<Value = Value> {
    let value = scalar().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(vec!["deep", "value", "x"]), inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    });
    let keys = prop::sample::select(vec!["path", "n", "flag", "tags", "to", "nested"]);
    prop_oneof![
        4 => prop::collection::btree_map(keys, value, 0..6).prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        1 => scalar(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]
    #[test]
    fn the_fast_path_answers_as_the_interpreter(
        args in arguments(),
        groups in prop::sample::subsequence(vec!["oncall", "dev", "ops"], 0..3),
        now in 1_700_000_000u64..1_900_000_000,
        endpoint in prop::sample::select(vec!["", "/ops"]),
        method in prop::sample::select(vec!["tools/call", "resources/read"]),
        annotations in prop::option::of(prop::collection::btree_map(prop::sample::select(vec!["readOnlyHint", "destructiveHint"]), scalar(), 0..2)),
    ) {
        let groups: Vec<String> = groups.into_iter().map(str::to_string).collect();
        let caller = CallerFacts::new("alice", &["staff".into()], json!({"groups": groups, "org": "acme"}), &[]);
        let request = RequestFacts { method, name: "fs__write", upstream: "fs", endpoint, era: "2026-07-28", client: Some(&json!({"name": "claude"})) };
        let item = annotations.map(|a| json!({"name": "write", "annotations": a}).to_string());
        let facts = Facts { caller: &caller, request: Some(&request), item: item.as_deref(), args: Some(&args), now: Some(now) };
        for source in CONDITIONS {
            let cond = Condition::compile(source).map_err(|e| TestCaseError::fail(format!("{source}: {e}")))?;
            prop_assert!(cond.is_fast(), "{} has no fast form", source);
            let fast = cond.eval_fast(&Scope::new(&facts));
            let interpreted = cond.eval_interpreted(&facts);
            if let Some(b) = fast {
                prop_assert_eq!(Ok(b), interpreted.clone(), "{} over {}", source, args);
            }
            prop_assert_eq!(cond.eval(&facts), interpreted, "{}", source);
        }
    }
}

#[test]
fn the_fast_path_answers_the_usual_shapes_itself() {
    let caller = CallerFacts::new("alice", &[], json!({"groups": ["oncall"], "org": "acme"}), &[]);
    let request = RequestFacts { method: "tools/call", name: "fs__write", upstream: "fs", endpoint: "", era: "2026-07-28", client: None };
    let args =
        json!({"path": "/workspace/a.md", "n": 3, "flag": true, "tags": ["x", "y"], "to": "a@acme.com", "nested": {"deep": {"value": 1}}});
    let item = r#"{"name":"write","annotations":{"readOnlyHint":true,"destructiveHint":false}}"#;
    let facts = Facts { caller: &caller, request: Some(&request), item: Some(item), args: Some(&args), now: Some(1_796_290_200) };
    for source in CONDITIONS.iter().filter(|s| !s.contains("request.client") && !s.contains("<= 2.5")) {
        let cond = Condition::compile(source).unwrap_or_else(|e| panic!("{source}: {e}"));
        assert!(cond.eval_fast(&Scope::new(&facts)).is_some(), "{source}: the fast path left it to the interpreter");
    }
    // Arguments past the limits are the interpreter's, which refuses them.
    let wide = Value::Array((0..10_001).map(|i| json!(i)).collect());
    let big = json!({"path": "/workspace/a", "list": wide});
    let facts = Facts { args: Some(&big), ..facts };
    let cond = Condition::compile(r#"args.path.startsWith("/workspace/")"#).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cond.eval_fast(&Scope::new(&facts)), None);
    assert!(cond.eval(&facts).is_err());
}

/// A token whose claims nest deeper than a rule may read: neither path reads them, so every
/// condition on `caller` fails (an allow does not hold, a deny does), on the fast path as in the
/// interpreter, when listing as when calling.
#[test]
fn claims_too_deep_to_read_fail_both_paths_alike() {
    use crate::policy::expr::MAX_ARG_DEPTH;
    let mut deep = json!("admin");
    for _ in 0..=MAX_ARG_DEPTH {
        deep = json!({ "a": deep });
    }
    let caller = CallerFacts::new("alice", &[], json!({"org": "acme", "groups": ["oncall"], "deep": deep}), &[]);
    let request = RequestFacts { method: "tools/call", name: "fs__write", upstream: "fs", ..Default::default() };
    let args = json!({});
    let call = Facts { caller: &caller, request: Some(&request), item: None, args: Some(&args), now: Some(0) };
    let listing = Facts::listing(&caller, None);
    for source in [r#"caller.claims.org == "acme""#, r#"caller.id == "alice""#, r#""oncall" in caller.groups"#, "has(caller.claims.deep)"] {
        let cond = Condition::compile(source).unwrap_or_else(|e| panic!("{source}: {e}"));
        for facts in [&call, &listing] {
            assert_eq!(cond.eval_fast(&Scope::new(facts)), None, "{source}: the fast path read them");
            let interpreted = cond.eval_interpreted(facts);
            assert!(matches!(&interpreted, Err(e) if e.to_string().contains("too deep")), "{source}: {interpreted:?}");
            assert_eq!(cond.eval(facts), interpreted, "{source}");
        }
    }
    // At the limit itself, both read them.
    let mut edge = json!("admin");
    for _ in 0..MAX_ARG_DEPTH - 1 {
        edge = json!({ "a": edge });
    }
    let caller = CallerFacts::new("alice", &[], json!({ "org": "acme", "deep": edge }), &[]);
    let facts = Facts::listing(&caller, None);
    let cond = Condition::compile(r#"caller.claims.org == "acme""#).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((cond.eval_fast(&Scope::new(&facts)), cond.eval_interpreted(&facts)), (Some(true), Ok(true)));
}
