//! Shared counters on Redis for the usage accounting and quotas: hashes of integer fields that
//! replicas add to in batches (`HINCRBY` in one pipeline, each hash given its time to live), read
//! back whole, and a quota taken atomically (a Lua script that refuses at the limit instead of
//! counting past it, so the count never runs over and what is left is exact).

use super::{Cluster, ClusterError};
use std::time::Duration;

pub(super) const QUOTA_TAKE: &str = r"
local n = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if n >= tonumber(ARGV[2]) then return -1 end
n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return n
";

/// One addition to a shared counter: `field` of hash `hash` grows by `by`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Add {
    pub hash: String,
    pub field: String,
    pub by: i64,
}

impl Cluster {
    /// Adds every `adds` in one round trip; each hash touched then lives `ttl` more.
    pub async fn counts_add(&self, adds: &[Add], ttl: Duration) -> Result<(), ClusterError> {
        if adds.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn.clone();
        let mut pipe = redis::pipe();
        let mut hashes: Vec<&str> = Vec::new();
        for a in adds {
            pipe.cmd("HINCRBY").arg(self.key(&format!("counts:{}", a.hash))).arg(&a.field).arg(a.by).ignore();
            if !hashes.contains(&a.hash.as_str()) {
                hashes.push(&a.hash);
            }
        }
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1000);
        for h in hashes {
            pipe.cmd("PEXPIRE").arg(self.key(&format!("counts:{h}"))).arg(ms).ignore();
        }
        self.run("counts_add", pipe.query_async::<()>(&mut conn)).await
    }

    /// The fields of each hash in `hashes` (an empty list for a hash that does not exist).
    pub async fn counts_get(&self, hashes: &[String]) -> Result<Vec<Vec<(String, i64)>>, ClusterError> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn.clone();
        let mut pipe = redis::pipe();
        for h in hashes {
            pipe.cmd("HGETALL").arg(self.key(&format!("counts:{h}")));
        }
        let all: Vec<Vec<(String, i64)>> = self.run("counts_get", pipe.query_async(&mut conn)).await?;
        Ok(all)
    }

    /// Takes one call from `field` of quota hash `hash` holding at most `limit`, the hash ending at
    /// `expires_at_ms` (Unix milliseconds): the new count, or `None` when the limit was reached.
    pub async fn quota_take(&self, hash: &str, field: &str, limit: u64, expires_at_ms: u64) -> Result<Option<u64>, ClusterError> {
        let mut conn = self.conn.clone();
        let mut call = self.quota_take.key(self.key(&format!("counts:{hash}")));
        call.arg(field).arg(limit).arg(expires_at_ms);
        let n: i64 = self.run("quota_take", call.invoke_async(&mut conn)).await?;
        Ok(u64::try_from(n).ok())
    }

    /// Gives back one call taken from `field` of quota hash `hash` (a later quota refused it).
    pub async fn quota_return(&self, hash: &str, field: &str) -> Result<(), ClusterError> {
        let mut conn = self.conn.clone();
        let _: i64 = self
            .run("quota_return", redis::cmd("HINCRBY").arg(self.key(&format!("counts:{hash}"))).arg(field).arg(-1).query_async(&mut conn))
            .await?;
        Ok(())
    }
}
