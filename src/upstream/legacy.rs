//! The legacy-era adapter (2025-11-25, 2025-06-18, 2025-03-26) on the upstream side. It owns
//! everything a legacy upstream needs and a modern one does not: the `initialize` handshake and
//! its `notifications/initialized`, the session (`Mcp-Session-Id`, one per pool endpoint),
//! renewing it once when the upstream forgets it (single-flight), the standalone GET stream that
//! carries `list_changed` and pings, the handshake a restarted stdio process must replay, and the
//! modernisation of legacy results (`resultType`, read cache hints). Requests lose the modern
//! `_meta` fields and headers.

use super::error::describe;
use super::outbound::{Envelope, version_header};
use super::probe::{Announcement, Identity};
use super::stdio::Preamble;
use super::{Call, Transport, Upstream, UpstreamError};
use http::HeaderValue;
use mcpgate_protocol::extensions::{self, Era};
use mcpgate_protocol::meta::LegacySession;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::{Outcome, Reply};
use mcpgate_protocol::sync::lock;
use mcpgate_protocol::tasks::Backoff;
use mcpgate_protocol::{LEGACY_VERSIONS, is_legacy_version, keys};
use serde_json::{Map, Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a new session waits for its standalone GET stream to be accepted before it is used.
const GET_STREAM_WAIT: Duration = Duration::from_secs(2);

/// The legacy session state of each endpoint.
pub(super) struct Sessions {
    slots: Vec<Slot>,
    /// Held while a session is (re)initialized, so concurrent calls do it once.
    renewal: tokio::sync::Mutex<()>,
}

/// One legacy upstream session: the gateway's own on an endpoint, or one opened for a legacy
/// client (`affinity`).
#[derive(Default)]
pub(super) struct Slot {
    /// The `Mcp-Session-Id` the upstream gave us, if any (stateless servers give none).
    id: Arc<Mutex<Option<HeaderValue>>>,
    /// The handshake was done.
    initialized: AtomicBool,
    /// The version the handshake negotiated.
    version: Mutex<Option<String>>,
    /// The `[[caller]]` rules the session was opened for (a legacy client's own session uses its
    /// caller's credentials, `caller_headers`, for the handshake, its GET stream and its end).
    rules: Mutex<Vec<String>>,
    /// Set when the session is closed for good (a client's own session that ended): no call opens
    /// it again, and its GET stream stops.
    ended: tokio_util::sync::CancellationToken,
}

impl Sessions {
    pub(super) fn new(endpoints: usize) -> Self {
        Sessions { slots: (0..endpoints.max(1)).map(|_| Slot::default()).collect(), renewal: tokio::sync::Mutex::new(()) }
    }

    fn slot(&self, i: usize) -> &Slot {
        &self.slots[i.min(self.slots.len() - 1)]
    }
}

impl Slot {
    pub(super) fn id(&self) -> Option<HeaderValue> {
        lock(&self.id).clone()
    }

    pub(super) fn version(&self) -> Option<String> {
        lock(&self.version).clone()
    }

    pub(super) fn rules(&self) -> Vec<String> {
        lock(&self.rules).clone()
    }

    /// Closes the session for good (see [`Slot::ended`]).
    pub(super) fn end(&self) {
        self.ended.cancel();
        self.clear();
    }

    pub(super) fn clear(&self) {
        *lock(&self.id) = None;
        self.initialized.store(false, Ordering::SeqCst);
    }

    fn is_open(&self) -> bool {
        self.initialized.load(Ordering::SeqCst)
    }
}

/// What the gateway says in an `initialize`: the version it asks for, the capabilities it
/// declares and who it says it is.
pub(super) struct Hello {
    version: String,
    capabilities: Value,
    info: Value,
    /// The `[[caller]]` rules whose credentials the session is opened with.
    on_behalf_of: Vec<String>,
}

impl Hello {
    /// The gateway's own session, which serves every client: it declares what the gateway relays
    /// (elicitation and sampling, asked during a call, reach its caller; MCP Apps' UI resources;
    /// Agent Skills).
    /// Not `roots`: a server may ask for roots outside any call (many do right after the
    /// handshake) and keep the answer for the whole session, which here is everyone's.
    fn gateway() -> Hello {
        let own = extensions::gateway_declares(Era::Legacy);
        Hello {
            version: LEGACY_VERSIONS[0].into(),
            capabilities: json!({ "elicitation": {}, "sampling": {}, "extensions": own }),
            info: json!({ "name": "mcpgate", "version": env!("CARGO_PKG_VERSION") }),
            on_behalf_of: Vec::new(),
        }
    }

    /// A legacy client's own session: its version, the capabilities it declared (tasks aside,
    /// which the gateway serves itself) and its client info, as if it spoke to the upstream. What
    /// the client sent is taken only in the shapes `initialize` allows (objects), so a client
    /// cannot make the upstream refuse the handshake for everyone.
    pub(super) fn client(c: &LegacySession, on_behalf_of: &[String], upstream: Option<&Map<String, Value>>) -> Hello {
        let mut capabilities = match &c.capabilities {
            Value::Object(m) => Value::Object(m.clone()),
            _ => json!({}),
        };
        if let Some(caps) = capabilities.as_object_mut() {
            caps.remove("tasks");
        }
        // Its extensions as the one table says a legacy upstream session may hear of them.
        extensions::filter_client_capabilities(&mut capabilities, upstream, Era::Legacy);
        let info = match &c.info {
            Value::Object(m) if m.get("name").is_some_and(Value::is_string) && m.get("version").is_some_and(Value::is_string) => {
                c.info.clone()
            }
            _ => json!({ "name": "mcpgate", "version": env!("CARGO_PKG_VERSION") }),
        };
        Hello { version: c.version.clone(), capabilities, info, on_behalf_of: on_behalf_of.to_vec() }
    }

    fn params(&self) -> Result<RawObject, UpstreamError> {
        let mut params = RawObject::default();
        let fields =
            [("protocolVersion", json!(self.version)), ("capabilities", self.capabilities.clone()), ("clientInfo", self.info.clone())];
        for (k, v) in fields {
            params.set_json(k, &v).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        }
        Ok(params)
    }
}

impl Upstream {
    /// The gateway's own session slot of a call's endpoint.
    fn slot(&self, endpoint: Option<usize>) -> &Slot {
        let i = match &self.transport {
            Transport::Http(p) => p.index(endpoint),
            Transport::Stdio(_) | Transport::Rest(_) => 0,
        };
        self.sessions.slot(i)
    }

    /// Whether the endpoint has a live session (a stdio one: a running, initialized process).
    pub(super) fn has_session(&self, endpoint: Option<usize>) -> bool {
        match &self.transport {
            Transport::Http(_) => self.slot(endpoint).id().is_some(),
            Transport::Stdio(t) => self.slot(endpoint).is_open() && t.is_live(),
            Transport::Rest(_) => false,
        }
    }

    fn envelope(call: &Call, session: Option<HeaderValue>, version: &str) -> Envelope {
        Envelope {
            version: version_header(version),
            session,
            mcp: None,
            on_behalf_of: call.on_behalf_of.clone(),
            traceparent: call.traceparent(),
        }
    }

    /// Sends a call in the legacy wire form, in the session it belongs to: a legacy client's own
    /// one on an HTTP upstream (`affinity`), else the gateway's. The session is opened on first
    /// use and renewed once if the upstream has forgotten it; results gain the modern fields they
    /// lack.
    pub(super) async fn call_legacy(&self, mut call: Call, version: &str) -> Result<Reply, UpstreamError> {
        // What the caller can answer if the upstream asks during the call (see `parked`).
        call.accepts_input = super::parked::answerable(&call.meta);
        call.logs |= call.meta.contains_key(keys::LOG_LEVEL);
        for key in [keys::PROTOCOL_VERSION, keys::CLIENT_CAPABILITIES, keys::CLIENT_INFO, keys::LOG_LEVEL] {
            call.meta.remove(key);
        }
        let method = call.method.clone();
        if let Some(id) = super::parked::parked_id(&call.params) {
            let reply = self.resume(&id, &call.params, &call.on_behalf_of).await?;
            return Ok(reply.map_outcome(move |o| modernise(&method, o)));
        }
        let reply = match (&call.client, &self.transport) {
            (Some(client), Transport::Http(p)) => {
                let own = self.own_session(&client.sid, p.index(call.endpoint));
                let st = self.state();
                let declared = st.capabilities.as_ref().and_then(|c| c.get("extensions")).and_then(Value::as_object);
                let hello = Hello::client(client, &call.on_behalf_of, declared);
                self.call_in(&call, &own.slot, &hello, &own.opening).await?
            }
            _ => {
                let hello = Hello { version: version.into(), ..Hello::gateway() };
                self.call_in(&call, self.slot(call.endpoint), &hello, &self.sessions.renewal).await?
            }
        };
        Ok(reply.map_outcome(move |o| modernise(&method, o)))
    }

    /// [`Self::call_legacy`] in one session; `renewal` makes its (re)initialization single-flight.
    async fn call_in(&self, call: &Call, slot: &Slot, hello: &Hello, renewal: &tokio::sync::Mutex<()>) -> Result<Reply, UpstreamError> {
        if !slot.is_open() {
            // A session is opened on first use; one handshake at a time, and none if another
            // call got there first.
            let _renewing = renewal.lock().await;
            if !slot.is_open() {
                self.open(slot, call.endpoint, hello).await.map_err(|e| UpstreamError::Handshake(Box::new(e)))?;
            }
        }
        let sent_with = slot.id();
        let version = slot.version().unwrap_or_else(|| hello.version.clone());
        let reply = match self.exchange_reply(call, Self::envelope(call, sent_with.clone(), &version)).await {
            Err(UpstreamError::SessionExpired) if sent_with.is_some() => {
                let _renewing = renewal.lock().await;
                // Renew only if no concurrent call has already replaced the session it used.
                if slot.id() == sent_with {
                    tracing::info!(upstream = %self.id(), "upstream session expired; initializing a new one");
                    slot.clear();
                    self.open(slot, call.endpoint, hello).await.map_err(|e| UpstreamError::Handshake(Box::new(e)))?;
                }
                let renewed = slot.id();
                let reply = self.exchange_reply(call, Self::envelope(call, renewed.clone(), &version)).await?;
                (reply, renewed)
            }
            other => (other?, sent_with),
        };
        let (reply, used) = reply;
        // A parked call answers in the session its question came in.
        Ok(if call.accepts_input.is_empty() { reply } else { self.watch(reply, call.endpoint, used, version).settle().await })
    }

    /// The `initialize` handshake of the gateway's own session on an endpoint (also used to renew
    /// an expired session).
    pub(super) async fn handshake(&self, endpoint: Option<usize>) -> Result<Identity, UpstreamError> {
        self.open(self.slot(endpoint), endpoint, &Hello::gateway()).await
    }

    /// The `initialize` handshake of one session, then `notifications/initialized`.
    async fn open(&self, slot: &Slot, endpoint: Option<usize>, hello: &Hello) -> Result<Identity, UpstreamError> {
        if slot.ended.is_cancelled() {
            return Err(UpstreamError::Unreachable("the session was closed".into()));
        }
        let mut call = Call::internal("initialize", hello.params()?, Map::new(), endpoint);
        call.on_behalf_of = hello.on_behalf_of.clone();
        let env = Envelope { on_behalf_of: hello.on_behalf_of.clone(), ..Envelope::default() };
        let (outcome, session) = self.exchange_outcome(&call, env).await?;
        let raw = match outcome {
            Outcome::Result(r) => r,
            Outcome::UpstreamError(e) => {
                let v: Value = serde_json::from_str(e.get()).unwrap_or(Value::Null);
                let message = format!("initialize: {}", v["message"].as_str().unwrap_or(e.get()));
                return Err(UpstreamError::Refused { code: v["code"].clone(), message });
            }
            Outcome::Error(e) => return Err(UpstreamError::Protocol(e.message)),
        };
        let r: Announcement = serde_json::from_str(raw.get())
            .map_err(|e| UpstreamError::Protocol(format!("initialize returned an unexpected result: {e}")))?;
        if !is_legacy_version(&r.protocol_version) {
            let message =
                format!("initialize answered with protocol version {:?}, which is not a legacy version mcpgate speaks", r.protocol_version);
            return Err(UpstreamError::Refused { code: Value::Null, message });
        }
        *lock(&slot.id) = session.clone();
        *lock(&slot.version) = Some(r.protocol_version.clone());
        *lock(&slot.rules) = hello.on_behalf_of.clone();
        let initialized = mcpgate_protocol::jsonrpc::bare_notification("notifications/initialized");
        let shared = std::ptr::eq(slot, self.slot(endpoint));
        match &self.transport {
            Transport::Http(p) => {
                let env = Self::envelope(&call, session.clone(), &r.protocol_version);
                p.at(endpoint).notify(initialized, &env).await?;
            }
            Transport::Stdio(t) => {
                t.write(initialized.clone()).await?;
                let request = mcpgate_protocol::jsonrpc::request_message(
                    "0",
                    "initialize",
                    &Hello { version: r.protocol_version.clone(), ..Hello::gateway() }.params()?.to_json(),
                );
                t.set_preamble(Some(Preamble { request, then: initialized }));
            }
            Transport::Rest(_) => return Err(UpstreamError::Protocol("a REST API has no legacy handshake".into())),
        }
        slot.initialized.store(true, Ordering::SeqCst);
        if shared {
            // A new session has no resource subscriptions yet: they are made again.
            lock(&self.subscribed).clear();
            self.refollow.notify_one();
        }
        if session.is_some() {
            // Requests the upstream sends outside any call's stream (a `roots/list` an SDK server
            // sends without a related request) go to the standalone stream, and a server drops
            // them while none is open: the session is used once its stream is (or could not be).
            let opened = self.start_get_stream(slot, endpoint, r.protocol_version.clone());
            if let Some(opened) = opened {
                let _ = tokio::time::timeout(GET_STREAM_WAIT.min(self.cfg.timeout), opened).await;
            }
        }
        tracing::info!(upstream = %self.id(), version = %r.protocol_version, own = !shared, "legacy upstream: initialized a session");
        Ok(r.into_identity())
    }

    /// Keeps the standalone GET stream of a session open, to hear `list_changed` and answer
    /// pings, for as long as the session lasts; reconnects with a backoff. An upstream without
    /// one (405), a session it no longer knows (404, 400) or refused credentials (401, 403) end it.
    fn start_get_stream(&self, slot: &Slot, endpoint: Option<usize>, version: String) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let Transport::Http(pool) = &self.transport else { return None };
        let transport = pool.at(endpoint).clone();
        let started = slot.id()?;
        let (opened_tx, opened_rx) = tokio::sync::oneshot::channel();
        let mut opened = Some(opened_tx);
        let env = Envelope {
            version: version_header(&version),
            session: Some(started.clone()),
            mcp: None,
            on_behalf_of: slot.rules(),
            traceparent: None,
        };
        let upstream = self.id().to_string();
        let current = slot.id.clone();
        let ended = slot.ended.clone();
        let inbound = self.inbound.clone();
        self.tasks.spawn(async move {
            let mut backoff = Backoff::steady(Duration::from_secs(1), Duration::from_secs(60));
            loop {
                if lock(&current).as_ref() != Some(&started) {
                    return;
                }
                let pumped = tokio::select! {
                    p = transport.pump_get(&env, opened.take()) => p,
                    _ = ended.cancelled() => return,
                };
                match pumped {
                    Ok(()) => backoff.reset(),
                    Err(UpstreamError::Status { status: 405 | 404 | 400 | 401 | 403 }) => return,
                    Err(e) => tracing::debug!(%upstream, error = %e, "upstream GET stream dropped"),
                }
                if lock(&current).as_ref() != Some(&started) {
                    return;
                }
                // Changes may have been missed, or the upstream may be gone: re-read its lists.
                inbound.channel_lost();
                tokio::time::sleep(backoff.next_wait()).await;
            }
        });
        Some(opened_rx)
    }
}

impl Upstream {
    /// Brings the legacy session's resource subscriptions in line with the followed URIs, when the
    /// upstream supports them.
    pub(super) async fn sync_legacy_subscriptions(&self) {
        if !self.state().declares("resources", "subscribe") {
            return;
        }
        let want = lock(&self.followed).clone();
        let have = lock(&self.subscribed).clone();
        for (method, uri) in
            want.difference(&have).map(|u| ("resources/subscribe", u)).chain(have.difference(&want).map(|u| ("resources/unsubscribe", u)))
        {
            let mut params = RawObject::default();
            if params.set_json("uri", uri).is_err() {
                continue;
            }
            match self.internal(method, params, None).await {
                Ok(_) => {
                    let mut s = lock(&self.subscribed);
                    if method == "resources/subscribe" {
                        s.insert(uri.clone());
                    } else {
                        s.remove(uri);
                    }
                }
                Err(o) => tracing::warn!(upstream = %self.id(), %uri, error = %describe(&o), "{method} failed"),
            }
        }
    }
}

/// Gives a legacy result the fields modern clients rely on: `resultType`, and for a read the
/// cache hints (`ttlMs: 0`, `cacheScope: "private"`: a legacy server promises nothing).
fn modernise(method: &str, o: Outcome) -> Outcome {
    let Outcome::Result(raw) = o else { return o };
    let Ok(mut obj) = RawObject::from_json(&raw) else { return Outcome::Result(raw) };
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
    Outcome::Result(if changed { obj.to_json() } else { raw })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clients_own_handshake_takes_only_well_formed_declarations() {
        let c = |capabilities: Value, info: Value| LegacySession { sid: "s".into(), version: "2025-06-18".into(), capabilities, info };
        let declared =
            json!({ "roots": {}, "tasks": {}, "extensions": { "com.example/unknown": {}, mcpgate_protocol::TASKS_EXTENSION: {} } });
        let h = Hello::client(&c(declared, json!({ "name": "ide", "version": "1" })), &["alice".into()], None);
        assert_eq!(h.capabilities, json!({ "roots": {} }), "tasks are the gateway's to serve, unknown extensions are never declared");
        let ui = json!({ "extensions": { mcpgate_protocol::UI_EXTENSION: {} } });
        assert_eq!(Hello::client(&c(ui.clone(), json!(null)), &[], None).capabilities, ui, "MCP Apps pass in both eras");
        assert_eq!(h.info["name"], "ide");
        assert_eq!((h.version.as_str(), h.on_behalf_of.as_slice()), ("2025-06-18", &["alice".to_string()][..]));
        let h = Hello::client(&c(Value::Null, json!(42)), &[], None);
        assert_eq!(h.capabilities, json!({}));
        assert_eq!(h.info["name"], "mcpgate", "a malformed clientInfo is not sent on");
        assert!(Hello::gateway().capabilities.get("roots").is_none(), "the shared session declares no roots");
    }

    #[test]
    fn legacy_results_gain_modern_fields_without_losing_their_own() {
        let raw = mcpgate_protocol::json::Json::from_string(r#"{"contents":[]}"#.into()).unwrap();
        let Outcome::Result(r) = modernise("resources/read", Outcome::Result(raw)) else { panic!() };
        assert_eq!(r.get(), r#"{"contents":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}"#);
        assert_eq!(version_header("2025-03-26"), None);
        assert_eq!(version_header("2025-11-25").as_deref(), Some("2025-11-25"));
    }
}
