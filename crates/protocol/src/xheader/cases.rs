//! Every case of the spec's header values (`basic/transports.mdx`, request metadata headers) and
//! annotation rules (`server/tools.mdx#x-mcp-header`), table-driven, plus property tests over the
//! codec and the validator: no input makes them panic, and encoding
//! then decoding gives back every string, integer and boolean.

#[cfg(test)] // test-only module: unwrap/expect below are on test data
use super::*;
use crate::headers::{decode, encode, matches_body};
use proptest::prelude::*;
use serde_json::json;

fn region_schema(ty: &str) -> Value {
    json!({"type":"object","properties":{"v":{"type":ty,"x-mcp-header":"V"}}})
}

/// (what, annotated type, body value, header as sent or None, accepted?)
const VALUE_CASES: &[(&str, &str, &str, Option<&str>, bool)] = &[
    ("plain token", "string", r#""us-west1""#, Some("us-west1"), true),
    ("internal spaces are sent as is", "string", r#""a b c""#, Some("a b c"), true),
    ("empty string is an empty header", "string", r#""""#, Some(""), true),
    ("surrounding whitespace of the header is not part of the value", "string", r#""foo""#, Some("  foo "), true),
    ("leading space in the value needs Base64", "string", r#"" lead""#, Some("=?base64?IGxlYWQ=?="), true),
    ("trailing tab in the value needs Base64", "string", r#""trail\t""#, Some("=?base64?dHJhaWwJ?="), true),
    ("non-ASCII needs Base64", "string", r#""zürich""#, Some("=?base64?esO8cmljaA==?="), true),
    ("control characters need Base64", "string", r#""a\nb""#, Some("=?base64?YQpi?="), true),
    ("a literal that looks encoded is itself encoded", "string", r#""=?base64?abc?=""#, Some("=?base64?PT9iYXNlNjQ/YWJjPz0=?="), true),
    ("uppercase markers are a literal", "string", r#""=?BASE64?SGVsbG8=?=""#, Some("=?BASE64?SGVsbG8=?="), true),
    ("uppercase markers do not decode", "string", r#""Hello""#, Some("=?BASE64?SGVsbG8=?="), false),
    ("missing prefix is a literal", "string", r#""SGVsbG8=?=""#, Some("SGVsbG8=?="), true),
    ("missing suffix is a literal", "string", r#""=?base64?SGVsbG8=""#, Some("=?base64?SGVsbG8="), true),
    ("valid Base64", "string", r#""Hello""#, Some("=?base64?SGVsbG8=?="), true),
    ("bad padding is rejected", "string", r#""Hello""#, Some("=?base64?SGVsbG8?="), false),
    ("bad characters are rejected", "string", r#""Hello""#, Some("=?base64?SGVs!!!bG8=?="), false),
    ("Base64 of invalid UTF-8 is rejected", "string", r#""x""#, Some("=?base64?/w==?="), false),
    ("a mismatching value is rejected", "string", r#""us-west1""#, Some("eu-west1"), false),
    ("values are case-sensitive", "string", r#""Us""#, Some("us"), false),
    ("a missing header is rejected", "string", r#""us-west1""#, None, false),
    ("integers compare numerically", "integer", "42", Some("42.0"), true),
    ("integer body written as a float", "integer", "42.0", Some("42"), true),
    ("a different integer is rejected", "integer", "42", Some("43"), false),
    ("a hex integer is not 42", "integer", "42", Some("0x2a"), false),
    ("integers beyond 2^53-1 are refused", "integer", "9007199254740993", Some("9007199254740993"), false),
    ("booleans are lowercase", "boolean", "true", Some("true"), true),
    ("booleans are case-sensitive", "boolean", "false", Some("False"), false),
    ("null expects no header", "string", "null", None, true),
];

#[test]
fn every_value_case_of_section_2_3() {
    for (what, ty, body, header, ok) in VALUE_CASES {
        let plan = plan(&region_schema(ty)).expect("valid schema");
        let args: Value = serde_json::from_str(&format!(r#"{{"v":{body}}}"#)).expect("args");
        let received: Vec<(String, Vec<u8>)> = header.iter().map(|h| ("mcp-param-v".to_string(), h.as_bytes().to_vec())).collect();
        let result = check_inbound(&plan, &args, &received);
        assert_eq!(result.is_ok(), *ok, "{what}: {result:?}");
        if let Err(e) = result {
            assert!(e.code == -32020 || e.code == -32602, "{what}: {e:?}");
        }
    }
    // An absent argument expects no header either, and an unknown Mcp-Param header is ignored.
    let plan = plan(&region_schema("string")).expect("schema");
    assert!(check_inbound(&plan, &json!({}), &[("mcp-param-other".into(), b"x".to_vec())]).is_ok());
}

#[test]
fn every_annotation_rule_of_section_2_4() {
    let cases: &[(&str, Value, Result<usize, &str>)] = &[
        (
            "string, integer and boolean may be mirrored",
            json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"integer","x-mcp-header":"B"},"c":{"type":"boolean","x-mcp-header":"C"}}}),
            Ok(3),
        ),
        (
            "nesting through properties is reachable",
            json!({"type":"object","properties":{"o":{"type":"object","properties":{"p":{"type":"object","properties":{"x":{"type":"string","x-mcp-header":"X"}}}}}}}),
            Ok(1),
        ),
        ("number is not allowed", json!({"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}), Err("only string")),
        ("arrays are not allowed", json!({"type":"object","properties":{"n":{"type":"array","x-mcp-header":"N"}}}), Err("only string")),
        (
            "through items is unreachable",
            json!({"type":"object","properties":{"l":{"type":"array","items":{"type":"string","x-mcp-header":"L"}}}}),
            Err("reachable"),
        ),
        (
            "through oneOf is unreachable",
            json!({"type":"object","oneOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}),
            Err("reachable"),
        ),
        (
            "through anyOf is unreachable",
            json!({"type":"object","properties":{"a":{"anyOf":[{"type":"string","x-mcp-header":"A"}]}}}),
            Err("reachable"),
        ),
        (
            "through allOf is unreachable",
            json!({"type":"object","allOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}),
            Err("reachable"),
        ),
        (
            "through if/then is unreachable",
            json!({"type":"object","if":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}),
            Err("reachable"),
        ),
        (
            "through $ref is unreachable",
            json!({"type":"object","$defs":{"r":{"type":"string","x-mcp-header":"R"}},"properties":{"a":{"$ref":"#/$defs/r"}}}),
            Err("reachable"),
        ),
        (
            "names are unique case-insensitively",
            json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"string","x-mcp-header":"REGION"}}}),
            Err("twice"),
        ),
        ("an empty name is invalid", json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}), Err("empty")),
        (
            "a name with a space is not a token",
            json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":"My Region"}}}),
            Err("token"),
        ),
        (
            "a name with CR/LF is not a token",
            json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":"R\r\nX: y"}}}),
            Err("token"),
        ),
        (
            "a name with a colon is not a token",
            json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":"R:x"}}}),
            Err("token"),
        ),
        ("the root may not be annotated", json!({"type":"object","x-mcp-header":"Root"}), Err("root")),
    ];
    for (what, schema, want) in cases {
        match (plan(schema), want) {
            (Ok(p), Ok(n)) => assert_eq!(p.len(), *n, "{what}"),
            (Err(e), Err(part)) => assert!(e.to_string().contains(part), "{what}: {e}"),
            (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
        }
    }
}

fn json_tree() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        "[a-zA-Z -]{0,8}".prop_map(Value::String),
        prop::sample::select(vec!["string", "integer", "boolean", "number", "object"]).prop_map(|t| json!(t)),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop::collection::vec(
            (prop::sample::select(vec!["type", "properties", "items", "oneOf", "$ref", "x-mcp-header", "a", "B", "$defs"]), inner),
            0..6,
        )
        .prop_map(|pairs| Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
    })
}

proptest! {
    #[test]
    fn strings_round_trip(s in any::<String>()) {
        let header = encode(&s);
        prop_assert!(header.bytes().all(|b| (0x20..0x7f).contains(&b)), "header-safe: {:?}", header);
        prop_assert_eq!(decode(header.as_bytes()).expect("decodes"), s);
    }

    #[test]
    fn integers_and_booleans_round_trip(i in -9_007_199_254_740_991i64..=9_007_199_254_740_991i64, b in any::<bool>()) {
        let hi = encode(&headers::value_to_header_string(&json!(i)).expect("int"));
        prop_assert!(matches_body(&decode(hi.as_bytes()).expect("int decodes"), &json!(i)));
        let hb = encode(&headers::value_to_header_string(&json!(b)).expect("bool"));
        prop_assert!(matches_body(&decode(hb.as_bytes()).expect("bool decodes"), &json!(b)));
    }

    #[test]
    fn decoding_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64), wrapped in any::<bool>()) {
        let input = if wrapped { [b"=?base64?".as_slice(), &bytes, b"?="].concat() } else { bytes };
        let _ = decode(&input);
    }

    #[test]
    fn validation_never_panics(schema in json_tree(), args in json_tree(), header in "[ -~]{0,12}") {
        if let Ok(p) = plan(&schema) {
            let _ = check_inbound(&p, &args, &[("mcp-param-v".into(), header.into_bytes())]);
            let _ = outbound(&p, &args);
            let _ = mirrored_values(&p, &args);
        }
    }
}
