//! The audit log: one structured record per call, prompt get, resource read or completion (log
//! target `mcpgate::audit`): caller, the endpoint it came through (`-` for the root, else a virtual
//! server's path), method, item (always the catalogue's name, with the name the endpoint presents
//! beside it when that differs), upstream, outcome and duration. Arguments are recorded only when
//! `[audit] include_arguments = true`; credentials never are. Who asked about what is one
//! [`Subject`] (`subject.rs`), built once on the call path; every record is written from one.
//! [`Audit`] is the sink the gateway owns: each record goes to the log line, to the export
//! (`export`: a JSON-lines file with rotation, OTLP logs), to the usage accounting (tool calls
//! and uses of skills), and, once something asked for them, to the recent calls and their
//! subscribers (the console).

pub mod chain;
pub mod export;
mod subject;

pub use subject::Subject;

use crate::usage::{RowRef, Usage};
use mcpgate_protocol::reply::Outcome;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::broadcast;

/// How many recent calls are kept.
pub const KEPT: usize = 200;

/// One ended call as the audit has it (never its arguments).
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    pub ts_ms: u64,
    pub caller: String,
    pub endpoint: String,
    pub method: String,
    /// The catalogue's name of the item.
    pub item: String,
    /// The name the endpoint presents, when it differs from the catalogue's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presented: Option<String>,
    pub upstream: String,
    pub outcome: String,
    /// The `[[rule]]` that decided a refusal, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The guard whose verdict this records (`[[guard]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
    /// Why the guard decided so (its own words, bounded; never the content it checked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The code-mode program that made the call (or the run of that program itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    pub duration_ms: u64,
}

/// The audit sink. Nothing is kept for subscribers until [`Audit::keep_recent`].
pub struct Audit {
    keeping: AtomicBool,
    /// When recent calls began to be kept (Unix ms), 0 before.
    kept_since: std::sync::atomic::AtomicU64,
    recent: Mutex<VecDeque<CallRecord>>,
    live: broadcast::Sender<CallRecord>,
    usage: Option<Arc<Usage>>,
    export: export::Export,
}

impl Default for Audit {
    fn default() -> Self {
        Audit::new(None, export::Export::default())
    }
}

impl Audit {
    /// The sink, counting tool calls in `usage` and exporting records to `export` when given.
    pub fn new(usage: Option<Arc<Usage>>, export: export::Export) -> Audit {
        Audit {
            keeping: AtomicBool::new(false),
            kept_since: std::sync::atomic::AtomicU64::new(0),
            recent: Mutex::new(VecDeque::with_capacity(KEPT)),
            live: broadcast::channel(256).0,
            usage,
            export,
        }
    }

    /// At shutdown: the audit file gets every record queued so far, flushed (see
    /// [`export::Export::close`]); `false` when its writer did not finish within `within`.
    pub fn close(&self, within: std::time::Duration) -> bool {
        self.export.close(within)
    }

    /// Sends every record as an OTLP log too.
    pub fn send_logs(&self, sink: export::LogSink) {
        self.export.send_logs(sink);
    }

    /// Starts keeping recent calls for subscribers (when a console is enabled).
    pub fn keep_recent(&self) {
        if !self.keeping.swap(true, Ordering::Relaxed) {
            self.kept_since.store(now_ms(), Ordering::Relaxed);
        }
    }

    /// When recent calls began to be kept (Unix ms): calls that ended before are not among them.
    pub fn kept_since(&self) -> Option<u64> {
        Some(self.kept_since.load(Ordering::Relaxed)).filter(|t| *t > 0)
    }

    /// The kept calls, newest first.
    pub fn recent(&self) -> Vec<CallRecord> {
        mcpgate_protocol::sync::lock(&self.recent).iter().rev().cloned().collect()
    }

    /// New calls as they end.
    pub fn subscribe(&self) -> broadcast::Receiver<CallRecord> {
        self.live.subscribe()
    }

    /// A request refused before it was forwarded (unknown or denied, rate limited, no route, a
    /// token not honoured, a result withheld): `outcome` says why. The record names the item as
    /// the caller named it, and no upstream.
    pub fn refused(&self, s: &Subject, outcome: &str) {
        self.emit(&Fields::asked(s), outcome, 0, None, false);
    }

    /// A guard's verdict other than a plain allow (`outcome`: `guard_denied`, `guard_modified`,
    /// `guard_flagged`, `guard_error`), with the guard's name, its reason and how long it took.
    pub fn guarded(&self, s: &Subject, outcome: &str, guard: &str, reason: &str, took: std::time::Duration) {
        let e = Fields { presented: None, guard: Some(guard), reason: Some(reason), ..Fields::of(s) };
        self.emit(&e, outcome, took.as_millis() as u64, None, false);
    }

    /// A call a rule refused (or that no rule allowed): the record names the rule.
    pub fn refused_by_rule(&self, s: &Subject, outcome: &str, rule: &str) {
        self.emit(&Fields { rule: Some(rule), ..Fields::asked(s) }, outcome, 0, None, false);
    }

    /// A tool call refused for its caller's limits (a rate limit or a quota), with the tool known
    /// by its catalogue name: audited, and counted in the usage.
    pub fn limited(&self, s: &Subject, outcome: &str) {
        self.emit(&Fields::of(s), outcome, 0, None, true);
    }

    /// The record of a code-mode program's run (its subject names the program), ended with
    /// `outcome` after `took`: not counted in the usage (its inner calls are, each on its own).
    pub fn program(&self, s: &Subject, outcome: &str, took: std::time::Duration) {
        self.emit(&Fields::of(s), outcome, took.as_millis() as u64, None, false);
    }

    /// The record of one forwarded call that ended with `outcome`.
    pub fn record(&self, e: &Entry, outcome: &str) {
        let duration_ms = e.started.elapsed().as_millis() as u64;
        self.emit(&Fields::of(&e.subject), outcome, duration_ms, e.arguments.as_deref(), true);
    }

    /// Writes the record everywhere it goes, its client-controlled values cleaned once; a tool
    /// call whose tool is known (`counted`), and a skill's use (its `skills/get`, a read of one of
    /// its files), are counted in the usage too.
    fn emit(&self, e: &Fields<'_>, outcome: &str, duration_ms: u64, arguments: Option<&str>, counted: bool) {
        let (caller, method, item, request) = (clean(e.caller), clean(e.method), clean(e.item), clean(e.request));
        let presented = e.presented.map(clean);
        if let Some(u) = self.usage.as_ref().filter(|_| counted && is_counted(e.method, e.item)) {
            let row = RowRef {
                caller: &caller,
                tool: &item,
                upstream: e.upstream,
                endpoint: e.endpoint,
                outcome: crate::usage::outcome_class(outcome),
            };
            u.record(row, duration_ms);
        }
        line(
            &Fields { caller: &caller, method: &method, item: &item, presented: presented.as_deref(), request: &request, ..*e },
            outcome,
            duration_ms,
            arguments,
        );
        let keeping = self.keeping.load(Ordering::Relaxed);
        if !keeping && !self.export.active() {
            return;
        }
        let record = CallRecord {
            ts_ms: now_ms(),
            caller: caller.into_owned(),
            endpoint: e.endpoint.to_string(),
            method: method.into_owned(),
            item: item.into_owned(),
            presented: presented.map(|p| p.into_owned()),
            upstream: e.upstream.to_string(),
            outcome: outcome.to_string(),
            rule: e.rule.map(str::to_string),
            guard: e.guard.map(str::to_string),
            reason: e.reason.map(|r| clean(r).into_owned()),
            program: e.program.map(str::to_string),
            duration_ms,
        };
        if self.export.active() {
            self.export.write(&record, arguments.map(clean).as_deref());
        }
        if keeping {
            {
                let mut r = mcpgate_protocol::sync::lock(&self.recent);
                if r.len() == KEPT {
                    r.pop_front();
                }
                r.push_back(record.clone());
            }
            // No subscriber (no console open) is fine.
            let _ = self.live.send(record);
        }
    }
}

/// The parts of a record, borrowed.
#[derive(Clone, Copy)]
struct Fields<'a> {
    caller: &'a str,
    endpoint: &'a str,
    method: &'a str,
    item: &'a str,
    presented: Option<&'a str>,
    upstream: &'a str,
    /// The rule that decided (refusals by a rule).
    rule: Option<&'a str>,
    /// The guard that decided (a guard's verdict).
    guard: Option<&'a str>,
    /// Why it decided so.
    reason: Option<&'a str>,
    /// The code-mode program that made the call.
    program: Option<&'a str>,
    /// The HTTP request's id (`-` on stdio).
    request: &'a str,
}

impl<'a> Fields<'a> {
    /// Everything the subject knows: the catalogue's name, the presented one, the upstream.
    fn of(s: &'a Subject) -> Fields<'a> {
        Fields {
            caller: &s.caller,
            endpoint: s.endpoint(),
            method: s.method.as_str(),
            item: &s.item,
            presented: s.presented.as_deref(),
            upstream: s.upstream(),
            rule: None,
            guard: None,
            reason: None,
            program: s.program.as_deref(),
            request: s.request.as_ref().and_then(|v| v.to_str().ok()).unwrap_or("-"),
        }
    }

    /// As a refusal records it: the item as the caller named it, no upstream.
    fn asked(s: &'a Subject) -> Fields<'a> {
        Fields { item: s.shown(), presented: None, upstream: "-", ..Fields::of(s) }
    }
}

fn now_ms() -> u64 {
    mcpgate_protocol::toolbox::unix_ms()
}

/// One forwarded call as the audit records it when it ends: its subject (shared with the checks
/// of its result), when it started, and its arguments when they are audited.
pub struct Entry {
    pub subject: Arc<Subject>,
    pub started: Instant,
    pub arguments: Option<String>,
}

/// A short, secret-free description of how a request ended. A result is read only for its
/// top-level `isError` (every other member is skipped unread: no allocation on the call path).
pub fn outcome_label(o: &Outcome) -> std::borrow::Cow<'static, str> {
    match o {
        Outcome::Result(raw) => (if crate::telemetry::semconv::is_error_result(raw.get()) { "tool_error" } else { "ok" }).into(),
        Outcome::Error(e) => format!("error {}", e.code).into(),
        Outcome::UpstreamError(raw) => format!("upstream_error {}", crate::telemetry::semconv::error_code(raw.get()).unwrap_or(0)).into(),
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

/// The audit record of one forwarded call: written by [`Pending::finish`] with the final outcome,
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
            self.audit.record(&self.entry, "abandoned");
        }
    }
}

/// Writes one audit line (target `mcpgate::audit`): caller, endpoint, method, item (and the
/// presented name) and upstream, the outcome and the duration, the HTTP request's id
/// (`request_id`, `-` on stdio), and the arguments when they are audited. The values are cleaned by the caller, and recorded as strings, which the text log
/// quotes wherever a logfmt reader could take them for more than one value
/// (`telemetry::logfmt`).
fn line(e: &Fields<'_>, outcome: &str, duration_ms: u64, arguments: Option<&str>) {
    let Fields { caller, endpoint, method, item, presented, upstream, rule, guard, reason, program, request: request_id } = *e;
    // A program's calls: one line with every field (`-` where none).
    if let Some(program) = program {
        let (presented, rule, guard) = (presented.unwrap_or("-"), rule.unwrap_or("-"), guard.unwrap_or("-"));
        let reason = &*clean(reason.unwrap_or("-"));
        let arguments = &*clean(arguments.unwrap_or("-"));
        tracing::info!(
            target: "mcpgate::audit",
            caller, endpoint, method, item, presented, upstream, outcome, rule, guard, reason, program, duration_ms, request_id, arguments,
            "audit"
        );
        return;
    }
    if let Some(guard) = guard {
        let reason = &*clean(reason.unwrap_or("-"));
        tracing::info!(target: "mcpgate::audit", caller, endpoint, method, item, upstream, outcome, guard, reason, duration_ms, request_id, "audit");
        return;
    }
    if let Some(rule) = rule {
        tracing::info!(target: "mcpgate::audit", caller, endpoint, method, item, upstream, outcome, rule, duration_ms, request_id, "audit");
        return;
    }
    match (arguments, presented) {
        (Some(args), _) => tracing::info!(
            target: "mcpgate::audit",
            caller, endpoint, method, item, presented = presented.unwrap_or("-"), upstream, outcome, duration_ms, request_id,
            arguments = &*clean(args),
            "audit"
        ),
        (None, Some(presented)) => tracing::info!(
            target: "mcpgate::audit",
            caller, endpoint, method, item, presented, upstream, outcome, duration_ms, request_id,
            "audit"
        ),
        (None, None) => {
            tracing::info!(target: "mcpgate::audit", caller, endpoint, method, item, upstream, outcome, duration_ms, request_id, "audit")
        }
    }
}

/// Whether a forwarded request counts in the usage: a tool call, or the use of an Agent Skill
/// (`skills/get`, or a read of a `skill://` file), counted under its gateway URI.
fn is_counted(method: &str, item: &str) -> bool {
    match method {
        "tools/call" | "skills/get" => true,
        "resources/read" => mcpgate_model::catalog::uris::is_skill(item),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgate_protocol::errors::RpcError;
    use mcpgate_protocol::json::Json;

    fn result(text: &str) -> Outcome {
        Outcome::Result(Json::to_json(&serde_json::from_str::<serde_json::Value>(text).unwrap()).unwrap())
    }

    /// Each path's record of one request, as the audit wrote it before the paths shared one
    /// subject: a forwarded call and a limited one name the catalogue's name, the presented one
    /// and the upstream; a refusal names the item as asked and no upstream; a guard's verdict the
    /// catalogue's name and the upstream, never the presented name; the catalogue guards no
    /// caller and the list method.
    #[test]
    fn every_path_records_the_fields_it_always_did() {
        use crate::auth::Principal;
        use mcpgate_model::catalog::Kind;
        use mcpgate_protocol::Method;
        use serde_json::json;

        let audit = Audit::default();
        audit.keep_recent();
        let carol = Principal { id: "carol".into(), endpoint: Some("/team".into()), ..(*Principal::anonymous()).clone() };
        let asked = Subject::asked(&carol, Method::ToolsCall, "add");
        let mut resolved = asked.clone();
        resolved.resolve(Kind::Tool, "calc", Some("calc__add"));
        let root = Principal { id: "dave".into(), ..(*Principal::anonymous()).clone() };
        let entry = Entry { subject: Arc::new(resolved.clone()), started: Instant::now(), arguments: None };

        audit.refused(&Subject::asked(&root, Method::PromptsGet, "nope"), "unknown_or_denied");
        audit.refused(&asked, "ambiguous_bare_name");
        audit.limited(&resolved, "rate_limited");
        audit.refused_by_rule(&resolved, "denied_by_rule", "no-adds");
        audit.refused(&resolved, "secret_blocked:aws");
        audit.guarded(&resolved, "guard_denied", "pii", "found one", std::time::Duration::from_millis(7));
        let definition = Subject::catalogue(Kind::Tool, Method::ToolsList, "calc__add", "calc");
        audit.guarded(&definition, "guard_flagged:email", "pii", "-", Default::default());
        audit.record(&entry, "ok");

        let mut records: Vec<serde_json::Value> = audit
            .recent()
            .iter()
            .rev()
            .map(|r| {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                v.as_object_mut().map(|o| o.remove("ts_ms"));
                v
            })
            .collect();
        // A forwarded call's duration is its own.
        records.last_mut().and_then(|v| v.as_object_mut()).map(|o| o.remove("duration_ms"));
        let who = |item: &str, upstream: &str| json!({ "caller": "carol", "endpoint": "/team", "method": "tools/call", "item": item, "upstream": upstream });
        let with = |mut base: serde_json::Value, more: serde_json::Value| {
            if let (Some(b), Some(m)) = (base.as_object_mut(), more.as_object()) {
                b.extend(m.clone());
            }
            base
        };
        let expected = vec![
            json!({ "caller": "dave", "endpoint": "-", "method": "prompts/get", "item": "nope", "upstream": "-", "outcome": "unknown_or_denied", "duration_ms": 0 }),
            with(who("add", "-"), json!({ "outcome": "ambiguous_bare_name", "duration_ms": 0 })),
            with(who("calc__add", "calc"), json!({ "presented": "add", "outcome": "rate_limited", "duration_ms": 0 })),
            with(who("add", "-"), json!({ "outcome": "denied_by_rule", "rule": "no-adds", "duration_ms": 0 })),
            with(who("add", "-"), json!({ "outcome": "secret_blocked:aws", "duration_ms": 0 })),
            with(who("calc__add", "calc"), json!({ "outcome": "guard_denied", "guard": "pii", "reason": "found one", "duration_ms": 7 })),
            json!({ "caller": "-", "endpoint": "-", "method": "tools/list", "item": "calc__add", "upstream": "calc", "outcome": "guard_flagged:email", "guard": "pii", "reason": "-", "duration_ms": 0 }),
            with(who("calc__add", "calc"), json!({ "presented": "add", "outcome": "ok" })),
        ];
        assert_eq!(records, expected);
        // The name as asked is the catalogue's: nothing is presented beside it.
        let mut same = Subject::asked(&carol, Method::ResourcesRead, "mem://a");
        same.resolve(Kind::Resource, "mem", None);
        assert_eq!((same.item.as_str(), same.presented.as_deref(), same.shown(), same.upstream()), ("mem://a", None, "mem://a", "mem"));
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
