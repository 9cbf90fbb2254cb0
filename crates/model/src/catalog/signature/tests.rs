//! The schema forms one by one, names, the comment escape, the caps, and a property: any JSON
//! at all gives a declaration within the cap, without a panic.

#[cfg(test)] // test-only module: unwrap/expect below are on test data
use super::*;
use proptest::prelude::*;
use serde_json::json;

fn decl(tool: Value) -> String {
    declaration(&tool.to_string(), tool["name"].as_str().unwrap_or("t"))
}

/// The argument type alone: `args: T` of a tool whose input schema is `schema`.
fn args(schema: Value) -> String {
    let d = decl(json!({"name": "t", "inputSchema": schema}));
    let rest = d.split_once(": ").map(|(_, r)| r).unwrap_or_default();
    rest.rsplit_once("): Promise<").map(|(a, _)| a.to_string()).unwrap_or_default()
}

#[test]
fn the_example_of_the_design() {
    let tool = json!({
        "name": "calc__add", "description": "Adds two numbers.",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
        "outputSchema": {"type": "object", "properties": {"result": {"type": "number"}}, "required": ["result"]}
    });
    assert_eq!(decl(tool), "/** Adds two numbers. */ calc__add(args: { a: number; b: number; }): Promise<{ result: number; }>;");
}

#[test]
fn objects_say_which_properties_are_optional() {
    let s = json!({"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["path"]});
    assert_eq!(args(s), "{ limit?: number; path: string; }");
    // Nothing required: the argument itself may be left out.
    let d = decl(json!({"name": "t", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}));
    assert!(d.starts_with("t(args?: { x?: string; })"), "{d}");
    assert_eq!(args(json!({"type": "object"})), "{ [k: string]: unknown }");
    assert_eq!(args(json!({"type": "object", "properties": {}, "additionalProperties": false})), "Record<string, never>");
    assert_eq!(args(json!({"type": "object", "additionalProperties": {"type": "number"}})), "{ [k: string]: number }");
    assert_eq!(
        args(json!({"properties": {"a": {"type": "boolean"}}, "additionalProperties": {"type": "string"}, "required": ["a"]})),
        "{ a: boolean; } & { [k: string]: string }"
    );
}

#[test]
fn arrays_enums_consts_and_type_lists() {
    let p = |s: Value| args(json!({"type": "object", "properties": {"v": s}, "required": ["v"]}));
    assert_eq!(p(json!({"type": "array", "items": {"type": "string"}})), "{ v: string[]; }");
    assert_eq!(p(json!({"type": "array", "items": {"type": ["string", "null"]}})), "{ v: Array<string | null>; }");
    assert_eq!(p(json!({"type": "array"})), "{ v: unknown[]; }");
    assert_eq!(p(json!({"items": {"type": "object", "properties": {"id": {"type": "number"}}}})), "{ v: Array<{ id?: number; }>; }");
    assert_eq!(p(json!({"enum": ["a", "b\"c", 1, true, null]})), "{ v: \"a\" | \"b\\\"c\" | 1 | true | null; }");
    assert_eq!(p(json!({"const": "fixed"})), "{ v: \"fixed\"; }");
    assert_eq!(p(json!({"const": {"an": "object"}})), "{ v: unknown; }");
    assert_eq!(p(json!({"type": ["string", "number"]})), "{ v: string | number; }");
    assert_eq!(p(json!({"type": "string", "nullable": true})), "{ v: string | null; }");
    assert_eq!(p(json!({"type": "string", "format": "uri"})), "{ v: string; }");
    assert_eq!(p(json!({"type": "weird"})), "{ v: unknown; }");
    assert_eq!(p(json!(true)), "{ v: unknown; }");
    assert_eq!(p(json!(false)), "{ v: never; }");
    assert_eq!(p(json!({})), "{ v: unknown; }");
}

#[test]
fn unions_and_intersections() {
    let p = |s: Value| args(json!({"type": "object", "properties": {"v": s}, "required": ["v"]}));
    assert_eq!(p(json!({"oneOf": [{"type": "string"}, {"type": "number"}]})), "{ v: (string | number); }");
    assert_eq!(p(json!({"anyOf": [{"const": 1}, {"type": "null"}]})), "{ v: (1 | null); }");
    assert_eq!(p(json!({"anyOf": [{"const": 1}, {"description": "anything"}]})), "{ v: unknown; }");
    assert_eq!(p(json!({"allOf": [{"type": "string"}, {"minLength": 1}]})), "{ v: string; }");
    assert_eq!(
        p(json!({"type": ["string", "null"], "anyOf": [{"const": "a"}, {"const": "b"}]})),
        "{ v: (string | null) & (\"a\" | \"b\"); }"
    );
    assert_eq!(
        p(json!({"allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "string"}}}]})),
        "{ v: ({ a?: string; } & { b?: string; }); }"
    );
    // A base type and a union together: both hold.
    assert_eq!(
        p(json!({"type": "object", "properties": {"k": {"type": "string"}}, "oneOf": [{"required": ["k"]}]})),
        "{ v: { k?: string; }; }"
    );
}

#[test]
fn local_references_are_inlined_and_cycles_and_others_are_unknown() {
    let s = json!({
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/point"}, "q": {"$ref": "#/definitions/q"}, "x": {"$ref": "https://example.com/s.json"}},
        "required": ["p"],
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "definitions": {"q": {"enum": ["a"]}}
    });
    assert_eq!(args(s), "{ p: { x: number; }; q?: \"a\"; x?: unknown; }");
    // A tree: the reference inside itself is not expanded again.
    let tree = json!({
        "$ref": "#/$defs/node",
        "$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}
    });
    assert_eq!(args(tree), "{ kids?: unknown[]; }");
    assert_eq!(args(json!({"$ref": "#"})), "unknown");
    assert_eq!(args(json!({"$ref": "#/$defs/missing"})), "unknown");
}

#[test]
fn deep_schemas_stop_at_the_depth_cap() {
    let mut s = json!({"type": "string"});
    for _ in 0..10 {
        s = json!({"type": "object", "properties": {"d": s}, "required": ["d"]});
    }
    let a = args(s);
    assert_eq!(a.matches("d: ").count(), MAX_DEPTH + 1, "{a}");
    assert!(a.contains("d: unknown;"), "{a}");
    assert!(!a.contains("string"), "{a}");
}

#[test]
fn names_that_are_not_identifiers_are_quoted_members() {
    assert_eq!(member("calc__add"), "calc__add");
    assert_eq!(member("$x_1"), "$x_1");
    assert_eq!(member("a-b"), "\"a-b\"");
    assert_eq!(member("1st"), "\"1st\"");
    assert_eq!(member("a.b"), "\"a.b\"");
    assert_eq!(member(""), "\"\"");
    assert_eq!(member("q\"x"), "\"q\\\"x\"");
    assert!(decl(json!({"name": "gh-search"})).starts_with("\"gh-search\"(args?: "));
    let s = json!({"type": "object", "properties": {"dry-run": {"type": "boolean"}}});
    assert_eq!(args(s), "{ \"dry-run\"?: boolean; }");
    // `tools.call` is the prelude's own function: the tool named `call` is one of its overloads.
    assert_eq!(decl(json!({"name": "call"})), "call(name: \"call\", args?: { [k: string]: unknown }): Promise<ToolResult>;");
    let all = tools_declaration(&[decl(json!({"name": "a"})), decl(json!({"name": "b-c"}))]);
    assert!(all.starts_with("declare const tools: {\n  a(args?: "), "{all}");
    assert!(all.ends_with("  call(name: string, args?: { [k: string]: unknown }): Promise<unknown>;\n};"), "{all}");
}

#[test]
fn descriptions_cannot_close_the_comment() {
    let d = decl(json!({"name": "t", "description": "ends */ here; then code(); /* and\n\n  more */",
        "inputSchema": {"properties": {"p": {"type": "string", "description": "p */ q"}}}}));
    assert_eq!(d.matches("*/").count(), 2, "only our own comments close: {d}");
    assert!(d.starts_with("/** ends *\\/ here; then code(); /* and more *\\/ */ t(args?: { /** p *\\/ q */ p?: string; })"), "{d}");
    // Whitespace-only descriptions leave no empty comment.
    assert!(decl(json!({"name": "t", "description": " \n "})).starts_with("t("));
    // A cut right inside the escape cannot make a closing sequence either.
    for n in 1..12 {
        let text = doc_text(&"*/".repeat(20), n + 4);
        assert!(!text.contains("*/"), "{text}");
    }
}

#[test]
fn long_descriptions_and_large_schemas_are_cut_visibly() {
    let d = decl(json!({"name": "t", "description": "word ".repeat(2000)}));
    assert!(d.len() <= MAX_DECLARATION);
    assert!(d.contains("word… */ t("), "{d}");
    // Too many properties for full depth: shallower, marked, within the cap.
    let mut props = Map::new();
    for i in 0..300 {
        props.insert(format!("p{i}"), json!({"type": "object", "properties": {"inner": {"type": "array", "items": {"type": "string"}}}}));
    }
    let d = decl(json!({"name": "t", "inputSchema": {"type": "object", "properties": props}}));
    assert!(d.len() <= MAX_DECLARATION, "{}", d.len());
    assert!(d.contains("/* … */"), "{d}");
    // A schema that only fits with no type at all.
    let mut props = Map::new();
    for i in 0..2000 {
        props.insert(format!("property_{i}"), json!({"type": "string"}));
    }
    let d = decl(json!({"name": "t", "description": "Big.", "inputSchema": {"type": "object", "properties": props}}));
    assert_eq!(d, "/** Big. */ t(args?: unknown /* … */): Promise<ToolResult>;");
    // References that fan out cannot blow the work up: the budget stops the rendering.
    let mut defs = Map::new();
    for level in 0..12 {
        let next: Map<String, Value> = (0..40).map(|i| (format!("f{i}"), json!({"$ref": format!("#/$defs/l{}", level + 1)}))).collect();
        defs.insert(format!("l{level}"), json!({"type": "object", "properties": next}));
    }
    let d = decl(json!({"name": "t", "inputSchema": {"$ref": "#/$defs/l0", "$defs": defs}}));
    assert!(d.len() <= MAX_DECLARATION, "{}", d.len());
    // A name longer than the cap still gives something within it.
    let long = "n".repeat(MAX_DECLARATION * 2);
    assert!(declaration("{}", &long).len() <= MAX_DECLARATION);
}

#[test]
fn what_is_not_a_tool_object_still_declares() {
    assert_eq!(declaration("not json", "t"), "t(args?: { [k: string]: unknown }): Promise<ToolResult>;");
    assert_eq!(declaration("[1,2]", "t"), "t(args?: { [k: string]: unknown }): Promise<ToolResult>;");
    assert_eq!(declaration(r#"{"inputSchema": 7, "outputSchema": "x"}"#, "t"), "t(args?: unknown): Promise<unknown>;");
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec!["object", "array", "string", "integer", "null", "#/$defs/a", "#", "*/", "a-b"]).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 96, 8, |inner| {
        let key = prop::sample::select(vec![
            "type",
            "properties",
            "required",
            "items",
            "enum",
            "const",
            "oneOf",
            "anyOf",
            "allOf",
            "$ref",
            "$defs",
            "definitions",
            "additionalProperties",
            "nullable",
            "description",
            "a",
            "b",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key, inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_json_gives_a_declaration_within_the_cap(input in any_json(), output in any_json(), desc in ".{0,64}", name in ".{0,40}") {
        let tool = json!({"name": name, "description": desc, "inputSchema": input, "outputSchema": output});
        let d = declaration(&tool.to_string(), &name);
        prop_assert!(d.len() <= MAX_DECLARATION);
        prop_assert!(d.ends_with(";") || d.ends_with("*/"));
        let comments = d.matches("/*").count();
        prop_assert!(d.matches("*/").count() <= comments, "{}", d);
        let again = declaration(&input.to_string(), &name);
        prop_assert!(again.len() <= MAX_DECLARATION);
    }
}
