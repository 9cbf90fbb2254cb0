//! The legacy-era adapter (2025-11-25, 2025-06-18, 2025-03-26) at the edge: the `initialize`
//! handshake (answered from the service's own `server/discover`, so the core stays era-free),
//! sessions carried in sealed `Mcp-Session-Id` tokens that any replica with the same key can
//! open, the legacy-only methods (`ping`, `logging/setLevel`), the conversion of session requests
//! into internal requests, and the downgrade of modern results to legacy shapes.

use crate::auth::Principal;
use crate::dispatch::{Request, Service};
use crate::edge::era::LEGACY_VERSIONS;
use crate::hub::{Change, UriSet};
use http::{HeaderMap, StatusCode};
use mcpgate_model::token::Sealer;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::extensions::{self, Era};
use mcpgate_protocol::json::Json;
use mcpgate_protocol::jsonrpc;
use mcpgate_protocol::jsonrpc::Message;
use mcpgate_protocol::meta::{LOG_LEVELS, LegacySession, RequestMeta};
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::read;
use mcpgate_protocol::reply::{Outcome, Reply};
use mcpgate_protocol::sync::lock;
use mcpgate_protocol::{MODERN_VERSION, keys};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use std::time::Instant;

const SESSION_PURPOSE: &str = "mcpgate/legacy-session/v1";

/// What a legacy session token carries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    pub sid: String,
    /// The negotiated protocol version.
    pub v: String,
    #[serde(default)]
    pub caps: Value,
    #[serde(default)]
    pub info: Value,
    /// The caller that opened the session (id and matched rules): nobody else may use it.
    #[serde(default)]
    pub c: String,
    #[serde(default)]
    pub r: Vec<String>,
    /// The endpoint path it was opened on (`None`: the root): it is used there only.
    #[serde(default)]
    pub e: Option<String>,
}

/// Replica-wide legacy state: the token sealer and what a session may change after the
/// handshake (its log level), plus sessions ended with DELETE on this replica.
pub struct LegacyState {
    pub sealer: Arc<Sealer>,
    pub ttl: Duration,
    levels: Mutex<HashMap<String, (String, Instant)>>,
    ended: Mutex<HashMap<String, Instant>>,
    /// The resource URIs each session follows (`resources/subscribe`), shared with its GET stream.
    follows: Mutex<HashMap<String, (UriSet, Instant)>>,
    /// Input requests sent to sessions' clients that wait for their answers.
    pub waiting: Arc<crate::edge::era::bridge::Waiting>,
    /// With `[cluster]`: where sessions ended on any replica are recorded.
    cluster: Option<Arc<mcpgate_net::cluster::Cluster>>,
    /// Bumped whenever a session is ended (here or, learnt from Redis, elsewhere), so open GET
    /// streams check at once whether theirs was.
    ended_tx: tokio::sync::watch::Sender<u64>,
}

/// Keeps a per-session map bounded: entries older than the session TTL are dropped (scanned only
/// every 1024 insertions), and past `MAX_TRACKED` entries the oldest half goes.
fn prune<V>(map: &mut HashMap<String, V>, ttl: Duration, at: impl Fn(&V) -> Instant) {
    const MAX_TRACKED: usize = 100_000;
    if map.len() % 1024 == 1023 {
        map.retain(|_, v| at(v).elapsed() < ttl);
    }
    if map.len() >= MAX_TRACKED {
        let mut times: Vec<Instant> = map.values().map(&at).collect();
        times.sort();
        let cutoff = times[times.len() / 2];
        map.retain(|_, v| at(v) > cutoff);
    }
}

/// The version the gateway answers `initialize` with: the client's if supported, else the newest.
pub fn negotiate(requested: &str) -> &'static str {
    LEGACY_VERSIONS.iter().find(|v| **v == requested).copied().unwrap_or(LEGACY_VERSIONS[0])
}

impl LegacyState {
    pub fn new(sealer: Arc<Sealer>, ttl: Duration) -> Self {
        LegacyState {
            sealer,
            ttl,
            levels: Mutex::default(),
            ended: Mutex::default(),
            follows: Mutex::default(),
            waiting: Arc::default(),
            cluster: None,
            ended_tx: tokio::sync::watch::channel(0).0,
        }
    }

    /// Changes whenever a session ends.
    pub fn endings(&self) -> tokio::sync::watch::Receiver<u64> {
        self.ended_tx.subscribe()
    }

    /// Shares session endings with the other replicas through `cluster`'s Redis.
    pub fn with_cluster(mut self, cluster: Option<Arc<mcpgate_net::cluster::Cluster>>) -> Self {
        self.cluster = cluster;
        self
    }

    /// [`Self::session`], then, with `[cluster]`, whether another replica ended it. While Redis
    /// does not answer, `sessions_on_redis_error` decides: open trusts what this replica knows,
    /// closed answers 503.
    pub async fn session_checked(&self, headers: &HeaderMap, caller: &Principal) -> Result<Session, RpcError> {
        let session = self.session(headers, caller)?;
        let Some(cluster) = &self.cluster else { return Ok(session) };
        match cluster.session_ended(&session.sid).await {
            Ok(false) => Ok(session),
            Ok(true) => {
                self.mark_ended(&session.sid);
                Err(RpcError::invalid_request("Session ended: initialize a new session").with_status(StatusCode::NOT_FOUND))
            }
            Err(_) => {
                let mode = cluster.config().sessions_on_redis_error;
                cluster.failed(mode);
                match mode {
                    mcpgate_config::cluster::FailMode::Open => Ok(session),
                    mcpgate_config::cluster::FailMode::Closed => {
                        Err(RpcError::internal("cannot confirm the session: the shared session store does not answer; retry shortly")
                            .with_status(StatusCode::SERVICE_UNAVAILABLE))
                    }
                }
            }
        }
    }

    /// Ends `s` here and, with `[cluster]`, on every replica. The ending is recorded in Redis
    /// before this returns; when Redis does not answer, it holds on this replica only (logged).
    pub async fn end_everywhere(&self, s: &Session) {
        self.end(s);
        if let Some(cluster) = &self.cluster
            && let Err(e) = cluster.end_session(&s.sid, self.ttl).await
        {
            tracing::warn!(error = %e, "cluster: a legacy session ended on this replica only (Redis did not answer)");
        }
    }

    fn mark_ended(&self, sid: &str) {
        let new = {
            let mut e = lock(&self.ended);
            prune(&mut e, self.ttl, |at| *at);
            e.insert(sid.to_string(), Instant::now()).is_none()
        };
        if new {
            self.ended_tx.send_modify(|n| *n += 1);
        }
    }

    /// With `[cluster]`: learns every half second which sessions other replicas ended, so open
    /// GET streams of those sessions end here too, and `on_end` releases what this replica keeps
    /// for them (their own upstream sessions). Returns when `stop` is cancelled.
    pub async fn follow_endings(self: Arc<Self>, stop: tokio_util::sync::CancellationToken, on_end: Arc<dyn Fn(&str) + Send + Sync>) {
        let Some(cluster) = self.cluster.clone() else { return };
        let mut since = 0u64;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.cancelled() => return,
            }
            if let Ok((sids, newest)) = cluster.ended_since(since).await {
                for sid in sids {
                    self.mark_ended(&sid);
                    on_end(&sid);
                }
                since = newest;
            }
        }
    }

    /// The session named by `Mcp-Session-Id`, if `caller` opened it on the endpoint it comes
    /// through now: 400 when the header is missing, 404 when unknown or ended (another caller's
    /// session, or one opened on another endpoint, answers exactly like an unknown one).
    pub fn session(&self, headers: &HeaderMap, caller: &Principal) -> Result<Session, RpcError> {
        let Some(token) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) else {
            return Err(RpcError::invalid_request("Bad Request: missing Mcp-Session-Id header (send initialize first)"));
        };
        let session: Session = self
            .sealer
            .open(SESSION_PURPOSE, token, self.ttl)
            .ok_or_else(|| RpcError::invalid_request("Session not found: initialize a new session").with_status(StatusCode::NOT_FOUND))?;
        if session.c != caller.id || session.r != caller.rules || session.e.as_deref() != caller.endpoint.as_deref() {
            return Err(RpcError::invalid_request("Session not found: initialize a new session").with_status(StatusCode::NOT_FOUND));
        }
        if lock(&self.ended).contains_key(&session.sid) {
            return Err(RpcError::invalid_request("Session ended: initialize a new session").with_status(StatusCode::NOT_FOUND));
        }
        Ok(session)
    }

    pub fn is_ended(&self, sid: &str) -> bool {
        lock(&self.ended).contains_key(sid)
    }

    /// The URIs session `sid` follows on this replica.
    pub fn follows(&self, sid: &str) -> UriSet {
        let mut f = lock(&self.follows);
        prune(&mut f, self.ttl, |(_, at)| *at);
        f.entry(sid.to_string()).or_insert_with(|| (UriSet::default(), Instant::now())).0.clone()
    }

    pub fn end(&self, s: &Session) {
        if let Some((set, _)) = lock(&self.follows).remove(&s.sid) {
            lock(&set).clear();
        }
        // A session older than the TTL no longer opens anyway: `mark_ended` forgets those.
        self.mark_ended(&s.sid);
        {
            let mut l = lock(&self.levels);
            l.remove(&s.sid);
        }
    }

    fn level(&self, s: &Session) -> Option<String> {
        lock(&self.levels).get(&s.sid).map(|(l, _)| l.clone())
    }

    /// Answers `initialize`: the result, the session and its token for `Mcp-Session-Id`.
    pub async fn initialize(&self, svc: &dyn Service, msg: &Message, caller: Arc<Principal>) -> Result<(Json, Session, String), RpcError> {
        let (result, session) = handshake(svc, msg, self.sealer.random_id(), caller).await?;
        let token = self.sealer.seal(SESSION_PURPOSE, &session).map_err(|e| RpcError::internal(e.to_string()))?;
        Ok((result, session, token))
    }

    /// Handles a request of an established session (see [`convert`]); a new log level is kept
    /// for the session on this replica.
    pub fn request(&self, session: &Session, msg: Message, caller: Arc<Principal>) -> Result<Action, RpcError> {
        let level = self.level(session);
        let action = convert(session, level.as_deref(), msg, caller)?;
        if let Action::SetLevel(level) = &action {
            let mut l = lock(&self.levels);
            prune(&mut l, self.ttl, |(_, at)| *at);
            l.insert(session.sid.clone(), (level.clone(), Instant::now()));
        }
        Ok(action)
    }
}

/// The `initialize` handshake, answered from the service's own `server/discover`.
pub async fn handshake(svc: &dyn Service, msg: &Message, sid: String, caller: Arc<Principal>) -> Result<(Json, Session), RpcError> {
    let params: Value = msg.params.as_ref().and_then(|p| serde_json::from_str(p.get()).ok()).unwrap_or(Value::Null);
    let requested =
        params["protocolVersion"].as_str().ok_or_else(|| RpcError::invalid_params("initialize needs params.protocolVersion"))?;
    let version = negotiate(requested);
    let session = Session {
        sid,
        v: version.to_string(),
        caps: params["capabilities"].clone(),
        info: params["clientInfo"].clone(),
        c: caller.id.clone(),
        r: caller.rules.clone(),
        e: caller.endpoint.as_deref().map(str::to_string),
    };
    let discover = internal(svc, "server/discover", caller).await?;
    let mut capabilities = discover["capabilities"].clone();
    // Only the extensions the gateway relays to legacy clients (the table in
    // `protocol::extensions`): discover answers for the modern era.
    if let Some(caps) = capabilities.as_object_mut() {
        if let Some(Value::Object(ext)) = caps.get_mut("extensions") {
            extensions::retain_for_era(ext, Era::Legacy);
        }
        if caps.get("extensions").and_then(Value::as_object).is_some_and(Map::is_empty) {
            caps.remove("extensions");
        }
        for list in ["tools", "prompts", "resources"] {
            if let Some(Value::Object(c)) = caps.get_mut(list) {
                c.insert("listChanged".into(), Value::Bool(true));
            }
        }
    }
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": discover["_meta"][keys::SERVER_INFO].clone(),
    });
    if let Some(text) = discover.get("instructions") {
        result["instructions"] = text.clone();
    }
    let raw = Json::to_json(&result).map_err(|e| RpcError::internal(e.to_string()))?;
    Ok((raw, session))
}

/// Converts a request of an established legacy session: legacy-only methods are answered here,
/// everything else becomes an internal (era-free) request.
pub fn convert(session: &Session, level: Option<&str>, msg: Message, caller: Arc<Principal>) -> Result<Action, RpcError> {
    let method = msg.method.clone().unwrap_or_default();
    let id = msg.id.clone().ok_or_else(|| RpcError::invalid_request("a request needs an id"))?;
    let mut params: RawObject = match &msg.params {
        Some(p) => serde_json::from_str(p.get())
            .map_err(|e| RpcError::invalid_params(format!("params must be an object without duplicate members ({e})")))?,
        None => RawObject::default(),
    };
    match method.as_str() {
        "ping" => return Ok(Action::Answer(Json::EMPTY_OBJECT)),
        "logging/setLevel" => {
            let level = params.parse::<String>("level").and_then(Result::ok).filter(|l| LOG_LEVELS.contains(&l.as_str()));
            let level = level.ok_or_else(|| RpcError::invalid_params(format!("level must be one of {}", LOG_LEVELS.join(", "))))?;
            return Ok(Action::SetLevel(level));
        }
        "initialize" => return Err(RpcError::invalid_request("this session is already initialized")),
        "resources/unsubscribe" => {
            let uri = params.parse::<String>("uri").and_then(Result::ok).ok_or_else(|| RpcError::invalid_params("uri must be a string"))?;
            return Ok(Action::Unfollow(uri));
        }
        _ => {}
    }
    let mut fields: Map<String, Value> = match params.remove("_meta").map(|m| read::text_value(m.get())) {
        None => Map::new(),
        Some(Ok(Value::Object(m))) => m,
        Some(Ok(_)) => return Err(RpcError::invalid_params("params._meta must be an object")),
        Some(Err(why)) => return Err(mcpgate_protocol::meta::unreadable_meta(&why)),
    };
    fields.insert(keys::PROTOCOL_VERSION.into(), MODERN_VERSION.into());
    // The client's own capabilities: an upstream may ask it for input (elicitation, sampling,
    // roots), which `bridge` turns into requests the legacy client understands. Tasks are a
    // 2026-07-28 extension a legacy client cannot use.
    let mut caps = session.caps.as_object().cloned().unwrap_or_default();
    caps.remove("tasks");
    if let Some(Value::Object(ext)) = caps.get_mut("extensions") {
        extensions::retain_for_era(ext, Era::Legacy);
    }
    fields.insert(keys::CLIENT_CAPABILITIES.into(), Value::Object(caps));
    if !session.info.is_null() {
        fields.insert(keys::CLIENT_INFO.into(), session.info.clone());
    }
    if let Some(level) = level {
        fields.insert(keys::LOG_LEVEL.into(), level.into());
    }
    let meta = RequestMeta { protocol_version: MODERN_VERSION.into(), fields };
    let method = mcpgate_protocol::Method::parse(&method);
    let legacy = Some(Arc::new(LegacySession {
        sid: session.sid.clone(),
        version: session.v.clone(),
        capabilities: session.caps.clone(),
        info: session.info.clone(),
    }));
    let req = Request { id, method, params, meta, param_headers: None, caller, legacy, request_id: None };
    if req.method == mcpgate_protocol::Method::ResourcesSubscribe {
        let uri = req.params.parse::<String>("uri").and_then(Result::ok).ok_or_else(|| RpcError::invalid_params("uri must be a string"))?;
        return Ok(Action::Follow(uri, req));
    }
    Ok(Action::Forward(req))
}

/// Runs a `resources/subscribe` (the service checks the URI, asked through `serve`, the request
/// path) or `resources/unsubscribe` of a session whose followed URIs are `set`; `Err` gives back
/// any other action.
pub async fn follow<F: std::future::Future<Output = Reply>>(
    svc: &dyn Service,
    set: &UriSet,
    action: Action,
    serve: impl FnOnce(Request) -> F,
) -> Result<Reply, Action> {
    match action {
        Action::Follow(uri, req) => {
            if lock(set).len() >= crate::hub::MAX_FOLLOWED && !lock(set).contains(&uri) {
                let e = RpcError::invalid_params(format!("at most {} resource subscriptions per session", crate::hub::MAX_FOLLOWED));
                return Ok(Reply::error(e));
            }
            let reply = serve(req).await;
            let Reply::Single(Outcome::Result(r)) = reply else { return Ok(reply) };
            lock(set).insert(uri);
            svc.follows_changed();
            Ok(Reply::Single(Outcome::Result(r)))
        }
        Action::Unfollow(uri) => {
            lock(set).remove(&uri);
            svc.follows_changed();
            Ok(Reply::Single(Outcome::Result(Json::EMPTY_OBJECT)))
        }
        other => Err(other),
    }
}

/// A change as the notification a legacy client expects (`None`: the stream must end).
pub fn change_message(change: &Change) -> Option<Vec<u8>> {
    match change {
        Change::List(kind) => Some(jsonrpc::bare_notification(kind.list_changed_method())),
        Change::Updated(uri) => {
            let params = Json::to_json(&json!({ "uri": uri })).ok()?;
            Some(jsonrpc::notification_message("notifications/resources/updated", &params))
        }
        Change::Completed(id) => {
            let params = Json::to_json(&json!({ "elicitationId": id })).ok()?;
            Some(jsonrpc::notification_message("notifications/elicitation/complete", &params))
        }
        Change::TooSlow | Change::Ended => None,
    }
}

/// What to do with a legacy session request.
pub enum Action {
    /// Answered at the edge with this result.
    Answer(Json),
    /// `logging/setLevel`: remember the level for the session, answer `{}`.
    SetLevel(String),
    Forward(Request),
    /// `resources/subscribe`: check the URI with the service, then follow it.
    Follow(String, Request),
    /// `resources/unsubscribe`: stop following the URI, answer `{}`.
    Unfollow(String),
}

impl Action {
    /// The result of an action answered at the edge.
    pub fn answer(&self) -> Option<Json> {
        match self {
            Action::Answer(r) => Some(r.clone()),
            Action::SetLevel(_) => Some(Json::EMPTY_OBJECT),
            Action::Forward(_) | Action::Follow(..) | Action::Unfollow(_) => None,
        }
    }
}

/// Asks the service itself (the era-free core) for a method's result, as a modern client would.
async fn internal(svc: &dyn Service, method: &str, caller: Arc<Principal>) -> Result<Value, RpcError> {
    let mut fields = Map::new();
    fields.insert(keys::PROTOCOL_VERSION.into(), MODERN_VERSION.into());
    fields.insert(keys::CLIENT_CAPABILITIES.into(), json!({}));
    let req = Request {
        id: Json::from_string("0".into()).map_err(|e| RpcError::internal(e.to_string()))?,
        method: method.into(),
        params: RawObject::default(),
        meta: RequestMeta { protocol_version: MODERN_VERSION.into(), fields },
        param_headers: None,
        caller,
        legacy: None,
        request_id: None,
    };
    svc.admit(&req).await?;
    match svc.handle(req).await.outcome().await {
        Outcome::Result(raw) => serde_json::from_str(raw.get()).map_err(|e| RpcError::internal(e.to_string())),
        Outcome::Error(e) => Err(e),
        Outcome::UpstreamError(raw) => Err(RpcError::internal(format!("{method} failed: {}", raw.get()))),
    }
}

/// Shapes a modern result for a legacy client: no `resultType`/`ttlMs`/`cacheScope`, an object
/// `structuredContent` only, and no `input_required` (which legacy clients cannot read).
pub fn downgrade(outcome: Outcome) -> Outcome {
    let Outcome::Result(raw) = outcome else {
        return outcome;
    };
    let Ok(mut obj) = RawObject::from_json(&raw) else {
        return Outcome::Result(raw);
    };
    if obj.parse::<String>("resultType").and_then(Result::ok).as_deref() == Some("input_required") {
        return Outcome::Error(RpcError::internal(
            "The upstream asked for client input (elicitation, sampling or roots), which mcpgate does not yet bridge to legacy clients",
        ));
    }
    let mut changed = false;
    for key in ["resultType", "ttlMs", "cacheScope"] {
        changed |= obj.remove(key).is_some();
    }
    if obj.get("structuredContent").is_some_and(|v| !v.get().trim_start().starts_with('{')) {
        obj.remove("structuredContent");
        changed = true;
    }
    // Legacy tools may only promise object output (as only object `structuredContent` reaches
    // legacy clients): any other `outputSchema` is left out of the tools they are shown.
    if raw.get().contains("\"outputSchema\"")
        && let Some(tools) = obj.get("tools").and_then(legacy_output_schemas)
    {
        obj.set("tools", tools);
        changed = true;
    }
    if !changed {
        return Outcome::Result(raw);
    }
    Outcome::Result(obj.to_json())
}

/// The tools with every `outputSchema` whose root is not `"type": "object"` removed, or `None`
/// when none is.
fn legacy_output_schemas(tools: &Json) -> Option<Json> {
    let mut items = tools.items().ok()?;
    let mut changed = false;
    for tool in &mut items {
        let Ok(mut t) = RawObject::from_json(tool) else { continue };
        let object =
            t.parse::<serde_json::Value>("outputSchema").map(|s| s.is_ok_and(|s| s.get("type").and_then(|v| v.as_str()) == Some("object")));
        if object == Some(false) {
            t.remove("outputSchema");
            *tool = t.to_json();
            changed = true;
        }
    }
    changed.then(|| Json::array(&items))
}

/// [`downgrade`] applied to a whole reply.
pub fn downgrade_reply(reply: Reply) -> Reply {
    reply.map_outcome(downgrade)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_consent_is_announced_to_a_legacy_client() {
        let msg = change_message(&Change::Completed("e-1".into())).expect("a notification");
        let v: serde_json::Value = serde_json::from_slice(&msg).expect("json");
        assert_eq!(v["method"], "notifications/elicitation/complete");
        assert_eq!(v["params"]["elicitationId"], "e-1");
    }

    #[test]
    fn negotiates_the_clients_version_or_the_newest() {
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("2025-03-26"), "2025-03-26");
        assert_eq!(negotiate("2024-11-05"), "2025-11-25");
        assert_eq!(negotiate("2099-01-01"), "2025-11-25");
    }

    #[test]
    fn downgrades_modern_results() {
        let raw =
            Json::from_string(r#"{"resultType":"complete","content":[],"structuredContent":[1,2],"ttlMs":0,"cacheScope":"public"}"#.into())
                .unwrap();
        let Outcome::Result(out) = downgrade(Outcome::Result(raw)) else { panic!() };
        assert_eq!(out.get(), r#"{"content":[]}"#);
        let raw = Json::from_string(
            r#"{"resultType":"complete","tools":[{"name":"a","inputSchema":{"type":"object"},"outputSchema":{"type":"array"}},{"name":"b","outputSchema":{"type":"object"}}]}"#.into(),
        )
        .unwrap();
        let Outcome::Result(out) = downgrade(Outcome::Result(raw)) else { panic!() };
        assert_eq!(
            out.get(),
            r#"{"tools":[{"name":"a","inputSchema":{"type":"object"}},{"name":"b","outputSchema":{"type":"object"}}]}"#,
            "a legacy client is never promised output it will not be given"
        );
        let raw = Json::from_string(r#"{"content":[],"structuredContent":{"a":1}}"#.into()).unwrap();
        let Outcome::Result(out) = downgrade(Outcome::Result(raw)) else { panic!() };
        assert_eq!(out.get(), r#"{"content":[],"structuredContent":{"a":1}}"#);
        let raw = Json::from_string(r#"{"resultType":"input_required","requestState":"x"}"#.into()).unwrap();
        assert!(matches!(downgrade(Outcome::Result(raw)), Outcome::Error(_)));
    }

    #[test]
    fn sessions_open_on_any_replica_with_the_key_and_end_locally() {
        let key = [9u8; 32];
        let a =
            LegacyState::new(Arc::new(Sealer::from_material(&key, mcpgate_model::token::KeySource::Env).unwrap()), Duration::from_secs(60));
        let b =
            LegacyState::new(Arc::new(Sealer::from_material(&key, mcpgate_model::token::KeySource::Env).unwrap()), Duration::from_secs(60));
        let me = Principal::anonymous();
        let s =
            Session { sid: "s1".into(), v: "2025-11-25".into(), caps: json!({}), info: json!({}), c: me.id.clone(), r: vec![], e: None };
        let token = a.sealer.seal(SESSION_PURPOSE, &s).unwrap();
        let mut h = HeaderMap::new();
        h.insert("mcp-session-id", token.parse().unwrap());
        assert_eq!(b.session(&h, &me).unwrap().sid, "s1");
        let other = Principal { id: "mallory".into(), ..(*me).clone() };
        assert_eq!(b.session(&h, &other).unwrap_err().status, StatusCode::NOT_FOUND, "another caller's session is unknown to it");
        let elsewhere = me.clone().at(Some("/mcp/dev"));
        assert_eq!(b.session(&h, &elsewhere).unwrap_err().status, StatusCode::NOT_FOUND, "a session belongs to its endpoint");
        a.end(&s);
        assert_eq!(a.session(&h, &me).unwrap_err().status, StatusCode::NOT_FOUND);
        h.insert("mcp-session-id", "forged".parse().unwrap());
        assert_eq!(b.session(&h, &me).unwrap_err().status, StatusCode::NOT_FOUND);
        assert_eq!(b.session(&HeaderMap::new(), &me).unwrap_err().status, StatusCode::BAD_REQUEST);
    }
}
