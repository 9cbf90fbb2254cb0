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
        items: [tools, &[], resources, &[], &[]],
        ttl_ms: [Some(1000 * (i as u64 + 1)), None, Some(0), None, None],
        listed_at: Some(std::time::Instant::now()),
        private: [false, false, i == 1, false, false],
        has_resources: !resources.is_empty(),
        rename: &[],
        validate: true,
    }
}

/// Builds with the default name policy and every input's prefix as a namespace.
fn build_all(inputs: &[UpstreamLists]) -> Catalog {
    let spaces: Vec<(usize, String)> = inputs.iter().filter(|i| !i.prefix.is_empty()).map(|i| (i.upstream, i.prefix.to_string())).collect();
    build(inputs, &Naming { policy: &names::NamePolicy::default(), namespaces: &spaces })
}

#[test]
fn prefixes_orders_and_keeps_fields_verbatim() {
    let a = raws(&[r#"{"name":"echo","inputSchema":{"type":"object","$defs":{"x":{"$anchor":"y"}}},"annotations":{"readOnlyHint":true}}"#]);
    let b = raws(&[r#"{"name":"echo","inputSchema":{"type":"object"}}"#, r#"{"name":"now","inputSchema":{"type":"object"}}"#]);
    let cat = build_all(&[input(0, "calc", "calc", &a, &[]), input(1, "text", "text", &b, &[])]);
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
    let cat = build_all(&[input(0, "a", "", &a, &[]), input(1, "b", "", &b, &[])]);
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
    let cat = build_all(&[input(0, "files", "files", &[], &r), input(1, "fixture", "", &[], &plain)]);
    let res = &cat.section(Kind::Resource).entries;
    assert_eq!(res[0].name, "files+file:///a.txt");
    assert_eq!(res[0].json.get(), r#"{"uri":"files+file:///a.txt","name":"a"}"#);
    assert_eq!(res[1].name, "test://static-text");
    assert_eq!(cat.route_uri("files+file:///a.txt"), Some((0, "file:///a.txt".into())));
    assert_eq!(cat.route_uri("files+file:///unlisted"), Some((0, "file:///unlisted".into())));
    assert_eq!(cat.route_uri("FILES+file:///unlisted"), Some((0, "file:///unlisted".into())), "schemes ignore case");
    assert_eq!(cat.route_uri("test://static-text"), Some((1, "test://static-text".into())));
    assert_eq!(cat.route_uri("test://other"), Some((1, "test://other".into())));
}

#[test]
fn a_down_upstreams_namespace_still_routes_to_it() {
    let any = raws(&[r#"{"uri":"evil://own","name":"own"}"#]);
    let inputs = [input(0, "evil", "", &[], &any)];
    let spaces = [(1, "vault".to_string())];
    let cat = build(&inputs, &Naming { policy: &names::NamePolicy::default(), namespaces: &spaces });
    assert_eq!(cat.route_uri("vault+mem://secret/key"), Some((1, "mem://secret/key".into())), "not to the unprefixed upstream");
    assert_eq!(cat.route_uri("Vault+mem://secret/key"), Some((1, "mem://secret/key".into())));
    assert_eq!(cat.route_uri("other://x"), Some((0, "other://x".into())));
    assert_eq!(cat.route_uri("mem://vault+x"), Some((0, "mem://vault+x".into())), "a + outside the scheme is no prefix");
}

#[test]
fn nobody_publishes_into_another_upstreams_namespace() {
    let squatter =
        raws(&[r#"{"name":"github__delete_repo","inputSchema":{"type":"object"}}"#, r#"{"name":"fine","inputSchema":{"type":"object"}}"#]);
    let links = raws(&[r#"{"uri":"github+https://x","name":"x"}"#, r#"{"uri":"GitHub+https://y","name":"y"}"#]);
    let owner = raws(&[r#"{"name":"list","inputSchema":{"type":"object"}}"#]);
    // `a_` + `__` + `_x` would be `a___x`, inside `a`'s namespace `a__`.
    let nested = raws(&[r#"{"name":"_x","inputSchema":{"type":"object"}}"#]);
    let cat = build_all(&[
        input(0, "plain", "", &squatter, &links),
        input(1, "github", "github", &owner, &[]),
        input(2, "a", "a", &[], &[]),
        input(3, "a_", "a_", &nested, &[]),
    ]);
    let names: Vec<_> = cat.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["fine", "github__list"]);
    assert!(cat.section(Kind::Resource).entries.is_empty());
    let refused: Vec<_> = cat.problems.iter().map(|p| (p.upstream.as_str(), p.item.as_str())).collect();
    // A URI's prefix is part of its case-insensitive scheme: `GitHub+` is github's namespace too.
    assert_eq!(refused, [("plain", "github__delete_repo"), ("plain", "github+https://x"), ("plain", "GitHub+https://y"), ("a_", "_x")]);
    assert!(cat.problems.iter().all(|p| p.reason.contains("namespace of upstream")), "{:?}", cat.problems);
}

#[test]
fn renames_and_the_name_policy_apply() {
    let tools = raws(&[
        r#"{"name":"search_issues_and_pull_requests_across_every_repository_of_the_organisation","inputSchema":{"type":"object"}}"#,
        r#"{"name":"repo.get","inputSchema":{"type":"object"}}"#,
    ]);
    let rename = [("repo.get".to_string(), "get_repo".to_string())];
    let mut lists = input(0, "github", "github", &tools, &[]);
    lists.rename = &rename;
    let policy = names::NamePolicy { separator: "__".into(), max_length: 64, charset: names::Charset::Strict };
    let cat = build(&[lists], &Naming { policy: &policy, namespaces: &[(0, "github".into())] });
    let names: Vec<_> = cat.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{:?}", cat.problems);
    assert!(names[0].len() == 64 && names[0].starts_with("github__search_issues"), "{}", names[0]);
    assert_eq!(names[1], "get_repo");
    assert_eq!(cat.tool("get_repo").map(|t| t.original.as_str()), Some("repo.get"), "routes to the upstream's own name");
}

#[test]
fn a_relisted_list_with_the_same_items_keeps_its_order() {
    let first = raws(&[r#"{"name":"zeta","v":1}"#, r#"{"name":"alpha","v":1}"#, r#"{"name":"mid","v":1}"#]);
    let shuffled = raws(&[r#"{"name":"mid","v":2}"#, r#"{"name":"zeta","v":2}"#, r#"{"name":"alpha","v":2}"#]);
    let kept = keep_order(Kind::Tool, &first, shuffled);
    let got: Vec<&str> = kept.iter().map(|r| r.get()).collect();
    assert_eq!(
        got,
        [r#"{"name":"zeta","v":2}"#, r#"{"name":"alpha","v":2}"#, r#"{"name":"mid","v":2}"#],
        "the new items, in the old order"
    );
    // Another set: the server's order now.
    let changed = raws(&[r#"{"name":"mid"}"#, r#"{"name":"new"}"#, r#"{"name":"alpha"}"#]);
    let got: Vec<String> = keep_order(Kind::Tool, &first, changed).iter().map(|r| r.get().to_string()).collect();
    assert_eq!(got, [r#"{"name":"mid"}"#, r#"{"name":"new"}"#, r#"{"name":"alpha"}"#]);
    // Duplicates are counted; resources by their uri.
    let a = raws(&[r#"{"uri":"m://b"}"#, r#"{"uri":"m://a"}"#, r#"{"uri":"m://b","x":1}"#]);
    let b = raws(&[r#"{"uri":"m://a"}"#, r#"{"uri":"m://b"}"#, r#"{"uri":"m://b","x":1}"#]);
    let got: Vec<String> = keep_order(Kind::Resource, &a, b).iter().map(|r| r.get().to_string()).collect();
    assert_eq!(got, [r#"{"uri":"m://b"}"#, r#"{"uri":"m://a"}"#, r#"{"uri":"m://b","x":1}"#]);
}
