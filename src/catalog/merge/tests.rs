#[cfg(test)] // test-only module: unwrap/expect below are on test data
use super::*;

fn raws(list: &[&str]) -> Vec<Box<RawValue>> {
    list.iter().map(|s| RawValue::from_string((*s).to_string()).unwrap()).collect()
}

fn input<'a>(i: usize, id: &'a str, prefix: &'a str, tools: &'a [Box<RawValue>], resources: &'a [Box<RawValue>]) -> UpstreamLists<'a> {
    UpstreamLists {
        upstream: i,
        id,
        prefix,
        items: [tools, &[], resources, &[]],
        ttl_ms: [Some(1000 * (i as u64 + 1)), None, Some(0), None],
        listed_at: Some(std::time::Instant::now()),
        private: [false, false, i == 1, false],
        has_resources: !resources.is_empty(),
    }
}

#[test]
fn prefixes_orders_and_keeps_fields_verbatim() {
    let a = raws(&[r#"{"name":"echo","inputSchema":{"type":"object","$defs":{"x":{"$anchor":"y"}}},"annotations":{"readOnlyHint":true}}"#]);
    let b = raws(&[r#"{"name":"echo","inputSchema":{"type":"object"}}"#, r#"{"name":"now","inputSchema":{"type":"object"}}"#]);
    let cat = build(&[input(0, "calc", "calc", &a, &[]), input(1, "text", "text", &b, &[])], "__");
    let names: Vec<_> = cat.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["calc__echo", "text__echo", "text__now"]);
    assert_eq!(
        cat.tools()[0].json.get(),
        r#"{"name":"calc__echo","inputSchema":{"type":"object","$defs":{"x":{"$anchor":"y"}}},"annotations":{"readOnlyHint":true}}"#
    );
    assert_eq!(cat.tool("text__now").unwrap().original, "now");
    let ttl = cat.ttl_ms(Kind::Tool, std::time::Instant::now());
    assert!(ttl <= 1000 && ttl > 900, "the smallest TTL, less the lists' age: {ttl}");
    assert_eq!(cat.ttl_ms(Kind::Tool, std::time::Instant::now() + std::time::Duration::from_secs(5)), 0, "never negative");
    assert_eq!(cat.ttl_ms(Kind::Prompt, std::time::Instant::now()), 0, "no contributing list promises nothing");
    assert!(!cat.is_private(Kind::Tool) && cat.is_private(Kind::Resource), "scope is per list");
    assert!(cat.problems.is_empty());
}

#[test]
fn reports_collisions_bad_names_and_bad_annotations() {
    let a = raws(&[r#"{"name":"search","inputSchema":{"type":"object"}}"#]);
    let b = raws(&[
        r#"{"name":"search","inputSchema":{"type":"object"}}"#,
        r#"{"name":"bad name","inputSchema":{"type":"object"}}"#,
        r#"{"name":"hdr","inputSchema":{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}}"#,
        r#"{"name":"ok","inputSchema":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"}}}}"#,
        r#"{"name":"nullschema","inputSchema":null}"#,
        r#"{"name":"arrayschema","inputSchema":{"type":"array"}}"#,
    ]);
    let cat = build(&[input(0, "a", "", &a, &[]), input(1, "b", "", &b, &[])], "__");
    let names: Vec<_> = cat.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["search", "ok"]);
    assert_eq!(cat.tool("search").unwrap().upstream, 0);
    assert_eq!(cat.tool("ok").unwrap().headers.len(), 1);
    let items: Vec<_> = cat.problems.iter().map(|p| p.item.as_str()).collect();
    assert_eq!(items, ["search", "bad name", "hdr", "nullschema", "arrayschema"]);
    assert!(cat.problems[0].reason.contains("collides"));
    assert!(cat.problems[1].reason.contains("not servable"));
    assert!(cat.problems[2].reason.contains("x-mcp-header"));
    assert!(cat.problems[3].reason.contains("not an object schema") && cat.problems[4].reason.contains("not an object schema"));
    assert!(cat.problems.iter().all(|p| p.upstream == "b" && p.kind == Kind::Tool));
}

#[test]
fn resource_uris_are_prefixed_and_route_back() {
    let r = raws(&[r#"{"uri":"file:///a.txt","name":"a"}"#]);
    let plain = raws(&[r#"{"uri":"test://static-text","name":"s"}"#]);
    let cat = build(&[input(0, "files", "files", &[], &r), input(1, "fixture", "", &[], &plain)], "__");
    let res = &cat.section(Kind::Resource).entries;
    assert_eq!(res[0].name, "files+file:///a.txt");
    assert_eq!(res[0].json.get(), r#"{"uri":"files+file:///a.txt","name":"a"}"#);
    assert_eq!(res[1].name, "test://static-text");
    assert_eq!(cat.route_uri("files+file:///a.txt"), Some((0, "file:///a.txt".into())));
    assert_eq!(cat.route_uri("files+file:///unlisted"), Some((0, "file:///unlisted".into())));
    assert_eq!(cat.route_uri("test://static-text"), Some((1, "test://static-text".into())));
    assert_eq!(cat.route_uri("test://other"), Some((1, "test://other".into())));
}
