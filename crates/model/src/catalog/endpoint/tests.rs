#[cfg(test)] // test-only module: unwrap/expect below are on test data
use super::*;
use crate::catalog::merge::{Naming, UpstreamLists, build};
use crate::catalog::names::NamePolicy;
use serde_json::value::RawValue;

fn raws(list: &[&str]) -> Vec<Box<RawValue>> {
    list.iter().map(|s| RawValue::from_string((*s).to_string()).unwrap()).collect()
}

fn base(gh: &[Box<RawValue>], db: &[Box<RawValue>]) -> Catalog {
    let lists = |i: usize, id: &'static str, tools: &'static [Box<RawValue>]| UpstreamLists {
        upstream: i,
        id,
        prefix: id,
        items: [tools, &[], &[], &[], &[]],
        ttl_ms: [Some(0); 5],
        listed_at: None,
        private: [false; 5],
        has_resources: false,
        rename: &[],
        validate: true,
    };
    let gh: &'static [Box<RawValue>] = Box::leak(gh.to_vec().into_boxed_slice());
    let db: &'static [Box<RawValue>] = Box::leak(db.to_vec().into_boxed_slice());
    let spaces = [(0, "gh".to_string()), (1, "db".to_string())];
    build(&[lists(0, "gh", gh), lists(1, "db", db)], &Naming { policy: &NamePolicy::default(), namespaces: &spaces })
}

fn ids(i: usize) -> &'static str {
    ["gh", "db"][i]
}

/// An endpoint's patterns and overrides, owned (what `[[endpoint]]` resolves to).
struct Endpoint {
    include: Vec<String>,
    exclude: Vec<String>,
    tools: Vec<ToolOverride>,
}

impl Endpoint {
    fn selection(&self) -> Selection<'_> {
        Selection { path: "/mcp/dev", include: &self.include, exclude: &self.exclude, tools: &self.tools }
    }
}

fn endpoint(include: &[&str], exclude: &[&str], tools: Vec<ToolOverride>) -> Endpoint {
    Endpoint { include: include.iter().map(|s| s.to_string()).collect(), exclude: exclude.iter().map(|s| s.to_string()).collect(), tools }
}

fn catalogue() -> Catalog {
    base(
        &raws(&[
            r#"{"name":"search","description":"Search code.","inputSchema":{"type":"object"}}"#,
            r#"{"name":"delete_repo","inputSchema":{"type":"object"}}"#,
        ]),
        &raws(&[
            r#"{"name":"run_query","description":"Runs SQL.","inputSchema":{"type":"object","properties":{"database":{"type":"string"},"sql":{"type":"string"}},"required":["database","sql"]},"annotations":{"openWorldHint":true}}"#,
        ]),
    )
}

#[test]
fn selects_with_patterns_and_exclusions() {
    let cat = catalogue();
    let v = view(&cat, &endpoint(&["gh__*", "upstream:db"], &["*__delete_*"], vec![]).selection(), &ids);
    let names: Vec<_> = v.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["gh__search", "db__run_query"]);
    assert!(v.tools().iter().all(|t| t.canonical.as_deref() == Some(t.name.as_str())));
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

#[test]
fn overrides_rename_describe_annotate_and_fix_arguments() {
    let cat = catalogue();
    let over = ToolOverride {
        name: "db__run_query".into(),
        rename: Some("query_readonly".into()),
        title: Some("Read-only query".into()),
        description_suffix: Some("Runs against the read replica.".into()),
        annotations: serde_json::json!({ "readOnlyHint": true }).as_object().unwrap().clone(),
        fixed: serde_json::json!({ "database": "replica" }).as_object().unwrap().clone(),
        ..Default::default()
    };
    let v = view(&cat, &endpoint(&["db__*"], &[], vec![over]).selection(), &ids);
    let t = v.tool("query_readonly").expect("renamed");
    assert_eq!(t.policy_name(), "db__run_query");
    assert_eq!(t.original, "run_query", "routes to the upstream's own name");
    assert_eq!(t.fixed["database"], "replica");
    let json: Value = serde_json::from_str(t.json.get()).unwrap();
    assert_eq!(json["name"], "query_readonly");
    assert_eq!(json["title"], "Read-only query");
    assert_eq!(json["description"], "Runs SQL.\n\nRuns against the read replica.");
    assert_eq!(json["annotations"], serde_json::json!({ "openWorldHint": true, "readOnlyHint": true }));
    assert_eq!(json["inputSchema"]["properties"].as_object().unwrap().keys().collect::<Vec<_>>(), ["sql"]);
    assert_eq!(json["inputSchema"]["required"], serde_json::json!(["sql"]));
    assert!(v.tool("db__run_query").is_none(), "only the new name is served");
}

#[test]
fn overrides_that_cannot_apply_are_problems() {
    let cat = catalogue();
    let bad_fixed = ToolOverride {
        name: "db__run_query".into(),
        fixed: serde_json::json!({ "schema": "x" }).as_object().unwrap().clone(),
        ..Default::default()
    };
    let clash = ToolOverride { name: "gh__delete_repo".into(), rename: Some("gh__search".into()), ..Default::default() };
    let nothing = ToolOverride { name: "gh__missing".into(), ..Default::default() };
    let v = view(&cat, &endpoint(&["*"], &[], vec![bad_fixed, clash, nothing]).selection(), &ids);
    let names: Vec<_> = v.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["gh__search"]);
    let reasons: Vec<_> = v.problems.iter().map(|p| (p.item.as_str(), p.reason.as_str())).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].1.contains("'gh__search' is already the name of 'gh__search'"), "{reasons:?}");
    assert!(reasons[1].1.contains("fixed argument 'schema' is not in the tool's inputSchema"), "{reasons:?}");
    assert!(reasons[2].0 == "gh__missing" && reasons[2].1.contains("matches no tool"), "{reasons:?}");
    let empty = view(&cat, &endpoint(&["nope__*"], &[], vec![]).selection(), &ids);
    assert!(empty.problems.iter().any(|p| p.reason.contains("the selection matches nothing")));
}
