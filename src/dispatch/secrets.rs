//! The redaction step of the call chain (`[secrets]`, docs/security.md): everything an upstream
//! sends back through a forwarded request passes the one walker of `policy::secrets` before it
//! reaches the client, in both eras: the final result of every forwarded method (`tools/call`,
//! `prompts/get`, `resources/read`, `completion/complete`, `tasks/*`), an `input_required`
//! result (the questions an upstream asks), an upstream's JSON-RPC error, and the notifications
//! (progress, log messages) and requests (a legacy client's `elicitation/create`) streamed during
//! the call. A redaction rewrites the message; a block withholds it: a final result becomes a tool
//! result saying so (for `tools/call`) or an error, a notification is dropped, a question ends the
//! call with the withheld result. A message the walker cannot read (too deep, too large, not
//! JSON) is withheld the same way, never passed. Nothing is read when no detector is configured.
//! What matched is never logged or audited, only the detector's name.

use super::Served;
use crate::audit::{Audit, Subject};
use crate::telemetry::Metrics;
use mcpgate_model::policy::secrets::{Detector, Withheld, scrub_json};
use mcpgate_protocol::Method;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::reply::{Event, Outcome, Reply};
use std::sync::Arc;

/// The redaction step for one forwarded request: its detectors, and the request its findings
/// are audited under.
pub struct Redact {
    detectors: Arc<Vec<Detector>>,
    audit: Arc<Audit>,
    metrics: Arc<Metrics>,
    subject: Arc<Subject>,
}

impl Redact {
    /// The step for the request about `subject`; `None` when no detector is configured (nothing
    /// is read).
    pub fn new(gw: &Served<'_>, subject: &Arc<Subject>) -> Option<Arc<Redact>> {
        if gw.config.secrets.is_empty() {
            return None;
        }
        Some(Arc::new(Redact {
            detectors: gw.config.secrets.clone(),
            audit: gw.audit.clone(),
            metrics: gw.metrics.clone(),
            subject: subject.clone(),
        }))
    }

    /// Scrubs one JSON text: `Ok(None)` clean, `Ok(Some(text))` redacted, `Err` withheld;
    /// each finding audited and counted (`what` says where it was, for the log).
    fn text(&self, text: Option<&str>, what: &str) -> Result<Option<String>, Withheld> {
        let mut redacted = Vec::new();
        let verdict = match text {
            Some(text) => scrub_json(text, &self.detectors, &mut redacted),
            None => Err(Withheld::Unreadable),
        };
        let (reason, counted) = match &verdict {
            Err(name) => {
                tracing::warn!(detector = %name, method = %self.subject.method.as_str(), what, "withheld a message from an upstream: it carried a secret or could not be read");
                (format!("secret_blocked:{name}"), crate::telemetry::reasons::Refused::SecretBlocked)
            }
            Ok(Some(_)) => {
                tracing::info!(detectors = ?redacted, method = %self.subject.method.as_str(), what, "secrets redacted from a message from an upstream");
                (format!("secret_redacted:{}", redacted.join(",")), crate::telemetry::reasons::Refused::SecretRedacted)
            }
            Ok(None) => return verdict,
        };
        self.metrics.refused(counted);
        self.audit.refused(&self.subject, &reason);
        verdict
    }

    /// What the client gets instead of a withheld final message.
    fn withheld(&self, why: &Withheld) -> Outcome {
        let text = match why {
            Withheld::Unreadable => {
                "The result was withheld by the gateway: it could not be checked for secrets (nested too deep or too large).".to_string()
            }
            Withheld::Blocked(name) => format!("The result was withheld by the gateway: it contained what looks like a secret ({name})."),
        };
        match self.subject.method {
            Method::ToolsCall => super::tool_text(&text, true),
            _ => Outcome::Error(RpcError::internal(text)),
        }
    }

    /// The final outcome after the detectors: a result (an `input_required` one too) or an
    /// upstream's error redacted or withheld; the gateway's own errors are read as well, since
    /// they may quote what an upstream said.
    pub fn outcome(&self, o: Outcome) -> Outcome {
        match o {
            Outcome::Result(raw) => match self.text(Some(raw.get()), "result") {
                Ok(None) => Outcome::Result(raw),
                Ok(Some(text)) => Json::from_string(text).map_or_else(|_| self.withheld(&Withheld::Unreadable), Outcome::Result),
                Err(why) => self.withheld(&why),
            },
            Outcome::UpstreamError(raw) => match self.text(Some(raw.get()), "error") {
                Ok(None) => Outcome::UpstreamError(raw),
                Ok(Some(text)) => Json::from_string(text).map_or_else(|_| self.withheld(&Withheld::Unreadable), Outcome::UpstreamError),
                Err(why) => self.withheld(&why),
            },
            Outcome::Error(e) => self.own_error(e),
        }
    }

    /// One of the gateway's errors, whose message or data may quote an upstream.
    fn own_error(&self, mut e: RpcError) -> Outcome {
        let body = serde_json::json!({ "message": e.message, "data": e.data });
        let Ok(text) = serde_json::to_string(&body) else { return Outcome::Error(e) };
        match self.text(Some(&text), "error") {
            Ok(None) => Outcome::Error(e),
            Ok(Some(clean)) => match serde_json::from_str::<serde_json::Value>(&clean) {
                Ok(mut v) => {
                    e.message = v["message"].as_str().unwrap_or("Upstream error").to_string();
                    e.data = Some(v["data"].take()).filter(|d| !d.is_null());
                    Outcome::Error(e)
                }
                Err(_) => self.withheld(&Withheld::Unreadable),
            },
            Err(why) => self.withheld(&why),
        }
    }

    /// One event streamed during the call: a notification redacted or dropped; a request of the
    /// upstream's (a question for a legacy client) redacted, or, withheld, the end of the call.
    pub fn event(&self, ev: Event) -> Option<Event> {
        let (bytes, ask) = match &ev {
            Event::Notification(b) => (b, false),
            Event::Ask(b) => (b, true),
            Event::Done(_) => return Some(ev),
        };
        let what = if ask { "request" } else { "notification" };
        match self.text(std::str::from_utf8(bytes).ok(), what) {
            Ok(None) => Some(ev),
            Ok(Some(text)) if ask => Some(Event::Ask(text.into_bytes())),
            Ok(Some(text)) => Some(Event::Notification(text.into_bytes())),
            Err(why) if ask => Some(Event::Done(self.withheld(&why))),
            Err(_) => None,
        }
    }
}

/// `reply` with its streamed notifications and requests passed through `step` (its final outcome
/// is the caller's to pass, where it is built).
pub fn events(reply: Reply, step: Option<Arc<Redact>>) -> Reply {
    match step {
        Some(step) => reply.filter_events(move |ev| step.event(ev)),
        None => reply,
    }
}
