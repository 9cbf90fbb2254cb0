//! The per-request `_meta` of the modern protocol: which fields are required, how they are
//! checked (MCP 2026-07-28 `basic/index.mdx`, `_meta`), and how a request's `_meta` is rewritten for an upstream (the caller's
//! capabilities, log level, progress token and trace context go up; the version is the
//! upstream's).

use super::errors::RpcError;
use super::keys;
use super::rawobj::RawObject;
use serde_json::{Map, Value};

pub const LOG_LEVELS: &[&str] = &["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// A legacy (2025) client's session, as an upstream adapter needs it to give the client a legacy
/// upstream session of its own (era affinity, docs/protocol.md): the session's id, the version it
/// negotiated, and the capabilities and client info it declared in `initialize`.
#[derive(Debug, Clone, PartialEq)]
pub struct LegacySession {
    pub sid: String,
    pub version: String,
    pub capabilities: Value,
    pub info: Value,
}

/// The parsed `_meta` of one request. `fields` keeps every member, so unknown keys pass through.
#[derive(Debug, Clone, Default)]
pub struct RequestMeta {
    pub protocol_version: String,
    pub fields: Map<String, Value>,
}

impl RequestMeta {
    pub fn progress_token(&self) -> Option<&Value> {
        self.fields.get(keys::PROGRESS_TOKEN)
    }

    pub fn client_capabilities(&self) -> Option<&Value> {
        self.fields.get(keys::CLIENT_CAPABILITIES)
    }

    /// The `_meta` object to send upstream: the caller's, with the upstream's protocol version
    /// and, when given, a replacement progress token (stdio upstreams need unique tokens).
    pub fn for_upstream(&self, version: &str, progress_token: Option<Value>) -> Map<String, Value> {
        let mut out = self.fields.clone();
        out.insert(keys::PROTOCOL_VERSION.into(), Value::String(version.into()));
        if !out.contains_key(keys::CLIENT_CAPABILITIES) {
            out.insert(keys::CLIENT_CAPABILITIES.into(), Value::Object(Map::new()));
        }
        if let Some(token) = progress_token {
            out.insert(keys::PROGRESS_TOKEN.into(), token);
        }
        out
    }
}

/// Splits a modern request's params into the raw params object and its checked `_meta`.
pub fn split_params(params: Option<&super::json::Json>) -> Result<(RawObject, RequestMeta), RpcError> {
    let Some(params) = params else {
        return Err(RpcError::malformed_meta(
            "Missing params._meta: every request must carry _meta with protocolVersion and clientCapabilities",
        ));
    };
    let obj = RawObject::from_json(params).map_err(|e| {
        RpcError::invalid_params(format!("params must be a JSON object without duplicate members ({e})"))
            .with_status(http::StatusCode::BAD_REQUEST)
    })?;
    let meta = match obj.get("_meta").map(|m| super::read::text_value(m.get())) {
        None => {
            return Err(RpcError::malformed_meta(
                "Missing params._meta: every request must carry _meta with protocolVersion and clientCapabilities",
            ));
        }
        Some(Err(why)) => return Err(unreadable_meta(&why)),
        Some(Ok(Value::Object(m))) => check_meta(m)?,
        Some(Ok(_)) => return Err(RpcError::malformed_meta("params._meta must be an object")),
    };
    Ok((obj, meta))
}

/// The refusal of a request whose `_meta` the gateway cannot read (`protocol::read`): the
/// gateway decides with what it holds (the version, the capabilities, the client's identity).
pub fn unreadable_meta(why: &super::read::Unreadable) -> RpcError {
    RpcError::malformed_meta(format!("params._meta cannot be read: {why}"))
}

/// Checks the required and typed fields of a request `_meta` (MCP 2026-07-28 `basic/index.mdx`, `_meta`).
pub fn check_meta(fields: Map<String, Value>) -> Result<RequestMeta, RpcError> {
    let version = match fields.get(keys::PROTOCOL_VERSION) {
        Some(Value::String(v)) => v.clone(),
        Some(_) => {
            return Err(RpcError::malformed_meta(format!("_meta[\"{}\"] must be a string", keys::PROTOCOL_VERSION)));
        }
        None => {
            return Err(RpcError::malformed_meta(format!("Missing required _meta field \"{}\"", keys::PROTOCOL_VERSION)));
        }
    };
    match fields.get(keys::CLIENT_CAPABILITIES) {
        Some(Value::Object(_)) => {}
        Some(_) => {
            return Err(RpcError::malformed_meta(format!("_meta[\"{}\"] must be an object", keys::CLIENT_CAPABILITIES)));
        }
        None => {
            return Err(RpcError::malformed_meta(format!("Missing required _meta field \"{}\"", keys::CLIENT_CAPABILITIES)));
        }
    }
    if let Some(level) = fields.get(keys::LOG_LEVEL)
        && !level.as_str().is_some_and(|l| LOG_LEVELS.contains(&l))
    {
        return Err(RpcError::invalid_params(format!("Invalid log level {level}: use one of {}", LOG_LEVELS.join(", "))));
    }
    if let Some(token) = fields.get(keys::PROGRESS_TOKEN)
        && !(token.is_string() || token.is_i64() || token.is_u64())
    {
        return Err(RpcError::invalid_params("progressToken must be a string or an integer"));
    }
    Ok(RequestMeta { protocol_version: version, fields })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Json;

    fn raw(s: &str) -> Json {
        Json::from_string(s.into()).unwrap()
    }

    #[test]
    fn requires_version_and_capabilities() {
        let e = split_params(None).unwrap_err();
        assert_eq!((e.code, e.status.as_u16()), (-32602, 400));
        let e = split_params(Some(&raw(r#"{"name":"x"}"#))).unwrap_err();
        assert_eq!((e.code, e.status.as_u16()), (-32602, 400));
        let e = split_params(Some(&raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#))).unwrap_err();
        assert!(e.message.contains("clientCapabilities"));
        let ok = split_params(Some(&raw(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"x":1}}"#,
        )))
        .unwrap();
        assert_eq!(ok.1.protocol_version, "2026-07-28");
        assert_eq!(ok.1.fields["x"], 1);
    }

    #[test]
    fn checks_log_level_and_progress_token() {
        let mut m = Map::new();
        m.insert(keys::PROTOCOL_VERSION.into(), "v".into());
        m.insert(keys::CLIENT_CAPABILITIES.into(), serde_json::json!({}));
        m.insert(keys::LOG_LEVEL.into(), "loud".into());
        assert!(check_meta(m.clone()).is_err());
        m.insert(keys::LOG_LEVEL.into(), "info".into());
        m.insert(keys::PROGRESS_TOKEN.into(), serde_json::json!(1.5));
        assert!(check_meta(m.clone()).is_err());
        m.insert(keys::PROGRESS_TOKEN.into(), serde_json::json!("t"));
        assert!(check_meta(m).is_ok());
    }

    #[test]
    fn upstream_meta_keeps_caller_fields_and_sets_version() {
        let mut m = Map::new();
        m.insert(keys::PROTOCOL_VERSION.into(), "2026-07-28".into());
        m.insert(keys::CLIENT_CAPABILITIES.into(), serde_json::json!({"elicitation":{}}));
        m.insert("traceparent".into(), "00-abc".into());
        m.insert(keys::PROGRESS_TOKEN.into(), "p1".into());
        let meta = check_meta(m).unwrap();
        let up = meta.for_upstream("2026-07-28", Some("gw-7".into()));
        assert_eq!(up["traceparent"], "00-abc");
        assert_eq!(up[keys::CLIENT_CAPABILITIES]["elicitation"], serde_json::json!({}));
        assert_eq!(up[keys::PROGRESS_TOKEN], "gw-7");
    }
}
