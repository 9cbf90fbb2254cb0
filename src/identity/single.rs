//! Single-flight per key, with a deadline: the identity engine's discovery (per upstream) and token
//! refreshes (per caller and upstream) each run once at a time *for their own key*, so one slow or
//! hostile authorization server holds only the work that needs it, never another upstream's or
//! another caller's. A waiter gives up at its deadline instead of queueing behind a stuck flight,
//! and the flight itself runs under the same deadline (docs/security.md, "Work an outsider can
//! make slow holds only itself").

use mcpgate_protocol::sync::lock;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// Keyed locks; an entry lives while someone holds or waits for it.
pub struct Flights<K> {
    locks: Mutex<HashMap<K, Weak<AsyncMutex<()>>>>,
}

impl<K> Default for Flights<K> {
    fn default() -> Self {
        Flights { locks: Mutex::default() }
    }
}

/// The most entries kept before the ones nobody holds are dropped.
const PRUNE_AT: usize = 256;

impl<K: Hash + Eq + Clone> Flights<K> {
    /// The flight of `key`, waited for at most `deadline`; `None` when another flight of the same
    /// key still runs at the deadline.
    pub async fn enter(&self, key: &K, deadline: Duration) -> Option<OwnedMutexGuard<()>> {
        let mutex = {
            let mut locks = lock(&self.locks);
            if locks.len() >= PRUNE_AT {
                locks.retain(|_, w| w.strong_count() > 0);
            }
            match locks.get(key).and_then(Weak::upgrade) {
                Some(m) => m,
                None => {
                    let m = Arc::new(AsyncMutex::new(()));
                    locks.insert(key.clone(), Arc::downgrade(&m));
                    m
                }
            }
        };
        tokio::time::timeout(deadline, mutex.lock_owned()).await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_key_waits_for_itself_only() {
        let flights: Arc<Flights<&'static str>> = Arc::default();
        let slow = flights.enter(&"slow-as", Duration::from_secs(1)).await.expect("first flight");
        // Another key is not held up by the slow one.
        assert!(flights.enter(&"other-as", Duration::from_millis(1)).await.is_some());
        // The same key waits, and gives up at its deadline.
        assert!(flights.enter(&"slow-as", Duration::from_millis(50)).await.is_none());
        drop(slow);
        assert!(flights.enter(&"slow-as", Duration::from_millis(1)).await.is_some(), "free again once the flight ends");
    }

    #[tokio::test]
    async fn unused_entries_are_dropped() {
        let flights: Flights<usize> = Flights::default();
        for i in 0..(PRUNE_AT * 3) {
            let _g = flights.enter(&i, Duration::from_secs(1)).await;
        }
        assert!(lock(&flights.locks).len() <= PRUNE_AT + 1);
    }
}
