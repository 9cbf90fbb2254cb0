//! `server/discover` for the gateway itself: the versions it speaks, the union of what its
//! upstreams offer (limited to what the gateway serves), and their instructions merged into one
//! labelled section per upstream.

use crate::flow::{Outcome, Reply};
use crate::gateway::Gateway;
use crate::protocol::errors::RpcError;
use crate::protocol::{SUPPORTED_VERSIONS, keys};
use crate::upstream::Status;
use serde_json::{Map, Value, json};

/// How long clients may cache the discover result.
const DISCOVER_TTL_MS: u64 = 30_000;

pub fn server_info() -> Value {
    json!({ "name": "mcpgate", "title": "mcpgate MCP gateway", "version": env!("CARGO_PKG_VERSION") })
}

pub fn discover(gw: &Gateway) -> Reply {
    let mut capabilities = Map::new();
    capabilities.insert("tools".into(), json!({}));
    let mut sections = Vec::new();
    if let Some(own) = &gw.config.server.instructions {
        sections.push(own.trim().to_string());
    }
    for up in &gw.upstreams {
        let st = up.state();
        if st.status != Status::Ready {
            continue;
        }
        for cap in ["logging", "prompts", "resources", "completions"] {
            if st.offers(cap) {
                capabilities.insert(cap.into(), json!({}));
            }
        }
        if let Some(text) = st.instructions.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            let label = if up.cfg.prefix.is_empty() {
                format!("## {} (tools without prefix)", up.id())
            } else {
                format!("## {} (tools named {}{}*)", up.id(), up.cfg.prefix, gw.config.catalog.separator)
            };
            sections.push(format!("{label}\n{text}"));
        }
    }
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": capabilities,
        "ttlMs": DISCOVER_TTL_MS,
        "cacheScope": "public",
        "_meta": { keys::SERVER_INFO: server_info() },
    });
    if !sections.is_empty() {
        result["instructions"] = Value::String(sections.join("\n\n"));
    }
    match serde_json::value::to_raw_value(&result) {
        Ok(raw) => Reply::Single(Outcome::Result(raw)),
        Err(e) => Reply::error(RpcError::internal(e.to_string())),
    }
}
