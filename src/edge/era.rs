//! Era classification at the edge (docs/protocol.md, "How the era is decided"): one function decides, per HTTP request and before
//! any modern validation runs, whether the caller speaks the modern protocol or a legacy one.
//! The version header decides when present (a legacy version without modern `_meta` means legacy,
//! anything else means modern, so an unknown future version gets the modern -32022); without it, a session id, an
//! `initialize`, a JSON-RPC response or a body without modern `_meta` mean legacy.

pub mod bridge;
pub mod legacy;
pub mod modern;

use http::{HeaderMap, Method};

pub use mcpgate_protocol::{LEGACY_VERSIONS, is_legacy_version};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Modern,
    Legacy,
}

/// What the classifier needs to know about the body (already parsed, or not JSON-RPC at all).
#[derive(Debug, Default, Clone, Copy)]
pub struct BodyFacts<'a> {
    pub method: Option<&'a str>,
    pub is_response: bool,
    pub is_batch: bool,
    pub has_modern_meta: bool,
}

impl<'a> BodyFacts<'a> {
    pub fn of(msg: &'a mcpgate_protocol::jsonrpc::Message) -> Self {
        // Only `_meta` is read, and of it only whether the version key is there: the rest of
        // the params (arguments of any size) is skipped, not parsed.
        let has_modern_meta = msg
            .params
            .as_ref()
            .is_some_and(|p| serde_json::from_str::<ParamsMeta>(p.get()).is_ok_and(|v| v.meta.is_some_and(|m| m.version.is_some())));
        BodyFacts {
            method: msg.method.as_deref(),
            is_response: msg.method.is_none() && (msg.result.is_some() || msg.error.is_some()),
            is_batch: false,
            has_modern_meta,
        }
    }
}

/// The `_meta` of a request's params: only whether it has the version key is read, the rest of
/// it skipped unread (no allocation).
#[derive(serde::Deserialize)]
struct ParamsMeta<'a> {
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<MetaVersion<'a>>,
}

#[derive(serde::Deserialize)]
struct MetaVersion<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
    version: Option<&'a serde_json::value::RawValue>,
}

pub fn classify(method: &Method, headers: &HeaderMap, body: BodyFacts) -> Era {
    let session = headers.contains_key("mcp-session-id");
    if *method != Method::POST {
        // GET (standalone stream, resumption) and DELETE (end of session) exist only with sessions.
        return if session { Era::Legacy } else { Era::Modern };
    }
    if let Some(v) = headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok()) {
        // A legacy version with modern `_meta` is a modern client whose header is wrong (-32020).
        return if is_legacy_version(v.trim()) && !body.has_modern_meta { Era::Legacy } else { Era::Modern };
    }
    if session {
        return Era::Legacy;
    }
    classify_message(body)
}

/// The era of one message where no header speaks (the rest of an HTTP request's rules, and every
/// line of `mcpgate stdio`): an `initialize`, a response or a batch is legacy; otherwise modern
/// `_meta` decides.
pub fn classify_message(body: BodyFacts) -> Era {
    if body.is_batch || body.is_response || body.method == Some("initialize") {
        return Era::Legacy;
    }
    if body.has_modern_meta { Era::Modern } else { Era::Legacy }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn h(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.insert(*k, HeaderValue::from_static(v));
        }
        m
    }

    #[test]
    fn the_version_key_read_from_the_body_is_the_protocols() {
        assert_eq!(mcpgate_protocol::keys::PROTOCOL_VERSION, "io.modelcontextprotocol/protocolVersion");
        let read = |params: &str| {
            let body = bytes::Bytes::from(format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{params}}}"#));
            let msg = mcpgate_protocol::jsonrpc::Message::parse_bytes(&body);
            msg.map(|m| BodyFacts::of(&m).has_modern_meta).unwrap_or(false)
        };
        assert!(read(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#));
        assert!(read(r#"{"_meta":{"a":[1,{"b":2}],"io.modelcontextprotocol\/protocolVersion":"x"}}"#), "an escaped key is the key");
        assert!(!read(r#"{"_meta":{"progressToken":1}}"#));
        assert!(!read(r#"{"arguments":{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}}"#));
    }

    fn body(method: Option<&'static str>) -> BodyFacts<'static> {
        BodyFacts { method, ..Default::default() }
    }

    /// One row per signal a client's era can be told by over HTTP (docs/protocol.md).
    #[test]
    fn modern_meta_is_found_without_reading_the_rest() {
        let facts = |params: &str| {
            let msg = mcpgate_protocol::jsonrpc::Message::parse(
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#).as_bytes(),
            )
            .unwrap();
            BodyFacts::of(&msg).has_modern_meta
        };
        assert!(facts(r#"{"arguments":{"x":[1,2,{"y":"z"}]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#));
        assert!(facts(r#"{"_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}"#), "an escaped key is the same key");
        assert!(!facts(r#"{"_meta":{"progressToken":1}}"#));
        assert!(!facts(r#"{"_meta":null}"#) && !facts(r#"{"_meta":"x"}"#) && !facts("[1]") && !facts("{}"));
    }

    #[test]
    fn every_signal_of_an_era_is_classified() {
        use Era::*;
        let post = Method::POST;
        let modern_meta = BodyFacts { method: Some("tools/list"), has_modern_meta: true, ..Default::default() };
        let rows: Vec<(&str, Method, HeaderMap, BodyFacts, Era)> = vec![
            ("initialize without session or version header", post.clone(), h(&[]), body(Some("initialize")), Legacy),
            (
                "initialize with a legacy version header",
                post.clone(),
                h(&[("mcp-protocol-version", "2025-06-18")]),
                body(Some("initialize")),
                Legacy,
            ),
            ("session id on a POST", post.clone(), h(&[("mcp-session-id", "abc")]), body(Some("tools/list")), Legacy),
            (
                "MCP-Protocol-Version 2025-11-25 without _meta",
                post.clone(),
                h(&[("mcp-protocol-version", "2025-11-25")]),
                body(Some("tools/list")),
                Legacy,
            ),
            (
                "MCP-Protocol-Version 2025-06-18 without _meta",
                post.clone(),
                h(&[("mcp-protocol-version", "2025-06-18")]),
                body(Some("tools/call")),
                Legacy,
            ),
            ("no version header and not initialize (2025-03-26)", post.clone(), h(&[]), body(Some("tools/list")), Legacy),
            ("JSON array body (2025-03-26 batch)", post.clone(), h(&[]), BodyFacts { is_batch: true, ..Default::default() }, Legacy),
            ("JSON-RPC response body", post.clone(), h(&[]), BodyFacts { is_response: true, ..Default::default() }, Legacy),
            (
                "GET with a session (standalone stream)",
                Method::GET,
                h(&[("mcp-session-id", "abc"), ("accept", "text/event-stream")]),
                body(None),
                Legacy,
            ),
            ("GET without a session (modern: 405)", Method::GET, h(&[("accept", "text/event-stream")]), body(None), Modern),
            ("DELETE with a session (end of session)", Method::DELETE, h(&[("mcp-session-id", "abc")]), body(None), Legacy),
            ("DELETE without a session (modern: 405)", Method::DELETE, h(&[]), body(None), Modern),
            (
                "2026-07-28 header and _meta",
                post.clone(),
                h(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")]),
                modern_meta,
                Modern,
            ),
            (
                "2026-07-28 header, _meta missing (modern -32602)",
                post.clone(),
                h(&[("mcp-protocol-version", "2026-07-28")]),
                body(Some("tools/list")),
                Modern,
            ),
            ("future version header (modern -32022)", post.clone(), h(&[("mcp-protocol-version", "2027-01-01")]), modern_meta, Modern),
            ("modern _meta without the header (modern -32020)", post.clone(), h(&[]), modern_meta, Modern),
            (
                "server/discover (modern-only method)",
                post.clone(),
                h(&[("mcp-protocol-version", "2026-07-28")]),
                body(Some("server/discover")),
                Modern,
            ),
            (
                "subscriptions/listen (modern-only method)",
                post.clone(),
                h(&[("mcp-protocol-version", "2026-07-28")]),
                body(Some("subscriptions/listen")),
                Modern,
            ),
            (
                "initialize sent with the modern header (modern 404)",
                post.clone(),
                h(&[("mcp-protocol-version", "2026-07-28")]),
                body(Some("initialize")),
                Modern,
            ),
            (
                "ping (legacy-only method) in a legacy session",
                post.clone(),
                h(&[("mcp-session-id", "abc"), ("mcp-protocol-version", "2025-11-25")]),
                body(Some("ping")),
                Legacy,
            ),
            (
                "ping with the modern header (modern 404)",
                post.clone(),
                h(&[("mcp-protocol-version", "2026-07-28")]),
                body(Some("ping")),
                Modern,
            ),
            ("logging/setLevel without any header", post.clone(), h(&[]), body(Some("logging/setLevel")), Legacy),
            ("notifications/initialized", post.clone(), h(&[("mcp-session-id", "abc")]), body(Some("notifications/initialized")), Legacy),
            (
                "legacy version header but modern _meta (modern -32020)",
                post.clone(),
                h(&[("mcp-protocol-version", "2025-11-25")]),
                modern_meta,
                Modern,
            ),
            ("2024-11-05 version header", post.clone(), h(&[("mcp-protocol-version", "2024-11-05")]), body(Some("tools/list")), Legacy),
        ];
        for (why, method, headers, facts, want) in rows {
            assert_eq!(classify(&method, &headers, facts), want, "{why}");
        }
    }
}
