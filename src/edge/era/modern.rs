//! The modern-era adapter at the edge: turns a JSON-RPC request received over Streamable HTTP
//! (or stdio, without headers) into a [`Request`] after the checks of MCP 2026-07-28
//! `basic/transports.mdx` (request metadata headers) and `basic/index.mdx` (`_meta`) —
//! known method, required `_meta`, `MCP-Protocol-Version` = `_meta` version, supported version,
//! `Mcp-Method` = method, `Mcp-Name` = name/uri — and collects `Mcp-Param-*` for the dispatcher.

use crate::auth::Principal;
use crate::dispatch::Request;
use http::HeaderMap;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::headers::{self, describe};
use mcpgate_protocol::jsonrpc::Message;
use mcpgate_protocol::meta::split_params;
use mcpgate_protocol::xheader::HEADER_PREFIX;
use mcpgate_protocol::{MODERN_METHODS, SUPPORTED_VERSIONS, name_param_of};
use std::sync::Arc;

/// Methods of the legacy eras that 2026-07-28 removed.
const REMOVED_METHODS: &[&str] =
    &["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "tasks/list", "tasks/result"];

/// Checks a request and builds the internal [`Request`]. `headers` is `None` on stdio.
pub fn to_request(msg: Message, headers: Option<&HeaderMap>, caller: Arc<Principal>) -> Result<Request, RpcError> {
    let method: &str = msg.method.as_deref().unwrap_or_default();
    if REMOVED_METHODS.contains(&method) {
        return Err(RpcError::method_not_found(method).with_data(serde_json::json!({
            "reason": format!("{method} does not exist in protocol {}", SUPPORTED_VERSIONS.join(", ")),
            "supported": SUPPORTED_VERSIONS,
        })));
    }
    if !MODERN_METHODS.contains(&method) {
        return Err(RpcError::method_not_found(method));
    }
    let (params, meta) = split_params(msg.params.as_ref())?;
    if let Some(h) = headers {
        let header_version =
            single(h, "mcp-protocol-version")?.ok_or_else(|| RpcError::header_mismatch("missing MCP-Protocol-Version header"))?;
        if header_version != meta.protocol_version {
            return Err(RpcError::header_mismatch(format!(
                "MCP-Protocol-Version header value {} does not match body value {}",
                describe(header_version),
                describe(&meta.protocol_version)
            )));
        }
    }
    if !SUPPORTED_VERSIONS.contains(&meta.protocol_version.as_str()) {
        return Err(RpcError::unsupported_version(&meta.protocol_version, SUPPORTED_VERSIONS));
    }
    let mut param_headers = None;
    if let Some(h) = headers {
        let header_method = single(h, "mcp-method")?.ok_or_else(|| RpcError::header_mismatch("missing Mcp-Method header"))?;
        if header_method != method {
            return Err(RpcError::header_mismatch(format!(
                "Mcp-Method header value {} does not match body value {}",
                describe(header_method),
                describe(method)
            )));
        }
        if let Some(field) = name_param_of(method) {
            // Borrowed from the body unless it has escapes.
            let body: std::borrow::Cow<'_, str> = match params.parse::<&str>(field) {
                Some(Ok(v)) => std::borrow::Cow::Borrowed(v),
                _ => match params.parse::<String>(field) {
                    Some(Ok(v)) => std::borrow::Cow::Owned(v),
                    _ => return Err(RpcError::invalid_params(format!("{method} needs params.{field} (a string)"))),
                },
            };
            let raw = single_raw(h, "mcp-name")?
                .ok_or_else(|| RpcError::header_mismatch(format!("missing Mcp-Name header (expected {})", describe(&body))))?;
            let decoded = headers::decode_borrowed(raw).map_err(|e| {
                RpcError::header_mismatch(format!("Mcp-Name header value {} is invalid: {e}", describe(&String::from_utf8_lossy(raw))))
            })?;
            if decoded != body {
                return Err(RpcError::header_mismatch(format!(
                    "Mcp-Name header value {} does not match body value {}",
                    describe(&decoded),
                    describe(&body)
                )));
            }
        }
        let mut params_seen: Vec<(String, Vec<u8>)> = Vec::new();
        for (name, value) in h {
            if name.as_str().starts_with(HEADER_PREFIX) {
                if params_seen.iter().any(|(n, _)| n == name.as_str()) {
                    return Err(RpcError::header_mismatch(format!("{name} header appears more than once")));
                }
                params_seen.push((name.as_str().to_string(), value.as_bytes().to_vec()));
            }
        }
        param_headers = Some(params_seen);
    }
    let id = msg.id.ok_or_else(|| RpcError::invalid_request("a request needs an id"))?;
    let request_id = headers.and_then(|h| h.get("x-request-id")).cloned();
    Ok(Request { id, method: mcpgate_protocol::Method::parse(method), params, meta, param_headers, caller, legacy: None, request_id })
}

/// A header that must appear at most once, as trimmed text.
fn single<'a>(h: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, RpcError> {
    match single_raw(h, name)? {
        None => Ok(None),
        Some(raw) => match std::str::from_utf8(raw) {
            Ok(s) if s.bytes().all(|b| (0x20..0x7f).contains(&b) || b == b'\t') => Ok(Some(s.trim())),
            _ => Err(RpcError::header_mismatch(format!("{name} header contains invalid characters"))),
        },
    }
}

fn single_raw<'a>(h: &'a HeaderMap, name: &str) -> Result<Option<&'a [u8]>, RpcError> {
    let mut values = h.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(RpcError::header_mismatch(format!("{name} header appears more than once")));
    }
    Ok(first.map(|v| v.as_bytes()))
}

#[cfg(test)]
mod tests;
