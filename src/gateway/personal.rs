//! Per-user upstream identity on the gateway (docs/auth-and-policy.md, "Each caller as
//! themselves"). An upstream with `user_auth` is never called with a credential of the gateway's:
//! each caller who has consented gets a handle of their own ([`Upstream::personal`]), which sends
//! that caller's token, is probed, listed and followed like any upstream, and is dropped when the
//! caller's consent ends (revoked, refused) or after it sits idle. So every caller's catalogue is
//! their own: the shared upstreams' items plus, per `user_auth` upstream, what it lists *for them*
//! (`cacheScope: "private"`), or, before they consent, one `connect` tool whose call starts the
//! consent. This module owns those handles, the per-caller catalogues built from them, and the
//! bridge from a handle's refused token to the identity engine.

use super::Gateway;
use crate::auth::Principal;
use crate::identity::dpop::Access;
use crate::identity::service::{Identity, Refusal};
use crate::upstream::{Shared, Status, Upstream, UpstreamError, UserToken};
use mcpgate_model::catalog::{self, Catalog, UpstreamLists};
use mcpgate_protocol::sync::lock;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long a caller's own handle may sit unused before it is closed (its token stays).
const IDLE: Duration = Duration::from_secs(30 * 60);
/// The most callers' own handles one replica keeps (the least recently used goes first).
const MAX_HANDLES: usize = 4096;
/// The name (before the upstream's prefix) of the tool a caller who has not consented sees.
pub const CONNECT_TOOL: &str = "connect";
/// The `_meta` key that marks that tool.
pub const CONNECT_META: &str = "io.mcpgate/consent";

/// A caller's catalogue and the generations (shared catalogue, callers' own lists) it was built at.
type Built = (usize, u64, Arc<Catalog>);
/// A caller and the endpoint it came through.
type CatalogKey = (String, Option<Arc<str>>);

struct Held {
    up: Arc<Upstream>,
    used: Mutex<Instant>,
}

/// The callers' own handles and catalogues.
pub struct Personal {
    pub identity: Arc<Identity>,
    handles: Mutex<HashMap<(String, usize), Arc<Held>>>,
    /// Per (caller, endpoint): the catalogue, and the generations it was built at.
    catalogs: Mutex<HashMap<CatalogKey, Built>>,
    /// Bumped whenever some caller's own lists change.
    generation: AtomicU64,
    /// The `connect` tool of each `user_auth` upstream, by index.
    connect_tools: Mutex<HashMap<usize, Vec<Box<RawValue>>>>,
    /// URL elicitations handed to 2025-11-25 clients, by (caller, upstream): their ids.
    elicitations: Mutex<HashMap<(String, String), Vec<String>>>,
    /// When opening a caller's own handle last failed, so a request does not retry at once.
    failed: Mutex<HashMap<(String, usize), Instant>>,
}

/// How long after a failed opening a caller's own handle is not tried again by a request.
const RETRY_OPEN_AFTER: Duration = Duration::from_secs(30);

/// A caller's token for one upstream, as the upstream layer asks for it.
struct CallerToken {
    identity: Arc<Identity>,
    caller: String,
    upstream: String,
    /// For an upstream whose tokens come by token exchange: the gateway, whose authenticator
    /// holds the caller's latest validated JWT.
    exchange: Option<Weak<Gateway>>,
}

tokio::task_local! {
    /// The JWT of the request being served (set around its upstream work by the dispatch), so a
    /// token exchange made for it exchanges that request's own token.
    pub static REQUEST_SUBJECT: crate::auth::SubjectToken;
}

impl CallerToken {
    /// The subject token to exchange: the current request's own JWT; for work no request asked
    /// for (a probe, a list refresh of the caller's handle), the caller's latest valid one.
    fn subject(&self, gw: &Weak<Gateway>) -> Option<String> {
        match REQUEST_SUBJECT.try_with(|s| s.0.to_string()) {
            Ok(own) => Some(own),
            Err(_) => gw.upgrade()?.auth().subject_token(&self.caller),
        }
    }

    async fn exchanged(&self, gw: &Weak<Gateway>) -> Option<String> {
        let subject = self.subject(gw)?;
        match self.identity.exchanged(&self.caller, &self.upstream, &subject).await {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(upstream = %self.upstream, caller = %self.caller, error = %e, "token exchange failed");
                None
            }
        }
    }
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl UserToken for CallerToken {
    fn token(&self) -> BoxFuture<'_, Option<Access>> {
        Box::pin(async move {
            match &self.exchange {
                Some(gw) => self.exchanged(gw).await.map(|token| Access { token, dpop: None, header: None }),
                None => self.identity.access(&self.caller, &self.upstream).await,
            }
        })
    }

    fn refused(&self, status: u16, challenge: Vec<String>, retried: bool) -> BoxFuture<'_, crate::upstream::Renewal> {
        Box::pin(async move {
            if self.exchange.is_some() {
                // An exchanged token is exchanged again, once; there is nothing to consent to.
                self.identity.forget_exchanged(&self.caller, &self.upstream);
                return if status == 401 && !retried { crate::upstream::Renewal::Retry } else { crate::upstream::Renewal::Refuse };
            }
            if retried && status == 401 {
                self.identity.revoke(&self.caller, Some(&self.upstream));
                return crate::upstream::Renewal::Consent;
            }
            match self.identity.refused(&self.caller, &self.upstream, status, &challenge).await {
                Refusal::Retry if !retried => crate::upstream::Renewal::Retry,
                Refusal::Retry | Refusal::Consent => crate::upstream::Renewal::Consent,
                Refusal::GiveUp => crate::upstream::Renewal::Refuse,
            }
        })
    }
}

/// Where a request for a `user_auth` upstream goes.
pub enum Routed {
    Up(Arc<Upstream>),
    /// The caller has to consent first.
    Consent,
    /// The caller's own connection could not be opened, for this reason.
    Failed(UpstreamError),
}

impl Personal {
    pub fn new(identity: Arc<Identity>) -> Self {
        Personal {
            identity,
            handles: Mutex::default(),
            catalogs: Mutex::default(),
            generation: AtomicU64::new(1),
            connect_tools: Mutex::default(),
            elicitations: Mutex::default(),
            failed: Mutex::default(),
        }
    }

    fn changed(&self, gw: &Gateway, caller: &str) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        gw.hub.caller_changed(caller);
    }

    /// The caller's own handle of upstream `index`, if it has one that is up.
    fn ready_handle(&self, caller: &str, index: usize) -> Option<Arc<Upstream>> {
        let held = lock(&self.handles).get(&(caller.to_string(), index)).cloned()?;
        *lock(&held.used) = Instant::now();
        (held.up.state().status == Status::Ready).then(|| held.up.clone())
    }

    /// Remembers the id of a URL elicitation handed to a 2025-11-25 client, to announce its end.
    pub fn elicited(&self, caller: &str, upstream: &str, id: &str) {
        let mut m = lock(&self.elicitations);
        let ids = m.entry((caller.into(), upstream.into())).or_default();
        if ids.len() >= 16 {
            ids.remove(0);
        }
        ids.push(id.into());
    }

    /// Closes a caller's own handle (its consent ended); `true` if there was one.
    /// Asks every caller's own handle of upstream `index` to list it again now (a reload reads
    /// an OpenAPI description again); each handle's loop tells its caller when its tools changed.
    pub(super) fn relist(&self, index: usize) {
        for (_, held) in lock(&self.handles).iter().filter(|((_, i), _)| *i == index) {
            held.up.changed.notify_one();
        }
    }

    fn close(&self, gw: &Gateway, caller: &str, index: usize) -> bool {
        let Some(held) = lock(&self.handles).remove(&(caller.to_string(), index)) else { return false };
        held.up.retire();
        self.changed(gw, caller);
        true
    }
}

impl Gateway {
    /// Whether upstream `index` is reached with each caller's own token.
    pub fn is_personal(&self, index: usize) -> bool {
        self.personal.as_ref().is_some_and(|p| p.identity.protects(self.upstream_id(index)))
    }

    /// The handle a request of `caller` for upstream `index` goes to: the shared one, or the
    /// caller's own for a `user_auth` upstream (opened now if the caller holds a token).
    pub async fn upstream_for(&self, caller: &Principal, index: usize) -> Option<Routed> {
        let shared = self.upstream(index)?;
        // The rare paths (a caller's own process, a caller's own handle to open) are boxed, so
        // that the future of every call stays small.
        if matches!(shared.cfg.instances, mcpgate_config::sandbox::Instances::PerCaller { .. })
            && let Some(own) = Box::pin(self.own_instance(&caller.id, &shared)).await
        {
            return Some(own);
        }
        let Some(p) = self.personal.as_ref().filter(|p| p.identity.protects(shared.id())) else {
            return Some(Routed::Up(shared));
        };
        if let Some(up) = p.ready_handle(&caller.id, index) {
            return Some(Routed::Up(up));
        }
        Some(match Box::pin(self.open_personal(&caller.id, index)).await {
            Ok(Some(up)) => Routed::Up(up),
            Ok(None) => Routed::Consent,
            Err(e) => Routed::Failed(e),
        })
    }

    /// Opens (probes and lists) the caller's own handle of `index`, if it holds a token
    /// (`Ok(None)`: it has to consent).
    pub async fn open_personal(&self, caller: &str, index: usize) -> Result<Option<Arc<Upstream>>, UpstreamError> {
        let (Some(p), Some(shared)) = (self.personal.as_ref(), self.upstream(index)) else { return Ok(None) };
        if shared.is_retired() {
            return Err(UpstreamError::Removed);
        }
        let exchange = p.identity.exchanges(shared.id());
        if exchange && self.auth().subject_token(caller).is_none() {
            return Err(UpstreamError::Credentials(
                "this upstream is reached with a token exchanged for the caller's own JWT, and the request carried none".into(),
            ));
        }
        if !exchange && !p.identity.holds(caller, shared.id()) {
            return Ok(None);
        }
        if let Some(up) = p.ready_handle(caller, index) {
            return Ok(Some(up));
        }
        let token = Arc::new(CallerToken {
            identity: p.identity.clone(),
            caller: caller.to_string(),
            upstream: shared.id().to_string(),
            exchange: exchange.then(|| self.me.clone()),
        });
        let (tx, _updates) = tokio::sync::mpsc::channel(1);
        let config = self.config();
        let shared_parts = Shared { client: self.client.clone(), tasks: self.tasks.child(), input_timeout: config.server.input_timeout };
        let up = Arc::new(Upstream::personal(index, shared.cfg.clone(), shared_parts, tx, token));
        match up.refresh().await {
            Ok(()) => {}
            Err(e) if e.needs_consent() => {
                up.retire();
                return Ok(None);
            }
            Err(e) => {
                tracing::warn!(upstream = %shared.id(), %caller, error = %e, "a caller's own connection to the upstream failed");
                up.retire();
                return Err(e);
            }
        }
        let held = Arc::new(Held { up: up.clone(), used: Mutex::new(Instant::now()) });
        {
            let mut handles = lock(&p.handles);
            if let Some(previous) = handles.insert((caller.to_string(), index), held) {
                previous.up.retire();
            }
            if handles.len() > MAX_HANDLES
                && let Some(oldest) = handles.iter().min_by_key(|(_, h)| *lock(&h.used)).map(|(k, _)| k.clone())
                && let Some(gone) = handles.remove(&oldest)
            {
                gone.up.retire();
            }
        }
        tracing::info!(upstream = %shared.id(), %caller, tools = up.state().items(catalog::Kind::Tool).len(), "a caller's own connection is ready");
        up.tasks().spawn(personal_loop(self.me.clone(), up.clone(), caller.to_string()));
        up.tasks().spawn(up.clone().keep_following());
        p.changed(self, caller);
        Ok(Some(up))
    }

    /// Before a request of `caller` is served: opens the caller's own handles that can open
    /// without it (a token in the vault, a JWT to exchange), so its lists show them. A handle that
    /// failed to open is tried again after [`RETRY_OPEN_AFTER`].
    pub async fn prepare_personal(&self, caller: &Principal) {
        let Some(p) = self.personal.as_ref() else { return };
        for up in self.upstreams().iter().filter(|u| !u.is_retired() && p.identity.protects(u.id())) {
            let key = (caller.id.clone(), up.index);
            if lock(&p.handles).contains_key(&key) || lock(&p.failed).get(&key).is_some_and(|t| t.elapsed() < RETRY_OPEN_AFTER) {
                continue;
            }
            let ready = if p.identity.exchanges(up.id()) {
                self.auth().subject_token(&caller.id).is_some()
            } else {
                p.identity.holds(&caller.id, up.id())
            };
            if !ready {
                continue;
            }
            if !matches!(self.open_personal(&caller.id, up.index).await, Ok(Some(_))) {
                let mut failed = lock(&p.failed);
                if failed.len() >= MAX_HANDLES {
                    failed.clear();
                }
                failed.insert(key, Instant::now());
            }
        }
    }

    /// A caller finished consenting to upstream `upstream`: its own handle opens, its lists
    /// change, and the 2025-11-25 clients that were sent to consent hear it is done.
    pub async fn consented(&self, caller: &str, upstream: &str) {
        let Some(p) = self.personal.as_ref() else { return };
        let Some(index) = self.upstreams().iter().position(|u| u.id() == upstream && !u.is_retired()) else { return };
        p.close(self, caller, index);
        lock(&p.failed).remove(&(caller.to_string(), index));
        if let Err(e) = self.open_personal(caller, index).await {
            tracing::warn!(%upstream, %caller, error = %e, "the caller's own connection could not be opened after consent");
        }
        let ids = lock(&p.elicitations).remove(&(caller.to_string(), upstream.to_string())).unwrap_or_default();
        for id in ids {
            self.hub.completed(caller, &id);
        }
    }

    /// Forgets a caller's tokens (one upstream's, or all) and closes its own handles; how many
    /// tokens were held.
    pub fn disconnect(&self, caller: &str, upstream: Option<&str>) -> usize {
        let Some(p) = self.personal.as_ref() else { return 0 };
        let n = p.identity.revoke(caller, upstream);
        for (i, up) in self.upstreams().iter().enumerate() {
            if upstream.is_none_or(|u| u == up.id()) {
                p.close(self, caller, i);
            }
        }
        n
    }

    /// The catalogue of a caller of a gateway with `user_auth` upstreams: the shared upstreams'
    /// items and, per `user_auth` upstream, the caller's own lists or its `connect` tool.
    /// Cached per caller until the shared catalogue or the caller's own lists change.
    pub(super) fn personal_catalog(&self, p: &Personal, caller: &Principal) -> Arc<Catalog> {
        let shared = self.catalog();
        let shared_gen = Arc::as_ptr(&shared) as usize;
        let generation = p.generation.load(Ordering::SeqCst);
        let key = (caller.id.clone(), caller.endpoint.clone());
        if let Some((s, g, cat)) = lock(&p.catalogs).get(&key)
            && *s == shared_gen
            && *g == generation
        {
            return cat.clone();
        }
        let all = self.upstreams();
        let own: Vec<Option<Arc<Upstream>>> =
            all.iter().map(|u| if p.identity.protects(u.id()) { p.ready_handle(&caller.id, u.index) } else { None }).collect();
        let states: Vec<_> = all.iter().zip(&own).map(|(u, mine)| mine.as_ref().map_or_else(|| u.state(), |m| m.state())).collect();
        let connect: HashMap<usize, Vec<Box<RawValue>>> = {
            let mut tools = lock(&p.connect_tools);
            for u in all.iter().filter(|u| p.identity.protects(u.id())) {
                tools.entry(u.index).or_insert_with(|| connect_tool(u.id()).into_iter().collect());
            }
            tools.clone()
        };
        let none: [Option<u64>; catalog::Kind::COUNT] = [None; catalog::Kind::COUNT];
        // Pins hold tools out of every caller's catalogue alike.
        let screened = self.screen_all(&all, &states);
        let mut inputs: Vec<UpstreamLists> = Vec::new();
        for (((u, st), mine), sc) in all.iter().zip(&states).zip(&own).zip(&screened) {
            if u.is_retired() {
                continue;
            }
            let personal = p.identity.protects(u.id());
            // A token-exchange upstream the caller cannot reach now has nothing to show.
            if personal && mine.is_none() && p.identity.exchanges(u.id()) {
                continue;
            }
            if personal && mine.is_none() {
                let empty: &[Box<RawValue>] = &[];
                let tools: &[Box<RawValue>] = connect.get(&u.index).map_or(empty, Vec::as_slice);
                inputs.push(UpstreamLists {
                    upstream: u.index,
                    id: u.id(),
                    prefix: &u.cfg.prefix,
                    items: [tools, empty, empty, empty, empty],
                    ttl_ms: [Some(0), None, None, None, None],
                    listed_at: None,
                    private: [true; catalog::Kind::COUNT],
                    has_resources: false,
                    rename: &[],
                    validate: u.cfg.validate_arguments,
                });
                continue;
            }
            if st.status != Status::Ready {
                continue;
            }
            inputs.push(UpstreamLists {
                upstream: u.index,
                id: u.id(),
                prefix: &u.cfg.prefix,
                items: [
                    sc.tools.as_deref().unwrap_or(st.items(catalog::Kind::Tool)),
                    sc.prompts.as_deref().unwrap_or(st.items(catalog::Kind::Prompt)),
                    sc.resources.as_deref().unwrap_or(st.items(catalog::Kind::Resource)),
                    st.items(catalog::Kind::Template),
                    sc.skills.as_deref().unwrap_or(st.items(catalog::Kind::Skill)),
                ],
                ttl_ms: if personal { none } else { st.ttl_ms },
                listed_at: st.listed_at,
                private: if personal { [true; catalog::Kind::COUNT] } else { st.private },
                has_resources: st.offers("resources"),
                rename: &u.cfg.rename,
                validate: u.cfg.validate_arguments,
            });
        }
        let config = self.config();
        let namespaces: Vec<(usize, String)> =
            all.iter().filter(|u| !u.cfg.prefix.is_empty() && !u.is_retired()).map(|u| (u.index, u.cfg.prefix.clone())).collect();
        let naming = catalog::merge::Naming { policy: &config.catalog.names, namespaces: &namespaces };
        let full = Arc::new(catalog::merge::build(&inputs, &naming));
        let cat = match caller.endpoint.as_deref() {
            None => full,
            Some(path) => match config.endpoints.iter().find(|e| e.path == path) {
                Some(ep) => Arc::new(catalog::endpoint::view(&full, &ep.selection(), &|i| self.upstream_id(i))),
                None => Arc::default(),
            },
        };
        let mut catalogs = lock(&p.catalogs);
        if catalogs.len() >= MAX_HANDLES {
            catalogs.clear();
        }
        catalogs.insert(key, (shared_gen, generation, cat.clone()));
        cat
    }

    /// The `user_auth` upstream a tool name `name` belongs to by its prefix, for a caller who has
    /// not connected it but may (its `connect` tool is in the caller's view `cat`): a call that
    /// names one of its tools (a list read before, or a retry) is sent to consent.
    pub fn unconnected_upstream_of(&self, caller: &Principal, cat: &Catalog, name: &str) -> Option<usize> {
        let p = self.personal.as_ref()?;
        let config = self.config();
        let id_of = |i: usize| self.upstream_id(i);
        self.upstreams().iter().filter(|u| !u.is_retired() && p.identity.protects(u.id()) && !p.identity.exchanges(u.id())).find_map(|u| {
            let connect = config.catalog.names.gateway_name(&u.cfg.prefix, CONNECT_TOOL, None);
            let head = connect.strip_suffix(CONNECT_TOOL)?;
            let named = !head.is_empty() && name.starts_with(head);
            let visible =
                mcpgate_model::catalog::view::find(cat, mcpgate_model::catalog::Kind::Tool, &connect, &caller.grants, &id_of).is_some();
            (named && visible && p.ready_handle(&caller.id, u.index).is_none()).then_some(u.index)
        })
    }

    /// The `user_auth` upstream whose `connect` tool `name` is, for a caller who already
    /// consented (its catalogue no longer lists the tool, but a retry may still name it).
    pub fn connect_tool_of(&self, caller: &Principal, name: &str) -> Option<usize> {
        let p = self.personal.as_ref()?;
        let config = self.config();
        self.upstreams().iter().filter(|u| !u.is_retired() && p.identity.protects(u.id())).map(|u| u.index).find(|&i| {
            self.upstream(i).is_some_and(|u| config.catalog.names.gateway_name(&u.cfg.prefix, CONNECT_TOOL, None) == name)
                && p.ready_handle(&caller.id, i).is_some()
        })
    }
}

/// Whether two states list the same items.
pub(super) fn same_lists(a: &crate::upstream::UpstreamState, b: &crate::upstream::UpstreamState) -> bool {
    a.lists.iter().zip(&b.lists).all(|(x, y)| x.len() == y.len() && x.iter().zip(y.iter()).all(|(i, j)| i.get() == j.get()))
}

/// The tool a caller sees for a `user_auth` upstream it has not consented to.
fn connect_tool(upstream: &str) -> Option<Box<RawValue>> {
    let tool = serde_json::json!({
        "name": CONNECT_TOOL,
        "title": format!("Connect {upstream}"),
        "description": format!(
            "Sign in to {upstream} with your own account, so that its tools become available to you. Calling this tool \
             asks you to open a consent page; once you have signed in, {upstream}'s tools are listed."
        ),
        "inputSchema": { "type": "object", "properties": {} },
        "annotations": { "readOnlyHint": true, "openWorldHint": true },
        "_meta": { CONNECT_META: { "upstream": upstream } },
    });
    serde_json::value::to_raw_value(&tool).ok()
}

/// Keeps a caller's own handle fresh: re-listed when the upstream announces a change and every
/// refresh interval; closed when the caller's consent ends or it sits idle.
async fn personal_loop(gw: Weak<Gateway>, up: Arc<Upstream>, caller: String) {
    let interval = match gw.upgrade() {
        Some(g) => g.config().catalog.refresh_interval,
        None => return,
    };
    loop {
        let tick = interval.min(IDLE);
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = up.changed.notified() => {}
        }
        let Some(g) = gw.upgrade() else { return };
        let Some(p) = g.personal.as_ref() else { return };
        let key = (caller.clone(), up.index);
        let idle = lock(&p.handles).get(&key).filter(|h| Arc::ptr_eq(&h.up, &up)).map(|h| lock(&h.used).elapsed());
        match idle {
            None => return,
            Some(idle) if idle > IDLE => {
                tracing::debug!(upstream = %up.id(), %caller, "closing a caller's idle connection");
                p.close(&g, &caller, up.index);
                return;
            }
            Some(_) => {}
        }
        let before = up.state();
        match up.refresh().await {
            Err(e) if e.needs_consent() => {
                tracing::info!(upstream = %up.id(), %caller, "a caller's consent ended; closing its connection");
                p.close(&g, &caller, up.index);
                return;
            }
            Err(e) => tracing::warn!(upstream = %up.id(), %caller, error = %e, "re-listing a caller's own connection failed"),
            Ok(()) => {
                let after = up.state();
                if !same_lists(&before, &after) {
                    p.changed(&g, &caller);
                }
            }
        }
    }
}

mod setup;
pub(super) use setup::identity;

#[cfg(test)]
mod tests;
