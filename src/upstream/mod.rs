//! One handle per configured upstream MCP server, whatever its transport: [`Upstream::call`]
//! sends a request (fresh upstream id, `_meta` stamped with the upstream's version, `Mcp-*`
//! headers built from the upstream's own schema) under the upstream's deadline, and
//! [`Upstream::refresh`] probes it (`server/discover`, falling back to the legacy `initialize`)
//! and reads its lists. Transport
//! details live in `http` and `stdio`; errors always name the upstream.

mod http;
mod oauth;
pub mod pool;
mod probe;
mod sse;
mod stdio;

pub use self::http::{HttpClient, new_http_client};

use crate::catalog::Kind;
use crate::config::{TransportConfig, UpstreamConfig};
use crate::flow::{Outcome, Reply};
use crate::protocol::errors::RpcError;
use crate::protocol::jsonrpc;
use crate::protocol::rawobj::RawObject;
use crate::protocol::{MODERN_VERSION, is_legacy_version, keys};
use arc_swap::ArcSwap;
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
    /// The `_meta` to send; its protocol version is set by [`Upstream::call`].
    pub meta: Map<String, Value>,
    /// The value `Mcp-Name` mirrors (tool or prompt name, resource URI), unencoded.
    pub name: Option<String>,
    /// `Mcp-Param-*` headers, already encoded.
    pub param_headers: Vec<(String, String)>,
    /// The `[[caller]]` ids of the caller this request is made for (per-caller credentials).
    pub on_behalf_of: Vec<String>,
    /// The pool endpoint to use; `None` means the default one.
    pub endpoint: Option<usize>,
}

impl Call {
    /// The JSON-RPC request line for upstream id `id`.
    fn encode(&self, id: u64) -> Result<Vec<u8>, RpcError> {
        let mut params = self.params.clone();
        if !self.meta.is_empty() {
            params.set_json("_meta", &self.meta).map_err(|e| RpcError::internal(format!("cannot encode _meta: {e}")))?;
        }
        let raw = params.to_raw().map_err(|e| RpcError::internal(format!("cannot encode params: {e}")))?;
        Ok(jsonrpc::request_message(&id.to_string(), &self.method, &raw))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Status {
    #[default]
    Pending,
    Ready,
    Down(String),
}

/// What the gateway last learnt about an upstream.
#[derive(Debug, Clone, Default)]
pub struct UpstreamState {
    pub status: Status,
    pub version: Option<String>,
    pub capabilities: Option<Value>,
    pub instructions: Option<String>,
    pub server_info: Option<Value>,
    /// The upstream's items per kind, in [`Kind::ALL`] order.
    pub lists: [Arc<Vec<Box<RawValue>>>; 4],
    /// The smallest `ttlMs` of its lists.
    pub ttl_ms: u64,
    /// Any of its lists was not `cacheScope: "public"`.
    pub private: bool,
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
}

enum Transport {
    Http(Box<pool::Pool>),
    Stdio(Box<stdio::StdioTransport>),
}

pub struct Upstream {
    pub index: usize,
    pub cfg: UpstreamConfig,
    transport: Transport,
    state: ArcSwap<UpstreamState>,
    next_id: AtomicU64,
    /// Signalled when the upstream says one of its lists changed.
    pub changed: Arc<tokio::sync::Notify>,
    /// Held while a legacy session is (re)initialized, so concurrent calls do it once.
    renewal: tokio::sync::Mutex<()>,
}

pub fn unavailable(id: &str, reason: impl std::fmt::Display) -> RpcError {
    RpcError::internal(format!("Upstream '{id}' is unavailable: {reason}")).with_data(json!({ "upstream": id }))
}

/// An upstream that answered HTTP `status` without a JSON-RPC response.
pub fn rejected(id: &str, status: u16, detail: impl std::fmt::Display) -> RpcError {
    RpcError::internal(format!("Upstream '{id}' refused the request: {detail}")).with_data(json!({ "upstream": id, "status": status }))
}

pub fn timed_out(id: &str, after: Duration) -> RpcError {
    RpcError::internal(format!("Upstream '{id}' did not answer within {}", humantime::format_duration(after)))
        .with_data(json!({ "upstream": id }))
}

impl Upstream {
    pub fn new(index: usize, cfg: UpstreamConfig, client: HttpClient) -> Upstream {
        let changed = Arc::new(tokio::sync::Notify::new());
        let transport = match &cfg.transport {
            TransportConfig::Http { endpoints } => {
                // One token for the whole upstream, shared by its endpoints.
                let oauth = cfg.oauth.clone().map(|o| Arc::new(oauth::OAuthClient::new(o, client.clone())));
                Transport::Http(Box::new(pool::Pool::new(
                    endpoints
                        .iter()
                        .map(|e| {
                            (e.clone(), self::http::HttpTransport::new(&cfg, e.url.clone(), client.clone(), changed.clone(), oauth.clone()))
                        })
                        .collect(),
                )))
            }
            TransportConfig::Stdio { command, env, cwd } => {
                Transport::Stdio(Box::new(stdio::StdioTransport::new(&cfg, command.clone(), env.clone(), cwd.clone(), changed.clone())))
            }
        };
        Upstream {
            index,
            cfg,
            transport,
            state: ArcSwap::from_pointee(UpstreamState::default()),
            next_id: AtomicU64::new(1),
            changed,
            renewal: tokio::sync::Mutex::new(()),
        }
    }

    pub fn id(&self) -> &str {
        &self.cfg.id
    }

    pub fn state(&self) -> Arc<UpstreamState> {
        self.state.load_full()
    }

    /// Sends one request; the reply is JSON or a stream exactly as the upstream answered. A
    /// legacy upstream gets the legacy wire form, its expired session is renewed transparently,
    /// and its results gain the modern fields they lack.
    pub async fn call(&self, call: Call) -> Reply {
        let version = self.state.load().version.clone();
        let reply = match version {
            Some(v) if is_legacy_version(&v) => self.call_legacy(call, &v).await,
            v => self.call_modern(call, v.as_deref().unwrap_or(MODERN_VERSION)).await,
        };
        let id = self.id().to_string();
        reply.map_outcome(move |o| hop_error(&id, o))
    }

    async fn call_modern(&self, mut call: Call, version: &str) -> Reply {
        call.meta.insert(keys::PROTOCOL_VERSION.into(), Value::String(version.into()));
        call.meta.entry(keys::CLIENT_CAPABILITIES).or_insert_with(|| json!({}));
        self.send(call, Wire { version: Some(version), modern: true }).await
    }

    async fn call_legacy(&self, mut call: Call, version: &str) -> Reply {
        for key in [keys::PROTOCOL_VERSION, keys::CLIENT_CAPABILITIES, keys::CLIENT_INFO, keys::LOG_LEVEL] {
            call.meta.remove(key);
        }
        let method = call.method.clone();
        let wire = legacy_wire(version);
        let initialized = |up: &Self| !matches!(&up.transport, Transport::Http(p) if !p.is_initialized(call.endpoint));
        if !initialized(self) {
            // A pool endpoint other than the probed one gets its session on first use; one
            // handshake at a time, and none if another call got there first.
            let _renewing = self.renewal.lock().await;
            if !initialized(self)
                && let Err(e) = self.handshake(call.endpoint).await
            {
                return Reply::error(unavailable(self.id(), format!("initializing a session failed: {e}")));
            }
        }
        let sent_with = self.session_of(call.endpoint);
        let mut reply = self.send(call.clone(), wire).await;
        if session_expired(&reply) && sent_with.is_some() {
            let _renewing = self.renewal.lock().await;
            // Renew only if no concurrent call has already replaced the session it used.
            if self.session_of(call.endpoint) == sent_with {
                tracing::info!(upstream = %self.id(), "upstream session expired; initializing a new one");
                self.clear_session(call.endpoint);
                if let Err(e) = self.handshake(call.endpoint).await {
                    return Reply::error(unavailable(self.id(), format!("re-initializing the session failed: {e}")));
                }
            }
            reply = self.send(call, wire).await;
        }
        reply.map_outcome(move |o| modernise(&method, o))
    }

    /// Sends on the transport under the upstream's deadline.
    async fn send(&self, call: Call, wire: Wire<'_>) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.cfg.timeout;
        let reply = match &self.transport {
            Transport::Http(t) => t.send(id, &call, wire, deadline).await,
            Transport::Stdio(t) => t.send(id, &call, deadline).await,
        };
        let reply = match reply {
            Reply::Stream(s) => Reply::Stream(s.with_deadline(deadline, timed_out(self.id(), self.cfg.timeout))),
            single => single,
        };
        reply.settle().await
    }

    /// Sends a notification (the legacy handshake's `notifications/initialized`).
    async fn notify(&self, method: &str, wire: Wire<'_>, endpoint: Option<usize>) -> Result<(), String> {
        match &self.transport {
            Transport::Http(t) => t.notify(method, wire, endpoint).await,
            Transport::Stdio(t) => t.notify(method).await,
        }
    }

    fn has_session(&self, endpoint: Option<usize>) -> bool {
        match &self.transport {
            Transport::Http(t) => t.has_session(endpoint),
            Transport::Stdio(t) => t.has_session(),
        }
    }

    /// The session id in use on an endpoint (HTTP upstreams), to tell renewals apart.
    fn session_of(&self, endpoint: Option<usize>) -> Option<::http::HeaderValue> {
        match &self.transport {
            Transport::Http(t) => t.session_of(endpoint),
            Transport::Stdio(_) => None,
        }
    }

    fn clear_session(&self, endpoint: Option<usize>) {
        if let Transport::Http(t) = &self.transport {
            t.clear_session(endpoint);
        }
    }

    /// The pool endpoint for a call's mirrored values (`None`: a single-endpoint upstream).
    pub fn route(&self, values: &[(String, String)]) -> Result<Option<usize>, String> {
        match &self.transport {
            Transport::Http(p) if p.len() > 1 => p.route(values).map(Some),
            _ => Ok(None),
        }
    }

    /// The number of endpoints and the URL of each (for `mcpgate check`).
    pub fn endpoints(&self) -> Vec<String> {
        match &self.transport {
            Transport::Http(p) => (0..p.len()).map(|i| p.url(i)).collect(),
            Transport::Stdio(_) => Vec::new(),
        }
    }

    /// A request the gateway makes on its own behalf (probe, lists), with its own `_meta`.
    async fn internal(&self, method: &str, params: RawObject, endpoint: Option<usize>) -> Result<Box<RawValue>, Outcome> {
        let call = Call {
            method: method.into(),
            params,
            meta: gateway_meta(),
            name: None,
            param_headers: Vec::new(),
            on_behalf_of: Vec::new(),
            endpoint,
        };
        match self.call(call).await.outcome().await {
            Outcome::Result(r) => Ok(r),
            other => Err(other),
        }
    }
}

/// How to put a request on the wire: the version header, and whether the modern `Mcp-*` headers
/// go with it.
#[derive(Debug, Clone, Copy)]
pub struct Wire<'a> {
    pub version: Option<&'a str>,
    pub modern: bool,
}

/// The wire form for a legacy upstream; 2025-03-26 predates the version header.
fn legacy_wire(version: &str) -> Wire<'_> {
    Wire { version: (version != "2025-03-26").then_some(version), modern: false }
}

/// An upstream's header-mismatch or version error is about the gateway's request, not the
/// client's: relayed as is, it would send the client re-listing or downgrading for nothing. It
/// becomes an internal error naming the upstream, with the original in `data`.
fn hop_error(id: &str, o: Outcome) -> Outcome {
    let Outcome::UpstreamError(raw) = &o else { return o };
    let Ok(v) = serde_json::from_str::<Value>(raw.get()) else { return o };
    let code = crate::protocol::errors::modernise_rc_code(v["code"].as_i64().unwrap_or(0));
    if code != crate::protocol::errors::HEADER_MISMATCH && code != crate::protocol::errors::UNSUPPORTED_VERSION {
        return o;
    }
    Outcome::Error(
        RpcError::internal(format!("Upstream '{id}' refused the gateway's request: {}", v["message"].as_str().unwrap_or("")))
            .with_data(json!({ "upstream": id, "upstreamError": { "code": v["code"], "message": v["message"] } })),
    )
}

/// Did a legacy upstream answer 404 (its session is gone)?
fn session_expired(reply: &Reply) -> bool {
    matches!(reply, Reply::Single(Outcome::Error(e)) if e.data.as_ref().and_then(|d| d.get("status")).and_then(Value::as_u64) == Some(404))
}

/// Gives a legacy result the fields modern clients rely on: `resultType`, and for a read the
/// cache hints (`ttlMs: 0`, `cacheScope: "private"`: a legacy server promises nothing).
fn modernise(method: &str, o: Outcome) -> Outcome {
    let Outcome::Result(raw) = o else { return o };
    let Ok(mut obj) = serde_json::from_str::<RawObject>(raw.get()) else { return Outcome::Result(raw) };
    let mut changed = false;
    if obj.get("resultType").is_none() {
        changed |= obj.set_json("resultType", "complete").is_ok();
    }
    if method == "resources/read" {
        if obj.get("ttlMs").is_none() {
            changed |= obj.set_json("ttlMs", &0).is_ok();
        }
        if obj.get("cacheScope").is_none() {
            changed |= obj.set_json("cacheScope", "private").is_ok();
        }
    }
    match changed.then(|| obj.to_raw()) {
        Some(Ok(r)) => Outcome::Result(r),
        _ => Outcome::Result(raw),
    }
}

/// The `_meta` of requests the gateway makes for itself.
pub fn gateway_meta() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(keys::PROTOCOL_VERSION.into(), MODERN_VERSION.into());
    m.insert(keys::CLIENT_CAPABILITIES.into(), json!({}));
    m.insert(keys::CLIENT_INFO.into(), json!({ "name": "mcpgate", "version": env!("CARGO_PKG_VERSION") }));
    m
}
