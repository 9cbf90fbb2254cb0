//! What callers spend, and the limits on it. `rate`: rate limits per caller and tool (token
//! buckets, taken before a call is forwarded). The rest: usage accounting and quotas: who called
//! which tool, through which upstream and endpoint, with what outcome, how often and how long
//! (`[usage]`), and how many calls each caller has left of its `[[quota]]` rules. A call's counts
//! go to this replica's pending rows on the call path (one lock, no I/O) and reach the store at
//! each flush: the state database (SQLite, or PostgreSQL shared by replicas), or Redis with
//! `[cluster]` and no shared database (see `store`). Rows are rolled up per hour and per day;
//! tools are counted under their catalogue names whatever name an endpoint presents, so one tool's
//! count is never split. Quota counts are taken on the call path, in the store itself (atomically
//! in Redis, so every replica enforces one count), and refuse the first call past the limit until
//! the window ends. `query` answers `mcpgate usage` and the console from the same store.

mod db;
mod error;
pub mod query;
pub mod rate;
pub mod store;

pub use error::UsageError;
use mcpgate_config::cluster::FailMode;
use mcpgate_config::usage::{Quota, UsageConfig};
use mcpgate_net::cluster::Cluster;
use mcpgate_protocol::sync::lock;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{DAY, Data, HOUR};

/// What one count is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Row {
    pub caller: String,
    /// The catalogue name.
    pub tool: String,
    pub upstream: String,
    /// The virtual server's path, `-` for the root endpoint.
    pub endpoint: String,
    /// `ok`, `tool_error`, `error`, `upstream_error`, `abandoned`, `rate_limited` or `quota_exceeded`.
    pub outcome: String,
}

/// A [`Row`] of hour `hour`, borrowed: how a call is looked up among the pending counts without
/// copying its parts (it hashes and compares exactly like the owned `(hour, Row)` key).
#[derive(Debug, Clone, Copy)]
pub struct RowRef<'a> {
    pub caller: &'a str,
    pub tool: &'a str,
    pub upstream: &'a str,
    pub endpoint: &'a str,
    pub outcome: &'a str,
}

struct Keyed<'a>(u64, RowRef<'a>);

impl std::hash::Hash for Keyed<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // The order of `(u64, Row)`'s derived hash, field by field.
        self.0.hash(h);
        let r = &self.1;
        for part in [r.caller, r.tool, r.upstream, r.endpoint, r.outcome] {
            part.hash(h);
        }
    }
}

impl hashbrown::Equivalent<(u64, Row)> for Keyed<'_> {
    fn equivalent(&self, (hour, row): &(u64, Row)) -> bool {
        let r = &self.1;
        self.0 == *hour
            && r.caller == row.caller
            && r.tool == row.tool
            && r.upstream == row.upstream
            && r.endpoint == row.endpoint
            && r.outcome == row.outcome
    }
}

impl RowRef<'_> {
    pub fn to_row(&self) -> Row {
        Row {
            caller: self.caller.to_string(),
            tool: self.tool.to_string(),
            upstream: self.upstream.to_string(),
            endpoint: self.endpoint.to_string(),
            outcome: self.outcome.to_string(),
        }
    }
}

/// Calls and their total milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub calls: u64,
    pub ms: u64,
}

impl Tally {
    pub fn add(&mut self, t: Tally) {
        self.calls += t.calls;
        self.ms += t.ms;
    }
}

/// Where the counts are kept.
enum Backend {
    /// Counts held in memory and written to the state database (`db`), or, without one, to the
    /// JSON file at `path`.
    File {
        path: PathBuf,
        data: Mutex<Data>,
        failing: AtomicBool,
        db: Option<Arc<mcpgate_store::Db>>,
    },
    Shared(Arc<Cluster>),
}

/// The counts not flushed yet, by hour and row.
pub type Pending = hashbrown::HashMap<(u64, Row), Tally>;

/// A call refused by a quota: which, and when its window ends.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub count: u64,
    pub window: String,
    /// Unix seconds.
    pub resets_at: u64,
    pub wait: Duration,
}

/// The accounting of one gateway (or of `mcpgate usage`, reading the same store).
pub struct Usage {
    cfg: UsageConfig,
    pending: Mutex<Pending>,
    backend: Backend,
    /// Where quotas are counted when the counts are in a shared database: the cluster's Redis.
    quota_cluster: Option<Arc<Cluster>>,
    /// Serialises flushes (the loop, a console read and the final flush).
    flushing: tokio::sync::Mutex<()>,
}

pub fn now_secs() -> u64 {
    mcpgate_protocol::toolbox::unix_secs()
}

/// The first word of an audit outcome label (`error -32602` counts as `error`).
pub fn outcome_class(label: &str) -> &str {
    label.split(' ').next().unwrap_or(label)
}

/// Whether an outcome is a call the gateway refused before it ran (a rate limit or a quota):
/// counted as a call, never as the tool's error.
pub fn is_refusal(outcome: &str) -> bool {
    use crate::telemetry::reasons::Refused;
    let class = outcome_class(outcome);
    class == Refused::RateLimited.as_str() || class == Refused::QuotaExceeded.as_str()
}

impl Usage {
    /// The accounting over the state database `db` when it is shared by replicas (PostgreSQL;
    /// quotas then counted in `cluster`'s Redis when given), else over `cluster`'s Redis when
    /// given, else over `db` or, without one, the file `cfg.store` (read now; a file that cannot
    /// be read as a store is moved aside, never overwritten).
    pub fn open(cfg: &UsageConfig, cluster: Option<Arc<Cluster>>, db: Option<Arc<mcpgate_store::Db>>) -> Usage {
        let (backend, quota_cluster) = match (cluster, db) {
            (c, Some(db)) if db.shared() => (Self::in_db(cfg, db), c),
            (Some(c), _) => (Backend::Shared(c), None),
            (None, Some(db)) => (Self::in_db(cfg, db), None),
            (None, None) => {
                let data = match Data::read(&cfg.store) {
                    Ok(d) => d,
                    Err(e) => {
                        let aside = cfg.store.with_extension(format!("unreadable-{}", now_secs()));
                        let moved = std::fs::rename(&cfg.store, &aside).is_ok();
                        tracing::warn!(error = %e, moved_to = %aside.display(), moved, "the usage store could not be read; counting starts afresh");
                        Data::default()
                    }
                };
                (Backend::File { path: cfg.store.clone(), data: Mutex::new(data), failing: AtomicBool::new(false), db: None }, None)
            }
        };
        Usage { cfg: cfg.clone(), pending: Mutex::default(), backend, quota_cluster, flushing: tokio::sync::Mutex::new(()) }
    }

    fn in_db(cfg: &UsageConfig, db: Arc<mcpgate_store::Db>) -> Backend {
        let data = db::load(&db, &cfg.store).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the usage counts could not be read from the state database; counting starts afresh");
            Data::default()
        });
        Backend::File { path: cfg.store.clone(), data: Mutex::new(data), failing: AtomicBool::new(false), db: Some(db) }
    }

    /// The accounting of a configuration, to report from (`mcpgate usage`): as [`Usage::open`],
    /// but a store that cannot be read is an error, left where it is.
    pub fn read(cfg: &UsageConfig, cluster: Option<Arc<Cluster>>, db: Option<Arc<mcpgate_store::Db>>) -> Result<Usage, UsageError> {
        let in_db = |db: Arc<mcpgate_store::Db>| -> Result<Backend, UsageError> {
            Ok(Backend::File {
                path: cfg.store.clone(),
                data: Mutex::new(db::load(&db, &cfg.store)?),
                failing: AtomicBool::new(false),
                db: Some(db),
            })
        };
        let (backend, quota_cluster) = match (cluster, db) {
            (c, Some(db)) if db.shared() => (in_db(db)?, c),
            (Some(c), _) => (Backend::Shared(c), None),
            (None, Some(db)) => (in_db(db)?, None),
            (None, None) => (
                Backend::File {
                    path: cfg.store.clone(),
                    data: Mutex::new(Data::read(&cfg.store)?),
                    failing: AtomicBool::new(false),
                    db: None,
                },
                None,
            ),
        };
        Ok(Usage { cfg: cfg.clone(), pending: Mutex::default(), backend, quota_cluster, flushing: tokio::sync::Mutex::new(()) })
    }

    /// Where quotas are counted once for every replica: the cluster's Redis, if any.
    fn quotas_shared(&self) -> Option<&Arc<Cluster>> {
        match &self.backend {
            Backend::Shared(c) => Some(c),
            Backend::File { .. } => self.quota_cluster.as_ref(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.cfg.enabled
    }

    /// Counts one ended tool call (a no-op with `[usage] enabled = false`). A row already
    /// pending is counted without a copy of its parts.
    pub fn record(&self, row: RowRef<'_>, took_ms: u64) {
        if !self.cfg.enabled {
            return;
        }
        let now = now_secs();
        let key = Keyed(now - now % HOUR, row);
        let one = Tally { calls: 1, ms: took_ms };
        let mut p = lock(&self.pending);
        match p.get_mut(&key) {
            Some(t) => t.add(one),
            None => {
                p.insert((key.0, row.to_row()), one);
            }
        }
    }

    /// Sends the pending counts to the store; counts that could not be written are kept for the
    /// next flush (nothing is lost while Redis or the disk is away).
    pub async fn flush(&self) {
        let _one = self.flushing.lock().await;
        let pending = std::mem::take(&mut *lock(&self.pending));
        match &self.backend {
            Backend::File { path, data, failing, db } => {
                let written = {
                    let mut d = lock(data);
                    for ((hour, row), t) in &pending {
                        d.add(*hour, row, *t);
                    }
                    let now = now_secs();
                    let (keep_h, keep_d) = (self.cfg.keep_hourly.as_secs(), self.cfg.keep_daily.as_secs());
                    d.prune(now, keep_h, keep_d);
                    if pending.is_empty() && !failing.load(Ordering::Relaxed) && !d.quotas_dirty {
                        Ok(())
                    } else {
                        let quotas = std::mem::take(&mut d.quotas_dirty);
                        match db {
                            Some(db) => {
                                let done = db::write(db, &pending, &d, now, now.saturating_sub(keep_h), now.saturating_sub(keep_d), quotas);
                                if done.is_err() {
                                    // Not written: added again at the next flush (the memory already has them).
                                    d.quotas_dirty |= quotas;
                                    let mut p = lock(&self.pending);
                                    for (k, t) in &pending {
                                        p.entry(k.clone()).or_default().add(*t);
                                    }
                                    for ((hour, row), t) in &pending {
                                        d.sub(*hour, row, *t);
                                    }
                                }
                                done
                            }
                            None => d.write(path),
                        }
                    }
                };
                match written {
                    Ok(()) => {
                        if failing.swap(false, Ordering::Relaxed) {
                            tracing::info!(store = %path.display(), "the usage store is written again");
                        }
                    }
                    Err(e) => {
                        if !failing.swap(true, Ordering::Relaxed) {
                            tracing::warn!(
                                error = %e,
                                "the usage store cannot be written; counts are kept in memory until it can (point [usage] store at a \
                                 writable file, or use [cluster])"
                            );
                        }
                    }
                }
            }
            Backend::Shared(cluster) => {
                let (hours, days) = store::adds(&pending);
                let ttl_h = self.cfg.keep_hourly + Duration::from_secs(HOUR);
                let ttl_d = self.cfg.keep_daily + Duration::from_secs(DAY);
                let done = match cluster.counts_add(&hours, ttl_h).await {
                    Ok(()) => cluster.counts_add(&days, ttl_d).await.map_err(|e| (e, true)),
                    Err(e) => Err((e, false)),
                };
                if let Err((e, hours_written)) = done {
                    tracing::warn!(error = %e, "usage counts could not be written to the cluster's Redis; kept for the next flush");
                    // Keep what was not written (the hourly rows went in when only the daily failed:
                    // those are lost to the daily roll-up rather than counted twice hourly).
                    if !hours_written {
                        let mut p = lock(&self.pending);
                        for (k, t) in pending {
                            p.entry(k).or_default().add(t);
                        }
                    }
                }
            }
        }
    }

    /// Flushes every `flush_interval` until `tasks` shut down, then once more.
    pub fn spawn_flush(self: &Arc<Self>, tasks: &mcpgate_protocol::tasks::Background) {
        let (me, stop, every) = (self.clone(), tasks.token(), self.cfg.flush_interval);
        tasks.track(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => me.flush().await,
                    _ = stop.cancelled() => {
                        me.flush().await;
                        return;
                    }
                }
            }
        });
    }

    /// Takes one call from every quota that applies to `caller` (its name and the `[[caller]]`
    /// ids it matched) calling `tool`; refuses, taking nothing, when one is used up.
    pub async fn take_quota(
        &self,
        quotas: &[Quota],
        caller: &str,
        rules: &[String],
        tool: &str,
        cluster_default: FailMode,
    ) -> Result<(), Refusal> {
        let applies = |q: &&Quota| {
            mcpgate_model::policy::glob::matches(&q.tools, tool)
                && q.callers.iter().any(|g| {
                    mcpgate_model::policy::glob::matches(g, caller) || rules.iter().any(|r| mcpgate_model::policy::glob::matches(g, r))
                })
        };
        let matching: Vec<&Quota> = quotas.iter().filter(applies).collect();
        if matching.is_empty() {
            return Ok(());
        }
        let now = now_secs();
        let refusal = |q: &Quota, end: u64| Refusal {
            count: q.count,
            window: q.window.label(),
            resets_at: end,
            wait: Duration::from_secs(end.saturating_sub(now).max(1)),
        };
        match (self.quotas_shared(), &self.backend) {
            // Taken in the database before the call goes on: a crash gives nothing back, and
            // replicas sharing the database share the count.
            (None, Backend::File { data, db: Some(db), .. }) => {
                let windows: Vec<db::Window> = matching
                    .iter()
                    .map(|q| {
                        let (start, end) = q.window.bounds(now);
                        db::Window { quota: q.id.clone(), start, end, limit: q.count }
                    })
                    .collect();
                // Off the threads that serve requests: a commit is a write, and on PostgreSQL a
                // round trip.
                let (db, who) = (db.clone(), caller.to_string());
                let taken = tokio::task::spawn_blocking(move || {
                    db.tx_quick(|t| db::take(t, &windows, &who)).map(|spent| (spent, windows)).map_err(UsageError::Db)
                })
                .await
                .unwrap_or_else(|e| Err(UsageError::QuotaStepStopped(e)));
                match taken {
                    Ok((None, windows)) => {
                        let mut d = lock(data);
                        for w in windows {
                            *d.quotas.entry((w.quota, w.start, w.end)).or_default().entry(caller.to_string()).or_default() += 1;
                        }
                        Ok(())
                    }
                    Ok((Some(i), windows)) => Err(refusal(matching[i], windows[i].end)),
                    Err(e) => {
                        let mode = matching.iter().find_map(|q| q.on_redis_error).unwrap_or(cluster_default);
                        tracing::warn!(error = %e, closed = mode == FailMode::Closed, "a quota could not be counted in the state database");
                        match mode {
                            FailMode::Closed => {
                                Err(Refusal { wait: Duration::from_secs(1), resets_at: now + 1, ..refusal(matching[0], now + 1) })
                            }
                            FailMode::Open => Ok(()),
                        }
                    }
                }
            }
            (None, Backend::File { data, .. }) => {
                let mut d = lock(data);
                for q in &matching {
                    let (start, end) = q.window.bounds(now);
                    let used = d.quotas.get(&(q.id.clone(), start, end)).and_then(|c| c.get(caller)).copied().unwrap_or(0);
                    if used >= q.count {
                        return Err(refusal(q, end));
                    }
                }
                for q in &matching {
                    let (start, end) = q.window.bounds(now);
                    *d.quotas.entry((q.id.clone(), start, end)).or_default().entry(caller.to_string()).or_default() += 1;
                }
                d.quotas_dirty = true;
                Ok(())
            }
            (None, Backend::Shared(cluster)) | (Some(cluster), _) => {
                let mut taken: Vec<String> = Vec::new();
                for q in &matching {
                    let (start, end) = q.window.bounds(now);
                    let hash = store::quota_hash(&q.id, start);
                    match cluster.quota_take(&hash, caller, q.count, (end + HOUR) * 1000).await {
                        Ok(Some(_)) => taken.push(hash),
                        Ok(None) => {
                            for h in &taken {
                                let _ = cluster.quota_return(h, caller).await;
                            }
                            return Err(refusal(q, end));
                        }
                        Err(e) => {
                            let mode = q.on_redis_error.unwrap_or(cluster_default);
                            cluster.failed(mode);
                            tracing::debug!(error = %e, quota = %q.id, "a quota could not be counted in the cluster's Redis");
                            if mode == FailMode::Closed {
                                for h in &taken {
                                    let _ = cluster.quota_return(h, caller).await;
                                }
                                return Err(Refusal { wait: Duration::from_secs(1), resets_at: now + 1, ..refusal(q, end) });
                            }
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgate_config::usage::Window;

    fn quota(callers: &[&str], tools: &str, count: u64) -> Quota {
        Quota {
            callers: callers.iter().map(|c| c.to_string()).collect(),
            tools: tools.into(),
            count,
            window: Window::Day,
            on_redis_error: None,
            id: format!("{}|{tools}|{count}/day", callers.join(",")),
        }
    }

    fn usage() -> (tempfile::TempDir, Usage) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = UsageConfig { store: dir.path().join("usage.json"), ..UsageConfig::default() };
        let u = Usage::open(&cfg, None, None);
        (dir, u)
    }

    #[tokio::test]
    async fn a_quota_refuses_the_first_call_past_it_and_takes_nothing_then() {
        let (_dir, u) = usage();
        let quotas = vec![quota(&["team-*"], "*", 5), quota(&["*"], "calc__*", 2)];
        let rules = vec!["team-a".to_string()];
        for _ in 0..2 {
            u.take_quota(&quotas, "alice", &rules, "calc__add", FailMode::Open).await.unwrap();
        }
        let refused = u.take_quota(&quotas, "alice", &rules, "calc__add", FailMode::Open).await.unwrap_err();
        assert_eq!(refused.count, 2);
        assert!(refused.resets_at > now_secs() && refused.resets_at <= now_secs() + DAY);
        // The caller-wide quota was not charged for the refused call: 3 more fit elsewhere.
        for _ in 0..3 {
            u.take_quota(&quotas, "alice", &rules, "echo__say", FailMode::Open).await.unwrap();
        }
        assert!(u.take_quota(&quotas, "alice", &rules, "echo__say", FailMode::Open).await.is_err());
        // Another caller of the team counts on its own.
        u.take_quota(&quotas, "bob", &rules, "echo__say", FailMode::Open).await.unwrap();
        // A caller no quota names is never refused.
        for _ in 0..10 {
            u.take_quota(&quotas[..1], "carol", &[], "calc__add", FailMode::Open).await.unwrap();
        }
    }

    #[tokio::test]
    async fn counts_survive_a_restart_through_the_file() {
        let (dir, u) = usage();
        let r = RowRef { caller: "alice", tool: "calc__add", upstream: "calc", endpoint: "-", outcome: "ok" };
        let row = r.to_row();
        u.record(r, 7);
        u.record(r, 5);
        assert_eq!(lock(&u.pending).len(), 1, "the second call found the first's row");
        u.take_quota(&[quota(&["*"], "*", 3)], "alice", &[], "calc__add", FailMode::Open).await.unwrap();
        u.flush().await;
        let again = Usage::open(&UsageConfig { store: dir.path().join("usage.json"), ..UsageConfig::default() }, None, None);
        let Backend::File { data, .. } = &again.backend else { panic!("a file store") };
        let d = lock(data);
        let hour = d.hours.values().next().unwrap();
        assert_eq!(hour[&row], Tally { calls: 2, ms: 12 });
        assert_eq!(d.quotas.values().next().unwrap()["alice"], 1);
    }
}
