//! The audit log: one structured line per call, prompt get, resource read or completion (target
//! `mcpgate::audit`): caller, the endpoint it came through (`-` for the root, else a virtual
//! server's path), method, item, upstream, outcome and duration. Arguments are logged
//! only when `[audit] include_arguments = true`; credentials never are.

use crate::reply::Outcome;
use std::time::Instant;

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

/// A short, secret-free description of how a request ended.
pub fn outcome_label(o: &Outcome) -> String {
    match o {
        Outcome::Result(raw) => {
            let is_error = serde_json::from_str::<crate::protocol::rawobj::RawObject>(raw.get())
                .ok()
                .and_then(|obj| obj.parse::<bool>("isError").and_then(Result::ok))
                .unwrap_or(false);
            if is_error { "tool_error".into() } else { "ok".into() }
        }
        Outcome::Error(e) => format!("error {}", e.code),
        Outcome::UpstreamError(raw) => {
            let code = serde_json::from_str::<serde_json::Value>(raw.get()).ok().and_then(|v| v["code"].as_i64()).unwrap_or(0);
            format!("upstream_error {code}")
        }
    }
}

/// A call refused before any upstream was involved (unknown or denied, rate limited, no route).
pub fn refused(caller: &str, endpoint: &str, method: &str, item: &str, outcome: &str) {
    feed([caller, endpoint, method, item, "-"], outcome, 0);
    tracing::info!(target: "mcpgate::audit", caller = %clean(caller), %endpoint, method = %clean(method), item = %clean(item), upstream = %"-", %outcome, duration_ms = 0u64, "audit");
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
    entry: Entry,
    done: std::sync::atomic::AtomicBool,
}

impl Pending {
    pub fn new(entry: Entry) -> std::sync::Arc<Pending> {
        std::sync::Arc::new(Pending { entry, done: Default::default() })
    }

    /// Records the final outcome (once).
    pub fn finish(&self, outcome: &Outcome) {
        if !self.done.swap(true, std::sync::atomic::Ordering::SeqCst) {
            record(&self.entry, outcome);
        }
    }
}

/// A call that goes away unfinished (the client hung up during the call or its stream) is
/// audited as abandoned.
impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let e = &self.entry;
            let duration_ms = e.started.elapsed().as_millis() as u64;
            feed([&e.caller, &e.endpoint, &e.method, &e.item, &e.upstream], "abandoned", duration_ms);
            tracing::info!(target: "mcpgate::audit", caller = %clean(&e.caller), endpoint = %e.endpoint, method = %clean(&e.method), item = %clean(&e.item), upstream = %e.upstream, outcome = %"abandoned", duration_ms, "audit");
        }
    }
}

pub fn record(e: &Entry, outcome: &Outcome) {
    let duration_ms = e.started.elapsed().as_millis() as u64;
    let outcome = outcome_label(outcome);
    feed([&e.caller, &e.endpoint, &e.method, &e.item, &e.upstream], &outcome, duration_ms);
    match &e.arguments {
        Some(args) => {
            tracing::info!(target: "mcpgate::audit", caller = %clean(&e.caller), endpoint = %e.endpoint, method = %clean(&e.method), item = %clean(&e.item), upstream = %e.upstream, %outcome, duration_ms, arguments = %clean(args), "audit")
        }
        None => {
            tracing::info!(target: "mcpgate::audit", caller = %clean(&e.caller), endpoint = %e.endpoint, method = %clean(&e.method), item = %clean(&e.item), upstream = %e.upstream, %outcome, duration_ms, "audit")
        }
    }
}

/// Hands an ended call (caller, endpoint, method, item, upstream) to the console's feed, when a
/// console is enabled: the same fields as the audit line, cleaned the same way.
fn feed([caller, endpoint, method, item, upstream]: [&str; 5], outcome: &str, duration_ms: u64) {
    crate::console::feed::push(|| crate::console::feed::CallRecord {
        ts_ms: crate::console::feed::now_ms(),
        caller: clean(caller).into_owned(),
        endpoint: endpoint.to_string(),
        method: clean(method).into_owned(),
        item: clean(item).into_owned(),
        upstream: upstream.to_string(),
        outcome: outcome.to_string(),
        duration_ms,
    });
}
