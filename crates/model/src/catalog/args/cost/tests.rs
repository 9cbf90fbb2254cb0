#![cfg(test)] // test-only module: unwrap/expect below are on test data
//! The cost of a check is counted, and bounded, before the validator runs.

use super::*;
use crate::catalog::args::{ArgCheck, Refusal};
use crate::protocol::json::Json;
use serde_json::json;
use std::time::{Duration, Instant};

/// `levels` definitions, each an `anyOf` of `fan` references to the next: 2^levels applications
/// for a value that fails them all (what the review's hostile upstream served).
pub fn nested_any_of(levels: usize, fan: usize) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..levels {
        let next = json!({ "$ref": format!("#/$defs/l{}", i + 1) });
        defs.insert(format!("l{i}"), json!({ "anyOf": vec![next; fan] }));
    }
    defs.insert(format!("l{levels}"), json!({ "type": "string" }));
    json!({ "type": "object", "properties": { "x": { "$ref": "#/$defs/l0" } }, "$defs": defs })
}

/// A recursive schema whose two branches both recurse into the same member: checking a value
/// nested `depth` deep applies it 2^depth times.
fn forked_recursion() -> Value {
    let branch = json!({ "type": "object", "properties": { "c": { "$ref": "#/$defs/node" } } });
    json!({ "type": "object", "properties": { "x": { "$ref": "#/$defs/node" } }, "$defs": { "node": { "anyOf": [branch.clone(), branch, { "type": "integer" }] } } })
}

fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!({ "c": v });
    }
    json!({ "x": v })
}

fn tool(schema: Value) -> ArgCheck {
    ArgCheck::new(Json::to_json(&json!({ "name": "t", "inputSchema": schema })).expect("json"))
}

#[test]
fn a_schema_that_expands_exponentially_is_not_affordable_and_counting_it_is_quick() {
    let started = Instant::now();
    let hostile = tool(nested_any_of(22, 2));
    let why = hostile.affordable().expect_err("2^22 applications is past the budget").to_string();
    assert!(why.contains("expands to more than"), "{why}");
    assert!(started.elapsed() < Duration::from_secs(2), "counting stops at the budget: {:?}", started.elapsed());
    // The same shape, shallow, and the schemas tools use: well within.
    assert!(tool(nested_any_of(6, 2)).affordable().is_ok());
    assert!(schema_size(&nested_any_of(6, 2), SCHEMA_BUDGET).expect("within") < 300);
    let tree = json!({ "$defs": { "node": { "type": "object", "properties": {
        "name": { "type": "string" }, "children": { "type": "array", "items": { "$ref": "#/$defs/node" } } } } },
        "type": "object", "properties": { "root": { "$ref": "#/$defs/node" } } });
    assert!(schema_size(&tree, SCHEMA_BUDGET).expect("a recursive schema counts its loop once") < 20);
    assert_eq!(schema_size(&json!({ "$ref": "#" }), SCHEMA_BUDGET), Ok(2), "a reference to itself on the same value stops");
}

#[test]
fn a_check_whose_work_grows_with_the_arguments_is_refused_before_it_runs() {
    let check = tool(forked_recursion());
    assert!(check.affordable().is_ok(), "the schema itself is small");
    assert_eq!(check.check(&nested(4)), Ok(()), "shallow arguments are checked");
    assert!(matches!(check.check(&json!({ "x": { "c": { "c": 1.5 } } })), Err(Refusal::Invalid(_))), "and refused when wrong");
    let started = Instant::now();
    let refused = check.check(&nested(40));
    assert!(matches!(&refused, Err(Refusal::TooCostly(why)) if why.contains("more than")), "{refused:?}");
    assert!(started.elapsed() < Duration::from_secs(2), "refused without running: {:?}", started.elapsed());
    // A legitimately deep tree is linear, whatever its depth.
    let tree = json!({ "$defs": { "node": { "anyOf": [{ "type": "integer" }, { "type": "object", "properties": { "c": { "$ref": "#/$defs/node" } } }] } },
        "type": "object", "properties": { "x": { "$ref": "#/$defs/node" } } });
    assert!(check_work(&tree, &nested(100), CHECK_BUDGET).expect("within") < 1_000);
    assert_eq!(tool(tree).check(&nested(100)), Ok(()));
}

#[test]
fn the_count_is_an_upper_bound_of_what_the_validator_applies() {
    // Items and members multiply by how many there are; every keyword that applies a subschema
    // is counted.
    let schema = json!({ "type": "object", "properties": { "xs": { "type": "array", "items": { "anyOf": [{ "type": "integer" }, { "type": "string" }] } } },
        "additionalProperties": { "not": { "type": "null" } }, "propertyNames": { "maxLength": 3 } });
    let args = json!({ "xs": [1, 2, 3], "y": true });
    let work = check_work(&schema, &args, CHECK_BUDGET).expect("within");
    // root, xs (properties), 3 items × (item + 2 branches), 2 members × (additionalProperties
    // + not), 2 names.
    assert_eq!(work, 1 + 1 + 3 * 3 + 2 * 2 + 2);
    assert_eq!(check_work(&schema, &args, 5), Err(6), "counting stops just past the budget");
}

#[test]
fn long_strings_and_unevaluated_keywords_count_what_they_cost() {
    // A thousand patterns over one 4 MB string read 4 GB: refused, though the schema is small.
    let branches: Vec<Value> = (0..1000).map(|i| json!({ "pattern": format!("^a{i}") })).collect();
    let schema = json!({ "type": "object", "properties": { "s": { "anyOf": branches } } });
    assert!(schema_size(&schema, SCHEMA_BUDGET).is_ok());
    let long = json!({ "s": "b".repeat(4 << 20) });
    assert!(check_work(&schema, &long, CHECK_BUDGET).is_err());
    assert!(check_work(&schema, &json!({ "s": "short" }), CHECK_BUDGET).is_ok());
    // unevaluatedProperties beside a reference, nested: each level doubles.
    let mut defs = serde_json::Map::new();
    for i in 0..20 {
        defs.insert(format!("l{i}"), json!({ "$ref": format!("#/$defs/l{}", i + 1), "unevaluatedProperties": false }));
    }
    defs.insert("l20".into(), json!({ "type": "object" }));
    let nested = json!({ "$ref": "#/$defs/l0", "$defs": defs });
    assert!(schema_size(&nested, SCHEMA_BUDGET).is_err(), "2^20 evaluations");
}
