//! The modern-era adapter (2026-07-28) on the upstream side: every request carries `_meta` with
//! the protocol version and client capabilities, and the `MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name` and `Mcp-Param-*` headers built from the upstream's own schema. There is no session
//! and no handshake: `server/discover` (see `probe`) is all an upstream needs.

use super::outbound::Envelope;
use super::{Call, Upstream, UpstreamError};
use crate::protocol::keys;
use crate::reply::Reply;
use serde_json::{Value, json};

/// The wire envelope of a modern request.
pub(super) fn envelope(call: &Call, version: &str) -> Envelope {
    Envelope { version: Some(version.into()), session: None, mcp: Some(call.mcp_headers()), on_behalf_of: call.on_behalf_of.clone() }
}

impl Upstream {
    pub(super) async fn call_modern(&self, mut call: Call, version: &str) -> Result<Reply, UpstreamError> {
        call.meta.insert(keys::PROTOCOL_VERSION.into(), Value::String(version.into()));
        call.meta.entry(keys::CLIENT_CAPABILITIES).or_insert_with(|| json!({}));
        let env = envelope(&call, version);
        self.exchange_reply(&call, env).await
    }
}
