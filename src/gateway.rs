//! The gateway's shared state: the resolved config, one [`Upstream`] handle per configured
//! upstream, the catalogue snapshot (an `Arc` swapped atomically) and the change-notification
//! [`Hub`]. The catalogue is built from the upstreams that are up: one that goes down leaves the
//! lists (and every client that could see its items is told), and comes back when it answers
//! again. Keeping everything fresh happens off the request path (see `maintain`). Until the first
//! probe round has finished, requests wait for it, bounded by the upstream timeouts, so a client
//! that connects at once sees every upstream that is ready.

pub mod guards;
mod instances;
mod maintain;
pub mod onetime;
mod personal;
pub use personal::REQUEST_SUBJECT;
pub mod pins;
pub mod programs;
mod reads;
mod reload;

pub use personal::{CONNECT_META, Routed};

pub use reload::Report;

use crate::auth::Authenticator;
use crate::hub::Hub;
use crate::upstream::{Shared, Status, Upstream};
use crate::usage::rate::Limiter;
use arc_swap::ArcSwap;
use mcpgate_config::Config;
use mcpgate_model::catalog::{self, Catalog, Kind, Problem, UpstreamLists};
use mcpgate_model::token::Sealer;
use mcpgate_net::http::HttpClients;
use mcpgate_protocol::sync::lock;
use mcpgate_protocol::tasks::Background;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// Resource updates an upstream may announce faster than they are fanned out.
const UPDATE_QUEUE: usize = 256;

/// Why a gateway could not be started, or a configuration not applied by a reload.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    TokenKey(#[from] mcpgate_model::token::KeyError),
    #[error("{0}")]
    Cluster(#[from] mcpgate_net::cluster::ClusterError),
    #[error("upstream {upstream}: {source}")]
    UpstreamTls { upstream: String, source: mcpgate_net::http::pem::TlsError },
    #[error("authentication setup failed: {0}")]
    Auth(#[from] crate::auth::jwt::JwksError),
    #[error("per-user identity: {0}")]
    Identity(String),
    #[error("audit export: {0}")]
    Audit(String),
    #[error(transparent)]
    Guard(#[from] guards::GuardSetError),
    /// Not a `#[source]`: its text already ends with the cause, which `{:#}` would repeat.
    #[error("{0}")]
    State(mcpgate_store::StoreError),
}

pub struct Gateway {
    config: ArcSwap<Config>,
    /// When the configuration in effect was loaded (at start, or by the last reload), in
    /// milliseconds since the epoch: what the registry API gives as each endpoint's `updatedAt`.
    loaded_at: std::sync::atomic::AtomicU64,
    /// Every upstream ever configured, by index: one removed by a reload stays, retired, so the
    /// indices the catalogue holds never point at another upstream.
    upstreams: ArcSwap<Vec<Arc<Upstream>>>,
    /// The id of each index (never changes once given).
    ids: ArcSwap<Vec<&'static str>>,
    auth: ArcSwap<Authenticator>,
    /// The shared upstream HTTP client (upstreams added by a reload get it too).
    client: HttpClients,
    /// Held while a reload is applied.
    reload_lock: tokio::sync::Mutex<()>,
    /// Owns the authenticator's background work (replaced with it by a reload).
    auth_tasks: Mutex<Background>,
    pub limiter: Limiter,
    /// The Redis that replicas share (`[cluster]`), if configured (fixed until a restart).
    pub cluster: Option<Arc<mcpgate_net::cluster::Cluster>>,
    catalog: ArcSwap<Catalog>,
    /// Each virtual server's view of the catalogue, by path (rebuilt with it).
    views: ArcSwap<Vec<(Arc<str>, Arc<Catalog>)>>,
    rebuild_lock: Mutex<()>,
    ready: watch::Sender<bool>,
    /// Every open change subscription (listen streams, legacy GET streams).
    pub hub: Arc<Hub>,
    /// Owns every background loop and stream (see [`Background`]).
    pub tasks: Background,
    /// Cancelled when the gateway starts shutting down: open streams end with their final message.
    pub closing: CancellationToken,
    pub metrics: Arc<crate::telemetry::Metrics>,
    /// The audit sink: every forwarded or refused request (the console reads its recent calls).
    pub audit: Arc<crate::audit::Audit>,
    /// The usage accounting and quotas (`[usage]`, `[[quota]]`; fixed until a restart but for
    /// the quota rules, which come from the configuration in effect).
    pub usage: Arc<crate::usage::Usage>,
    /// How many CPU-heavy tasks a caller can start (tool searches indexing or ranking, costly
    /// argument checks) may run at once, on the blocking pool: half the cores (at least one), so
    /// a burst of them queues and leaves CPU for every other request.
    pub ranking: Arc<tokio::sync::Semaphore>,
    /// Seals the tokens the gateway hands out (request state; legacy sessions use it too).
    pub sealer: Arc<Sealer>,
    /// Each upstream's announced resource updates, until maintenance takes them.
    updates: Mutex<Vec<Option<mpsc::Receiver<String>>>>,
    /// Per-user upstream identity (`[identity]`): the engine, and each caller's own handles of
    /// the `user_auth` upstreams (fixed until a restart).
    pub personal: Option<Arc<personal::Personal>>,
    /// The gateway itself, for the loops it starts on demand.
    me: std::sync::Weak<Gateway>,
    /// The approved tool definitions (`[pins]`).
    pub pins: pins::Pins,
    /// The `[[guard]]`s of the configuration in effect, ready to run (replaced by a reload).
    guards: ArcSwap<guards::GuardSet>,
    /// The external guards' verdicts on definitions (emptied by a reload).
    definitions: guards::Definitions,
    /// Confirmations asked and not yet answered: each accepted answer runs its call once.
    pub confirmations: Arc<onetime::OneTime>,
    /// Code mode's running and paused programs.
    pub programs: Arc<programs::Programs>,
    /// The endpoints' selection problems last reported (by path), so each is logged once, and
    /// only once every upstream has settled.
    view_problems: Mutex<Vec<(Arc<str>, Problem)>>,
    /// The callers' own processes of `per_caller` stdio upstreams.
    instances: instances::PerCaller,
    /// The state database (pin approvals; the vault and usage hold it too), if one is open.
    db: Option<Arc<mcpgate_store::Db>>,
    /// Without authentication, the proof an administrator of the console gives (its link,
    /// `/console#key=…`, is logged at start): being on loopback proves nothing, since every local
    /// process is, sandboxed servers with an open network included. New at each start.
    pub console_key: String,
}

impl Gateway {
    pub fn new(config: Config) -> Result<Arc<Gateway>, StartError> {
        Self::with_client(config, HttpClients::new())
    }

    pub fn with_client(config: Config, client: HttpClients) -> Result<Arc<Gateway>, StartError> {
        let tasks = Background::new();
        let mut updates = Vec::new();
        let mut upstreams = Vec::new();
        for (i, u) in config.upstreams.iter().enumerate() {
            let (up, rx) = make_upstream(i, u, &client, &tasks, &config)?;
            updates.push(Some(rx));
            upstreams.push(up);
        }
        let ids = upstreams.iter().map(|u| leak(u.id())).collect();
        let auth = Authenticator::new(&config, client.detached());
        let hub = Hub::new(config.catalog.debounce);
        hub.set_limit(config.server.max_streams_per_caller);
        let cluster = config.cluster.as_ref().map(mcpgate_net::cluster::Cluster::connect).transpose()?;
        // The state database: PostgreSQL shared by the replicas when configured (the gateway does
        // not start without it: what it keeps there must not split); else, without `[cluster]`,
        // a SQLite file beside the configuration. A file that is there but cannot be read stops
        // the start (serving on empty state would give back spent quotas and forget accounts
        // and approvals), unless `--fresh-state` moves it aside; one that cannot be made (a
        // read-only folder) leaves the gateway with its files and memory.
        let db = match (&config.state.postgres, &cluster) {
            (Some(_), _) => Some(Arc::new(mcpgate_store::Db::open(&config.state).map_err(StartError::State)?)),
            (None, Some(_)) => None,
            (None, None) => mcpgate_store::open_file(&config.state).map_err(StartError::State)?.map(Arc::new),
        };
        let usage = Arc::new(crate::usage::Usage::open(&config.usage, cluster.clone(), db.clone()));
        let (metrics_switches, has_cluster) = (config.metrics, cluster.is_some());
        let export = crate::audit::export::Export::start(&config.audit).map_err(|e| StartError::Audit(e.to_string()))?;
        let audit = Arc::new(crate::audit::Audit::new(Some(usage.clone()), export));
        if config.console {
            audit.keep_recent();
        }
        let sealer = Arc::new(Sealer::load(std::env::var(mcpgate_model::token::KEY_ENV).ok(), &config.server.token_key_file)?);
        let pins = pins::Pins::default();
        pins.refresh(&config.pins.file, db.as_deref());
        let guard_set = guards::GuardSet::new(&config).map_err(StartError::Guard)?;
        let personal = personal::identity(&config, &sealer, cluster.as_ref(), db.as_ref(), &tasks)?
            .map(|id| Arc::new(personal::Personal::new(Arc::new(id))));
        Ok(Arc::new_cyclic(|me| Gateway {
            config: ArcSwap::from_pointee(config),
            loaded_at: std::sync::atomic::AtomicU64::new(mcpgate_protocol::toolbox::unix_ms()),
            upstreams: ArcSwap::from_pointee(upstreams),
            ids: ArcSwap::from_pointee(ids),
            auth: ArcSwap::from_pointee(auth),
            client,
            reload_lock: tokio::sync::Mutex::new(()),
            auth_tasks: Mutex::new(tasks.child()),
            limiter: Limiter::new(cluster.clone()),
            confirmations: Arc::new(onetime::OneTime::new(cluster.clone())),
            programs: Arc::default(),
            cluster,
            catalog: ArcSwap::from_pointee(Catalog::default()),
            views: ArcSwap::from_pointee(Vec::new()),
            rebuild_lock: Mutex::new(()),
            ready: watch::channel(false).0,
            hub,
            tasks,
            closing: CancellationToken::new(),
            sealer,
            metrics: Arc::new(crate::telemetry::Metrics::new(metrics_switches, has_cluster)),
            audit,
            usage,
            ranking: Arc::new(tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(1, |n| n.get().div_ceil(2)))),
            updates: Mutex::new(updates),
            personal,
            me: me.clone(),
            console_key: mcpgate_protocol::toolbox::random_hex(24),
            pins,
            guards: ArcSwap::from_pointee(guard_set),
            definitions: guards::Definitions::default(),
            view_problems: Mutex::default(),
            instances: Default::default(),
            db,
        }))
    }

    /// The id of upstream `index` (for policy decisions).
    pub fn upstream_id(&self, index: usize) -> &'static str {
        self.ids.load().get(index).copied().unwrap_or("")
    }

    /// The guards in effect, and what running them needs.
    pub fn guards(&self) -> (Arc<guards::GuardSet>, guards::Context) {
        let cx = guards::Context { upstreams: self.upstreams(), audit: self.audit.clone(), metrics: self.metrics.clone() };
        (self.guards.load_full(), cx)
    }

    /// The configuration in effect.
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// When the configuration in effect was loaded: at start, or by the last reload.
    pub fn loaded_at(&self) -> std::time::SystemTime {
        std::time::UNIX_EPOCH + Duration::from_millis(self.loaded_at.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Every upstream by index, retired ones included (they are never ready).
    pub fn upstreams(&self) -> Arc<Vec<Arc<Upstream>>> {
        self.upstreams.load_full()
    }

    /// The configured upstreams (not retired by a reload).
    pub fn live_upstreams(&self) -> Vec<Arc<Upstream>> {
        self.upstreams.load().iter().filter(|u| !u.is_retired()).cloned().collect()
    }

    pub fn upstream(&self, index: usize) -> Option<Arc<Upstream>> {
        self.upstreams.load().get(index).cloned()
    }

    pub fn auth(&self) -> Arc<Authenticator> {
        self.auth.load_full()
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.load_full()
    }

    /// The catalogue as `caller` sees it through the endpoint it came in by: the root's, or a
    /// virtual server's view (empty when a reload removed that endpoint).
    pub fn catalog_for(&self, caller: &crate::auth::Principal) -> Arc<Catalog> {
        if let Some(p) = &self.personal {
            return self.personal_catalog(p, caller);
        }
        match caller.endpoint.as_deref() {
            None => self.catalog(),
            Some(path) => self.view(path).unwrap_or_default(),
        }
    }

    /// The view of the virtual server at `path`.
    pub fn view(&self, path: &str) -> Option<Arc<Catalog>> {
        self.views.load().iter().find(|(p, _)| p.as_ref() == path).map(|(_, v)| v.clone())
    }

    /// Ready once the first refresh round has finished (each upstream answered or failed).
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Whether the upstreams `/readyz` needs are ready (`server.ready_when`).
    pub fn upstreams_ready(&self) -> bool {
        let ready = |u: &Arc<Upstream>| u.state().status == Status::Ready;
        // An upstream reached with each caller's own token has no state of its own to be ready.
        let live: Vec<_> = self.live_upstreams().into_iter().filter(|u| !self.is_personal(u.index)).collect();
        match self.config().server.ready_when {
            _ if live.is_empty() => true,
            mcpgate_config::ReadyWhen::Any => live.iter().any(ready),
            mcpgate_config::ReadyWhen::All => live.iter().all(ready),
        }
    }

    /// Waits for the first refresh round, at most as long as the slowest upstream may take.
    pub async fn wait_ready(&self) {
        if self.is_ready() {
            return;
        }
        let longest = self.upstreams().iter().map(|u| u.cfg.timeout).max().unwrap_or_default();
        let mut rx = self.ready.subscribe();
        let _ = tokio::time::timeout(longest + Duration::from_secs(1), rx.wait_for(|r| *r)).await;
    }

    /// Whether any upstream that is up declared the server capability `cap` (`prompts`, ...).
    pub fn offers(&self, cap: &str) -> bool {
        self.upstreams().iter().any(|u| {
            let st = u.state();
            st.status == Status::Ready && !u.is_retired() && st.offers(cap)
        })
    }

    /// Whether any upstream that is up declares a capability flag (`resources.subscribe`).
    pub fn declares(&self, cap: &str, flag: &str) -> bool {
        self.upstreams().iter().any(|u| {
            let st = u.state();
            st.status == Status::Ready && !u.is_retired() && st.declares(cap, flag)
        })
    }

    /// Refreshes every upstream concurrently; each one updates the catalogue as soon as it is done.
    pub async fn refresh_all(&self) {
        let all = self.upstreams();
        let tasks = all.iter().map(|u| self.refresh_one(u));
        futures_util::future::join_all(tasks).await;
        self.ready.send_replace(true);
    }

    async fn refresh_one(&self, up: &Arc<Upstream>) {
        if let Some(p) = self.personal.as_ref().filter(|_| self.is_personal(up.index)) {
            // Never called with a credential of the gateway's: only where its authorization lives
            // is learnt (each caller's own handle probes and lists it), in the background, so a
            // slow authorization server does not hold the catalogue (its `connect` tool needs none).
            let (identity, id) = (p.identity.clone(), up.id().to_string());
            self.tasks.spawn(async move {
                if let Err(e) = identity.discover(&id).await {
                    tracing::warn!(upstream = %id, error = %e, "the upstream's authorization could not be discovered yet");
                }
            });
            return;
        }
        let before = up.state().status.clone();
        match up.refresh().await {
            Ok(()) => {
                let stale = up.state().stale_lists;
                if stale > 0 {
                    self.metrics.stale_lists(up.id(), stale);
                }
                if before != Status::Ready {
                    let st = up.state();
                    let latency_ms = st.latency.map(|l| l.as_millis() as u64).unwrap_or(0);
                    tracing::info!(upstream = %up.id(), tools = st.items(Kind::Tool).len(), latency_ms, "upstream ready");
                }
            }
            Err(reason) => {
                if !matches!(&before, Status::Down(previous) if *previous == reason) {
                    tracing::warn!(upstream = %up.id(), %reason, "upstream unavailable");
                }
            }
        }
        self.rebuild();
    }

    /// Rebuilds the catalogue from every ready upstream's lists, swaps it in and tells every
    /// subscription whose caller's view changed.
    pub fn rebuild(&self) {
        let _guard = lock(&self.rebuild_lock);
        let all = self.upstreams();
        let states: Vec<_> = all.iter().map(|u| u.state()).collect();
        // Tools screened against their pins and the catalogue guards: what is held stays out, as
        // a problem.
        let screened = self.screen_all(&all, &states);
        let config = self.config();
        let inputs: Vec<UpstreamLists> = all
            .iter()
            .zip(&states)
            .zip(&screened)
            .filter(|((u, st), _)| st.status == Status::Ready && !u.is_retired())
            .map(|((u, st), sc)| UpstreamLists {
                upstream: u.index,
                id: u.id(),
                prefix: &u.cfg.prefix,
                items: [
                    sc.tools.as_deref().unwrap_or(st.items(Kind::Tool)),
                    sc.prompts.as_deref().unwrap_or(st.items(Kind::Prompt)),
                    sc.resources.as_deref().unwrap_or(st.items(Kind::Resource)),
                    st.items(Kind::Template),
                    sc.skills.as_deref().unwrap_or(st.items(Kind::Skill)),
                ],
                ttl_ms: st.ttl_ms,
                listed_at: st.listed_at,
                private: st.private,
                has_resources: st.offers("resources"),
                rename: &u.cfg.rename,
                validate: u.cfg.validate_arguments,
            })
            .collect();
        let namespaces: Vec<(usize, String)> =
            all.iter().filter(|u| !u.cfg.prefix.is_empty() && !u.is_retired()).map(|u| (u.index, u.cfg.prefix.clone())).collect();
        let naming = catalog::merge::Naming { policy: &config.catalog.names, namespaces: &namespaces };
        let mut built = catalog::merge::build(&inputs, &naming);
        for ((u, st), sc) in all.iter().zip(&states).zip(&screened) {
            if st.status == Status::Ready && !u.is_retired() {
                built.problems.extend(sc.held.iter().cloned());
            }
        }
        self.metrics
            .set_pins(built.problems.iter().filter(|p| p.reason.starts_with(pins::HELD)).count(), screened.iter().map(|s| s.drifted).sum());
        let next = Arc::new(built);
        let prev = self.catalog.load_full();
        for p in next.problems.iter().filter(|p| !prev.problems.contains(p)) {
            log_problem(p);
        }
        self.catalog.store(next.clone());
        let id_of = |i: usize| self.upstream_id(i);
        self.hub.catalog_changed(&prev, &next, &id_of, None);
        let views: Vec<(Arc<str>, Arc<Catalog>)> = config
            .endpoints
            .iter()
            .map(|ep| (Arc::from(ep.path.as_str()), Arc::new(catalog::endpoint::view(&next, &ep.selection(), &id_of))))
            .collect();
        let prev_views = self.views.swap(Arc::new(views.clone()));
        let empty = Catalog::default();
        // What an endpoint's selection matches is known once every upstream has answered (or
        // failed): until then "matches nothing" may only mean "not started yet", so it is not
        // reported; once settled, each problem is reported once.
        let settled = all.iter().zip(&states).all(|(u, st)| u.is_retired() || self.is_personal(u.index) || st.status != Status::Pending);
        let mut reported = lock(&self.view_problems);
        for (path, view) in &views {
            let before = prev_views.iter().find(|(p, _)| p == path).map_or(&empty, |(_, v)| v.as_ref());
            if settled {
                for p in view.problems.iter().filter(|p| !reported.iter().any(|(rp, r)| rp == path && r == *p)) {
                    log_problem(p);
                }
            }
            self.hub.catalog_changed(before, view, &id_of, Some(path));
        }
        if settled {
            *reported = views.iter().flat_map(|(path, v)| v.problems.iter().map(move |p| (path.clone(), p.clone()))).collect();
        }
        drop(reported);
        // A followed URI may now route to an upstream that just came up.
        self.hub.follows.notify_one();
    }

    /// Tells each upstream which of its resources clients follow (from every open subscription).
    pub fn sync_follows(&self) {
        let cat = self.catalog();
        let mut per: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
        for uri in self.hub.followed_uris() {
            if let Some((upstream, original)) = cat.route_uri(&uri) {
                per.entry(upstream).or_default().insert(original);
            }
        }
        for up in self.upstreams().iter() {
            up.follow(per.remove(&up.index).unwrap_or_default());
        }
    }
}

/// Makes the handle of upstream `index`, with its own owner for background work.
pub(super) fn make_upstream(
    index: usize,
    u: &mcpgate_config::UpstreamConfig,
    client: &HttpClients,
    tasks: &Background,
    config: &Config,
) -> Result<(Arc<Upstream>, mpsc::Receiver<String>), StartError> {
    let (tx, rx) = mpsc::channel(UPDATE_QUEUE);
    let client = match &u.tls {
        Some(t) => HttpClients::with_tls(t).map_err(|source| StartError::UpstreamTls { upstream: u.id.clone(), source })?,
        None => client.clone(),
    };
    let shared = Shared { client, tasks: tasks.child(), input_timeout: config.server.input_timeout };
    Ok((Arc::new(Upstream::new(index, u.clone(), shared, tx)), rx))
}

/// An upstream id that lives as long as the process (ids are never reused or changed).
fn leak(id: &str) -> &'static str {
    Box::leak(id.to_string().into_boxed_str())
}

pub fn log_problem(p: &Problem) {
    tracing::warn!(upstream = %p.upstream, kind = p.kind.label(), item = %p.item, reason = %p.reason, "item not served");
}
