//! Learning what an upstream is and offers: the era probe (`server/discover` first; a legacy
//! answer — an unknown-method error, a plain HTTP error, silence on stdio — falls back to the
//! `initialize` handshake, docs/protocol.md, "How the era is decided"), then every list it declares, page by page up to the
//! configured limit. The verdict is cached in the upstream's state until the next refresh.

use super::error::describe;
use super::{Call, Status, Transport, Upstream, UpstreamError, UpstreamState, gateway_meta, modern};
use mcpgate_config::EraChoice;
use mcpgate_model::catalog::Kind;
use mcpgate_protocol::errors;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::Outcome;
use mcpgate_protocol::{LEGACY_VERSIONS, MODERN_VERSION, keys};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::sync::Arc;
use tokio::time::Instant;

/// What `server/discover` or `initialize` told us.
pub(super) struct Identity {
    pub version: String,
    pub capabilities: Value,
    pub instructions: Option<String>,
    pub server_info: Option<Value>,
    /// The newest legacy version it offers (its own version, for a legacy one).
    pub legacy: Option<String>,
    /// The versions it said it supports (`supportedVersions`; a legacy one: its own version).
    pub supported: Vec<String>,
}

impl Identity {
    /// What the upstream said last time.
    fn from_state(st: &UpstreamState) -> Identity {
        Identity {
            version: st.version.clone().unwrap_or_default(),
            capabilities: st.capabilities.clone().unwrap_or(Value::Null),
            instructions: st.instructions.clone(),
            server_info: st.server_info.clone(),
            legacy: st.legacy_version.clone(),
            supported: st.supported_versions.clone(),
        }
    }
}

impl Upstream {
    /// Probes the upstream and reloads its lists; the state is updated either way (a failed
    /// refresh keeps the previous lists, so the upstream's items still route and fail clearly).
    pub async fn refresh(&self) -> Result<(), UpstreamError> {
        if self.is_retired() {
            return Err(UpstreamError::Removed);
        }
        self.close_idle_sessions();
        let started = Instant::now();
        let first = self.state.load().listed_at.is_none();
        let result = self.probe_and_list().await.map_err(|e| self.explain(e, first));
        let mut next = (*self.state.load_full()).clone();
        match &result {
            Ok(fresh) => {
                next = fresh.clone();
                next.latency = Some(started.elapsed());
                next.listed_at = Some(started.into_std());
                next.status = Status::Ready;
            }
            Err(reason) => {
                next.status = Status::Down(reason.clone());
                next.latency = None;
            }
        }
        if self.is_retired() {
            // Retired while the probe ran: it stays out of service.
            next.status = Status::Down(UpstreamError::Removed);
        }
        self.state.store(Arc::new(next));
        self.refreshed.notify_one();
        result.map(|_| ())
    }

    /// A probe that did not answer in time, with the advice on its likely cause when its command
    /// is a package runner (`runner`): a sandbox without the network, or, at the `first` start,
    /// a download slower than the deadline.
    fn explain(&self, e: UpstreamError, first: bool) -> UpstreamError {
        let timed_out = |e: &UpstreamError| matches!(e, UpstreamError::Timeout { .. });
        if !(timed_out(&e) || matches!(&e, UpstreamError::Handshake(inner) if timed_out(inner))) {
            return e;
        }
        match super::runner::timeout_hint(&self.cfg.transport, self.cfg.timeout, first) {
            Some(hint) => UpstreamError::Hinted { error: Box::new(e), hint },
            None => e,
        }
    }

    async fn probe_and_list(&self) -> Result<UpstreamState, UpstreamError> {
        let st = self.state.load_full();
        // A live legacy session (the gateway's own) is kept; its lists are re-read below.
        let kept = st.status == Status::Ready && !st.is_modern() && st.legacy_version.is_some() && self.has_session(None);
        let identity = if kept { Identity::from_state(&st) } else { self.identify().await? };
        let previous = self.state.load_full();
        let mut state = UpstreamState {
            version: Some(identity.version),
            capabilities: Some(identity.capabilities),
            instructions: identity.instructions,
            server_info: identity.server_info,
            legacy_version: identity.legacy,
            supported_versions: identity.supported,
            ..Default::default()
        };
        // Lists are read with the version just learnt.
        self.state.store(Arc::new(UpstreamState {
            status: self.state.load().status.clone(),
            lists: self.state.load().lists.clone(),
            ..state.clone()
        }));
        for kind in Kind::ALL {
            // Skills are listed when the upstream declares their extension.
            if !state.capabilities.as_ref().is_some_and(|c| kind.declared_by(c)) {
                continue;
            }
            match self.list_all(kind, &mut state, None).await {
                Ok(()) => {}
                // The upstream answered but its list did not come: the list it gave last time
                // is served, stale (no freshness promised), rather than nothing. An upstream
                // that does not answer at all is down instead (its items leave the lists).
                Err(e)
                    if previous.status == Status::Ready
                        && !previous.items(kind).is_empty()
                        && !matches!(e, UpstreamError::Unreachable(_) | UpstreamError::Timeout { .. }) =>
                {
                    tracing::warn!(upstream = %self.id(), error = %e, "{} could not be re-read; serving the previous one", kind.list_key());
                    state.lists[kind as usize] = previous.lists[kind as usize].clone();
                    state.stale_lists += 1;
                    state.ttl_ms[kind as usize] = Some(0);
                    state.private[kind as usize] = previous.private[kind as usize];
                }
                // Without its tools an upstream is not usable; a broken secondary list only
                // leaves that list empty.
                Err(e) if kind == Kind::Tool => return Err(e),
                Err(e) => tracing::warn!(upstream = %self.id(), error = %e, "{} not served", kind.list_key()),
            }
        }
        state.pool_problems = self.compare_pool(&state).await;
        for p in &state.pool_problems {
            tracing::warn!(upstream = %self.id(), problem = %p, "pool endpoints disagree");
        }
        Ok(state)
    }

    /// Checks that every endpoint of a pool serves the same tools as the default one.
    async fn compare_pool(&self, state: &UpstreamState) -> Vec<String> {
        let urls = self.endpoints();
        let default = match &self.transport {
            Transport::Http(p) if p.len() > 1 => p.default_index(),
            _ => return Vec::new(),
        };
        let tools_of = |items: &[Box<RawValue>]| -> std::collections::BTreeMap<String, Value> {
            items
                .iter()
                .filter_map(|t| serde_json::from_str::<Value>(t.get()).ok())
                .filter_map(|v| Some((v.get("name")?.as_str()?.to_string(), v)))
                .collect()
        };
        let reference = tools_of(state.items(Kind::Tool));
        let mut problems = Vec::new();
        for (i, url) in urls.iter().enumerate().filter(|(i, _)| *i != default) {
            let mut other = UpstreamState::default();
            if let Err(e) = self.list_all(Kind::Tool, &mut other, Some(i)).await {
                problems.push(format!("endpoint {} ({url}) could not be listed: {e}", i + 1));
                continue;
            }
            let theirs = tools_of(other.items(Kind::Tool));
            let missing: Vec<&String> = reference.keys().filter(|k| !theirs.contains_key(*k)).collect();
            let extra: Vec<&String> = theirs.keys().filter(|k| !reference.contains_key(*k)).collect();
            let differ: Vec<&String> = reference.iter().filter(|(k, v)| theirs.get(*k).is_some_and(|t| t != *v)).map(|(k, _)| k).collect();
            if !missing.is_empty() || !extra.is_empty() || !differ.is_empty() {
                problems.push(format!(
                    "endpoint {} ({url}) differs from the default: missing {missing:?}, extra {extra:?}, different {differ:?}",
                    i + 1
                ));
            }
        }
        problems
    }

    /// The era probe, as the upstream's `era` asks (docs/protocol.md, "Which era each upstream is
    /// spoken to in"): `legacy` is the handshake alone; otherwise `server/discover`, with the
    /// handshake as the fallback unless the era is `modern`. A stdio process spoken to in the
    /// modern era cannot take a handshake later: legacy clients get a second process (`twin`).
    async fn identify(&self) -> Result<Identity, UpstreamError> {
        match (self.cfg.era, &self.transport) {
            (_, Transport::Rest(_)) => self.discover_only().await,
            (EraChoice::Legacy, _) => self.handshake(None).await,
            (_, Transport::Stdio(_)) => {
                self.discover().await.map(|i| if i.version == MODERN_VERSION { Identity { legacy: None, ..i } } else { i })
            }
            _ => self.discover().await,
        }
    }

    /// `server/discover`, else (unless the era is `modern`) the legacy handshake.
    async fn discover(&self) -> Result<Identity, UpstreamError> {
        if self.cfg.era == EraChoice::Modern {
            return self.discover_only().await;
        }
        let call = Call::internal("server/discover", RawObject::default(), gateway_meta(), None);
        let env = modern::envelope(&call, MODERN_VERSION);
        let outcome = match self.exchange_outcome(&call, env).await {
            Ok((o, _)) => o,
            // A legacy HTTP server refuses the unknown method with a plain HTTP error; a legacy
            // stdio server may say nothing at all.
            Err(UpstreamError::Status { .. }) => return self.handshake(None).await,
            Err(UpstreamError::Timeout { .. }) if matches!(self.transport, Transport::Stdio(_)) => return self.handshake(None).await,
            Err(e) => return Err(e),
        };
        match outcome {
            Outcome::Result(raw) => {
                let d: Announcement = serde_json::from_str(raw.get())
                    .map_err(|e| UpstreamError::Protocol(format!("server/discover returned an unexpected result: {e}")))?;
                if d.supported_versions.iter().any(|v| v == MODERN_VERSION) {
                    return Ok(d.into_modern_identity());
                }
                if d.result_type.is_none() {
                    // A legacy stateless server ran an unknown method's default handler.
                    return self.handshake(None).await;
                }
                Err(UpstreamError::Protocol(format!("it supports protocol versions {:?}, not {MODERN_VERSION}", d.supported_versions)))
            }
            Outcome::UpstreamError(raw) => {
                let v: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                let code = errors::modernise_rc_code(v["code"].as_i64().unwrap_or(0));
                if code == errors::UNSUPPORTED_VERSION {
                    let supported: Vec<String> = serde_json::from_value(v["data"]["supported"].clone()).unwrap_or_default();
                    if supported.iter().any(|s| LEGACY_VERSIONS.contains(&s.as_str())) {
                        return self.handshake(None).await;
                    }
                    return Err(UpstreamError::Protocol(format!("it supports protocol versions {supported:?} only")));
                }
                if code == errors::HEADER_MISMATCH || code == errors::MISSING_CAPABILITY {
                    return Err(UpstreamError::Protocol(format!("it is modern but refused the probe: {}", v["message"])));
                }
                // Modern servers implement discover; any other error means a legacy server.
                self.handshake(None).await
            }
            Outcome::Error(e) => Err(UpstreamError::Protocol(e.message)),
        }
    }

    /// `server/discover` for an upstream configured `era = "modern"`: a legacy answer is an error.
    async fn discover_only(&self) -> Result<Identity, UpstreamError> {
        let call = Call::internal("server/discover", RawObject::default(), gateway_meta(), None);
        let (outcome, _) = self.exchange_outcome(&call, modern::envelope(&call, MODERN_VERSION)).await?;
        if let Outcome::Result(raw) = &outcome
            && let Ok(d) = serde_json::from_str::<Announcement>(raw.get())
            && d.supported_versions.iter().any(|v| v == MODERN_VERSION)
        {
            return Ok(d.into_modern_identity());
        }
        Err(UpstreamError::Protocol(format!(
            "era = \"modern\" is configured, but server/discover did not answer as {MODERN_VERSION}: {}",
            describe(&outcome)
        )))
    }

    /// Reads one whole list, following `nextCursor` up to the configured page limit.
    async fn list_all(&self, kind: Kind, state: &mut UpstreamState, endpoint: Option<usize>) -> Result<(), UpstreamError> {
        use UpstreamError::Protocol;
        let method = kind.list_method();
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 0.. {
            if page == self.cfg.max_pages {
                tracing::warn!(upstream = %self.id(), pages = page, method, "list page limit reached; the rest of the list is \
                    not served (raise max_pages)");
                state.truncated = true;
                break;
            }
            let mut params = RawObject::default();
            if let Some(c) = &cursor {
                params.set_json("cursor", c).map_err(|e| Protocol(e.to_string()))?;
            }
            let raw = self.internal(method, params, endpoint).await.map_err(|o| match o {
                // The upstream answered, with an error.
                Outcome::UpstreamError(_) => Protocol(format!("{method} failed: {}", describe(&o))),
                // The caller's own token was refused (a caller's own handle).
                Outcome::Error(e) if e.code == super::CONSENT_NEEDED => UpstreamError::ConsentNeeded,
                // It did not answer (unreachable, timed out, refused at the HTTP level).
                _ => UpstreamError::Unreachable(format!("{method} failed: {}", describe(&o))),
            })?;
            let page: RawObject =
                serde_json::from_str(raw.get()).map_err(|e| Protocol(format!("{method} returned an unexpected result: {e}")))?;
            match page.parse::<Vec<Box<RawValue>>>(kind.list_key()) {
                Some(Ok(list)) => items.extend(list),
                Some(Err(e)) => return Err(Protocol(format!("{method} returned an invalid \"{}\": {e}", kind.list_key()))),
                None => {}
            }
            let ttl = page.parse::<i64>("ttlMs").and_then(Result::ok).map(|t| t.max(0) as u64);
            let k = kind as usize;
            state.ttl_ms[k] = Some(state.ttl_ms[k].unwrap_or(u64::MAX).min(ttl.unwrap_or(0)));
            if let Some(t) = ttl {
                state.ttl_hint = Some(state.ttl_hint.map_or(t, |h| h.min(t)));
            }
            state.private[k] |= page.parse::<String>("cacheScope").and_then(Result::ok).as_deref() != Some("public");
            match page.parse::<Option<String>>("nextCursor") {
                Some(Ok(Some(c))) => cursor = Some(c),
                _ => break,
            }
        }
        // The same items in another order keep the order the catalogue already has (one order
        // across requests and re-lists, whatever order the server answers in).
        let previous = self.state.load().lists[kind as usize].clone();
        state.lists[kind as usize] = Arc::new(mcpgate_model::catalog::merge::keep_order(kind, &previous, items));
        Ok(())
    }
}

/// What a server announces about itself: a `server/discover` result or an `initialize` result.
#[derive(Deserialize)]
pub(super) struct Announcement {
    #[serde(rename = "protocolVersion", default)]
    pub protocol_version: String,
    #[serde(rename = "supportedVersions", default)]
    supported_versions: Vec<String>,
    #[serde(rename = "resultType", default)]
    result_type: Option<String>,
    #[serde(default)]
    capabilities: Value,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(rename = "serverInfo", default)]
    server_info: Option<Value>,
    #[serde(rename = "_meta", default)]
    meta: Option<Map<String, Value>>,
}

impl Announcement {
    /// What an `initialize` result says.
    pub(super) fn into_identity(self) -> Identity {
        Identity {
            legacy: Some(self.protocol_version.clone()),
            supported: vec![self.protocol_version.clone()],
            version: self.protocol_version,
            capabilities: self.capabilities,
            instructions: self.instructions,
            server_info: self.server_info,
        }
    }

    /// What a modern `server/discover` result says, with the newest legacy version it also offers.
    fn into_modern_identity(self) -> Identity {
        let legacy = LEGACY_VERSIONS.iter().find(|v| self.supported_versions.iter().any(|s| s == *v)).map(|v| v.to_string());
        let server_info = self.meta.as_ref().and_then(|m| m.get(keys::SERVER_INFO)).cloned().or(self.server_info);
        Identity {
            version: MODERN_VERSION.into(),
            capabilities: self.capabilities,
            instructions: self.instructions,
            server_info,
            legacy,
            supported: self.supported_versions,
        }
    }
}
