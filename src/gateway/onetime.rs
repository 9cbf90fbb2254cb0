//! One-time entries: something the gateway hands out that may act once (a person's confirmation)
//! is issued here when it is handed out and redeemed when it is used; a second use finds nothing.
//! The sealed token itself carries the binding (caller, endpoint, what was reviewed) and its age;
//! this only records whether it is still unspent. In one process the record is a map with expiry;
//! with `[cluster]` it is Redis's once-only entry (`once_put`/`once_take`), so any replica can
//! redeem what another issued, once. Without `[cluster]`, each replica knows only what it issued:
//! an answer that reaches another replica is not redeemed there (the caller is asked again), which
//! fails closed rather than letting one answer run on two replicas.

use mcpgate_net::cluster::{Cluster, ClusterError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most entries one process keeps unspent; past it, new ones are refused.
const MAX_LOCAL: usize = 100_000;

/// Why an entry could not be issued or redeemed.
#[derive(Debug, thiserror::Error)]
pub enum OneTimeError {
    #[error("too many unanswered entries ({MAX_LOCAL})")]
    Full,
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

pub struct OneTime {
    /// Unspent entries and when each expires (used without a cluster).
    local: Mutex<HashMap<String, Instant>>,
    cluster: Option<Arc<Cluster>>,
}

impl OneTime {
    pub fn new(cluster: Option<Arc<Cluster>>) -> OneTime {
        OneTime { local: Mutex::default(), cluster }
    }

    /// Records `key` as unspent for `ttl`.
    pub async fn issue(&self, key: &str, ttl: Duration) -> Result<(), OneTimeError> {
        if let Some(cluster) = &self.cluster {
            return Ok(cluster.once_put(key, "1", "1", ttl).await?);
        }
        let now = Instant::now();
        let mut local = self.local.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if local.len() >= MAX_LOCAL {
            local.retain(|_, until| *until > now);
            if local.len() >= MAX_LOCAL {
                return Err(OneTimeError::Full);
            }
        }
        local.insert(key.to_string(), now + ttl);
        Ok(())
    }

    /// [`Self::issue`] from code that cannot wait: at once in one process; with a cluster the
    /// entry is put by a task, and until it lands a redemption finds nothing (the caller is
    /// asked again: it fails closed).
    pub fn issue_detached(&self, key: String, ttl: Duration) {
        let Some(cluster) = &self.cluster else {
            let now = Instant::now();
            let mut local = self.local.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if local.len() >= MAX_LOCAL {
                local.retain(|_, until| *until > now);
            }
            if local.len() < MAX_LOCAL {
                local.insert(key, now + ttl);
            }
            return;
        };
        let cluster = cluster.clone();
        tokio::spawn(async move {
            if let Err(e) = cluster.once_put(&key, "1", "1", ttl).await {
                tracing::warn!(error = %e, "a one-time entry could not be recorded; its use will be asked again");
            }
        });
    }

    /// Spends `key`: true the first time it is redeemed within its time, false after (or for a
    /// key never issued here).
    pub async fn redeem(&self, key: &str) -> Result<bool, OneTimeError> {
        if let Some(cluster) = &self.cluster {
            return Ok(cluster.once_take(key, "1").await?.is_some());
        }
        let mut local = self.local.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(local.remove(key).is_some_and(|until| until > Instant::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_entry_is_redeemed_once_and_only_in_its_time() {
        let once = OneTime::new(None);
        once.issue("a", Duration::from_secs(60)).await.expect("issued");
        assert!(!once.redeem("b").await.expect("redeem"), "never issued");
        assert!(once.redeem("a").await.expect("redeem"));
        assert!(!once.redeem("a").await.expect("redeem"), "spent");
        once.issue("c", Duration::ZERO).await.expect("issued");
        assert!(!once.redeem("c").await.expect("redeem"), "expired");
    }
}
