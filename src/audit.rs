//! The audit log: one structured line per call, prompt get, resource read or completion (target
//! `mcpgate::audit`): caller, the endpoint it came through (`-` for the root, else a virtual
//! server's path), method, item, upstream, outcome and duration. Arguments are logged
//! only when `[audit] include_arguments = true`; credentials never are. [`Audit`] is the sink the
//! gateway owns: besides the log line, it keeps the recent calls and hands each new one to its
//! subscribers (the console), once something asked it to keep them.

use crate::reply::Outcome;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::broadcast;

/// How many recent calls are kept.
const KEPT: usize = 200;

/// One ended call as the audit line has it (never its arguments).
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    pub ts_ms: u64,
    pub caller: String,
    pub endpoint: String,
    pub method: String,
    pub item: String,
    pub upstream: String,
    pub outcome: String,
    pub duration_ms: u64,
}

/// The audit sink. Nothing is kept or sent until [`Audit::keep_recent`] (one atomic load on the
/// call path otherwise).
pub struct Audit {
    keeping: AtomicBool,
    recent: Mutex<VecDeque<CallRecord>>,
    live: broadcast::Sender<CallRecord>,
}

impl Default for Audit {
    fn default() -> Self {
        Audit { keeping: AtomicBool::new(false), recent: Mutex::new(VecDeque::with_capacity(KEPT)), live: broadcast::channel(256).0 }
    }
}

impl Audit {
    /// Starts keeping recent calls for subscribers (when a console is enabled).
    pub fn keep_recent(&self) {
        self.keeping.store(true, Ordering::Relaxed);
    }

    /// The kept calls, newest first.
    pub fn recent(&self) -> Vec<CallRecord> {
        crate::sync::lock(&self.recent).iter().rev().cloned().collect()
    }

    /// New calls as they end.
    pub fn subscribe(&self) -> broadcast::Receiver<CallRecord> {
        self.live.subscribe()
    }

    /// A request refused before any upstream was involved (unknown or denied, rate limited, no
    /// route, a token not honoured): `outcome` says why.
    pub fn refused(&self, caller: &str, endpoint: &str, method: &str, item: &str, outcome: &str) {
        let fields = [caller, endpoint, method, item, "-"];
        self.keep(fields, outcome, 0);
        line(fields, outcome, 0, None);
    }

    /// Keeps one ended call (caller, endpoint, method, item, upstream), cleaned like the line.
    fn keep(&self, [caller, endpoint, method, item, upstream]: [&str; 5], outcome: &str, duration_ms: u64) {
        if !self.keeping.load(Ordering::Relaxed) {
            return;
        }
        let record = CallRecord {
            ts_ms: now_ms(),
            caller: clean(caller).into_owned(),
            endpoint: endpoint.to_string(),
            method: clean(method).into_owned(),
            item: clean(item).into_owned(),
            upstream: upstream.to_string(),
            outcome: outcome.to_string(),
            duration_ms,
        };
        {
            let mut r = crate::sync::lock(&self.recent);
            if r.len() == KEPT {
                r.pop_front();
            }
            r.push_back(record.clone());
        }
        // No subscriber (no console open) is fine.
        let _ = self.live.send(record);
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

pub struct Entry {
    pub caller: String,
    /// The virtual server's path, `-` for the root endpoint.
    pub endpoint: String,
    pub method: String,
    pub item: String,
    pub upstream: String,
    pub started: Instant,
    pub arguments: Option<String>,
}

/// A short, secret-free description of how a request ended. A result is read only for its
/// top-level `isError` (every other member is skipped unread: no allocation on the call path).
pub fn outcome_label(o: &Outcome) -> std::borrow::Cow<'static, str> {
    /// The one member of a result the label needs.
    #[derive(serde::Deserialize)]
    struct Flags {
        #[serde(rename = "isError", default)]
        is_error: Option<bool>,
    }
    match o {
        Outcome::Result(raw) => {
            let is_error = serde_json::from_str::<Flags>(raw.get()).ok().and_then(|f| f.is_error).unwrap_or(false);
            (if is_error { "tool_error" } else { "ok" }).into()
        }
        Outcome::Error(e) => format!("error {}", e.code).into(),
        Outcome::UpstreamError(raw) => {
            #[derive(serde::Deserialize)]
            struct Code {
                #[serde(default)]
                code: Option<i64>,
            }
            let code = serde_json::from_str::<Code>(raw.get()).ok().and_then(|c| c.code).unwrap_or(0);
            format!("upstream_error {code}").into()
        }
    }
}

/// A client-controlled value made safe for a log line: control characters escaped (so no value
/// can start a forged line), at most 200 characters.
pub fn clean(s: &str) -> std::borrow::Cow<'_, str> {
    // The common case (a short, plain name) is logged as it is, without a copy.
    if s.len() <= 200 && !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len().min(200));
    for (i, c) in s.chars().enumerate() {
        if i == 200 {
            out.push('…');
            break;
        }
        if c.is_control() { out.extend(c.escape_default()) } else { out.push(c) }
    }
    std::borrow::Cow::Owned(out)
}

/// The audit line of one forwarded call: written by [`Pending::finish`] with the final outcome,
/// or on drop when the call ended without one (the client went away, the gateway stopped).
pub struct Pending {
    audit: Arc<Audit>,
    entry: Entry,
    done: AtomicBool,
}

impl Pending {
    pub fn new(audit: Arc<Audit>, entry: Entry) -> Arc<Pending> {
        Arc::new(Pending { audit, entry, done: Default::default() })
    }

    /// Records the final outcome (once), described by its [`outcome_label`].
    pub fn finish(&self, label: &str) {
        if !self.done.swap(true, Ordering::SeqCst) {
            self.audit.record(&self.entry, label);
        }
    }
}

/// A call that goes away unfinished (the client hung up during the call or its stream) is
/// audited as abandoned.
impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done.swap(true, Ordering::SeqCst) {
            let e = &self.entry;
            let duration_ms = e.started.elapsed().as_millis() as u64;
            let fields = [e.caller.as_str(), &e.endpoint, &e.method, &e.item, &e.upstream];
            self.audit.keep(fields, "abandoned", duration_ms);
            line(fields, "abandoned", duration_ms, None);
        }
    }
}

impl Audit {
    /// The line of one forwarded call that ended with `outcome`.
    pub fn record(&self, e: &Entry, outcome: &str) {
        let duration_ms = e.started.elapsed().as_millis() as u64;
        let fields = [e.caller.as_str(), &e.endpoint, &e.method, &e.item, &e.upstream];
        self.keep(fields, outcome, duration_ms);
        line(fields, outcome, duration_ms, e.arguments.as_deref());
    }
}

/// Writes one audit line (target `mcpgate::audit`): caller, endpoint, method, item and upstream,
/// the outcome and the duration, and the arguments when they are audited; every value a client
/// controls is cleaned.
fn line([caller, endpoint, method, item, upstream]: [&str; 5], outcome: &str, duration_ms: u64, arguments: Option<&str>) {
    let (caller, method, item) = (clean(caller), clean(method), clean(item));
    match arguments {
        Some(args) => tracing::info!(
            target: "mcpgate::audit",
            %caller, %endpoint, %method, %item, %upstream, %outcome, duration_ms, arguments = %clean(args),
            "audit"
        ),
        None => tracing::info!(target: "mcpgate::audit", %caller, %endpoint, %method, %item, %upstream, %outcome, duration_ms, "audit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::errors::RpcError;
    use crate::protocol::json::Json;

    fn result(text: &str) -> Outcome {
        Outcome::Result(Json::to_json(&serde_json::from_str::<serde_json::Value>(text).unwrap()).unwrap())
    }

    #[test]
    fn outcome_labels_read_only_the_top_level_flag_and_code() {
        assert_eq!(outcome_label(&result(r#"{"content":[{"type":"text","text":"fine"}]}"#)), "ok");
        assert_eq!(outcome_label(&result(r#"{"content":[],"isError":true}"#)), "tool_error");
        assert_eq!(outcome_label(&result(r#"{"isError":false,"content":[]}"#)), "ok");
        // Only the result's own member counts, not one inside its content or structured output.
        assert_eq!(
            outcome_label(&result(r#"{"structuredContent":{"isError":true},"content":[{"type":"text","text":"\"isError\":true"}]}"#)),
            "ok"
        );
        let upstream = Outcome::UpstreamError(Json::to_json(&serde_json::json!({"code": -32602, "message": "bad"})).unwrap());
        assert_eq!(outcome_label(&upstream), "upstream_error -32602");
        assert_eq!(outcome_label(&Outcome::Error(RpcError::internal("x"))), "error -32603");
    }
}
