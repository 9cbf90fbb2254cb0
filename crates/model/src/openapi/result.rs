//! An HTTP answer as a `CallToolResult`: a JSON success as `structuredContent` (wrapped as
//! `{"result": …}` when it is not an object) plus its text, other text as text, images as image
//! content, anything else as an embedded resource blob; an empty success says its status. An HTTP
//! error is a tool error (`isError: true`) carrying the status and a bounded excerpt of the body, so
//! a model sees why without an error page flooding its context.

use super::ops::Operation;
use base64::Engine;
use serde_json::{Value, json};

/// The most of an error body a result carries.
pub const EXCERPT: usize = 2048;

/// What came back.
pub struct Answer<'a> {
    pub status: u16,
    pub content_type: Option<&'a str>,
    pub body: &'a [u8],
    /// The body was cut at the size limit.
    pub truncated: bool,
    /// Where it came from (for an embedded resource's URI).
    pub url: &'a str,
}

fn is_json(ct: &str) -> bool {
    let ct = ct.to_ascii_lowercase();
    ct.starts_with("application/json") || (ct.starts_with("application/") && ct.split(';').next().is_some_and(|m| m.ends_with("+json")))
}

fn is_text(ct: &str) -> bool {
    let ct = ct.to_ascii_lowercase();
    ct.starts_with("text/") || ct.starts_with("application/xml") || ct.starts_with("application/javascript") || ct.contains("+xml")
}

/// The tool result for `a`, an answer to `op`.
pub fn tool_result(op: &Operation, a: &Answer<'_>) -> Value {
    let reason = reason(a.status);
    if !(200..300).contains(&a.status) {
        let mut excerpt = String::from_utf8_lossy(&a.body[..a.body.len().min(EXCERPT)]).into_owned();
        if a.body.len() > EXCERPT || a.truncated {
            excerpt.push_str(" …");
        }
        let text = if excerpt.trim().is_empty() {
            format!("HTTP {} {reason}", a.status)
        } else {
            format!("HTTP {} {reason}: {excerpt}", a.status)
        };
        return json!({ "content": [{ "type": "text", "text": text }], "isError": true });
    }
    if a.truncated {
        return json!({
            "content": [{ "type": "text", "text": format!("HTTP {} {reason}: the answer is larger than the gateway takes from this API (max_message_bytes)", a.status) }],
            "isError": true
        });
    }
    let ct = a.content_type.unwrap_or("");
    if a.body.is_empty() {
        return json!({ "content": [{ "type": "text", "text": format!("HTTP {} {reason}", a.status) }] });
    }
    let json_expected = is_json(ct) || (ct.is_empty() && op.tool.get("outputSchema").is_some());
    if json_expected && let Ok(v) = serde_json::from_slice::<Value>(a.body) {
        let text = String::from_utf8_lossy(a.body).into_owned();
        let structured = if op.wrapped || !v.is_object() { json!({ "result": v }) } else { v };
        return json!({ "content": [{ "type": "text", "text": text }], "structuredContent": structured });
    }
    if is_text(ct) || std::str::from_utf8(a.body).is_ok() && !ct.to_ascii_lowercase().starts_with("image/") {
        return json!({ "content": [{ "type": "text", "text": String::from_utf8_lossy(a.body) }] });
    }
    let data = base64::engine::general_purpose::STANDARD.encode(a.body);
    let mime = ct.split(';').next().unwrap_or("application/octet-stream").trim();
    if mime.to_ascii_lowercase().starts_with("image/") {
        return json!({ "content": [{ "type": "image", "data": data, "mimeType": mime }] });
    }
    json!({ "content": [{ "type": "resource", "resource": { "uri": a.url, "mimeType": mime, "blob": data } }] })
}

/// The reason phrase of common statuses.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        415 => "Unsupported Media Type",
        418 => "I'm a teapot",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(wrapped: bool) -> Operation {
        Operation { name: "t".into(), method: "GET".into(), path: "/".into(), params: vec![], body: None, tool: json!({}), wrapped }
    }

    fn answer<'a>(status: u16, ct: Option<&'a str>, body: &'a [u8]) -> Answer<'a> {
        Answer { status, content_type: ct, body, truncated: false, url: "http://api/x" }
    }

    #[test]
    fn successes_by_type() {
        let r = tool_result(&op(false), &answer(200, Some("application/json"), br#"{"a":1}"#));
        assert_eq!(r["structuredContent"], json!({ "a": 1 }));
        assert_eq!(r["content"][0]["text"], r#"{"a":1}"#);
        let r = tool_result(&op(true), &answer(200, Some("application/problem+json"), b"[1,2]"));
        assert_eq!(r["structuredContent"], json!({ "result": [1, 2] }));
        let r = tool_result(&op(false), &answer(200, Some("text/plain"), b"hello"));
        assert_eq!(r["content"][0], json!({ "type": "text", "text": "hello" }));
        let r = tool_result(&op(false), &answer(200, Some("image/png"), &[0x89, b'P', b'N', b'G', 0xff]));
        assert_eq!(r["content"][0]["type"], "image");
        let r = tool_result(&op(false), &answer(200, Some("application/octet-stream"), &[0xff, 0xfe, 0]));
        assert_eq!(r["content"][0]["resource"]["uri"], "http://api/x");
        let r = tool_result(&op(false), &answer(204, None, b""));
        assert_eq!(r["content"][0]["text"], "HTTP 204 No Content");
    }

    #[test]
    fn errors_carry_the_status_and_a_bounded_excerpt() {
        let big = vec![b'x'; 10_000];
        let r = tool_result(&op(false), &answer(503, Some("text/html"), &big));
        assert_eq!(r["isError"], true);
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("HTTP 503 Service Unavailable: xxx") && text.len() < EXCERPT + 64, "{}", text.len());
        let r = tool_result(&op(false), &answer(404, None, b""));
        assert_eq!(r["content"][0]["text"], "HTTP 404 Not Found");
    }
}
