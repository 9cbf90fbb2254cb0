//! State that replicas share through Redis (`[cluster]`): rate-limit buckets kept with GCRA in one
//! atomic script per check (so N replicas enforce one limit), the legacy sessions ended with
//! DELETE (a sorted set scored by Redis's own clock, so every replica sees an ending at its next
//! request and open streams learn of it from a poll), versioned maps (a hash and a counter bumped
//! with every change, so a replica re-reads only what changed: the per-user token vault), and
//! one-time entries taken at most once, by whoever proves what they were put with (the started
//! authorizations of per-user identity), and counters (usage and quotas, `counts`). Every command runs under the configured
//! deadline; what a failure means is the caller's decision (fail open or closed), this module
//! counts failures and logs once when Redis goes away and once when it returns.

mod counts;
pub use counts::Add;

use mcpgate_config::cluster::{ClusterConfig, FailMode};
use mcpgate_config::limits::Rate;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

/// GCRA: the bucket is the "theoretical arrival time" of the next request, in microseconds of
/// Redis's clock. ARGV: emission interval (µs per request), burst tolerance (µs: count × interval).
/// Returns 0 when the request is allowed, else the microseconds until it would be.
/// `redis.replicate_commands()` lets a script write after `TIME` on Redis 5 and 6 (on 7 it is
/// the default, and the call a no-op).
const GCRA: &str = r"
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
if new_tat - now > burst then
  return math.max(1, math.floor(new_tat - now - burst))
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.floor((new_tat - now) / 1000) + 1000)
return 0
";

/// Records an ended session: ARGV the session id and how long sessions live (ms). Scores are
/// Redis's clock in ms; entries older than a session's lifetime are dropped as they can no longer
/// open anyway. Returns the score given.
const END_SESSION: &str = r"
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return now
";

/// Sets (ARGV[1] = field, ARGV[2] = value) or, with one argument per field, removes fields of the
/// hash KEYS[1]; bumps the version KEYS[2]; returns the new version.
const MAP_SET: &str = r"
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return redis.call('INCR', KEYS[2])
";
const MAP_REMOVE: &str = r"
redis.call('HDEL', KEYS[1], unpack(ARGV))
return redis.call('INCR', KEYS[2])
";
/// The version KEYS[2] and every field of KEYS[1], read together.
const MAP_ALL: &str = r"
return {tonumber(redis.call('GET', KEYS[2]) or '0'), redis.call('HGETALL', KEYS[1])}
";
/// Takes the one-time entry KEYS[1] if its check is ARGV[1]: its value, removed; else nil (an entry
/// whose check does not match stays for the one who can prove it).
const ONCE_TAKE: &str = r"
if redis.call('HGET', KEYS[1], 'c') ~= ARGV[1] then return false end
local v = redis.call('HGET', KEYS[1], 'v')
redis.call('DEL', KEYS[1])
return v
";

const UNKNOWN: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

/// Counters for `/metrics`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ClusterStats {
    pub up: bool,
    pub errors: u64,
    /// Requests let through (by this replica's own bucket) because Redis did not answer.
    pub failed_open: u64,
    /// Requests refused because Redis did not answer.
    pub failed_closed: u64,
}

pub struct Cluster {
    conn: ConnectionManager,
    cfg: ClusterConfig,
    gcra: redis::Script,
    end_session: redis::Script,
    map_set: redis::Script,
    map_remove: redis::Script,
    map_all: redis::Script,
    once_take: redis::Script,
    quota_take: redis::Script,
    state: AtomicU8,
    errors: AtomicU64,
    failed_open: AtomicU64,
    failed_closed: AtomicU64,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("redis", &self.cfg.redacted_url()).finish_non_exhaustive()
    }
}

/// A failure to reach or use Redis. The URL in it is always the redacted one.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cluster: Redis URL {url}: {source}")]
    Url { url: String, source: redis::RedisError },
    #[error("cluster: Redis {url}: {source}")]
    Client { url: String, source: redis::RedisError },
    #[error("{0}")]
    Redis(#[from] redis::RedisError),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl Cluster {
    /// A client for the configured Redis; it connects on first use (and reconnects after a
    /// failure), so a gateway starts even while Redis is down.
    pub fn connect(cfg: &ClusterConfig) -> Result<Arc<Cluster>, ClusterError> {
        let client = redis::Client::open(cfg.redis_url.as_str()).map_err(|source| ClusterError::Url { url: cfg.redacted_url(), source })?;
        let options = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(cfg.timeout))
            .set_response_timeout(Some(cfg.timeout))
            .set_number_of_retries(1)
            .set_max_delay(cfg.timeout);
        let conn = ConnectionManager::new_lazy_with_config(client, options)
            .map_err(|source| ClusterError::Client { url: cfg.redacted_url(), source })?;
        Ok(Arc::new(Cluster {
            conn,
            cfg: cfg.clone(),
            gcra: redis::Script::new(GCRA),
            end_session: redis::Script::new(END_SESSION),
            map_set: redis::Script::new(MAP_SET),
            map_remove: redis::Script::new(MAP_REMOVE),
            map_all: redis::Script::new(MAP_ALL),
            once_take: redis::Script::new(ONCE_TAKE),
            quota_take: redis::Script::new(counts::QUOTA_TAKE),
            state: AtomicU8::new(UNKNOWN),
            errors: AtomicU64::new(0),
            failed_open: AtomicU64::new(0),
            failed_closed: AtomicU64::new(0),
        }))
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.cfg
    }

    fn key(&self, parts: &str) -> String {
        format!("{}:{parts}", self.cfg.key_prefix)
    }

    /// Runs one Redis operation under the deadline, keeping the up/down state and its log.
    async fn run<T>(&self, op: &'static str, fut: impl Future<Output = redis::RedisResult<T>>) -> Result<T, ClusterError> {
        let outcome = match tokio::time::timeout(self.cfg.timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(ClusterError::Redis(e)),
            Err(_) => Err(ClusterError::Timeout(self.cfg.timeout)),
        };
        match &outcome {
            Ok(_) => {
                if self.state.swap(UP, Ordering::Relaxed) != UP {
                    tracing::info!(redis = %self.cfg.redacted_url(), "cluster: Redis answers; limits and session endings are \
                        shared across replicas");
                }
            }
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                if self.state.swap(DOWN, Ordering::Relaxed) != DOWN {
                    tracing::warn!(
                        redis = %self.cfg.redacted_url(),
                        op,
                        error = %e,
                        limits = self.cfg.on_redis_error.as_str(),
                        sessions = self.cfg.sessions_on_redis_error.as_str(),
                        "cluster: Redis does not answer; shared limits and session endings fail open or closed as configured until it does"
                    );
                }
            }
        }
        outcome
    }

    /// Takes one request from the shared bucket `key` at `rate`: `Ok(Ok(()))` allowed,
    /// `Ok(Err(wait))` refused, `Err` when Redis did not answer.
    pub async fn take(&self, key: &str, rate: Rate) -> Result<Result<(), Duration>, ClusterError> {
        let interval_us = (rate.per.as_micros() / u128::from(rate.count.max(1))).max(1);
        let burst_us = interval_us * u128::from(rate.count);
        let mut conn = self.conn.clone();
        let key = self.key(&format!("rl:{key}"));
        let mut call = self.gcra.key(key);
        call.arg(u64::try_from(interval_us).unwrap_or(u64::MAX)).arg(u64::try_from(burst_us).unwrap_or(u64::MAX));
        let wait_us: u64 = self.run("rate_limit", call.invoke_async(&mut conn)).await?;
        Ok(if wait_us == 0 { Ok(()) } else { Err(Duration::from_micros(wait_us)) })
    }

    /// Records that session `sid` ended, for every replica.
    pub async fn end_session(&self, sid: &str, session_ttl: Duration) -> Result<(), ClusterError> {
        let mut conn = self.conn.clone();
        let mut call = self.end_session.key(self.key("ended"));
        call.arg(sid).arg(u64::try_from(session_ttl.as_millis()).unwrap_or(u64::MAX).max(1000));
        let _: i64 = self.run("end_session", call.invoke_async(&mut conn)).await?;
        Ok(())
    }

    /// Whether session `sid` was ended on any replica.
    pub async fn session_ended(&self, sid: &str) -> Result<bool, ClusterError> {
        let mut conn = self.conn.clone();
        let score: Option<f64> =
            self.run("session_ended", redis::cmd("ZSCORE").arg(self.key("ended")).arg(sid).query_async(&mut conn)).await?;
        Ok(score.is_some())
    }

    /// Sessions ended at or after `since_ms` on Redis's clock (with a second of overlap, so an
    /// ending recorded while the previous poll ran is not missed), and the newest score seen.
    pub async fn ended_since(&self, since_ms: u64) -> Result<(Vec<String>, u64), ClusterError> {
        let mut conn = self.conn.clone();
        let from = since_ms.saturating_sub(1000);
        let found: Vec<(String, f64)> = self
            .run(
                "ended_since",
                redis::cmd("ZRANGEBYSCORE").arg(self.key("ended")).arg(from).arg("+inf").arg("WITHSCORES").query_async(&mut conn),
            )
            .await?;
        // Scores are whole milliseconds written by the script.
        let newest = found.iter().map(|(_, s)| *s as u64).max().unwrap_or(since_ms).max(since_ms);
        Ok((found.into_iter().map(|(sid, _)| sid).collect(), newest))
    }

    /// Sets `field` of the shared map `map` to `value`; the map's new version.
    pub async fn map_set(&self, map: &str, field: &str, value: &str) -> Result<u64, ClusterError> {
        let mut conn = self.conn.clone();
        let mut call = self.map_set.key(self.key(&format!("map:{map}")));
        call.key(self.key(&format!("map:{map}:v"))).arg(field).arg(value);
        self.run("map_set", call.invoke_async(&mut conn)).await
    }

    /// Removes `fields` of the shared map `map`; the map's new version.
    pub async fn map_remove(&self, map: &str, fields: &[String]) -> Result<u64, ClusterError> {
        if fields.is_empty() {
            return self.map_version(map).await;
        }
        let mut conn = self.conn.clone();
        let mut call = self.map_remove.key(self.key(&format!("map:{map}")));
        call.key(self.key(&format!("map:{map}:v")));
        for f in fields {
            call.arg(f);
        }
        self.run("map_remove", call.invoke_async(&mut conn)).await
    }

    /// The shared map `map`'s version (0 before its first change).
    pub async fn map_version(&self, map: &str) -> Result<u64, ClusterError> {
        let mut conn = self.conn.clone();
        let v: Option<u64> =
            self.run("map_version", redis::cmd("GET").arg(self.key(&format!("map:{map}:v"))).query_async(&mut conn)).await?;
        Ok(v.unwrap_or(0))
    }

    /// The shared map `map`, whole, and its version at that moment.
    pub async fn map_all(&self, map: &str) -> Result<(u64, Vec<(String, String)>), ClusterError> {
        let mut conn = self.conn.clone();
        let mut call = self.map_all.key(self.key(&format!("map:{map}")));
        call.key(self.key(&format!("map:{map}:v")));
        let (version, flat): (u64, Vec<String>) = self.run("map_all", call.invoke_async(&mut conn)).await?;
        let mut pairs = Vec::with_capacity(flat.len() / 2);
        let mut it = flat.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            pairs.push((k, v));
        }
        Ok((version, pairs))
    }

    /// Puts the one-time entry `key` for `ttl`: `value`, to be taken by whoever shows `check`.
    pub async fn once_put(&self, key: &str, check: &str, value: &str, ttl: Duration) -> Result<(), ClusterError> {
        let mut conn = self.conn.clone();
        let k = self.key(&format!("once:{key}"));
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("HSET").arg(&k).arg("c").arg(check).arg("v").arg(value).ignore().cmd("PEXPIRE").arg(&k).arg(ms).ignore();
        self.run("once_put", pipe.query_async::<()>(&mut conn)).await
    }

    /// Takes the one-time entry `key` if it was put with `check`: its value (then gone), or `None`
    /// (none, expired, taken, or another check: then it stays).
    pub async fn once_take(&self, key: &str, check: &str) -> Result<Option<String>, ClusterError> {
        let mut conn = self.conn.clone();
        let mut call = self.once_take.key(self.key(&format!("once:{key}")));
        call.arg(check);
        self.run("once_take", call.invoke_async(&mut conn)).await
    }

    /// Claims `key` for `ttl`, once across every replica: `true` for the first claim, `false`
    /// while an earlier one lasts (what makes a grant single-use in a cluster).
    pub async fn claim(&self, key: &str, ttl: Duration) -> Result<bool, ClusterError> {
        let mut conn = self.conn.clone();
        let k = self.key(&format!("claim:{key}"));
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let set: Option<String> =
            self.run("claim", redis::cmd("SET").arg(&k).arg("1").arg("NX").arg("PX").arg(ms).query_async(&mut conn)).await?;
        Ok(set.is_some())
    }

    /// Counts a request decided without Redis.
    pub fn failed(&self, mode: FailMode) {
        match mode {
            FailMode::Open => self.failed_open.fetch_add(1, Ordering::Relaxed),
            FailMode::Closed => self.failed_closed.fetch_add(1, Ordering::Relaxed),
        };
    }

    pub fn stats(&self) -> ClusterStats {
        ClusterStats {
            up: self.state.load(Ordering::Relaxed) == UP,
            errors: self.errors.load(Ordering::Relaxed),
            failed_open: self.failed_open.load(Ordering::Relaxed),
            failed_closed: self.failed_closed.load(Ordering::Relaxed),
        }
    }

    /// One command to learn whether Redis answers (at startup, for the log and the gauge).
    pub async fn ping(&self) -> Result<(), ClusterError> {
        let mut conn = self.conn.clone();
        let _: String = self.run("ping", redis::cmd("PING").query_async(&mut conn)).await?;
        Ok(())
    }
}
