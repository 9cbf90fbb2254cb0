use super::*;
use crate::policy::facts::{CallerFacts, RequestFacts};
use crate::policy::{Grants, Item, allows};
use serde_json::json;

fn rule(name: &str, effect: Effect, tools: &[&str], when: Option<&str>) -> Arc<Rule> {
    let tools: Vec<String> = tools.iter().map(|s| s.to_string()).collect();
    let mut r = Rule::new(name, effect, Source::Rule).on(&[Kind::Tool], &tools);
    if let Some(w) = when {
        r = r.when(Condition::compile(w).unwrap_or_else(|e| panic!("{w}: {e}")));
    }
    Arc::new(r)
}

fn tool(name: &str) -> Item<'_> {
    Item { kind: Kind::Tool, name, upstream: "fs", json: Some(r#"{"annotations":{"readOnlyHint":true}}"#) }
}

fn grants(rules: Vec<Arc<Rule>>, groups: &[&str]) -> Grants {
    let caller = CallerFacts::new("bob", &[], json!({ "groups": groups }), &[]);
    Grants::new(false, rules, Arc::new(caller))
}

fn call(g: &Grants, name: &str, args: serde_json::Value, now: u64) -> Verdict {
    let req = RequestFacts { method: "tools/call", name, upstream: "fs", ..Default::default() };
    let facts = Facts { caller: g.caller(), request: Some(&req), item: tool(name).json, args: Some(&args), now: Some(now) };
    g.decide(&tool(name), &facts, None)
}

#[test]
fn an_argument_rule_lists_the_tool_and_decides_each_call() {
    let g = grants(vec![rule("workspace-writes", Effect::Allow, &["fs__write_file"], Some(r#"args.path.startsWith("/workspace/")"#))], &[]);
    assert!(allows(&g, &tool("fs__write_file")), "some call can be allowed: listed");
    assert!(!allows(&g, &tool("fs__delete")), "no rule can allow it: hidden");
    assert!(call(&g, "fs__write_file", json!({"path": "/workspace/a"}), 0).allowed);
    let refused = call(&g, "fs__write_file", json!({"path": "/etc/passwd"}), 0);
    assert!(!refused.allowed && refused.denied_by.is_none());
    assert_eq!(refused.unmet, ["workspace-writes"]);
    // A condition that cannot be evaluated does not allow.
    assert!(!call(&g, "fs__write_file", json!({}), 0).allowed);
}

#[test]
fn deny_wins_and_a_failing_deny_holds() {
    let g = grants(
        vec![rule("all", Effect::Allow, &["*"], None), rule("no-etc", Effect::Deny, &["fs__*"], Some(r#"args.path.startsWith("/etc")"#))],
        &[],
    );
    assert!(allows(&g, &tool("fs__read")), "a deny that waits for the call hides nothing");
    let v = call(&g, "fs__read", json!({"path": "/etc/shadow"}), 0);
    assert_eq!((v.allowed, v.denied_by.as_deref()), (false, Some("no-etc")));
    assert!(call(&g, "fs__read", json!({"path": "/home/x"}), 0).allowed);
    let v = call(&g, "fs__read", json!({"other": 1}), 0);
    assert_eq!(v.denied_by.as_deref(), Some("no-etc"), "cannot be evaluated: counts against the call");
}

#[test]
fn caller_conditions_are_decided_once_and_hide_at_listing() {
    let rules = vec![
        rule("oncall-restarts", Effect::Allow, &["ops__restart"], Some(r#""oncall" in caller.groups"#)),
        rule("reads", Effect::Allow, &["*"], Some("tool.annotations.readOnlyHint == true")),
    ];
    let oncall = grants(rules.clone(), &["oncall"]);
    let other = grants(rules, &["dev"]);
    assert!(allows(&oncall, &tool("ops__restart")));
    assert!(allows(&other, &tool("ops__restart")), "read-only by its annotations");
    let writer = Item { json: Some(r#"{"annotations":{"readOnlyHint":false}}"#), ..tool("ops__restart") };
    assert!(allows(&oncall, &writer));
    assert!(!allows(&other, &writer), "not read-only, and not on call: hidden");
    assert!(oncall != other, "grants whose rules read the caller are the caller's own");
}

#[test]
fn confirm_holds_only_for_an_allowed_call_and_time_rules_use_the_clock() {
    let g = grants(
        vec![
            rule("all", Effect::Allow, &["*"], None),
            rule("big-deletes", Effect::Confirm, &["fs__delete"], Some("size(args.paths) > 2")),
            rule("office-hours", Effect::Deny, &["fs__delete"], Some("now.hour < 9 || now.hour >= 17")),
        ],
        &[],
    );
    let at_ten = 1_796_292_000; // 2026-12-03T10:00:00Z
    let v = call(&g, "fs__delete", json!({"paths": [1, 2, 3]}), at_ten);
    assert_eq!((v.allowed, v.confirm_by.as_deref()), (true, Some("big-deletes")));
    assert_eq!(call(&g, "fs__delete", json!({"paths": [1]}), at_ten).confirm_by, None);
    let v = call(&g, "fs__delete", json!({"paths": [1, 2, 3]}), at_ten + 8 * 3600);
    assert_eq!((v.allowed, v.denied_by.as_deref(), v.confirm_by), (false, Some("office-hours"), None));
}

#[test]
fn explain_traces_every_rule_that_targets_the_item() {
    let g = grants(
        vec![
            rule("all", Effect::Allow, &["*"], None),
            rule("other", Effect::Deny, &["x__*"], None),
            rule("etc", Effect::Deny, &["*"], Some("has(args.path)")),
        ],
        &[],
    );
    let req = RequestFacts { method: "tools/call", name: "fs__a", upstream: "fs", ..Default::default() };
    let args = json!({"path": "/"});
    let facts = Facts { caller: g.caller(), request: Some(&req), item: None, args: Some(&args), now: Some(0) };
    let mut trace = Vec::new();
    let v = g.decide(&tool("fs__a"), &facts, Some(&mut trace));
    assert_eq!(v.denied_by.as_deref(), Some("etc"));
    let seen: Vec<(&str, Holds)> = trace.iter().map(|s| (s.rule.as_str(), s.holds.clone())).collect();
    assert_eq!(seen, [("all", Holds::Yes), ("etc", Holds::Yes)]);
}

mod list_and_call {
    use super::*;
    use proptest::prelude::*;

    fn rules() -> Vec<Arc<Rule>> {
        vec![
            rule("reads", Effect::Allow, &["*"], Some("has(tool.annotations.readOnlyHint) && tool.annotations.readOnlyHint")),
            rule("oncall", Effect::Allow, &["ops__*"], Some(r#""oncall" in caller.groups"#)),
            rule("workspace", Effect::Allow, &["fs__write"], Some(r#"has(args.path) && args.path.startsWith("/workspace/")"#)),
            rule("no-etc", Effect::Deny, &["fs__*"], Some(r#"has(args.path) && args.path.startsWith("/etc")"#)),
            rule("hours", Effect::Deny, &["ops__*"], Some("now.hour < 9")),
            rule("dev-no-admin", Effect::Deny, &["*__admin*"], Some(r#""dev" in caller.groups"#)),
            rule("writes-confirm", Effect::Confirm, &["fs__write"], Some("has(args.content) && size(args.content) > 3")),
        ]
    }

    proptest! {
        /// What a call may do, its listing shows: a call allowed with any arguments, request or
        /// time is of an item listed for the caller; an item not listed refuses every call.
        #[test]
        fn a_call_is_allowed_only_for_a_listed_item(
            groups in proptest::sample::subsequence(vec!["oncall", "dev"], 0..=2),
            tool in proptest::sample::select(vec!["fs__write", "fs__read", "ops__restart", "ops__admin_drop", "db__query"]),
            read_only in proptest::option::of(any::<bool>()),
            path in proptest::sample::select(vec!["/workspace/a", "/etc/passwd", "/home/x", ""]),
            content in "[a-z]{0,6}",
            hour in 0u64..24,
        ) {
            let caller = CallerFacts::new("p", &[], json!({ "groups": groups }), &[]);
            let g = Grants::new(false, rules(), Arc::new(caller));
            let definition = match read_only {
                Some(b) => json!({ "annotations": { "readOnlyHint": b } }).to_string(),
                None => json!({}).to_string(),
            };
            let item = Item { kind: Kind::Tool, name: tool, upstream: tool.split("__").next().unwrap_or(""), json: Some(&definition) };
            let listed = allows(&g, &item);
            let args = if path.is_empty() { json!({ "content": content }) } else { json!({ "path": path, "content": content }) };
            let req = RequestFacts { method: "tools/call", name: tool, upstream: item.upstream, ..Default::default() };
            let facts = Facts { caller: g.caller(), request: Some(&req), item: item.json, args: Some(&args), now: Some(hour * 3600) };
            let called = g.decide(&item, &facts, None);
            prop_assert!(!called.allowed || listed, "{tool} called but not listed: {called:?}");
            if !listed {
                prop_assert!(!called.allowed);
            }
            // A confirmation is asked only of a call that is allowed.
            prop_assert!(called.confirm_by.is_none() || called.allowed);
        }
    }
}

/// What the grants remember of their rules (found once, when made) is what scanning the rules
/// says, for every mix of rules and after scopes are taken away: a call is decided again, and
/// its arguments read, exactly when some rule needs it.
mod remembered {
    use super::*;
    use proptest::prelude::*;

    const WHENS: [Option<&str>; 6] = [
        None,
        Some(r#"args.path.startsWith("/workspace/")"#),
        Some("now > 0"),
        Some(r#""oncall" in caller.groups"#),
        Some(r#"request.upstream == "fs""#),
        Some("has(tool.annotations)"),
    ];

    proptest! {
        #[test]
        fn the_grants_remember_what_their_rules_read(
            picks in proptest::collection::vec((0usize..WHENS.len(), 0usize..3), 0..8),
            scoped in any::<bool>(),
        ) {
            let effects = [Effect::Allow, Effect::Deny, Effect::Confirm];
            let rules: Vec<Arc<Rule>> =
                picks.iter().enumerate().map(|(i, (w, e))| rule(&format!("r{i}"), effects[*e], &["fs__*"], WHENS[*w])).collect();
            let mut g = grants(rules, &["oncall"]);
            if scoped {
                g.lack_scopes_for(&[Kind::Tool], "fs__*");
            }
            let kept = &g.rules;
            let calls = kept.iter().any(|r| r.needs_call() || r.effect == Effect::Confirm);
            let arguments = kept.iter().any(|r| r.when.as_ref().is_some_and(|w| w.reads().args));
            prop_assert_eq!(g.decides_calls(), calls);
            prop_assert_eq!(g.reads_arguments(), arguments);
            prop_assert_eq!(g.may_confirm(), kept.iter().any(|r| r.effect == Effect::Confirm));
            // An argument rule (kept: it cannot be decided from the caller) always means both.
            if picks.iter().any(|(w, _)| *w == 1) {
                prop_assert!(g.decides_calls() && g.reads_arguments());
            }
        }
    }
}
