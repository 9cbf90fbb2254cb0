//! The guards at work (`[[guard]]`, docs/guards.md): one [`GuardSet`] per configuration (its
//! HTTP clients and concurrency limits), and [`GuardSet::check`], which asks every guard that
//! runs at a point for an item, in the order declared, with the contract of `policy::guards`:
//! the first `deny` ends the walk, a `modify` hands its replacement to the next guard, a guard
//! that fails (deadline, connection, an answer that is not the contract) is decided by its
//! `on_error`. A webhook is POSTed the request as JSON; a tool guard is called with it as its
//! arguments and answers in `structuredContent` (or a JSON text). Every verdict is counted, and
//! every one but a plain allow is audited with the guard's name and latency; what was checked
//! is never logged.

use crate::audit::{Audit, Subject};
use crate::telemetry::Metrics;
use crate::upstream::{Call, Upstream};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use mcpgate_config::Config;
use mcpgate_config::guards::{GuardConfig, GuardKind};
use mcpgate_model::policy::guards::{Ask, Asked, Point, VERSION, Verdict, builtin, parse};
use mcpgate_net::http::HttpClient;
use mcpgate_protocol::Method;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::read::{self, Unreadable};
use mcpgate_protocol::reply::Outcome;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Semaphore;

/// The largest answer a webhook may send.
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// The guards of one configuration, ready to run.
pub struct GuardSet {
    guards: Vec<Running>,
}

struct Running {
    cfg: GuardConfig,
    permits: Arc<Semaphore>,
    /// Each caller's share of `permits` ([`share`]), while it has requests at the guard.
    callers: std::sync::Mutex<std::collections::HashMap<String, Arc<Semaphore>>>,
    client: Option<HttpClient>,
}

/// How many of a guard's `concurrency` slots one caller may hold: half (at least one), so a
/// caller that makes the guard slow (large content, many calls) waits on its own requests, and
/// the others still have half the slots.
fn share(concurrency: usize) -> usize {
    concurrency.div_ceil(2).max(1)
}

/// The guards' decision on some content.
#[derive(Debug, PartialEq)]
pub enum Checked {
    /// Every guard let it pass; `Some` when one or more replaced it.
    Pass(Option<Value>),
    Denied {
        guard: String,
        reason: String,
        /// The guard failed (and its `on_error` is `deny`): a verdict not to keep.
        failed: bool,
    },
}

/// A webhook guard whose TLS settings cannot be used (the cause is in the text, so not a
/// `source` that `{:#}` would print again).
#[derive(Debug, thiserror::Error)]
#[error("guard '{guard}': {error}")]
pub struct GuardSetError {
    pub guard: String,
    pub error: mcpgate_net::http::pem::TlsError,
}

/// Why an external guard gave no verdict (its `on_error` decides; the text is audited).
#[derive(Debug, thiserror::Error)]
pub enum GuardFailure {
    #[error("the guard is shutting down")]
    ShuttingDown,
    #[error("a built-in guard is not asked")]
    BuiltinAsked,
    #[error("no answer within {0} ms")]
    Timeout(u128),
    #[error("no HTTP client")]
    NoClient,
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Request(#[from] http::Error),
    #[error("cannot reach the guard: {0}")]
    Unreachable(#[source] hyper_util::client::legacy::Error),
    #[error("the guard answered HTTP {0}")]
    Status(http::StatusCode),
    #[error("cannot read the answer: {0}")]
    Unread(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the answer is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("{0}")]
    Answer(#[from] mcpgate_model::policy::guards::AnswerError),
    #[error("upstream '{0}' is gone")]
    UpstreamGone(String),
    #[error("the guard tool failed: {0}")]
    ToolFailed(String),
    #[error("the guard tool answered an error")]
    ToolRpcError,
    #[error("the guard tool answered a tool error")]
    ToolError,
    #[error("the guard tool's answer holds no verdict")]
    NoVerdict,
    #[error("the guard tool's answer is not JSON: {0}")]
    ToolNotJson(#[source] serde_json::Error),
}

impl GuardSet {
    pub fn new(config: &Config) -> Result<GuardSet, GuardSetError> {
        let mut guards = Vec::new();
        for cfg in config.guards.iter() {
            let client = match &cfg.kind {
                GuardKind::Webhook { tls: Some(tls), .. } => {
                    Some(mcpgate_net::http::new_http_client_tls(tls).map_err(|error| GuardSetError { guard: cfg.name.clone(), error })?)
                }
                GuardKind::Webhook { .. } => Some(mcpgate_net::http::new_http_client()),
                _ => None,
            };
            guards.push(Running {
                permits: Arc::new(Semaphore::new(cfg.concurrency)),
                callers: Default::default(),
                client,
                cfg: cfg.clone(),
            });
        }
        Ok(GuardSet { guards })
    }

    /// Whether any guard runs at `point` (nothing is read otherwise).
    pub fn any(&self, point: Point) -> bool {
        self.guards.iter().any(|g| g.cfg.points.contains(&point))
    }

    /// Whether any guard runs at `point` for the item `name`.
    pub fn guards(&self, point: Point, name: &str) -> bool {
        self.guards.iter().any(|g| g.cfg.guards(point, name))
    }

    /// Asks every guard that runs at `point` for the item of `subject` (what was checked, and
    /// for whom: what the request a guard is sent says), in order, about `content` as
    /// `protocol::read` read it: content that could not be read is denied by the first of them
    /// (counted and audited as its denial), never handed to a guard as something else.
    pub async fn check(&self, cx: &Context, point: Point, subject: &Subject, content: Result<Value, Unreadable>) -> Checked {
        self.check_with(cx, point, subject, content, None).await
    }

    /// [`GuardSet::check`] with the guard named `only`, when given.
    async fn check_with(
        &self,
        cx: &Context,
        point: Point,
        subject: &Subject,
        content: Result<Value, Unreadable>,
        only: Option<&str>,
    ) -> Checked {
        let chosen = |g: &&Running| g.cfg.guards(point, &subject.item) && only.is_none_or(|n| n == g.cfg.name);
        let mut content = match content {
            Ok(content) => content,
            Err(why) => {
                let Some(g) = self.guards.iter().find(chosen) else { return Checked::Pass(None) };
                let (name, reason) = (g.cfg.name.as_str(), unreadable(&why));
                cx.metrics.guard_verdict(name, point.as_str(), "deny");
                cx.audit.guarded(subject, "guard_denied", name, &reason, Default::default());
                return Checked::Denied { guard: name.to_string(), reason, failed: false };
            }
        };
        let mut modified = false;
        for g in self.guards.iter().filter(chosen) {
            let started = Instant::now();
            let answer = match &g.cfg.kind {
                GuardKind::Builtin { detectors } => Ok(builtin(detectors, &mut content.clone())),
                _ => g.ask(cx, point, subject, &content).await,
            };
            let took = started.elapsed();
            let name = g.cfg.name.as_str();
            let label = point.as_str();
            match answer {
                Ok(Verdict::Allow) => cx.metrics.guard_verdict(name, label, "allow"),
                Ok(Verdict::Flag(found)) => {
                    cx.metrics.guard_verdict(name, label, "flag");
                    cx.audit.guarded(subject, &format!("guard_flagged:{}", found.join(",")), name, "-", took);
                }
                Ok(Verdict::Modify { content: new, reason }) => {
                    cx.metrics.guard_verdict(name, label, "modify");
                    cx.audit.guarded(subject, "guard_modified", name, &reason, took);
                    content = new;
                    modified = true;
                }
                Ok(Verdict::Deny(reason)) => {
                    cx.metrics.guard_verdict(name, label, "deny");
                    cx.audit.guarded(subject, "guard_denied", name, &reason, took);
                    return Checked::Denied { guard: name.to_string(), reason, failed: false };
                }
                Err(why) => {
                    cx.metrics.guard_verdict(name, label, "error");
                    cx.audit.guarded(subject, "guard_error", name, &why.to_string(), took);
                    tracing::warn!(guard = name, point = label, reason = %why, "a guard failed; its on_error decides");
                    if !g.cfg.allow_on_error {
                        return Checked::Denied { guard: name.to_string(), reason: "the guard could not be asked".into(), failed: true };
                    }
                }
            }
        }
        Checked::Pass(modified.then_some(content))
    }
}

impl GuardSet {
    /// A notification streamed during a request (progress, a log message) about `subject`, read
    /// by the built-in guards of `point` (external guards are asked about final answers and
    /// questions only): `None` when one blocks it (it is dropped), else the notification,
    /// redacted where one redacts.
    pub fn notification(&self, cx: &Context, point: Point, subject: &Subject, bytes: Vec<u8>) -> Option<Vec<u8>> {
        let mut builtins = self.guards.iter().filter(|g| g.cfg.guards(point, &subject.item)).filter_map(|g| match &g.cfg.kind {
            GuardKind::Builtin { detectors } => Some((g.cfg.name.as_str(), detectors)),
            _ => None,
        });
        let Some(first) = builtins.next() else { return Some(bytes) };
        let mut message = match read::value(&bytes) {
            Ok(message) => message,
            Err(why) => {
                cx.metrics.guard_verdict(first.0, point.as_str(), "deny");
                cx.audit.guarded(subject, "guard_denied", first.0, &unreadable(&why), Default::default());
                return None;
            }
        };
        let mut changed = false;
        for (name, detectors) in std::iter::once(first).chain(builtins) {
            let label = point.as_str();
            match builtin(detectors, &mut message) {
                Verdict::Allow => cx.metrics.guard_verdict(name, label, "allow"),
                Verdict::Flag(found) => {
                    cx.metrics.guard_verdict(name, label, "flag");
                    cx.audit.guarded(subject, &format!("guard_flagged:{}", found.join(",")), name, "-", Default::default());
                }
                Verdict::Modify { reason, .. } => {
                    cx.metrics.guard_verdict(name, label, "modify");
                    cx.audit.guarded(subject, "guard_modified", name, &reason, Default::default());
                    changed = true;
                }
                Verdict::Deny(reason) => {
                    cx.metrics.guard_verdict(name, label, "deny");
                    cx.audit.guarded(subject, "guard_denied", name, &reason, Default::default());
                    return None;
                }
            }
        }
        if changed { serde_json::to_vec(&message).ok() } else { Some(bytes) }
    }
}

/// The reason a guard denies what cannot be read.
pub fn unreadable(why: &Unreadable) -> String {
    format!("the message cannot be read: {why}")
}

/// The external guards' verdicts on definitions (the `catalogue` point), by guard, upstream and
/// the SHA-256 of the definition: a definition is asked about once, while the catalogue holds it
/// back, and the catalogue is rebuilt with the answer. A failure is not kept: the definition is
/// asked about again at the next rebuild, 30 s later at the earliest.
#[derive(Default)]
pub struct Definitions {
    known: std::sync::Mutex<std::collections::HashMap<(String, String), Option<Verdict>>>,
    /// The built-in guards' verdicts already counted and audited, by guard and digest.
    recorded: std::sync::Mutex<std::collections::HashSet<(String, String)>>,
}

impl Definitions {
    /// Forgets every verdict (the guards changed).
    pub fn clear(&self) {
        mcpgate_protocol::sync::lock(&self.known).clear();
        mcpgate_protocol::sync::lock(&self.recorded).clear();
    }
}

/// The hex SHA-256 of a definition's text.
fn digest(text: &str) -> String {
    mcpgate_protocol::toolbox::sha256_hex(text.as_bytes())
}

/// Who asked about a definition of `kind`: no caller, the list method it arrives in.
fn definition_of(kind: mcpgate_model::catalog::Kind, name: &str, upstream: &str) -> Subject {
    let method = match kind {
        mcpgate_model::catalog::Kind::Prompt => Method::PromptsList,
        mcpgate_model::catalog::Kind::Skill => Method::SkillsList,
        _ => Method::ToolsList,
    };
    Subject::catalogue(kind, method, name, upstream)
}

/// The most verdicts kept (the set is emptied past it, and definitions are asked about again).
const MAX_DEFINITIONS: usize = 10_000;

impl super::Gateway {
    /// External guard `g`'s verdict on the definition `definition` of item `name` (`kind`) of
    /// `upstream`, when known; otherwise `None`, and it is asked (once).
    pub(super) fn definition_verdict(
        &self,
        g: &GuardConfig,
        kind: mcpgate_model::catalog::Kind,
        name: &str,
        upstream: &str,
        definition: &Value,
    ) -> Option<Verdict> {
        // A guard may judge the same definition differently for another upstream.
        let key = (g.name.clone(), format!("{upstream}\n{}", digest(&definition.to_string())));
        {
            let mut known = mcpgate_protocol::sync::lock(&self.definitions.known);
            if let Some(v) = known.get(&key) {
                return v.clone();
            }
            if known.len() >= MAX_DEFINITIONS {
                known.clear();
            }
            known.insert(key.clone(), None);
        }
        let me = self.me.upgrade()?;
        let (subject, definition) = (definition_of(kind, name, upstream), definition.clone());
        self.tasks.spawn(async move {
            let (set, cx) = me.guards();
            let verdict = match set.check_with(&cx, Point::Catalogue, &subject, Ok(definition), Some(&key.0)).await {
                Checked::Pass(None) => Some(Verdict::Allow),
                Checked::Pass(Some(content)) => Some(Verdict::Modify { content, reason: String::new() }),
                Checked::Denied { failed: true, .. } => None,
                Checked::Denied { reason, .. } => Some(Verdict::Deny(reason)),
            };
            let failed = verdict.is_none();
            let failure = Verdict::Deny("could not be asked".into());
            mcpgate_protocol::sync::lock(&me.definitions.known).insert(key.clone(), Some(verdict.unwrap_or(failure)));
            me.rebuild();
            if failed {
                tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                mcpgate_protocol::sync::lock(&me.definitions.known).remove(&key);
            }
        });
        None
    }
}

impl super::Gateway {
    /// A built-in guard's verdict on a definition (the `catalogue` point), counted, and audited
    /// unless it allows, once per guard and definition (the catalogue is screened at every
    /// rebuild).
    pub(super) fn catalogue_verdict(
        &self,
        g: &GuardConfig,
        kind: mcpgate_model::catalog::Kind,
        name: &str,
        upstream: &str,
        text: &str,
        verdict: &Verdict,
    ) {
        {
            let mut recorded = mcpgate_protocol::sync::lock(&self.definitions.recorded);
            if recorded.len() >= MAX_DEFINITIONS {
                recorded.clear();
            }
            if !recorded.insert((g.name.clone(), format!("{upstream}\n{}", digest(text)))) {
                return;
            }
        }
        let (label, outcome, reason) = match verdict {
            Verdict::Allow => ("allow", String::new(), ""),
            Verdict::Flag(found) => ("flag", format!("guard_flagged:{}", found.join(",")), "-"),
            Verdict::Modify { reason, .. } => ("modify", "guard_modified".into(), reason.as_str()),
            Verdict::Deny(reason) => ("deny", "guard_denied".into(), reason.as_str()),
        };
        self.metrics.guard_verdict(&g.name, Point::Catalogue.as_str(), label);
        if label != "allow" {
            self.audit.guarded(&definition_of(kind, name, upstream), &outcome, &g.name, reason, Default::default());
        }
    }
}

/// What running the external guards needs from the gateway: the upstreams (for tool guards),
/// the audit and the metrics. Owned, so a stream's result can be checked after the request
/// handler returned.
#[derive(Clone)]
pub struct Context {
    pub upstreams: Arc<Vec<Arc<Upstream>>>,
    pub audit: Arc<Audit>,
    pub metrics: Arc<Metrics>,
}

impl Running {
    /// An external guard's answer, within its deadline and concurrency limit.
    async fn ask(&self, cx: &Context, point: Point, subject: &Subject, content: &Value) -> Result<Verdict, GuardFailure> {
        let body = Ask {
            version: VERSION,
            guard: &self.cfg.name,
            point,
            caller: &subject.caller,
            method: subject.method.as_str(),
            item: Asked { kind: subject.kind_label(), name: &subject.item, upstream: subject.upstream() },
            content,
        };
        let mine = self.caller_share(&subject.caller);
        let work = async {
            let _mine = mine.acquire().await.map_err(|_| GuardFailure::ShuttingDown)?;
            let _permit = self.permits.acquire().await.map_err(|_| GuardFailure::ShuttingDown)?;
            let answer = match &self.cfg.kind {
                GuardKind::Webhook { url, headers, .. } => self.post(url, headers, &body).await?,
                GuardKind::Tool { upstream, tool } => call_tool(cx, upstream, tool, &body).await?,
                GuardKind::Builtin { .. } => return Err(GuardFailure::BuiltinAsked),
            };
            Ok(parse(&answer, point, content)?)
        };
        let answer =
            tokio::time::timeout(self.cfg.timeout, work).await.unwrap_or_else(|_| Err(GuardFailure::Timeout(self.cfg.timeout.as_millis())));
        self.release_share(&subject.caller, mine);
        answer
    }

    /// The semaphore of `caller`'s share of the slots.
    fn caller_share(&self, caller: &str) -> Arc<Semaphore> {
        let mut callers = mcpgate_protocol::sync::lock(&self.callers);
        callers.entry(caller.to_string()).or_insert_with(|| Arc::new(Semaphore::new(share(self.cfg.concurrency)))).clone()
    }

    /// Forgets `caller`'s share once no request of its is at the guard.
    fn release_share(&self, caller: &str, mine: Arc<Semaphore>) {
        drop(mine);
        let mut callers = mcpgate_protocol::sync::lock(&self.callers);
        if callers.get(caller).is_some_and(|s| Arc::strong_count(s) == 1) {
            callers.remove(caller);
        }
    }

    async fn post(
        &self,
        url: &http::Uri,
        headers: &[(http::HeaderName, http::HeaderValue)],
        body: &Ask<'_>,
    ) -> Result<Value, GuardFailure> {
        let client = self.client.as_ref().ok_or(GuardFailure::NoClient)?;
        let bytes = serde_json::to_vec(body)?;
        let mut req = http::Request::post(url.clone()).header(http::header::CONTENT_TYPE, "application/json");
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let req = req.body(Full::new(Bytes::from(bytes)))?;
        let resp = client.request(req).await.map_err(GuardFailure::Unreachable)?;
        let status = resp.status();
        if !status.is_success() {
            return Err(GuardFailure::Status(status));
        }
        let body = Limited::new(resp.into_body(), MAX_ANSWER).collect().await.map_err(GuardFailure::Unread)?;
        serde_json::from_slice(&body.to_bytes()).map_err(GuardFailure::NotJson)
    }
}

/// A tool guard's answer: the tool is called with the request as its arguments, on the
/// gateway's own behalf, and answers the contract in `structuredContent` or as JSON text.
async fn call_tool(cx: &Context, upstream: &str, tool: &str, body: &Ask<'_>) -> Result<Value, GuardFailure> {
    let up = cx
        .upstreams
        .iter()
        .find(|u| u.id() == upstream && !u.is_retired())
        .ok_or_else(|| GuardFailure::UpstreamGone(upstream.to_string()))?;
    let mut params = RawObject::default();
    params.set_json("name", tool)?;
    params.set_json("arguments", body)?;
    let mut call = Call::internal("tools/call", params, serde_json::Map::new(), None);
    call.name = Some(tool.to_string());
    let raw = match up.call(call).await.outcome().await {
        Outcome::Result(raw) => raw,
        Outcome::Error(e) => return Err(GuardFailure::ToolFailed(e.message)),
        Outcome::UpstreamError(_) => return Err(GuardFailure::ToolRpcError),
    };
    let result: Value = serde_json::from_str(raw.get())?;
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(GuardFailure::ToolError);
    }
    if let Some(structured) = result.get("structuredContent").filter(|s| s.is_object()) {
        return Ok(structured.clone());
    }
    let text = result["content"].as_array().and_then(|c| c.iter().find_map(|b| b["text"].as_str())).ok_or(GuardFailure::NoVerdict)?;
    serde_json::from_str(text).map_err(GuardFailure::ToolNotJson)
}
