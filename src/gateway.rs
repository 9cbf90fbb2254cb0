//! The gateway's shared state: the resolved config, one [`Upstream`] handle per configured
//! upstream, and the catalogue snapshot (an `Arc` swapped atomically). Refreshing happens off the
//! request path: each upstream is probed on its own schedule (backing off while it is down) and
//! the catalogue is rebuilt from the latest state of all of them after each refresh. An upstream
//! that goes down keeps its last tool list, so its tools still route and fail with an error that
//! names it instead of turning into "Unknown tool".

use crate::auth::Authenticator;
use crate::catalog::{self, Catalog, Kind, Problem, UpstreamLists};
use crate::config::Config;
use crate::ratelimit::Limiter;
use crate::sync::lock;
use crate::tasks::Background;
use crate::upstream::{HttpClient, Status, Upstream, new_http_client};
use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;

pub struct Gateway {
    pub config: Config,
    pub upstreams: Vec<Arc<Upstream>>,
    pub auth: Arc<Authenticator>,
    pub limiter: Limiter,
    catalog: ArcSwap<Catalog>,
    rebuild_lock: Mutex<()>,
    ready: AtomicBool,
    changes: broadcast::Sender<Kind>,
    /// Owns every background loop and stream (see [`Background`]).
    pub tasks: Background,
}

impl Gateway {
    pub fn new(config: Config) -> Result<Arc<Gateway>, String> {
        Self::with_client(config, new_http_client())
    }

    pub fn with_client(config: Config, client: HttpClient) -> Result<Arc<Gateway>, String> {
        let tasks = Background::new();
        let upstreams = config
            .upstreams
            .iter()
            .enumerate()
            .map(|(i, u)| Arc::new(Upstream::new(i, u.clone(), client.clone(), tasks.clone())))
            .collect();
        let auth = Arc::new(Authenticator::new(&config, client)?);
        Ok(Arc::new(Gateway {
            config,
            upstreams,
            auth,
            limiter: Limiter::default(),
            catalog: ArcSwap::from_pointee(Catalog::default()),
            rebuild_lock: Mutex::new(()),
            ready: AtomicBool::new(false),
            changes: broadcast::channel(64).0,
            tasks,
        }))
    }

    /// The id of upstream `index` (for policy decisions).
    pub fn upstream_id(&self, index: usize) -> &str {
        self.upstreams.get(index).map(|u| u.id()).unwrap_or("")
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.load_full()
    }

    /// Ready once the first refresh round has finished (each upstream answered or failed).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Events for every list whose contents changed in a rebuild.
    pub fn subscribe_changes(&self) -> broadcast::Receiver<Kind> {
        self.changes.subscribe()
    }

    /// Whether any live upstream declared the server capability `cap` (`prompts`, ...).
    pub fn offers(&self, cap: &str) -> bool {
        self.upstreams.iter().any(|u| {
            let st = u.state();
            (st.status == Status::Ready || st.has_items()) && st.offers(cap)
        })
    }

    /// Refreshes every upstream concurrently; each one updates the catalogue as soon as it is done.
    pub async fn refresh_all(&self) {
        let tasks = self.upstreams.iter().map(|u| self.refresh_one(u));
        futures_util::future::join_all(tasks).await;
        self.ready.store(true, Ordering::SeqCst);
    }

    async fn refresh_one(&self, up: &Arc<Upstream>) {
        let before = up.state().status.clone();
        match up.refresh().await {
            Ok(()) => {
                if before != Status::Ready {
                    let st = up.state();
                    tracing::info!(upstream = %up.id(), tools = st.items(Kind::Tool).len(), latency_ms = st.latency.map(|l| l.as_millis() as u64).unwrap_or(0), "upstream ready");
                }
            }
            Err(reason) => {
                if before != Status::Down(reason.to_string()) {
                    tracing::warn!(upstream = %up.id(), %reason, "upstream unavailable");
                }
            }
        }
        self.rebuild();
    }

    /// Rebuilds the catalogue from every upstream's latest tool list and swaps it in.
    pub fn rebuild(&self) {
        let _guard = lock(&self.rebuild_lock);
        let states: Vec<_> = self.upstreams.iter().map(|u| u.state()).collect();
        let inputs: Vec<UpstreamLists> = self
            .upstreams
            .iter()
            .zip(&states)
            .filter(|(_, st)| st.status == Status::Ready || st.has_items())
            .map(|(u, st)| UpstreamLists {
                upstream: u.index,
                id: u.id(),
                prefix: &u.cfg.prefix,
                items: [st.items(Kind::Tool), st.items(Kind::Prompt), st.items(Kind::Resource), st.items(Kind::Template)],
                ttl_ms: st.ttl_ms,
                private: st.private,
                has_resources: st.offers("resources"),
            })
            .collect();
        let next = catalog::merge::build(&inputs, &self.config.catalog.separator);
        let prev = self.catalog.load();
        for p in next.problems.iter().filter(|p| !prev.problems.contains(p)) {
            log_problem(p);
        }
        for kind in Kind::ALL {
            let before: Vec<&str> = prev.section(kind).entries.iter().map(|e| e.json.get()).collect();
            let after: Vec<&str> = next.section(kind).entries.iter().map(|e| e.json.get()).collect();
            if before != after {
                let _ = self.changes.send(kind);
            }
        }
        self.catalog.store(Arc::new(next));
    }

    /// Keeps every upstream fresh: on the configured interval while it is up, and with a backoff
    /// from 1 s to the interval while it is down.
    pub fn spawn_maintenance(self: &Arc<Self>) {
        for up in &self.upstreams {
            let gw = Arc::downgrade(self);
            let up = up.clone();
            let interval = self.config.catalog.refresh_interval;
            self.tasks.spawn(async move {
                let mut backoff = Duration::from_secs(1);
                loop {
                    let wait = if up.state().status == Status::Ready {
                        backoff = Duration::from_secs(1);
                        interval
                    } else {
                        let w = backoff;
                        backoff = (backoff * 2).min(interval.max(Duration::from_secs(1)));
                        w
                    };
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        // The upstream said a list changed: re-read it now.
                        _ = up.changed.notified() => {}
                    }
                    let Some(gw) = gw.upgrade() else { return };
                    gw.refresh_one(&up).await;
                }
            });
        }
    }
}

pub fn log_problem(p: &Problem) {
    tracing::warn!(upstream = %p.upstream, kind = p.kind.label(), item = %p.item, reason = %p.reason, "item not served");
}
