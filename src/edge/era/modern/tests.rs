//! Every header/body case of the request metadata headers (`basic/transports.mdx`) and the
//! `_meta` rules (`basic/index.mdx`), table-driven.

#[cfg(test)] // test-only module: unwrap/expect below are on test data
use super::*;
use crate::auth::Principal;
use http::HeaderValue;

type Pairs<'a> = Vec<(&'a str, &'a [u8])>;

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

fn msg(method: &str, extra: &str) -> Message {
    let sep = if extra.is_empty() { "" } else { "," };
    Message::parse(format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{{META}{sep}{extra}}}}}"#).as_bytes()).unwrap()
}

fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_bytes(v).unwrap());
    }
    h
}

fn code(r: Result<Request, RpcError>) -> (i64, u16) {
    match r {
        Ok(_) => (0, 200),
        Err(e) => (e.code, e.status.as_u16()),
    }
}

#[test]
fn valid_requests_pass() {
    let h = headers(&[
        ("mcp-protocol-version", b"2026-07-28"),
        ("mcp-method", b"tools/call"),
        ("mcp-name", b"calc__add"),
        ("mcp-param-region", b"eu"),
    ]);
    let r = to_request(msg("tools/call", r#""name":"calc__add""#), Some(&h), Principal::anonymous()).unwrap();
    assert_eq!(r.method, "tools/call");
    assert_eq!(r.param_headers.unwrap(), vec![("mcp-param-region".to_string(), b"eu".to_vec())]);
    let h = headers(&[("MCP-Protocol-Version", b" 2026-07-28 "), ("Mcp-Method", b"tools/list")]);
    assert_eq!(code(to_request(msg("tools/list", ""), Some(&h), Principal::anonymous())), (0, 200));
    assert_eq!(code(to_request(msg("tools/list", ""), None, Principal::anonymous())), (0, 200));
}

#[test]
fn header_body_mismatches_get_400_and_32020() {
    let v: &[u8] = b"2026-07-28";
    let cases: Vec<(&str, &str, Pairs)> = vec![
        ("missing version header", "", vec![("mcp-method", b"tools/list")]),
        ("version header differs", "", vec![("mcp-protocol-version", b"2025-11-25"), ("mcp-method", b"tools/list")]),
        ("missing Mcp-Method", "", vec![("mcp-protocol-version", v)]),
        ("Mcp-Method differs", "", vec![("mcp-protocol-version", v), ("mcp-method", b"tools/call")]),
        ("Mcp-Method case differs", "", vec![("mcp-protocol-version", v), ("mcp-method", b"TOOLS/LIST")]),
        ("duplicate Mcp-Method", "", vec![("mcp-protocol-version", v), ("mcp-method", b"tools/list"), ("mcp-method", b"tools/list")]),
    ];
    for (why, extra, h) in cases {
        assert_eq!(code(to_request(msg("tools/list", extra), Some(&headers(&h)), Principal::anonymous())), (-32020, 400), "{why}");
    }
    let call: Vec<(&str, Pairs)> = vec![
        ("missing Mcp-Name", vec![]),
        ("Mcp-Name differs", vec![("mcp-name", b"foo")]),
        ("Mcp-Name invalid base64", vec![("mcp-name", b"=?base64?@@?=")]),
        ("Mcp-Name uppercase markers are literal", vec![("mcp-name", b"=?BASE64?aMOpbGxv?=")]),
        ("Mcp-Name with raw non-ASCII bytes", vec![("mcp-name", "héllo".as_bytes())]),
        ("duplicate Mcp-Param", vec![("mcp-name", b"=?base64?aMOpbGxv?="), ("mcp-param-a", b"1"), ("mcp-param-a", b"1")]),
    ];
    for (why, extra) in call {
        let mut h = vec![("mcp-protocol-version", v), ("mcp-method", b"tools/call" as &[u8])];
        h.extend(extra);
        assert_eq!(
            code(to_request(msg("tools/call", r#""name":"héllo""#), Some(&headers(&h)), Principal::anonymous())),
            (-32020, 400),
            "{why}"
        );
    }
    let ok = headers(&[("mcp-protocol-version", v), ("mcp-method", b"tools/call"), ("mcp-name", b"=?base64?aMOpbGxv?=")]);
    assert_eq!(code(to_request(msg("tools/call", r#""name":"héllo""#), Some(&ok), Principal::anonymous())), (0, 200));
    let spaced = headers(&[("mcp-protocol-version", v), ("mcp-method", b"prompts/get"), ("mcp-name", b"  foo ")]);
    assert_eq!(code(to_request(msg("prompts/get", r#""name":"foo""#), Some(&spaced), Principal::anonymous())), (0, 200));
    let uri = headers(&[("mcp-protocol-version", v), ("mcp-method", b"resources/read"), ("mcp-name", b"file:///x")]);
    assert_eq!(code(to_request(msg("resources/read", r#""uri":"file:///y""#), Some(&uri), Principal::anonymous())), (-32020, 400));
}

#[test]
fn meta_version_and_method_rules() {
    let h = headers(&[("mcp-protocol-version", b"2027-01-01"), ("mcp-method", b"tools/list")]);
    let m = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#).unwrap();
    let e = to_request(m, Some(&h), Principal::anonymous()).unwrap_err();
    assert_eq!((e.code, e.status.as_u16()), (-32022, 400));
    assert_eq!(e.data.unwrap()["supported"][0], "2026-07-28");
    let m = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#).unwrap();
    assert_eq!(code(to_request(m, Some(&h), Principal::anonymous())), (-32602, 400));
    let m = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap();
    assert_eq!(code(to_request(m, None, Principal::anonymous())), (-32602, 400));
    assert_eq!(code(to_request(msg("initialize", ""), None, Principal::anonymous())), (-32601, 404));
    assert_eq!(code(to_request(msg("ping", ""), None, Principal::anonymous())), (-32601, 404));
    assert_eq!(code(to_request(msg("no/such", ""), None, Principal::anonymous())), (-32601, 404));
}
