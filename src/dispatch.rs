//! The era-free request pipeline. Edge adapters (modern HTTP, stdio) turn wire messages into a
//! [`Request`]; a [`Service`] answers it with a [`Reply`]. For the gateway, this module owns the
//! request's admission (the caller's own rate limit, its personal upstreams made ready), the one
//! table from method to handler, and what every handler is served from ([`Served`]: one snapshot
//! of the configuration, the authenticator and the caller's view); with the answers the handlers
//! share (a rate limit's or a quota's 429, a tool's text result). The order of the decisions on
//! one item is not here: each method's chain of steps declares it (`chain`), and `forward` is
//! its last step.

mod bare;
mod chain;
mod code;
mod confirm;
mod consent;
pub mod decide;
mod discover;
mod envelope;
mod forward;
mod guarded;
mod listen;
mod lists;
mod readers;
mod refusal;
pub mod request_state;
mod search;
mod secrets;
mod skills;
mod tasks;

use crate::auth::Principal;
use crate::gateway::Gateway;
use crate::hub::{Filter, Subscription, UriSet};
use mcpgate_model::catalog::Kind;
use mcpgate_protocol::Method;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::meta::RequestMeta;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::Reply;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// One client request, whatever the wire it came on.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: Json,
    pub method: mcpgate_protocol::Method,
    /// The params, `_meta` included, kept raw.
    pub params: RawObject,
    pub meta: RequestMeta,
    /// `Mcp-Param-*` headers as `(lower-cased name, raw value)` when the request came over modern
    /// HTTP, where they must be checked against the body; `None` on transports without headers.
    pub param_headers: Option<Vec<(String, Vec<u8>)>>,
    /// Who is calling (authenticated at the edge).
    pub caller: Arc<Principal>,
    /// The legacy session the request came in (`None`: a modern client): an upstream that speaks
    /// the client's era is spoken to in it, in a session of the client's own.
    pub legacy: Option<Arc<mcpgate_protocol::meta::LegacySession>>,
    /// The HTTP request's id (`x-request-id`, the client's or the edge's), which the audit line
    /// names; `None` on stdio.
    pub request_id: Option<http::HeaderValue>,
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Anything that answers MCP requests: the gateway, or the built-in demo server.
pub trait Service: Send + Sync + 'static {
    fn handle(&self, req: Request) -> BoxFuture<'_, Reply>;

    /// Whether `req` may go on to [`Self::handle`] (the request path's admission step): `Err` is
    /// its answer instead.
    fn admit<'a>(&'a self, _req: &'a Request) -> BoxFuture<'a, Result<(), RpcError>> {
        Box::pin(async { Ok(()) })
    }

    /// Whether `req` may go on at once, with nothing [`Self::admit`] would wait for or check
    /// (a fast path: `false` always sends it through `admit`).
    fn admits_at_once(&self, _req: &Request) -> bool {
        false
    }

    /// Whether `/readyz` should report ready.
    fn ready(&self) -> bool {
        true
    }

    /// A change subscription for `caller` (a legacy GET stream or stdio connection), following
    /// the resource URIs in `uris`; `None` when the service announces no changes.
    /// `Err` when the caller may not open another one.
    fn subscribe(&self, _caller: Arc<Principal>, _filter: Filter, _uris: UriSet) -> Result<Option<Subscription>, RpcError> {
        Ok(None)
    }

    /// A legacy session's followed URIs changed.
    fn follows_changed(&self) {}

    /// A legacy session ended (its client sent DELETE, or its stdio connection closed): what was
    /// kept for it upstream is released.
    fn session_ended(&self, _sid: &str) {}

    /// The metrics text (`/metrics`), with what the edge knows; `None`: no metrics.
    fn metrics(&self, _edge: crate::telemetry::EdgeStats) -> Option<String> {
        None
    }

    /// Where the request path records each request's duration; `None`: nowhere.
    fn operation_metrics(&self) -> Option<Arc<crate::telemetry::Metrics>> {
        None
    }

    /// The authenticator in effect (a reload may replace it); `None`: use the listener's own.
    /// Whether a virtual server (`[[endpoint]]`) lives at `path`.
    fn serves_endpoint(&self, _path: &str) -> bool {
        false
    }

    fn authenticator(&self) -> Option<Arc<crate::auth::Authenticator>> {
        None
    }

    /// How long a client may take to answer an input request.
    fn input_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(300)
    }

    /// Cancelled when the service starts shutting down (open streams end then).
    fn closing(&self) -> Option<tokio_util::sync::CancellationToken> {
        None
    }
}

/// What one request is served from, taken once when it starts: the configuration, the
/// authenticator and the caller's view of the catalogue (the root's or its endpoint's), so that
/// every step of the request sees the same ones (a reload or a rebuild in between changes the
/// next request, not this one) and none derives them again. Everything else of the gateway is
/// reached through it (it dereferences to the [`Gateway`]).
pub struct Served<'a> {
    gw: &'a Gateway,
    pub config: Arc<mcpgate_config::Config>,
    pub auth: Arc<crate::auth::Authenticator>,
    pub view: Arc<mcpgate_model::catalog::Catalog>,
}

impl<'a> Served<'a> {
    pub fn new(gw: &'a Gateway, caller: &Principal) -> Self {
        Served { gw, config: gw.config(), auth: gw.auth(), view: gw.catalog_for(caller) }
    }
}

impl std::ops::Deref for Served<'_> {
    type Target = Gateway;

    fn deref(&self) -> &Gateway {
        self.gw
    }
}

/// The handlers that wait, by what they are.
enum Waits {
    /// The declared chain of the method (`chain::serve`).
    Chain,
    /// Code mode's `tools/call`.
    Code,
    /// Tool-search mode's `tools/call`.
    Search,
}

/// HTTP 429 with `Retry-After` (whole seconds, at least 1) and the wait in `data.retryAfterMs`.
pub fn rate_limited(who: &str, wait: std::time::Duration) -> RpcError {
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    RpcError::new(RATE_LIMITED, format!("Rate limit exceeded for {who}: retry in {secs} s"))
        .with_data(serde_json::json!({ "retryAfterMs": wait.as_millis() as u64 }))
        .with_status(http::StatusCode::TOO_MANY_REQUESTS)
        .with_header("retry-after", secs.to_string())
}

/// HTTP 429 for a call past its caller's quota: the limit, when it resets (RFC 3339 and
/// `Retry-After`), answered like a rate limit so clients back off the same way.
pub fn quota_exceeded(who: &str, tool: &str, r: &crate::usage::Refusal) -> RpcError {
    let secs = r.wait.as_secs().max(1);
    let resets = humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(r.resets_at));
    RpcError::new(
        RATE_LIMITED,
        format!(
            "Quota exceeded for {who} on {tool}: {} per {}; it resets at {resets} (in {secs} s)",
            mcpgate_protocol::text::count(r.count, "call", "calls"),
            r.window
        ),
    )
    .with_data(serde_json::json!({ "retryAfterMs": secs * 1000, "quota": { "limit": r.count, "window": r.window, "resetsAt": resets.to_string() } }))
    .with_status(http::StatusCode::TOO_MANY_REQUESTS)
    .with_header("retry-after", secs.to_string())
}

/// The application error code of a rate-limited request (outside the JSON-RPC reserved range).
pub const RATE_LIMITED: i64 = 429;

/// A `CallToolResult` the gateway answers itself, with one text block (`is_error`: a failure the
/// model can read and act on).
pub(crate) fn tool_text(text: &str, is_error: bool) -> mcpgate_protocol::reply::Outcome {
    let result = serde_json::json!({ "resultType": "complete", "content": [{ "type": "text", "text": text }], "isError": is_error });
    match Json::to_json(&result) {
        Ok(raw) => mcpgate_protocol::reply::Outcome::Result(raw),
        Err(e) => mcpgate_protocol::reply::Outcome::Error(RpcError::internal(e.to_string())),
    }
}

/// Takes the gateway's own answer `key` out of a retry's `inputResponses` (it is not the
/// upstream's to see); the member goes when nothing else is left in it.
pub(crate) fn strip_input_response(params: &mut RawObject, key: &str) {
    let Some(Ok(mut responses)) = params.parse::<RawObject>("inputResponses") else { return };
    if responses.remove(key).is_none() {
        return;
    }
    if responses.0.is_empty() || params.set_json("inputResponses", &responses).is_err() {
        params.remove("inputResponses");
    }
}

impl Service for Gateway {
    fn admit<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<(), RpcError>> {
        Box::pin(async move {
            // A client that connects at once sees every upstream that is ready by then.
            self.wait_ready().await;
            if let Some(rate) = req.caller.rate
                && let Err(wait) = self.limiter.check(&format!("caller:{}", req.caller.id), rate).await
            {
                self.metrics.refused(crate::telemetry::reasons::Refused::RateLimited);
                return Err(rate_limited(&req.caller.id, wait));
            }
            // And the upstreams it reaches with its own token, where it has one.
            self.prepare_personal(&req.caller).await;
            Ok(())
        })
    }

    fn admits_at_once(&self, req: &Request) -> bool {
        // Ready, no rate of its own, and no upstream of its own to prepare: `admit` would only
        // have said yes.
        req.caller.rate.is_none() && self.personal.is_none() && self.is_ready()
    }

    fn handle(&self, req: Request) -> BoxFuture<'_, Reply> {
        // A token exchange made for this request exchanges the JWT it carried.
        let subject = req.caller.subject_token.clone();
        let work = async move {
            let offered = |cap: &str| self.offers(cap);
            let served = Served::new(self, &req.caller);
            let cx = &served;
            // Every handler that waits is awaited at one point (one slot in this future), and
            // the rare, large ones (a program's run, a search) are boxed: every request's future
            // stays the size of the plain call path's.
            let waits = match &req.method {
                Method::Discover => return discover::discover(cx, &req),
                Method::ToolsList if code::active(cx, &req.caller) => return code::list(cx, &req),
                Method::ToolsList if search::active(cx, &req.caller) => return search::list(cx, &req),
                Method::ToolsList => return lists::list(cx, &req, Kind::Tool),
                Method::ToolsCall if code::active(cx, &req.caller) => Waits::Code,
                Method::ToolsCall if search::active(cx, &req.caller) => Waits::Search,
                Method::ToolsCall => Waits::Chain,
                Method::PromptsList if offered("prompts") => return lists::list(cx, &req, Kind::Prompt),
                Method::PromptsGet if offered("prompts") => Waits::Chain,
                Method::ResourcesList if offered("resources") => return lists::list(cx, &req, Kind::Resource),
                Method::ResourceTemplatesList if offered("resources") => return lists::list(cx, &req, Kind::Template),
                Method::ResourcesRead if offered("resources") => Waits::Chain,
                Method::SkillsList if skills::offered(cx, &req) => return lists::list(cx, &req, Kind::Skill),
                Method::SkillsGet | Method::ResourcesDirectoryRead if skills::offered(cx, &req) => Waits::Chain,
                Method::CompletionComplete if offered("completions") => Waits::Chain,
                Method::SubscriptionsListen => return listen::listen(cx, req),
                Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => Waits::Chain,
                // Only legacy sessions reach this (the modern edge refuses the method).
                Method::ResourcesSubscribe if offered("resources") => return listen::follow(cx, &req),
                other => return Reply::error(RpcError::method_not_found(other.as_str())),
            };
            match waits {
                Waits::Chain => chain::serve(cx, req).await,
                Waits::Code => Box::pin(code::call(cx, req)).await,
                Waits::Search => Box::pin(search::call(cx, req)).await,
            }
        };
        // Boxed once, as it is: another async block around it would be a second copy.
        match subject {
            Some(own) => Box::pin(crate::gateway::REQUEST_SUBJECT.scope(own, work)),
            None => Box::pin(work),
        }
    }

    fn ready(&self) -> bool {
        self.is_ready() && self.upstreams_ready()
    }

    fn subscribe(&self, caller: Arc<Principal>, filter: Filter, uris: UriSet) -> Result<Option<Subscription>, RpcError> {
        let who = format!("{} (change streams)", caller.id);
        match self.hub.subscribe(caller, filter, uris) {
            Some(s) => Ok(Some(s)),
            None => Err(rate_limited(&who, std::time::Duration::from_secs(5))),
        }
    }

    fn follows_changed(&self) {
        self.hub.follows.notify_one();
    }

    fn session_ended(&self, sid: &str) {
        for up in self.upstreams().iter() {
            up.end_client_session(sid);
        }
    }

    fn closing(&self) -> Option<tokio_util::sync::CancellationToken> {
        Some(self.closing.clone())
    }

    fn input_timeout(&self) -> std::time::Duration {
        self.config().server.input_timeout
    }

    fn authenticator(&self) -> Option<Arc<crate::auth::Authenticator>> {
        Some(self.auth())
    }

    fn serves_endpoint(&self, path: &str) -> bool {
        self.config().endpoints.iter().any(|e| e.path == path)
    }

    fn metrics(&self, edge: crate::telemetry::EdgeStats) -> Option<String> {
        let cat = self.catalog();
        let snapshot = crate::telemetry::Snapshot {
            upstreams: self
                .upstreams()
                .iter()
                .map(|u| (u.id().to_string(), (!u.is_retired()).then(|| u.state().status == crate::upstream::Status::Ready)))
                .collect(),
            catalog: Kind::ALL.iter().map(|k| (k.list_key(), cat.section(*k).entries.len())).collect(),
            streams: self.hub.len(),
            cluster: self.cluster.as_ref().map(|c| c.stats()),
            audit_dropped: crate::audit::export::dropped(),
        };
        Some(self.metrics.render(&snapshot, edge))
    }

    fn operation_metrics(&self) -> Option<Arc<crate::telemetry::Metrics>> {
        Some(self.metrics.clone())
    }
}
