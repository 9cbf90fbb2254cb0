//! Token-bucket rate limiting keyed by caller (and by caller and tool pattern): each bucket
//! holds up to `count` tokens and refills at `count` per `per`; a request takes one token or is
//! refused with the time until one is available. Buckets of idle callers are dropped. With
//! `[cluster]`, buckets live in Redis and hold across replicas; while Redis does not answer, a
//! limit that fails open falls back to this replica's own bucket and one that fails closed
//! refuses.

use mcpgate_config::cluster::FailMode;
use mcpgate_config::limits::Rate;
use mcpgate_net::cluster::Cluster;
use mcpgate_protocol::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a request refused because the shared store is down is told to wait.
const STORE_DOWN_RETRY: Duration = Duration::from_secs(1);

const MAX_BUCKETS: usize = 100_000;

struct Bucket {
    tokens: f64,
    last: Instant,
}

#[derive(Default)]
pub struct Limiter {
    buckets: Mutex<HashMap<String, Bucket>>,
    cluster: Option<Arc<Cluster>>,
}

impl Limiter {
    /// A limiter whose buckets live in `cluster`'s Redis when given.
    pub fn new(cluster: Option<Arc<Cluster>>) -> Self {
        Limiter { buckets: Mutex::default(), cluster }
    }

    /// Takes one token from `key`'s bucket, or says how long until one is free.
    pub async fn check(&self, key: &str, rate: Rate) -> Result<(), Duration> {
        let Some(cluster) = &self.cluster else { return self.check_at(key, rate, Instant::now()) };
        match cluster.take(key, rate).await {
            Ok(decision) => decision,
            Err(_) => {
                let mode = rate.on_redis_error.unwrap_or(cluster.config().on_redis_error);
                cluster.failed(mode);
                match mode {
                    FailMode::Open => self.check_at(key, rate, Instant::now()),
                    FailMode::Closed => Err(STORE_DOWN_RETRY),
                }
            }
        }
    }

    fn check_at(&self, key: &str, rate: Rate, now: Instant) -> Result<(), Duration> {
        let mut map = lock(&self.buckets);
        let capacity = f64::from(rate.count);
        let per_sec = capacity / rate.per.as_secs_f64();
        if map.len() >= MAX_BUCKETS {
            // Full buckets carry no state worth keeping.
            map.retain(|_, b| b.tokens + now.duration_since(b.last).as_secs_f64() * per_sec < capacity);
        }
        let b = map.entry(key.to_string()).or_insert(Bucket { tokens: capacity, last: now });
        b.tokens = (b.tokens + now.duration_since(b.last).as_secs_f64() * per_sec).min(capacity);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - b.tokens) / per_sec))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_are_refused_then_recover() {
        let l = Limiter::default();
        let rate = Rate { count: 3, per: Duration::from_secs(1), on_redis_error: None };
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(l.check_at("alice", rate, t0).is_ok());
        }
        let wait = l.check_at("alice", rate, t0).unwrap_err();
        assert!(wait > Duration::from_millis(300) && wait <= Duration::from_millis(334), "{wait:?}");
        assert!(l.check_at("bob", rate, t0).is_ok(), "buckets are per key");
        assert!(l.check_at("alice", rate, t0 + Duration::from_millis(340)).is_ok());
        assert!(l.check_at("alice", rate, t0 + Duration::from_millis(341)).is_err());
        for _ in 0..3 {
            assert!(l.check_at("alice", rate, t0 + Duration::from_secs(5)).is_ok());
        }
    }
}
