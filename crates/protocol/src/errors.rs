//! The gateway's single JSON-RPC error model: every failure the gateway reports becomes an
//! [`RpcError`] carrying its code, message, optional `data` and the HTTP status the Streamable
//! HTTP transport must use (MCP 2026-07-28 `basic/transports.mdx` and the schema's error codes).
//! Codes and statuses are decided here and nowhere else.

use http::StatusCode;
use serde_json::{Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const HEADER_MISMATCH: i64 = -32020;
pub const MISSING_CAPABILITY: i64 = -32021;
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// A JSON-RPC error together with the HTTP status it travels with.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
    pub status: StatusCode,
    /// HTTP headers the error travels with (`Retry-After`, `WWW-Authenticate`).
    pub headers: Vec<(&'static str, String)>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        let status = status_for(code);
        RpcError { code, message: message.into(), data: None, status, headers: Vec::new() }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::new(PARSE_ERROR, format!("Parse error: {detail}")).with_status(StatusCode::BAD_REQUEST)
    }

    pub fn invalid_request(detail: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, detail).with_status(StatusCode::BAD_REQUEST)
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    /// Invalid params inside an otherwise well-formed request (unknown tool, bad cursor): HTTP 200.
    pub fn invalid_params(detail: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, detail)
    }

    /// A missing or malformed required `_meta` field: the spec demands HTTP 400.
    pub fn malformed_meta(detail: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, detail).with_status(StatusCode::BAD_REQUEST)
    }

    pub fn header_mismatch(detail: impl Into<String>) -> Self {
        Self::new(HEADER_MISMATCH, format!("Header mismatch: {}", detail.into()))
    }

    pub fn unsupported_version(requested: &str, supported: &[&str]) -> Self {
        Self::new(UNSUPPORTED_VERSION, format!("Unsupported protocol version: {requested} (supported: {})", supported.join(", ")))
            .with_data(json!({ "supported": supported, "requested": requested }))
    }

    pub fn unknown_tool(name: &str) -> Self {
        Self::invalid_params(format!("Unknown tool: {name}"))
    }

    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, detail)
    }

    /// The JSON value of the `error` member.
    pub fn to_value(&self) -> Value {
        let mut v = json!({ "code": self.code, "message": self.message });
        if let (Some(data), Some(obj)) = (&self.data, v.as_object_mut()) {
            obj.insert("data".into(), data.clone());
        }
        v
    }
}

/// The HTTP status a JSON-RPC error code travels with on Streamable HTTP (MCP 2026-07-28
/// `basic/transports.mdx` and the schema's error codes). Codes the
/// spec leaves open travel with 200 so that every client can read the JSON-RPC body.
pub fn status_for(code: i64) -> StatusCode {
    match code {
        HEADER_MISMATCH | MISSING_CAPABILITY | UNSUPPORTED_VERSION | PARSE_ERROR | INVALID_REQUEST => StatusCode::BAD_REQUEST,
        METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// Release-candidate builds of 2026-07-28 SDKs used these codes for the modern errors; they are
/// recognised when reading upstream replies and never emitted.
pub fn modernise_rc_code(code: i64) -> i64 {
    match code {
        -32001 => HEADER_MISMATCH,
        -32003 => MISSING_CAPABILITY,
        -32004 => UNSUPPORTED_VERSION,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_transport_rules() {
        assert_eq!(RpcError::header_mismatch("x").status, StatusCode::BAD_REQUEST);
        assert_eq!(RpcError::unsupported_version("1", &["2"]).status, StatusCode::BAD_REQUEST);
        assert_eq!(RpcError::method_not_found("x").status, StatusCode::NOT_FOUND);
        assert_eq!(RpcError::malformed_meta("x").status, StatusCode::BAD_REQUEST);
        assert_eq!(RpcError::unknown_tool("x").status, StatusCode::OK);
    }

    #[test]
    fn version_error_carries_supported_and_requested() {
        let v = RpcError::unsupported_version("2027-01-01", &["2026-07-28"]).to_value();
        assert_eq!(v["code"], -32022);
        assert_eq!(v["data"]["supported"][0], "2026-07-28");
        assert_eq!(v["data"]["requested"], "2027-01-01");
    }

    #[test]
    fn rc_codes_are_read_as_modern() {
        assert_eq!(modernise_rc_code(-32001), HEADER_MISMATCH);
        assert_eq!(modernise_rc_code(-32004), UNSUPPORTED_VERSION);
        assert_eq!(modernise_rc_code(-32601), METHOD_NOT_FOUND);
    }
}
