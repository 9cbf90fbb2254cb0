//! One handle per configured upstream MCP server, whatever its transport and era. Three layers:
//! the transports (`http`, `stdio`) only move messages; the era adapters (`modern`, `legacy`)
//! turn a [`Call`] into the wire form of the upstream's era (the legacy one also owns the
//! handshake, sessions, renewal and the GET stream); [`Upstream::call`] picks the adapter once,
//! from what the probe (`probe`) learnt. Every request is built by `outbound`, every unasked
//! message is handled by `inbound`, and every failure is an [`UpstreamError`] turned into a
//! client-visible error in one place.

mod affinity;
mod child;
mod era;
mod error;
mod http;
mod inbound;
mod legacy;
mod lines;
mod modern;
mod oauth;
pub mod openapi;
mod outbound;
mod parked;
pub mod pool;
mod probe;
pub mod program;
mod progress;
pub mod runner;
mod sse;
mod stdio;

pub use self::error::{CONSENT_NEEDED, UpstreamError};
pub use self::outbound::{Renewal, UserToken};

use self::era::{Affine, Era, Partner};
use self::outbound::{Envelope, McpHeaders};
use arc_swap::ArcSwap;
use mcpgate_config::{TransportConfig, UpstreamConfig};
use mcpgate_model::catalog::Kind;
use mcpgate_net::http::HttpClients;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::{Outcome, Reply};
use mcpgate_protocol::tasks::Background;
use mcpgate_protocol::{MODERN_VERSION, is_legacy_version, jsonrpc, keys};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// One request for an upstream, before transport encoding.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    /// The params without `_meta`.
    pub params: RawObject,
    /// The `_meta` to send; the era adapter stamps or strips the protocol fields.
    pub meta: Map<String, Value>,
    /// The value `Mcp-Name` mirrors (tool or prompt name, resource URI), unencoded.
    pub name: Option<String>,
    /// `Mcp-Param-*` headers, already encoded.
    pub param_headers: Vec<(String, String)>,
    /// The `[[caller]]` ids of the caller this request is made for (per-caller credentials).
    pub on_behalf_of: Vec<String>,
    /// The pool endpoint to use; `None` means the default one.
    pub endpoint: Option<usize>,
    /// The requests (`elicitation/create`, ...) the upstream may send the caller during this call,
    /// yielded as [`mcpgate_protocol::reply::Event::Ask`]; any other request of the upstream's is refused.
    pub accepts_input: Vec<String>,
    /// The legacy session of the client the call is made for (`None`: a modern client or the
    /// gateway itself): an upstream that speaks the legacy era is spoken to in a session of the
    /// client's own.
    pub client: Option<Arc<mcpgate_protocol::meta::LegacySession>>,
    /// The caller asked for log messages (a legacy call's `_meta` loses the level, not the wish).
    pub logs: bool,
}

impl Call {
    /// A request the gateway makes on its own behalf, with `meta` as its `_meta`.
    pub fn internal(method: &str, params: RawObject, meta: Map<String, Value>, endpoint: Option<usize>) -> Call {
        Call {
            method: method.into(),
            params,
            meta,
            name: None,
            param_headers: Vec::new(),
            on_behalf_of: Vec::new(),
            endpoint,
            accepts_input: Vec::new(),
            client: None,
            logs: false,
        }
    }

    /// The JSON-RPC request line for upstream id `id`.
    fn encode(&self, id: u64) -> Result<Vec<u8>, UpstreamError> {
        // Written in one pass: the params are not copied to set their `_meta`.
        let meta = (!self.meta.is_empty()).then_some(&self.meta);
        jsonrpc::request_message_obj(id, &self.method, &self.params, meta)
            .map_err(|e| UpstreamError::Protocol(format!("cannot encode _meta: {e}")))
    }

    /// The caller's trace context, from `_meta`.
    fn traceparent(&self) -> Option<String> {
        self.meta.get("traceparent").and_then(Value::as_str).map(str::to_string)
    }

    fn mcp_headers(&self) -> McpHeaders {
        McpHeaders { method: self.method.clone(), name: self.name.clone(), params: self.param_headers.clone() }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub enum Status {
    #[default]
    Pending,
    Ready,
    /// Not serving, and why (the last failure).
    Down(UpstreamError),
}

/// What the gateway last learnt about an upstream.
#[derive(Debug, Clone, Default)]
pub struct UpstreamState {
    pub status: Status,
    pub version: Option<String>,
    pub capabilities: Option<Value>,
    pub instructions: Option<String>,
    pub server_info: Option<Value>,
    /// The newest legacy version it offers besides `version` (a dual-era upstream), or `version`
    /// itself for a legacy one: what a legacy client's own session with it speaks.
    pub legacy_version: Option<String>,
    /// The protocol versions it said it supports (`server/discover`'s `supportedVersions`; a
    /// legacy one: the version its handshake agreed on).
    pub supported_versions: Vec<String>,
    /// The upstream's items per kind, in [`Kind::ALL`] order.
    pub lists: [Arc<Vec<Box<RawValue>>>; Kind::COUNT],
    /// Per kind, the smallest `ttlMs` of the list's pages (0 when a page gave none); `None` for a
    /// list it was not asked for.
    pub ttl_ms: [Option<u64>; Kind::COUNT],
    /// The smallest `ttlMs` its lists gave, if any did (what its re-listing schedule follows).
    pub ttl_hint: Option<u64>,
    /// Per kind, whether a page of the list was not `cacheScope: "public"`.
    pub private: [bool; Kind::COUNT],
    /// When the lists were requested (their `ttlMs` counts from then).
    pub listed_at: Option<std::time::Instant>,
    /// How many lists the last refresh could not re-read, so the previous ones are served.
    pub stale_lists: u32,
    pub latency: Option<Duration>,
    /// Set when the page limit cut a list short.
    pub truncated: bool,
    /// Pool endpoints that do not serve the same tools as the default one, and how.
    pub pool_problems: Vec<String>,
}

impl UpstreamState {
    pub fn items(&self, kind: Kind) -> &[Box<RawValue>] {
        &self.lists[kind as usize]
    }

    pub fn has_items(&self) -> bool {
        self.lists.iter().any(|l| !l.is_empty())
    }

    /// Whether the upstream declared a server capability (`tools`, `prompts`, ...).
    pub fn offers(&self, capability: &str) -> bool {
        self.capabilities.as_ref().is_some_and(|c| c.get(capability).is_some_and(|v| !v.is_null()))
    }

    /// Whether a capability declares a flag (`tools.listChanged`, `resources.subscribe`).
    pub fn declares(&self, capability: &str, flag: &str) -> bool {
        self.capabilities.as_ref().and_then(|c| c.get(capability)).and_then(|c| c.get(flag)).and_then(Value::as_bool) == Some(true)
    }

    /// Whether the upstream announces changes to its tool list (so polling can be rare).
    pub fn announces_changes(&self) -> bool {
        self.declares("tools", "listChanged")
    }

    pub fn is_modern(&self) -> bool {
        self.version.as_deref().is_some_and(|v| !is_legacy_version(v))
    }
}

enum Transport {
    Http(Box<pool::Pool>),
    Stdio(Box<stdio::StdioTransport>),
    /// A REST API answered in process (`openapi`).
    Rest(Box<openapi::RestTransport>),
}

pub struct Upstream {
    pub index: usize,
    pub cfg: UpstreamConfig,
    transport: Transport,
    state: ArcSwap<UpstreamState>,
    next_id: AtomicU64,
    /// Signalled when the upstream says one of its lists changed.
    pub changed: Arc<tokio::sync::Notify>,
    /// The gateway's legacy sessions, one slot per endpoint.
    sessions: legacy::Sessions,
    /// Legacy clients' own legacy sessions.
    affinity: affinity::Affinity,
    /// The resource URIs (upstream form) some client follows, and a signal when they change.
    followed: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// The URIs the legacy upstream's current session is subscribed to.
    subscribed: std::sync::Mutex<std::collections::BTreeSet<String>>,
    refollow: tokio::sync::Notify,
    /// Signalled after every refresh.
    refreshed: tokio::sync::Notify,
    inbound: Arc<inbound::Inbound>,
    /// Calls of a legacy upstream that wait for their caller's input.
    parked: Arc<parked::Parked>,
    /// How long a parked call waits.
    input_timeout: Duration,
    tasks: Background,
    /// Removed from the configuration by a reload.
    retired: std::sync::atomic::AtomicBool,
    /// Consecutive calls that did not reach the upstream.
    failures: AtomicU64,
    /// What it was made from, to make its `twin`.
    shared: Shared,
    updated: tokio::sync::mpsc::Sender<String>,
    /// Where a modern stdio upstream's legacy clients go (decided on the first one).
    partner: tokio::sync::OnceCell<Partner>,
    /// A modern HTTP upstream refused the legacy handshake: legacy clients are bridged.
    legacy_refused: std::sync::atomic::AtomicBool,
}

/// How many calls in a row may fail to reach an upstream before it is probed out of turn.
const FAILURES_BEFORE_PROBE: u64 = 3;

/// What every upstream handle shares with the gateway.
#[derive(Clone)]
pub struct Shared {
    pub client: HttpClients,
    pub tasks: Background,
    /// How long a call of a legacy upstream that asked for input waits for the caller.
    pub input_timeout: Duration,
}

/// A message put on the transport: the reply as soon as its head arrived, the session id the
/// upstream sent with it, and the deadline it runs under.
struct Sent {
    reply: Reply,
    session: Option<::http::HeaderValue>,
    deadline: Instant,
}

impl Upstream {
    /// A handle; resource updates the upstream announces go to `updated` (its URI form).
    pub fn new(index: usize, cfg: UpstreamConfig, shared: Shared, updated: tokio::sync::mpsc::Sender<String>) -> Upstream {
        Upstream::with_signal(index, cfg, shared, updated, Arc::new(tokio::sync::Notify::new()), None)
    }

    /// One caller's own handle of a `user_auth` upstream: every request carries that caller's
    /// token (per-user identity); it is probed, listed and followed like any upstream.
    pub fn personal(
        index: usize,
        cfg: UpstreamConfig,
        shared: Shared,
        updated: tokio::sync::mpsc::Sender<String>,
        token: Arc<dyn UserToken>,
    ) -> Upstream {
        Upstream::with_signal(index, cfg, shared, updated, Arc::new(tokio::sync::Notify::new()), Some(token))
    }

    /// [`Self::new`], signalling list changes on `changed`.
    fn with_signal(
        index: usize,
        cfg: UpstreamConfig,
        shared: Shared,
        updated: tokio::sync::mpsc::Sender<String>,
        changed: Arc<tokio::sync::Notify>,
        user: Option<Arc<dyn UserToken>>,
    ) -> Upstream {
        let kept = (shared.clone(), updated.clone());
        let Shared { client, tasks, input_timeout } = shared;
        let inbound = Arc::new(inbound::Inbound::new(&cfg.id, changed.clone(), updated));
        // One token for the whole upstream, shared by its endpoints.
        let credential = match (user, &cfg.oauth) {
            (Some(u), _) => outbound::Credential::User(u),
            (None, Some(o)) => outbound::Credential::Client(Arc::new(oauth::OAuthClient::new(o.clone(), client.detached()))),
            (None, None) => outbound::Credential::Headers,
        };
        let transport = match &cfg.transport {
            TransportConfig::Http { endpoints } => {
                let inbound = inbound.clone();
                let endpoint = |url: &::http::Uri| {
                    let out = outbound::Outbound::new(
                        url.clone(),
                        cfg.headers.clone(),
                        cfg.caller_headers.clone(),
                        credential.clone(),
                        cfg.timeout,
                    );
                    http::HttpTransport::new(
                        &cfg.id,
                        out,
                        client.clone(),
                        cfg.max_message_bytes,
                        cfg.timeout,
                        inbound.clone(),
                        tasks.clone(),
                    )
                };
                Transport::Http(Box::new(pool::Pool::new(endpoints.iter().map(|e| (e.clone(), endpoint(&e.url))).collect())))
            }
            TransportConfig::Stdio { command, env, cwd, sandbox } => Transport::Stdio(Box::new(stdio::StdioTransport::new(
                &cfg,
                command.clone(),
                env.clone(),
                cwd.clone(),
                sandbox.as_deref().cloned(),
                inbound.clone(),
                tasks.clone(),
            ))),
            TransportConfig::OpenApi(o) => {
                // The base URL is where calls go; without one, each call names its own URL.
                let url = o.base_url.clone().unwrap_or_else(|| ::http::Uri::from_static("http://base-url.invalid/"));
                let out = outbound::Outbound::new(url, cfg.headers.clone(), cfg.caller_headers.clone(), credential, cfg.timeout);
                Transport::Rest(Box::new(openapi::RestTransport::new(
                    &cfg.id,
                    (**o).clone(),
                    out,
                    client.clone(),
                    cfg.max_message_bytes,
                    cfg.timeout,
                )))
            }
        };
        let slots = match &transport {
            Transport::Http(p) => p.len(),
            Transport::Stdio(_) | Transport::Rest(_) => 1,
        };
        Upstream {
            index,
            cfg,
            transport,
            state: ArcSwap::from_pointee(UpstreamState::default()),
            next_id: AtomicU64::new(1),
            changed,
            sessions: legacy::Sessions::new(slots),
            affinity: Default::default(),
            followed: Default::default(),
            subscribed: Default::default(),
            refollow: tokio::sync::Notify::new(),
            refreshed: tokio::sync::Notify::new(),
            inbound,
            parked: Arc::default(),
            input_timeout,
            tasks,
            retired: Default::default(),
            failures: AtomicU64::new(0),
            shared: kept.0,
            updated: kept.1,
            partner: tokio::sync::OnceCell::new(),
            legacy_refused: Default::default(),
        }
    }

    pub fn id(&self) -> &str {
        &self.cfg.id
    }

    /// The owner of this upstream's background work.
    pub fn tasks(&self) -> &Background {
        &self.tasks
    }

    /// Whether a call is in flight to a stdio child (an idle sweep leaves it running).
    pub fn busy(&self) -> bool {
        matches!(&self.transport, Transport::Stdio(s) if s.busy())
    }

    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    /// Takes the upstream out of service (a reload removed or replaced it): its items leave the
    /// catalogue at the next rebuild and no new call reaches it. Calls in flight may finish:
    /// only after its deadline are its loops and streams stopped (a stdio child with them).
    pub fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        self.close_all_sessions();
        let mut st = (*self.state()).clone();
        st.status = Status::Down(UpstreamError::Removed);
        self.state.store(Arc::new(st));
        let (tasks, parked, grace) = (self.tasks.clone(), self.parked.clone(), self.cfg.timeout + Duration::from_secs(1));
        self.tasks.spawn(async move {
            tokio::time::sleep(grace).await;
            parked.clear();
            tasks.stop();
        });
    }

    /// Calls that failed in a row (reset by a success).
    pub fn consecutive_failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    pub fn state(&self) -> Arc<UpstreamState> {
        self.state.load_full()
    }

    /// Sets the resource URIs (upstream form) clients follow: a modern upstream gets them on its
    /// listen stream, a legacy one by `resources/subscribe` and `resources/unsubscribe`.
    pub fn follow(&self, uris: std::collections::BTreeSet<String>) {
        let previous = {
            let mut f = mcpgate_protocol::sync::lock(&self.followed);
            if *f == uris {
                return;
            }
            std::mem::replace(&mut *f, uris.clone())
        };
        tracing::debug!(upstream = %self.id(), before = previous.len(), now = uris.len(), "followed resources changed");
        self.refollow.notify_one();
    }

    /// Keeps the upstream telling the gateway about changes, in its era: a modern upstream's
    /// listen stream, a legacy upstream's resource subscriptions. Runs until its owner stops it.
    pub async fn keep_following(self: Arc<Self>) {
        loop {
            let st = self.state();
            if st.status == Status::Ready && st.is_modern() {
                self.clone().keep_listening().await;
            } else if st.status == Status::Ready {
                self.sync_legacy_subscriptions().await;
            }
            tokio::select! {
                _ = self.refreshed.notified() => {}
                _ = self.refollow.notified() => {}
            }
        }
    }

    /// Sends one request in the upstream's era; the reply is JSON or a stream exactly as the
    /// upstream answered, under the upstream's deadline.
    /// (Boxed, with its type spelt out: a legacy client's call may go to the `twin`, another
    /// upstream handle, whose probe makes calls.)
    pub fn call(&self, call: Call) -> std::pin::Pin<Box<dyn std::future::Future<Output = Reply> + Send + '_>> {
        Box::pin(async move {
            // The modern path inline; the others boxed, so that a call's future stays the size
            // of the path nearly every call takes.
            let sent = match self.era_for(&call) {
                Era::Modern(v) => self.call_modern(call, &v).await,
                Era::Legacy(v) => Box::pin(self.call_legacy(call, &v)).await,
                Era::Affine(v) => match Box::pin(self.call_affine(call, v)).await {
                    Affine::Sent(sent) => sent,
                    Affine::Twin(reply) => return reply,
                },
            };
            match sent {
                Ok(reply) => {
                    self.failures.store(0, Ordering::Relaxed);
                    match reply {
                        // A single reply is mapped here, with the id borrowed.
                        Reply::Single(o) => Reply::Single(error::hop_error(self.id(), o)),
                        stream => {
                            let id = self.id().to_string();
                            stream.map_outcome(move |o| error::hop_error(&id, o))
                        }
                    }
                }
                Err(e) => {
                    self.failed(&e);
                    Reply::error(e.into_rpc(self.id()))
                }
            }
        })
    }

    /// Passive outlier detection: consecutive calls that could not reach the upstream at all
    /// make the gateway probe it at once; if the probe fails too, the upstream is down (its
    /// items leave the lists) until a later probe, on the backoff, finds it back.
    fn failed(&self, e: &UpstreamError) {
        if !matches!(e, UpstreamError::Unreachable(_) | UpstreamError::Timeout { .. } | UpstreamError::Status { status: 500..=599 }) {
            return;
        }
        if self.failures.fetch_add(1, Ordering::Relaxed) + 1 == FAILURES_BEFORE_PROBE {
            tracing::warn!(upstream = %self.id(), failures = FAILURES_BEFORE_PROBE, "calls keep failing; probing the upstream");
            self.inbound.channel_lost();
        }
    }

    /// Puts `call` on the transport with `env` around it.
    async fn exchange(&self, call: &Call, env: Envelope) -> Result<Sent, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.cfg.timeout;
        let (reply, session) = match &self.transport {
            Transport::Http(p) => {
                let (body, progress) = match call.meta.contains_key(keys::PROGRESS_TOKEN) {
                    true => {
                        let mut call = call.clone();
                        let client = progress::swap(&mut call.meta, id);
                        (call.encode(id)?, client)
                    }
                    false => (call.encode(id)?, None),
                };
                let relay = http::Relay { want_id: id, progress, accepts: call.accepts_input.clone() };
                let posted = p.at(call.endpoint).post(body, relay, &env, deadline).await?;
                (posted.reply, posted.session)
            }
            // The other transports boxed, so that this future is the size of the HTTP path's.
            Transport::Stdio(t) => (Box::pin(t.send(id, call, deadline)).await?, None),
            Transport::Rest(t) => {
                let params: Map<String, Value> = serde_json::from_str(call.params.to_json().get()).unwrap_or_default();
                (Box::pin(t.send(&call.method, &params, &env, deadline)).await?, None)
            }
        };
        Ok(Sent { reply, session, deadline })
    }

    /// [`Self::exchange`] for a client: a stream ends with the timeout error at the deadline,
    /// and a stream whose first event is final becomes a single reply.
    async fn exchange_reply(&self, call: &Call, env: Envelope) -> Result<Reply, UpstreamError> {
        let sent = self.exchange(call, env).await?;
        let reply = match sent.reply {
            Reply::Stream(s) => {
                let late = UpstreamError::Timeout { after: self.cfg.timeout }.into_rpc(self.id());
                let s = s.with_deadline(sent.deadline, late);
                // Requests the caller can answer stay in the stream for the era adapter.
                Reply::Stream(if call.accepts_input.is_empty() { s } else { s.with_asks() })
            }
            single => single,
        };
        Ok(reply.settle().await)
    }

    /// [`Self::exchange`] for the gateway's own requests: waits for the final outcome, with a
    /// missed deadline reported as [`UpstreamError::Timeout`].
    async fn exchange_outcome(&self, call: &Call, env: Envelope) -> Result<(Outcome, Option<::http::HeaderValue>), UpstreamError> {
        let sent = self.exchange(call, env).await?;
        match tokio::time::timeout_at(sent.deadline, sent.reply.outcome()).await {
            Ok(o) => Ok((o, sent.session)),
            Err(_) => Err(UpstreamError::Timeout { after: self.cfg.timeout }),
        }
    }

    /// The pool endpoint for a call's mirrored values (`None`: a single-endpoint upstream).
    pub fn route(&self, values: &[(String, String)]) -> Result<Option<usize>, pool::NoRoute> {
        match &self.transport {
            Transport::Http(p) if p.len() > 1 => p.route(values).map(Some),
            _ => Ok(None),
        }
    }

    /// The URL of each endpoint (for `mcpgate check`); empty for stdio.
    pub fn endpoints(&self) -> Vec<String> {
        match &self.transport {
            Transport::Http(p) => (0..p.len()).map(|i| p.url(i)).collect(),
            Transport::Stdio(_) => Vec::new(),
            Transport::Rest(t) => t.loaded().map(|l| vec![l.base.to_string()]).unwrap_or_default(),
        }
    }

    /// A request the gateway makes on its own behalf (lists), in the upstream's era.
    async fn internal(&self, method: &str, params: RawObject, endpoint: Option<usize>) -> Result<Json, Outcome> {
        match self.call(Call::internal(method, params, gateway_meta(), endpoint)).await.outcome().await {
            Outcome::Result(r) => Ok(r),
            other => Err(other),
        }
    }
}

/// The `_meta` of requests the gateway makes for itself.
pub fn gateway_meta() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(keys::PROTOCOL_VERSION.into(), MODERN_VERSION.into());
    // Lists are read for every client: a server that registers its MCP Apps' tools only for
    // clients that render them must list them to the gateway, which relays them.
    let own = mcpgate_protocol::extensions::gateway_declares(mcpgate_protocol::extensions::Era::Modern);
    m.insert(keys::CLIENT_CAPABILITIES.into(), json!({ "extensions": own }));
    m.insert(keys::CLIENT_INFO.into(), json!({ "name": "mcpgate", "version": env!("CARGO_PKG_VERSION") }));
    m
}
