//! What an upstream sends the gateway unasked, on any channel (stdout, a response stream, the GET
//! stream, a `subscriptions/listen` stream): its notifications and its requests. Both transports
//! hand such messages here, so the rules are written once: a `*/list_changed` notification (or a
//! lost channel, after which changes may have been missed) signals that the upstream's lists must
//! be re-read; `notifications/resources/updated` is passed on with the upstream's URI; a `ping`
//! is answered with an empty result; any other request (sampling, elicitation, roots:
//! capabilities the gateway did not declare to it) gets method-not-found.

use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::jsonrpc::{self, Message};
use std::sync::Arc;
use tokio::sync::{Notify, mpsc};

pub struct Inbound {
    id: String,
    /// Signalled when the upstream says one of its lists changed.
    changed: Arc<Notify>,
    /// Resource URIs (the upstream's form) the upstream said were updated.
    updated: mpsc::Sender<String>,
}

impl Inbound {
    pub fn new(id: &str, changed: Arc<Notify>, updated: mpsc::Sender<String>) -> Self {
        Inbound { id: id.to_string(), changed, updated }
    }

    /// A channel that carries the upstream's notifications ended: changes may have been missed,
    /// and the upstream may be gone. Its lists are re-read (which also tells whether it is up).
    pub fn channel_lost(&self) {
        self.changed.notify_one();
    }

    /// A notification not tied to a request of the gateway's.
    pub fn notification(&self, msg: &Message) {
        match msg.method.as_deref() {
            Some(m) if m.ends_with("/list_changed") => {
                tracing::debug!(upstream = %self.id, method = m, "upstream list changed");
                self.changed.notify_one();
            }
            Some("notifications/resources/updated") => {
                let uri = msg.params.as_ref().and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok());
                match uri.as_ref().and_then(|p| p.get("uri")).and_then(|u| u.as_str()) {
                    Some(uri) => {
                        if self.updated.try_send(uri.to_string()).is_err() {
                            tracing::warn!(upstream = %self.id, "dropping a resource update: too many pending");
                        }
                    }
                    None => tracing::debug!(upstream = %self.id, "resources/updated without a uri"),
                }
            }
            m => tracing::debug!(upstream = %self.id, method = ?m, "notification from upstream"),
        }
    }

    /// The answer to a request the upstream sent (`None` when it carries no id).
    pub fn answer(&self, msg: &Message) -> Option<Vec<u8>> {
        let id = msg.id.as_ref()?;
        Some(match msg.method.as_deref() {
            Some("ping") => format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, id.get()).into_bytes(),
            m => {
                tracing::debug!(upstream = %self.id, method = ?m, "refusing a request from upstream");
                jsonrpc::error_message(Some(id), &RpcError::method_not_found(m.unwrap_or("")))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pings_are_answered_and_other_requests_refused() {
        let inbound = Inbound::new("a", Arc::new(Notify::new()), mpsc::channel(1).0);
        let ping = Message::parse(br#"{"jsonrpc":"2.0","id":"p1","method":"ping"}"#).unwrap();
        assert_eq!(inbound.answer(&ping).unwrap(), br#"{"jsonrpc":"2.0","id":"p1","result":{}}"#.to_vec());
        let sampling = Message::parse(br#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage"}"#).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&inbound.answer(&sampling).unwrap()).unwrap();
        assert_eq!(v["error"]["code"], -32601);
        assert_eq!(v["id"], 7);
    }

    #[tokio::test]
    async fn list_changed_signals() {
        let changed = Arc::new(Notify::new());
        let (tx, mut rx) = mpsc::channel(4);
        let inbound = Inbound::new("a", changed.clone(), tx);
        inbound.notification(&Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#).unwrap());
        tokio::time::timeout(std::time::Duration::from_secs(1), changed.notified()).await.unwrap();
        let updated = br#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a"}}"#;
        inbound.notification(&Message::parse(updated).unwrap());
        assert_eq!(rx.recv().await.as_deref(), Some("file:///a"));
    }
}
