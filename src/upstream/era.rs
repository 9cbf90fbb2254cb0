//! Which era each call goes in (docs/protocol.md, "Which era each upstream is spoken to in"): the
//! upstream's own, except that a legacy client reaching a modern upstream is spoken to in its own
//! era where the upstream takes it. On HTTP that is a legacy session of the client's own
//! (`affinity`); on stdio, where one process serves one era, it is the same process if it takes
//! the handshake too, else a second process of the same command (the twin), else nothing (the
//! client is bridged). This module owns that decision, the twin, and the call made in the
//! client's era (`call_affine`).

use super::{Call, Shared, Transport, Upstream, UpstreamError};
use mcpgate_config::{EraChoice, UpstreamConfig};
use mcpgate_protocol::{MODERN_VERSION, is_legacy_version};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The era of one call: the upstream's legacy one, its modern one, or (a legacy client on a
/// modern upstream) the client's own where the upstream takes it.
pub(super) enum Era {
    Legacy(String),
    Modern(String),
    Affine(String),
}

/// What a call in its client's era came to: sent here, or answered by the twin handle (whose
/// reply is final).
pub(super) enum Affine {
    Sent(Result<mcpgate_protocol::reply::Reply, UpstreamError>),
    Twin(mcpgate_protocol::reply::Reply),
}

/// Where a modern stdio upstream's legacy clients go.
#[derive(Clone)]
pub(super) enum Partner {
    /// The same process, in the legacy session it took (the negotiated version).
    Itself(String),
    /// A second process of the same command, in the legacy era.
    Twin(Arc<Upstream>),
    /// Nowhere: they are bridged.
    None,
}

/// Whether a failed handshake means the upstream does not speak the legacy era, rather than being
/// unreachable, slow or failing for now: a JSON-RPC refusal of the request itself (invalid request,
/// unknown method, invalid params, unsupported version, header mismatch), an answer in another
/// era, or a plain HTTP 400, 404 or 405.
pub(super) fn refuses_legacy(why: &UpstreamError) -> bool {
    match why {
        UpstreamError::Refused { code, .. } => {
            code.is_null() || [-32600, -32601, -32602, -32022, -32020].contains(&code.as_i64().unwrap_or(0))
        }
        UpstreamError::Status { status } => matches!(status, 400 | 404 | 405),
        _ => false,
    }
}

impl Upstream {
    /// A call in the era its client speaks, where the upstream speaks both: a stdio server
    /// through its legacy partner (itself, or a twin handle), an HTTP one in a legacy session
    /// of the client's own unless it refuses them.
    pub(super) async fn call_affine(&self, call: Call, v: String) -> Affine {
        Affine::Sent(match &self.transport {
            Transport::Stdio(_) => match self.legacy_partner().await {
                Some(Partner::Itself(version)) => self.call_legacy(call, &version).await,
                Some(Partner::Twin(twin)) => return Affine::Twin(twin.call(call).await),
                Some(Partner::None) | None => self.call_modern(call, &v).await,
            },
            Transport::Rest(_) => self.call_modern(call, &v).await,
            Transport::Http(_) => {
                let version = call.client.as_ref().map(|c| c.version.clone()).unwrap_or_default();
                match self.call_legacy(call.clone(), &version).await {
                    Err(UpstreamError::Handshake(why)) if refuses_legacy(&why) => {
                        tracing::info!(upstream = %self.id(), error = %why, "the upstream refused the legacy handshake; legacy clients are bridged");
                        self.legacy_refused.store(true, Ordering::Relaxed);
                        self.call_modern(call, &v).await
                    }
                    // A failure that may pass: this call is bridged, the next one tries again.
                    Err(UpstreamError::Handshake(why)) => {
                        tracing::debug!(upstream = %self.id(), error = %why, "a legacy client's own session could not be opened now; bridging");
                        self.call_modern(call, &v).await
                    }
                    other => other,
                }
            }
        })
    }

    /// The era a call goes in: the upstream's, except that a legacy client reaching a modern
    /// upstream is spoken to in its own era where the upstream takes it (docs/protocol.md, "Which
    /// era each upstream is spoken to in").
    pub(super) fn era_for(&self, call: &Call) -> Era {
        let st = self.state.load();
        match st.version.as_deref() {
            Some(v) if is_legacy_version(v) => Era::Legacy(v.to_string()),
            v => {
                let v = v.unwrap_or(MODERN_VERSION).to_string();
                if call.client.is_some() && self.cfg.era == EraChoice::Auto && !self.legacy_refused.load(Ordering::Relaxed) {
                    Era::Affine(v)
                } else {
                    Era::Modern(v)
                }
            }
        }
    }

    /// Where a modern stdio upstream's legacy clients go, decided on the first one: the same
    /// process when it takes the handshake as well (it serves both eras at once); else a second
    /// process of the same command, spoken to in the legacy era (SDKs lock a process to the era
    /// of its first request); else nowhere (they are bridged). Only a refusal is final: after a
    /// failure that may pass (a timeout, a restart), `None` bridges this call and the next legacy
    /// call decides again.
    pub(super) async fn legacy_partner(&self) -> Option<Partner> {
        let decide = async {
            match self.handshake(None).await {
                Ok(identity) => {
                    tracing::info!(upstream = %self.id(), "the process serves both eras: legacy clients use it too");
                    return Ok(Partner::Itself(identity.version));
                }
                Err(e) if refuses_legacy(&e) => tracing::debug!(upstream = %self.id(), error = %e, "the process keeps to the modern era"),
                Err(e) => return Err(e),
            }
            let cfg = UpstreamConfig { era: EraChoice::Legacy, ..self.cfg.clone() };
            let shared = Shared { tasks: self.tasks.child(), ..self.shared.clone() };
            // Its list changes are this upstream's: the catalogue is re-read.
            let twin = Arc::new(Upstream::with_signal(self.index, cfg, shared, self.updated.clone(), self.changed.clone(), None));
            match twin.refresh().await {
                Ok(()) => {
                    tracing::info!(upstream = %self.id(), "started a legacy-era process for legacy clients");
                    Ok(Partner::Twin(twin))
                }
                Err(e) => {
                    twin.tasks.stop();
                    if !refuses_legacy(&e) {
                        return Err(e);
                    }
                    tracing::info!(upstream = %self.id(), error = %e, "the command refuses the legacy handshake; legacy clients are bridged");
                    Ok(Partner::None)
                }
            }
        };
        match self.partner.get_or_try_init(|| decide).await {
            Ok(p) => Some(p.clone()),
            Err(e) => {
                tracing::info!(upstream = %self.id(), error = %e, "no legacy-era process for now; this legacy client is bridged");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn only_real_refusals_bridge_legacy_clients_for_good() {
        let refused = |code: Value| UpstreamError::Refused { code, message: String::new() };
        for e in [
            refused(json!(-32601)),
            refused(json!(-32602)),
            refused(json!(-32022)),
            refused(Value::Null),
            UpstreamError::Status { status: 405 },
        ] {
            assert!(refuses_legacy(&e), "{e}");
        }
        for e in [
            refused(json!(-32603)),
            UpstreamError::Status { status: 401 },
            UpstreamError::Status { status: 503 },
            UpstreamError::Timeout { after: std::time::Duration::from_secs(1) },
            UpstreamError::Protocol("the response stream ended before the response".into()),
        ] {
            assert!(!refuses_legacy(&e), "{e}");
        }
    }
}
