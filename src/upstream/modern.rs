//! The modern-era adapter (2026-07-28) on the upstream side: every request carries `_meta` with
//! the protocol version and client capabilities, and the `MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name` and `Mcp-Param-*` headers built from the upstream's own schema. There is no session
//! and no handshake: `server/discover` (see `probe`) is all an upstream needs. Change
//! notifications come on one `subscriptions/listen` stream per upstream, shared by every client:
//! opened for the list kinds the upstream declares `listChanged` for and the resource URIs
//! clients follow, re-opened with backoff and jitter after a drop (and at once when the followed
//! URIs change), and every (re)open re-reads the lists, since changes may have been missed.

use super::outbound::Envelope;
use super::{Call, Status, Upstream, UpstreamError, UpstreamState, gateway_meta};
use mcpgate_protocol::extensions::{self, Era};
use mcpgate_protocol::jsonrpc::Message;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::{Event, Reply};
use mcpgate_protocol::sync::lock;
use mcpgate_protocol::tasks::Backoff;
use mcpgate_protocol::{MODERN_VERSION, keys};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The wire envelope of a modern request.
pub(super) fn envelope(call: &Call, version: &str) -> Envelope {
    Envelope {
        version: Some(version.into()),
        session: None,
        mcp: Some(call.mcp_headers()),
        on_behalf_of: call.on_behalf_of.clone(),
        traceparent: call.traceparent(),
    }
}

/// The `notifications` filter to ask an upstream for: the list kinds it announces and the
/// followed URIs it can report on; `None` when there is nothing to listen for.
pub(super) fn listen_filter(st: &UpstreamState, followed: &BTreeSet<String>) -> Option<Value> {
    let mut n = Map::new();
    for (capability, field) in [("tools", "toolsListChanged"), ("prompts", "promptsListChanged"), ("resources", "resourcesListChanged")] {
        if st.declares(capability, "listChanged") {
            n.insert(field.into(), Value::Bool(true));
        }
    }
    if st.declares("resources", "subscribe") && !followed.is_empty() {
        n.insert("resourceSubscriptions".into(), json!(followed));
    }
    (!n.is_empty()).then_some(Value::Object(n))
}

/// Why a listen stream ended.
enum Ended {
    /// The followed URIs changed: open a new one at once.
    Refollow,
    /// The upstream or the connection ended it.
    Dropped(String),
}

impl Upstream {
    pub(super) async fn call_modern(&self, mut call: Call, version: &str) -> Result<Reply, UpstreamError> {
        // Set only where the client's own differ (the usual call carries both already).
        if call.meta.get(keys::PROTOCOL_VERSION).and_then(Value::as_str) != Some(version) {
            call.meta.insert(keys::PROTOCOL_VERSION.into(), Value::String(version.into()));
        }
        if !call.meta.contains_key(keys::CLIENT_CAPABILITIES) {
            call.meta.insert(keys::CLIENT_CAPABILITIES.into(), json!({}));
        }
        // The client's extensions, as the one table says this upstream may hear of them.
        if let Some(caps) = call.meta.get_mut(keys::CLIENT_CAPABILITIES) {
            let st = self.state();
            let declared = st.capabilities.as_ref().and_then(|c| c.get("extensions")).and_then(Value::as_object);
            extensions::filter_client_capabilities(caps, declared, Era::Modern);
        }
        let env = envelope(&call, version);
        self.exchange_reply(&call, env).await
    }

    /// Keeps one `subscriptions/listen` stream open while the upstream is a ready modern server
    /// with something to announce; returns when it is not (any more).
    pub(super) async fn keep_listening(self: Arc<Self>) {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        loop {
            let st = self.state();
            let followed = lock(&self.followed).clone();
            let filter = if st.status == Status::Ready && st.is_modern() { listen_filter(&st, &followed) } else { None };
            let Some(filter) = filter else { return };
            let opened = Instant::now();
            match self.listen_once(&filter).await {
                Ended::Refollow => continue,
                Ended::Dropped(reason) => {
                    tracing::debug!(upstream = %self.id(), %reason, "upstream listen stream ended");
                    // It may be gone, or have changed while we were not listening.
                    self.inbound.channel_lost();
                }
            }
            if opened.elapsed() > Duration::from_secs(30) {
                backoff.reset();
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff.next_wait()) => {}
                _ = self.refollow.notified() => {}
            }
        }
    }

    async fn listen_once(&self, filter: &Value) -> Ended {
        let mut params = RawObject::default();
        if let Err(e) = params.set_json("notifications", filter) {
            return Ended::Dropped(e.to_string());
        }
        let call = Call::internal("subscriptions/listen", params, gateway_meta(), None);
        let sent = match self.exchange(&call, envelope(&call, MODERN_VERSION)).await {
            Ok(s) => s,
            Err(e) => return Ended::Dropped(e.to_string()),
        };
        // Changes made while no stream was open are only seen by re-reading the lists.
        self.inbound.channel_lost();
        let mut stream = match sent.reply {
            Reply::Stream(s) => s,
            Reply::Single(o) => return Ended::Dropped(format!("the upstream answered at once: {}", super::error::describe(&o))),
        };
        tracing::debug!(upstream = %self.id(), filter = %filter, "listening to the upstream");
        loop {
            tokio::select! {
                ev = stream.next() => match ev {
                    // stdio delivers these through the transport's inbound path instead.
                    Some(Event::Notification(bytes)) => {
                        if let Ok(msg) = Message::parse(&bytes) {
                            self.inbound.notification(&msg);
                        }
                    }
                    Some(Event::Ask(_)) => {}
                    Some(Event::Done(o)) => return Ended::Dropped(format!("it ended: {}", super::error::describe(&o))),
                    None => return Ended::Dropped("it ended".into()),
                },
                _ = self.refollow.notified() => return Ended::Refollow,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_asks_for_what_the_upstream_can_announce() {
        let mut st = UpstreamState {
            capabilities: Some(json!({ "tools": { "listChanged": true }, "prompts": {}, "resources": { "subscribe": true } })),
            ..Default::default()
        };
        assert_eq!(listen_filter(&st, &BTreeSet::new()), Some(json!({ "toolsListChanged": true })));
        let followed: BTreeSet<String> = ["file:///a".to_string()].into();
        assert_eq!(listen_filter(&st, &followed), Some(json!({ "toolsListChanged": true, "resourceSubscriptions": ["file:///a"] })));
        st.capabilities = Some(json!({ "tools": {} }));
        assert_eq!(listen_filter(&st, &followed), None);
    }
}
