#![cfg(test)] // test-only module: unwrap/expect below are on test data
//! The argument check over the JSON Schema cases tools use, table-driven.

use super::*;
use serde_json::json;

fn tool(schema: Value) -> ArgCheck {
    ArgCheck::new(Json::to_json(&json!({ "name": "t", "inputSchema": schema })).expect("json"))
}

fn verdict(schema: Value, args: Value) -> Result<(), Vec<String>> {
    match tool(schema).check(&args) {
        Ok(()) => Ok(()),
        Err(Refusal::Invalid(p)) => Err(p.into_iter().map(|p| p.path).collect()),
        Err(Refusal::Unusable(why)) => Err(vec![format!("unusable: {why}")]),
        Err(Refusal::TooCostly(why)) => Err(vec![format!("too costly: {why}")]),
    }
}

/// A label, a schema, arguments, and the failing paths expected (`Ok`: none).
type Case = (&'static str, Value, Value, Result<(), Vec<&'static str>>);

#[test]
fn arguments_are_checked_as_json_schema_2020_12_says() {
    let object = |props: Value, required: Value| json!({ "type": "object", "properties": props, "required": required });
    let cases: Vec<Case> = vec![
        ("types: a number", object(json!({ "n": { "type": "number" } }), json!([])), json!({ "n": 2.5 }), Ok(())),
        ("types: a string is no number", object(json!({ "n": { "type": "number" } }), json!([])), json!({ "n": "2" }), Err(vec!["/n"])),
        ("types: an integer", object(json!({ "i": { "type": "integer" } }), json!([])), json!({ "i": 1.5 }), Err(vec!["/i"])),
        ("required: present", object(json!({ "q": { "type": "string" } }), json!(["q"])), json!({ "q": "x" }), Ok(())),
        ("required: missing", object(json!({ "q": { "type": "string" } }), json!(["q"])), json!({}), Err(vec![""])),
        ("enum: a listed value", object(json!({ "c": { "enum": ["red", "blue"] } }), json!([])), json!({ "c": "red" }), Ok(())),
        ("enum: another value", object(json!({ "c": { "enum": ["red", "blue"] } }), json!([])), json!({ "c": "green" }), Err(vec!["/c"])),
        (
            "additionalProperties false: an extra argument",
            json!({ "type": "object", "properties": { "a": {} }, "additionalProperties": false }),
            json!({ "a": 1, "b": 2 }),
            Err(vec![""]),
        ),
        (
            "additionalProperties: a schema for the others",
            json!({ "type": "object", "additionalProperties": { "type": "boolean" } }),
            json!({ "x": true, "y": 1 }),
            Err(vec!["/y"]),
        ),
        (
            "$ref within the schema ($defs)",
            json!({ "type": "object", "properties": { "when": { "$ref": "#/$defs/date" } }, "$defs": { "date": { "type": "string", "minLength": 10 } } }),
            json!({ "when": "2026" }),
            Err(vec!["/when"]),
        ),
        (
            "$ref within the schema, satisfied",
            json!({ "type": "object", "properties": { "when": { "$ref": "#/$defs/date" } }, "$defs": { "date": { "type": "string" } } }),
            json!({ "when": "2026-12-02" }),
            Ok(()),
        ),
        (
            "formats are annotations",
            object(json!({ "e": { "type": "string", "format": "email" } }), json!([])),
            json!({ "e": "not an email" }),
            Ok(()),
        ),
        (
            "nested paths",
            object(json!({ "o": { "type": "object", "properties": { "k": { "type": "integer" } } } }), json!([])),
            json!({ "o": { "k": "x" } }),
            Err(vec!["/o/k"]),
        ),
        (
            "arrays: items",
            object(json!({ "l": { "type": "array", "items": { "type": "string" } } }), json!([])),
            json!({ "l": ["a", 1] }),
            Err(vec!["/l/1"]),
        ),
        (
            "2020-12 prefixItems",
            object(json!({ "p": { "type": "array", "prefixItems": [{ "type": "string" }, { "type": "integer" }] } }), json!([])),
            json!({ "p": ["a", "b"] }),
            Err(vec!["/p/1"]),
        ),
        (
            "draft-07 by $schema: items as a list",
            json!({ "$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": { "p": { "type": "array", "items": [{ "type": "string" }] } } }),
            json!({ "p": [1] }),
            Err(vec!["/p/0"]),
        ),
        (
            "pattern (linear engine)",
            object(json!({ "z": { "type": "string", "pattern": "^[0-9]{5}$" } }), json!([])),
            json!({ "z": "1234a" }),
            Err(vec!["/z"]),
        ),
        (
            "pattern with a lookahead (bounded backtracking)",
            object(json!({ "w": { "type": "string", "pattern": "^(?=.*[0-9]).+$" } }), json!([])),
            json!({ "w": "abc" }),
            Err(vec!["/w"]),
        ),
        ("an empty schema takes anything", json!({}), json!({ "anything": [1, 2] }), Ok(())),
        (
            "null for an optional argument is leaving it out",
            object(json!({ "r": { "type": "string" } }), json!([])),
            json!({ "r": null }),
            Ok(()),
        ),
        (
            "null for a required argument is missing it",
            object(json!({ "r": { "type": "string" } }), json!(["r"])),
            json!({ "r": null }),
            Err(vec![""]),
        ),
    ];
    for (label, schema, args, expected) in cases {
        let expected = expected.map_err(|paths| paths.into_iter().map(str::to_string).collect::<Vec<_>>());
        assert_eq!(verdict(schema, args), expected, "{label}");
    }
}

#[test]
fn a_schema_that_reaches_outside_itself_is_refused_not_followed() {
    let remote = tool(json!({ "type": "object", "properties": { "a": { "$ref": "https://example.com/schema.json" } } }));
    assert!(matches!(remote.check(&json!({ "a": 1 })), Err(Refusal::Unusable(_))), "an external $ref is never fetched");
    let file = tool(json!({ "type": "object", "properties": { "a": { "$ref": "file:///etc/passwd" } } }));
    assert!(matches!(file.check(&json!({ "a": 1 })), Err(Refusal::Unusable(_))));
}

#[test]
fn a_tool_without_a_schema_is_not_checked_and_the_validator_is_compiled_once() {
    let open = ArgCheck::new(Json::to_json(&json!({ "name": "t" })).expect("json"));
    assert_eq!(open.check(&json!({ "x": 1 })), Ok(()));
    let check = tool(json!({ "type": "object", "required": ["q"] }));
    let copy = check.clone();
    assert!(check.check(&json!({})).is_err());
    assert!(copy.compiled.get().is_some(), "a copy shares the compiled validator");
    let Err(Refusal::Invalid(p)) = copy.check(&json!({})) else { panic!("refused") };
    assert!(p[0].message.contains("\"q\""), "the message names what is missing: {p:?}");
}
