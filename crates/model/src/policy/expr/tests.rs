use super::*;
use crate::policy::facts::{CallerFacts, Facts, RequestFacts};
use serde_json::json;

fn caller() -> CallerFacts {
    CallerFacts::new("alice", &["staff".to_string()], json!({"groups": ["oncall", "dev"], "org": "acme"}), &["files:write".to_string()])
}

fn call<'a>(caller: &'a CallerFacts, request: &'a RequestFacts<'a>, args: &'a serde_json::Value, now: u64) -> Facts<'a> {
    Facts {
        caller,
        request: Some(request),
        item: Some(r#"{"name":"write","annotations":{"readOnlyHint":false}}"#),
        args: Some(args),
        now: Some(now),
    }
}

#[test]
fn conditions_read_the_declared_variables() {
    let c = caller();
    let req = RequestFacts { method: "tools/call", name: "fs__write_file", upstream: "fs", endpoint: "", era: "2026-07-28", client: None };
    let args = json!({"path": "/workspace/a.txt", "to": ["x@acme.com", "y@evil.com"]});
    // 2026-12-03T09:30:00Z, a Thursday.
    let facts = call(&c, &req, &args, 1_796_290_200);
    for (source, want) in [
        (r#"args.path.startsWith("/workspace/")"#, true),
        (r#"args.to.all(a, a.endsWith("@acme.com"))"#, false),
        (r#""oncall" in caller.groups && caller.claims.org == "acme""#, true),
        (r#"caller.rules.exists(r, r == "staff") && "files:write" in caller.scopes"#, true),
        (r#"request.tool == "fs__write_file" && request.upstream == "fs" && request.era == "2026-07-28""#, true),
        ("tool.annotations.readOnlyHint", false),
        ("now.hour >= 9 && now.hour < 17 && now.weekday >= 1 && now.weekday <= 5", true),
        ("now.year == 2026 && now.month == 12 && now.day == 3 && now.minute == 30", true),
        (r#"args.path.lowerAscii().contains("workspace")"#, true),
    ] {
        let cond = Condition::compile(source).unwrap_or_else(|e| panic!("{source}: {e}"));
        assert_eq!(cond.eval(&facts), Ok(want), "{source}");
    }
}

#[test]
fn what_a_condition_reads_says_when_it_is_decided() {
    let reads = |s: &str| Condition::compile(s).map(|c| c.reads()).unwrap_or_else(|e| panic!("{s}: {e}"));
    assert!(!reads(r#""ops" in caller.groups"#).needs_call());
    assert!(!reads("tool.annotations.readOnlyHint == true").needs_call());
    assert!(reads("has(args.path)").needs_call());
    assert!(reads("now.hour < 18").needs_call());
    assert!(reads(r#"request.endpoint == "/ops""#).needs_call());
    // Variables a comprehension binds are not the declared ones.
    let r = reads("[1, 2].exists(args, args == 2)");
    assert!(!r.args && !r.needs_call());
}

#[test]
fn mistakes_are_found_when_the_rule_is_loaded_with_their_position() {
    for (source, line, column, says) in [
        ("args.path.startsWith(", 1, 0, ""),
        ("arg.path == 'x'", 1, 1, "unknown variable 'arg'"),
        ("caller.group == 'x'", 1, 7, "'caller' has no field 'group'"),
        ("now.hours > 3", 1, 4, "'now' has no field 'hours'"),
        ("args.path.startswit('/')", 1, 20, "unknown function 'startswit'"),
        ("true &&\n  args.a.all(x, args.b.exists(y, x == y))", 2, 0, "may not nest"),
        ("'text'", 1, 1, "true or false"),
        ("", 1, 1, "empty"),
    ] {
        let Err(e) = Condition::compile(source) else { panic!("{source:?} was accepted") };
        assert!(e.message.contains(says), "{source:?}: {e}");
        assert_eq!(e.line, line, "{source:?}: {e}");
        if column > 0 {
            assert_eq!(e.column, column, "{source:?}: {e}");
        }
    }
}

#[test]
fn a_condition_that_cannot_be_evaluated_says_why() {
    let c = caller();
    let req = RequestFacts { method: "tools/call", name: "t", ..Default::default() };
    let args = json!({"n": 1});
    let facts = call(&c, &req, &args, 0);
    let missing = Condition::compile("args.path.startsWith('/x')").map(|c| c.eval(&facts));
    assert!(matches!(missing, Ok(Err(_))), "{missing:?}");
    let not_bool = Condition::compile("args.n + 1 == 2 ? args.n : args.n").map(|c| c.eval(&facts));
    assert!(matches!(not_bool, Ok(Err(ref e)) if e.to_string().contains("not true or false")), "{not_bool:?}");
    // Arguments past the budget are not converted.
    let big = json!({"list": (0..MAX_ARG_NODES).collect::<Vec<_>>()});
    let facts = call(&c, &req, &big, 0);
    let too_big = Condition::compile("size(args.list) > 0").map(|c| c.eval(&facts));
    assert!(matches!(too_big, Ok(Err(ref e)) if e.to_string().contains("too large")), "{too_big:?}");
    let mut deep = json!(1);
    for _ in 0..=MAX_ARG_DEPTH {
        deep = json!([deep]);
    }
    let deep = json!({"d": deep});
    let facts = call(&c, &req, &deep, 0);
    let too_deep = Condition::compile("has(args.d)").map(|c| c.eval(&facts));
    assert!(matches!(too_deep, Ok(Err(ref e)) if e.to_string().contains("too deep")), "{too_deep:?}");
    // When listing, what only a call tells is unknown.
    let listing = Facts::listing(&c, None);
    assert!(Condition::compile("has(args.x)").is_ok_and(|c| c.eval(&listing).is_err()));
}

/// A comparison between a field whose type the gateway knows and a value of another type can
/// never hold (CEL's equality between two types is false): it is refused when the rule is
/// loaded, with where and a fix, rather than becoming a rule that silently never holds.
#[test]
fn a_comparison_of_two_known_types_is_refused_when_the_rule_is_loaded() {
    for (source, column, says, fix) in [
        (r#"now.hour == "eight""#, 1, "now.hour is a number, \"eight\" is a string", "a number"),
        (r#"now.weekday == "0""#, 1, "never holds", "compare now.weekday with a number"),
        (r#"now.hour != "8""#, 1, "always holds", "a number"),
        (r#"now.hour < "8""#, 1, "a number", "a number"),
        ("caller.id == 7", 1, "caller.id is a string, 7 is a number", "a string"),
        (r#"caller.groups == "ops""#, 1, "a list of strings", "a list"),
        ("1 in caller.scopes", 1, "the items of caller.scopes are strings", "\"text\""),
        (r#""ops" in caller.id"#, 1, "'in' needs a list or a map", "caller.id.contains"),
        (r#"request.method == true"#, 1, "request.method is a string", "a string"),
        ("request.client == \"claude\"", 1, "request.client is a map", ""),
        ("1 in request.client", 1, "the keys of request.client are strings", ""),
        (r#"tool.annotations.readOnlyHint == "true""#, 1, "a boolean", "true or false"),
        ("tool.annotations.title == false", 1, "a string", ""),
        ("caller.id == null", 1, "caller.id is a string, null is null", ""),
        ("caller.scopes < 3", 1, "never holds", ""),
        (r#"caller.scopes < ["a"]"#, 1, "cannot be ordered", "size()"),
        ("true && size(args.x) == 'big'", 9, "a number", ""),
        ("true &&\n  now.hour >= 9 && now.hour < 'x'", 2, "never holds", ""),
    ] {
        let Err(e) = Condition::compile(source) else { panic!("{source:?} was accepted") };
        assert!(e.message.contains(says), "{source:?}: {e}");
        let fixed = e.fix.clone().unwrap_or_default();
        assert!(fixed.contains(fix), "{source:?}: the fix {fixed:?}");
        if source.contains('\n') {
            assert_eq!(e.line, column, "{source:?}: {e}");
        } else {
            assert_eq!((e.line, e.column > 0), (1, true), "{source:?}: {e}");
        }
    }
    // What the gateway cannot know the type of is left to the call; values of one type, numbers
    // of every kind, and null against what JSON may hold are fine.
    for source in [
        r#"args.n == "5" || args.n == 5"#,
        r#"caller.claims.level == 3 && caller.claims.org == "acme""#,
        "now.hour == 8.0 || now.hour == 8u",
        r#""ops" in caller.groups && caller.id in ["alice", "bob"]"#,
        r#""name" in request.client && request.client.name == "claude""#,
        "tool.annotations.readOnlyHint == null || tool.annotations.readOnlyHint == true",
        "size(caller.scopes) > 0 && caller.scopes.exists(s, s == 1)",
        "int(args.n) < now.hour",
        r#"args.tags.exists(t, t == "x") && "x" in args.tags"#,
    ] {
        assert!(Condition::compile(source).is_ok(), "{source:?}: {:?}", Condition::compile(source).err());
    }
}
