//! Era affinity on the upstream side: a legacy client that reaches an HTTP upstream the gateway
//! speaks the legacy era to gets a legacy upstream session of its own, opened with the client's
//! version, capabilities and client info (`legacy::Hello::client`). What the upstream keeps per
//! session (roots, log level, its own state) and what it asks mid-call (elicitation, sampling,
//! roots) are then the client's, as when it speaks to the upstream directly. This module owns the
//! table of those sessions: keyed by client session and pool endpoint, bounded in number (the
//! least recently used goes first), and closed with `DELETE` when the client's session ends, when
//! one sits idle for longer than [`IDLE`], or when it is evicted.

use super::legacy::Slot;
use super::outbound::Envelope;
use super::{Transport, Upstream};
use mcpgate_protocol::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Client sessions one upstream keeps a session for at once.
const MAX_SESSIONS: usize = 1024;
/// How long a client's upstream session may sit unused before it is closed.
const IDLE: Duration = Duration::from_secs(30 * 60);

/// A legacy client's own upstream session.
#[derive(Default)]
pub(super) struct Own {
    pub slot: Slot,
    /// Held while the session is (re)initialized, so concurrent calls do it once.
    pub opening: tokio::sync::Mutex<()>,
}

/// A client session id and a pool endpoint index.
type Key = (String, usize);

/// The sessions of one upstream, with when each was last used.
#[derive(Default)]
pub(super) struct Affinity {
    map: Mutex<HashMap<Key, (Arc<Own>, Instant)>>,
}

impl Affinity {
    /// The session for a client on an endpoint (created empty, opened on first use), and the
    /// sessions that must be closed to make room or because they sat idle.
    fn take(&self, sid: &str, endpoint: usize) -> (Arc<Own>, Vec<(usize, Arc<Own>)>) {
        let now = Instant::now();
        let mut map = lock(&self.map);
        let key = (sid.to_string(), endpoint);
        if let Some((own, used)) = map.get_mut(&key) {
            *used = now;
            return (own.clone(), Vec::new());
        }
        let mut gone: Vec<Key> = map.iter().filter(|(_, (_, used))| now.duration_since(*used) > IDLE).map(|(k, _)| k.clone()).collect();
        // A session with a call in flight (held elsewhere too) is not evicted.
        if map.len() - gone.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .filter(|(k, (own, _))| !gone.contains(k) && Arc::strong_count(own) == 1)
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            gone.push(oldest);
        }
        let closed = gone.into_iter().filter_map(|k| map.remove(&k).map(|(own, _)| (k.1, own))).collect();
        let own = Arc::new(Own::default());
        map.insert(key, (own.clone(), now));
        (own, closed)
    }

    /// Forgets the sessions unused for longer than [`IDLE`] and no call holds; they are returned
    /// to be closed.
    fn idle(&self) -> Vec<(usize, Arc<Own>)> {
        let mut map = lock(&self.map);
        let keys: Vec<Key> =
            map.iter().filter(|(_, (own, used))| used.elapsed() > IDLE && Arc::strong_count(own) == 1).map(|(k, _)| k.clone()).collect();
        keys.into_iter().filter_map(|k| map.remove(&k).map(|(own, _)| (k.1, own))).collect()
    }

    /// Forgets every session; they are returned to be closed.
    fn all(&self) -> Vec<(usize, Arc<Own>)> {
        lock(&self.map).drain().map(|(k, (own, _))| (k.1, own)).collect()
    }

    /// Forgets every session of a client; they are returned to be closed.
    fn remove(&self, sid: &str) -> Vec<(usize, Arc<Own>)> {
        let mut map = lock(&self.map);
        let keys: Vec<Key> = map.keys().filter(|(s, _)| s == sid).cloned().collect();
        keys.into_iter().filter_map(|k| map.remove(&k).map(|(own, _)| (k.1, own))).collect()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.map).len()
    }
}

impl Upstream {
    /// The legacy upstream session of client session `sid` on endpoint index `endpoint`.
    pub(super) fn own_session(&self, sid: &str, endpoint: usize) -> Arc<Own> {
        let (own, closed) = self.affinity.take(sid, endpoint);
        for (endpoint, own) in closed {
            self.close_session(endpoint, &own);
        }
        own
    }

    /// A legacy client's session ended: the upstream sessions opened for it are closed.
    pub fn end_client_session(&self, sid: &str) {
        for (endpoint, own) in self.affinity.remove(sid) {
            self.close_session(endpoint, &own);
        }
    }

    /// Closes the clients' sessions that sat unused for too long (run at every refresh).
    pub(super) fn close_idle_sessions(&self) {
        for (endpoint, own) in self.affinity.idle() {
            self.close_session(endpoint, &own);
        }
    }

    /// Closes every client's session (the upstream is retired).
    pub(super) fn close_all_sessions(&self) {
        for (endpoint, own) in self.affinity.all() {
            self.close_session(endpoint, &own);
        }
    }

    /// Ends one session upstream (`DELETE`, in the background; its GET stream stops with it, and
    /// no call opens it again).
    fn close_session(&self, endpoint: usize, own: &Own) {
        let Transport::Http(pool) = &self.transport else { return };
        let (session, version, rules) = (own.slot.id(), own.slot.version(), own.slot.rules());
        own.slot.end();
        let Some(session) = session else { return };
        let transport = pool.at(Some(endpoint)).clone();
        let env = Envelope {
            version: version.as_deref().and_then(super::outbound::version_header),
            session: Some(session),
            mcp: None,
            on_behalf_of: rules,
            traceparent: None,
        };
        let upstream = self.id().to_string();
        self.tasks.spawn(async move {
            match transport.delete(&env).await {
                Ok(()) => tracing::debug!(%upstream, "closed a client's upstream session"),
                Err(e) => tracing::debug!(%upstream, error = %e, "closing a client's upstream session failed"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_keeps_its_session_and_the_table_stays_bounded() {
        let a = Affinity::default();
        let (first, closed) = a.take("s1", 0);
        assert!(closed.is_empty());
        let (again, _) = a.take("s1", 0);
        assert!(Arc::ptr_eq(&first, &again), "the same client on the same endpoint gets the same session");
        let (other, _) = a.take("s1", 1);
        assert!(!Arc::ptr_eq(&first, &other), "another endpoint is another session");
        for i in 0..MAX_SESSIONS {
            a.take(&format!("c{i}"), 0);
        }
        assert_eq!(a.len(), MAX_SESSIONS, "past the bound, the least recently used session goes");
        let (still, _) = a.take("s1", 0);
        assert!(Arc::ptr_eq(&first, &still), "a session a call holds is not evicted, however old");
        drop((still, other));
        assert_eq!(a.all().len(), MAX_SESSIONS);
        assert_eq!(a.len(), 0);
        for i in 0..10 {
            a.take(&format!("c{i}"), 0);
        }
        assert_eq!(a.remove("c5").len(), 1);
        assert!(a.remove("c5").is_empty());
    }
}
