//! One handle per configured upstream MCP server, whatever its transport: [`Upstream::call`]
//! sends a request (fresh upstream id, `_meta` stamped with the upstream's version, `Mcp-*`
//! headers built from the upstream's own schema) under the upstream's deadline, and
//! [`Upstream::refresh`] probes it with `server/discover` and reads its whole tool list. Transport
//! details live in `http` and `stdio`; errors always name the upstream.

mod http;
mod sse;
mod stdio;

pub use self::http::{HttpClient, new_http_client};

use crate::catalog::Kind;
use crate::config::{TransportConfig, UpstreamConfig};
use crate::flow::{Outcome, Reply};
use crate::protocol::errors::{self, RpcError};
use crate::protocol::jsonrpc;
use crate::protocol::rawobj::RawObject;
use crate::protocol::{MODERN_VERSION, keys};
use arc_swap::ArcSwap;
use serde::Deserialize;
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
}

impl Call {
    /// The JSON-RPC request line for upstream id `id`.
    fn encode(&self, id: u64) -> Result<Vec<u8>, RpcError> {
        let mut params = self.params.clone();
        params.set_json("_meta", &self.meta).map_err(|e| RpcError::internal(format!("cannot encode _meta: {e}")))?;
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
    Http(Box<self::http::HttpTransport>),
    Stdio(stdio::StdioTransport),
}

pub struct Upstream {
    pub index: usize,
    pub cfg: UpstreamConfig,
    transport: Transport,
    state: ArcSwap<UpstreamState>,
    next_id: AtomicU64,
}

pub fn unavailable(id: &str, reason: impl std::fmt::Display) -> RpcError {
    RpcError::internal(format!("Upstream '{id}' is unavailable: {reason}")).with_data(json!({ "upstream": id }))
}

pub fn timed_out(id: &str, after: Duration) -> RpcError {
    RpcError::internal(format!("Upstream '{id}' did not answer within {}", humantime::format_duration(after)))
        .with_data(json!({ "upstream": id }))
}

impl Upstream {
    pub fn new(index: usize, cfg: UpstreamConfig, client: HttpClient) -> Upstream {
        let transport = match &cfg.transport {
            TransportConfig::Http { url } => Transport::Http(Box::new(self::http::HttpTransport::new(&cfg, url.clone(), client))),
            TransportConfig::Stdio { command, env, cwd } => {
                Transport::Stdio(stdio::StdioTransport::new(&cfg, command.clone(), env.clone(), cwd.clone()))
            }
        };
        Upstream { index, cfg, transport, state: ArcSwap::from_pointee(UpstreamState::default()), next_id: AtomicU64::new(1) }
    }

    pub fn id(&self) -> &str {
        &self.cfg.id
    }

    pub fn state(&self) -> Arc<UpstreamState> {
        self.state.load_full()
    }

    /// Sends one request; the reply is JSON or a stream exactly as the upstream answered.
    pub async fn call(&self, mut call: Call) -> Reply {
        let version = self.state.load().version.clone().unwrap_or_else(|| MODERN_VERSION.to_string());
        call.meta.insert(keys::PROTOCOL_VERSION.into(), Value::String(version.clone()));
        call.meta.entry(keys::CLIENT_CAPABILITIES).or_insert_with(|| json!({}));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.cfg.timeout;
        let reply = match &self.transport {
            Transport::Http(t) => t.send(id, &call, &version, deadline).await,
            Transport::Stdio(t) => t.send(id, &call, deadline).await,
        };
        let reply = match reply {
            Reply::Stream(s) => Reply::Stream(s.with_deadline(deadline, timed_out(self.id(), self.cfg.timeout))),
            single => single,
        };
        reply.settle().await
    }

    /// A request the gateway makes on its own behalf (probe, lists), with its own `_meta`.
    async fn internal(&self, method: &str, params: RawObject) -> Result<Box<RawValue>, Outcome> {
        let call = Call { method: method.into(), params, meta: gateway_meta(), name: None, param_headers: Vec::new() };
        match self.call(call).await.outcome().await {
            Outcome::Result(r) => Ok(r),
            other => Err(other),
        }
    }

    /// Probes the upstream and reloads its tool list; the state is updated either way.
    pub async fn refresh(&self) -> Result<(), String> {
        let started = Instant::now();
        let result = self.probe_and_list().await;
        let mut next = (*self.state.load_full()).clone();
        match &result {
            Ok(fresh) => {
                next = fresh.clone();
                next.latency = Some(started.elapsed());
                next.status = Status::Ready;
            }
            Err(reason) => {
                next.status = Status::Down(reason.clone());
                next.latency = None;
            }
        }
        self.state.store(Arc::new(next));
        result.map(|_| ())
    }

    async fn probe_and_list(&self) -> Result<UpstreamState, String> {
        let discover = match self.internal("server/discover", RawObject::default()).await {
            Ok(raw) => raw,
            Err(o) => return Err(describe_probe_failure(o)),
        };
        let d: DiscoverResult =
            serde_json::from_str(discover.get()).map_err(|e| format!("server/discover returned an unexpected result: {e}"))?;
        if !d.supported_versions.iter().any(|v| v == MODERN_VERSION) {
            return Err(format!("it supports protocol versions {:?}, not {MODERN_VERSION}", d.supported_versions));
        }
        let server_info = d.meta.as_ref().and_then(|m| m.get(keys::SERVER_INFO)).cloned().or(d.server_info);
        let mut state = UpstreamState {
            version: Some(MODERN_VERSION.into()),
            capabilities: Some(d.capabilities.clone()),
            instructions: d.instructions,
            server_info,
            ..Default::default()
        };
        state.ttl_ms = u64::MAX;
        for (kind, capability) in
            [(Kind::Tool, "tools"), (Kind::Prompt, "prompts"), (Kind::Resource, "resources"), (Kind::Template, "resources")]
        {
            if !state.offers(capability) {
                continue;
            }
            match self.list_all(kind, &mut state).await {
                Ok(()) => {}
                // Without its tools an upstream is not usable; a broken secondary list only
                // leaves that list empty.
                Err(e) if kind == Kind::Tool => return Err(e),
                Err(e) => tracing::warn!(upstream = %self.id(), error = %e, "{} not served", kind.list_key()),
            }
        }
        if state.ttl_ms == u64::MAX {
            state.ttl_ms = 0;
        }
        Ok(state)
    }

    /// Reads one whole list, following `nextCursor` up to the configured page limit.
    async fn list_all(&self, kind: Kind, state: &mut UpstreamState) -> Result<(), String> {
        let method = match kind {
            Kind::Tool => "tools/list",
            Kind::Prompt => "prompts/list",
            Kind::Resource => "resources/list",
            Kind::Template => "resources/templates/list",
        };
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 0.. {
            if page == self.cfg.max_pages {
                tracing::warn!(upstream = %self.id(), pages = page, method, "list page limit reached; the rest of the list is not served (raise max_pages)");
                state.truncated = true;
                break;
            }
            let mut params = RawObject::default();
            if let Some(c) = &cursor {
                params.set_json("cursor", c).map_err(|e| e.to_string())?;
            }
            let raw = self.internal(method, params).await.map_err(|o| format!("{method} failed: {}", describe_outcome(&o)))?;
            let page: RawObject = serde_json::from_str(raw.get()).map_err(|e| format!("{method} returned an unexpected result: {e}"))?;
            match page.parse::<Vec<Box<RawValue>>>(kind.list_key()) {
                Some(Ok(list)) => items.extend(list),
                Some(Err(e)) => {
                    return Err(format!("{method} returned an invalid \"{}\": {e}", kind.list_key()));
                }
                None => {}
            }
            let ttl = page.parse::<i64>("ttlMs").and_then(Result::ok).unwrap_or(0).max(0) as u64;
            state.ttl_ms = state.ttl_ms.min(ttl);
            state.private |= page.parse::<String>("cacheScope").and_then(Result::ok).as_deref() != Some("public");
            match page.parse::<Option<String>>("nextCursor") {
                Some(Ok(Some(c))) => cursor = Some(c),
                _ => break,
            }
        }
        state.lists[kind as usize] = Arc::new(items);
        Ok(())
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

fn describe_outcome(o: &Outcome) -> String {
    match o {
        Outcome::Result(_) => "ok".into(),
        Outcome::Error(e) => e.message.clone(),
        Outcome::UpstreamError(raw) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(v) => format!("error {} {}", v["code"], v["message"].as_str().unwrap_or("")),
            Err(_) => raw.get().chars().take(200).collect(),
        },
    }
}

fn describe_probe_failure(o: Outcome) -> String {
    if let Outcome::UpstreamError(raw) = &o
        && let Ok(v) = serde_json::from_str::<Value>(raw.get())
    {
        let code = errors::modernise_rc_code(v["code"].as_i64().unwrap_or(0));
        if code == errors::UNSUPPORTED_VERSION {
            return format!("it does not support {MODERN_VERSION} (it supports {})", v["data"]["supported"]);
        }
        if code == errors::METHOD_NOT_FOUND || code == errors::INVALID_PARAMS || code == -32000 {
            return format!("it looks like a legacy (pre-{MODERN_VERSION}) server: server/discover answered {}", describe_outcome(&o));
        }
    }
    format!("server/discover failed: {}", describe_outcome(&o))
}

#[derive(Deserialize)]
struct DiscoverResult {
    #[serde(rename = "supportedVersions", default)]
    supported_versions: Vec<String>,
    #[serde(default)]
    capabilities: Value,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(rename = "serverInfo", default)]
    server_info: Option<Value>,
    #[serde(rename = "_meta", default)]
    meta: Option<Map<String, Value>>,
}
