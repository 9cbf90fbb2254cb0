//! Keeping the catalogue fresh and the upstreams following what clients want, off the request
//! path. Per upstream: a refresh loop (at once, after a short debounce, when the upstream
//! announces a change or a notification channel drops; on the schedule its `ttlMs` implies,
//! within `catalog.ttl_min`..`ttl_max`, when it announces nothing; every `refresh_interval`
//! otherwise; with jittered backoff while it is down), the era's change channel
//! (`Upstream::keep_following`), and the relay of its resource updates to the hub in the
//! gateway's URI form. One more loop hands followed resource URIs to their upstreams.

use super::Gateway;
use crate::upstream::{Status, Upstream, UpstreamState};
use futures_util::FutureExt;
use mcpgate_config::CatalogConfig;
use mcpgate_model::catalog::uris;
use mcpgate_protocol::sync::lock;
use mcpgate_protocol::tasks::Backoff;
use std::sync::{Arc, Weak};
use std::time::Duration;

impl Gateway {
    /// Starts every background loop (after the first refresh round).
    pub fn spawn_maintenance(self: &Arc<Self>) {
        let receivers: Vec<_> = lock(&self.updates).iter_mut().map(Option::take).collect();
        for (up, updates) in self.upstreams().iter().zip(receivers) {
            self.maintain(up, updates);
        }
        self.watch_pins();
        let gw = Arc::downgrade(self);
        let hub = self.hub.clone();
        self.tasks.spawn(async move {
            loop {
                hub.follows.notified().await;
                let Some(gw) = gw.upgrade() else { return };
                gw.sync_follows();
            }
        });
    }
}

impl Gateway {
    /// Starts one upstream's loops, owned by the upstream (a reload that removes it stops them).
    pub(super) fn maintain(self: &Arc<Self>, up: &Arc<Upstream>, updates: Option<tokio::sync::mpsc::Receiver<String>>) {
        if self.is_personal(up.index) {
            // Each caller's own handle keeps itself fresh (`personal`).
            return;
        }
        up.tasks().spawn(refresh_loop(Arc::downgrade(self), up.clone()));
        up.tasks().spawn(up.clone().keep_following());
        if let Some(mut rx) = updates {
            let gw = Arc::downgrade(self);
            let (prefix, index, id) = (up.cfg.prefix.clone(), up.index, up.id().to_string());
            up.tasks().spawn(async move {
                while let Some(uri) = rx.recv().await {
                    let Some(gw) = gw.upgrade() else { return };
                    let uri = uris::to_gateway(&prefix, &uri);
                    // An upstream speaks only for the URIs that route to it: an unprefixed one
                    // cannot announce changes in another upstream's namespace.
                    if gw.catalog().route_uri(&uri).map(|(owner, _)| owner) != Some(index) {
                        tracing::warn!(upstream = %id, uri = %crate::audit::clean(&uri), "ignored a resource update for a URI \
                            another upstream owns");
                        continue;
                    }
                    gw.hub.resource_updated(&uri, &|caller| gw.may_read(caller, &uri));
                }
            });
        }
    }
}

/// How long an upstream that is up may go without being re-listed: the refresh interval when it
/// announces its changes (or gives no `ttlMs`), else what its `ttlMs` says, within bounds.
fn relist_after(st: &UpstreamState, c: &CatalogConfig) -> Duration {
    if st.announces_changes() {
        return c.refresh_interval;
    }
    match st.ttl_hint {
        Some(ms) => Duration::from_millis(ms).clamp(c.ttl_min, c.ttl_max),
        None => c.refresh_interval,
    }
}

async fn refresh_loop(gw: Weak<Gateway>, up: Arc<Upstream>) {
    let (interval, debounce) = match gw.upgrade() {
        Some(g) => (g.config().catalog.refresh_interval, g.config().catalog.debounce),
        None => return,
    };
    let mut backoff = Backoff::new(Duration::from_secs(1), interval.max(Duration::from_secs(1)));
    loop {
        if up.state().status == Status::Ready {
            backoff.reset();
            let wait = match gw.upgrade() {
                Some(g) => relist_after(&up.state(), &g.config().catalog),
                None => return,
            };
            let announced = tokio::select! {
                _ = tokio::time::sleep(wait) => false,
                _ = up.changed.notified() => true,
            };
            if announced {
                // A burst of announcements costs one refresh.
                tokio::time::sleep(debounce).await;
                let _ = up.changed.notified().now_or_never();
            }
        } else {
            // Down: retry on the backoff only, so a crash-looping upstream is not hammered.
            tokio::time::sleep(backoff.next_wait()).await;
            let _ = up.changed.notified().now_or_never();
        }
        let Some(g) = gw.upgrade() else { return };
        g.refresh_one(&up).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn upstreams_that_announce_nothing_are_relisted_as_their_ttl_says() {
        let c = CatalogConfig {
            names: Default::default(),
            page_size: 100,
            refresh_interval: Duration::from_secs(300),
            debounce: Duration::from_millis(100),
            ttl_min: Duration::from_secs(2),
            ttl_max: Duration::from_secs(60),
            tool_search: false,
            bare_names: true,
        };
        let mut st = UpstreamState { ttl_hint: Some(10_000), ..Default::default() };
        assert_eq!(relist_after(&st, &c), Duration::from_secs(10));
        st.ttl_hint = Some(0);
        assert_eq!(relist_after(&st, &c), Duration::from_secs(2), "bounded below");
        st.ttl_hint = Some(3_600_000);
        assert_eq!(relist_after(&st, &c), Duration::from_secs(60), "bounded above");
        st.ttl_hint = None;
        assert_eq!(relist_after(&st, &c), Duration::from_secs(300));
        st.ttl_hint = Some(0);
        st.capabilities = Some(json!({ "tools": { "listChanged": true } }));
        assert_eq!(relist_after(&st, &c), Duration::from_secs(300), "it tells us when it changes");
    }
}
