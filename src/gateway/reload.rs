//! Applying a new configuration without a restart (SIGHUP, or a watched config file). The new
//! file is validated first: a bad one (or one whose authentication cannot start) is refused and
//! the old configuration keeps serving. A good one is applied as a diff: upstreams whose settings
//! did not change keep their handles, sessions and calls in flight; added and changed ones are
//! probed *before* they go live, so a changed upstream's tools do not flicker; removed and
//! replaced ones are retired (their loops and children stop; calls in flight finish). The
//! catalogue is then rebuilt once, and listeners hear about what they can see that changed.
//! An OpenAPI upstream whose settings did not change still has its description read again (an
//! edited file or a republished API is picked up by the reload, not at the next refresh).
//! Policy, callers, rate limits and catalogue settings take effect at once; listener settings
//! (`[server]`) need a restart, which the report says.

use super::StartError;
use super::{Gateway, make_upstream};
use crate::auth::Authenticator;
use crate::upstream::Upstream;
use mcpgate_config::Config;
use std::sync::Arc;

/// What a reload changed.
#[derive(Debug, Default)]
pub struct Report {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
    /// Virtual servers (`[[endpoint]]` paths) added, changed and removed.
    pub endpoints_added: Vec<String>,
    pub endpoints_changed: Vec<String>,
    pub endpoints_removed: Vec<String>,
    /// OpenAPI upstreams kept as they were whose description, read again, lists other tools.
    pub descriptions_changed: Vec<String>,
    /// `[server]` or `[cluster]` changed: it applies at the next restart only.
    pub server_needs_restart: bool,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "added {:?}, changed {:?}, removed {:?}", self.added, self.changed, self.removed)?;
        if !(self.endpoints_added.is_empty() && self.endpoints_changed.is_empty() && self.endpoints_removed.is_empty()) {
            write!(
                f,
                "; endpoints added {:?}, changed {:?}, removed {:?}",
                self.endpoints_added, self.endpoints_changed, self.endpoints_removed
            )?;
        }
        if !self.descriptions_changed.is_empty() {
            write!(f, "; OpenAPI descriptions changed {:?}", self.descriptions_changed)?;
        }
        if self.server_needs_restart {
            write!(f, "; [server] and [cluster] changes apply after a restart")?;
        }
        Ok(())
    }
}

impl Gateway {
    /// Starts the authenticator in effect (JWKS loading and refresh), owned apart from the rest so
    /// that a reload can replace it.
    pub async fn start_auth(&self) -> Result<(), StartError> {
        let owner = mcpgate_protocol::sync::lock(&self.auth_tasks).clone();
        Ok(self.auth().start(&owner).await?)
    }

    /// Applies `new` (already parsed and validated) as a diff; `Err` leaves everything as it was.
    pub async fn reload(self: &Arc<Self>, new: Config) -> Result<Report, StartError> {
        let _one_at_a_time = self.reload_lock.lock().await;
        let old = self.config();
        let guard_set = super::guards::GuardSet::new(&new).map_err(StartError::Guard)?;
        let auth = Authenticator::new(&new, self.client.detached());
        let auth_owner = self.tasks.child();
        if let Err(e) = auth.start(&auth_owner).await {
            auth_owner.stop();
            return Err(StartError::Auth(e));
        }
        let current = self.upstreams();
        let live: Vec<_> = current.iter().filter(|u| !u.is_retired()).cloned().collect();
        let mut report = Report {
            server_needs_restart: format!("{:?}", old.server) != format!("{:?}", new.server) || old.cluster != new.cluster,
            ..Default::default()
        };
        // New handles first: a configuration that cannot be applied changes nothing.
        let mut fresh = Vec::new();
        for (n, c) in new.upstreams.iter().filter(|c| !live.iter().any(|u| u.cfg == **c)).enumerate() {
            match make_upstream(current.len() + n, c, &self.client, &self.tasks, &new) {
                Ok(made) => fresh.push(made),
                Err(e) => {
                    for (up, _) in &fresh {
                        up.retire();
                    }
                    auth_owner.stop();
                    return Err(e);
                }
            }
            if live.iter().any(|u| u.cfg.id == c.id) {
                report.changed.push(c.id.clone());
            } else {
                report.added.push(c.id.clone());
            }
        }
        // Probed before they go live, so their tools are there from the first list; one that
        // cannot start is reported as at startup (it is retried like any upstream that is down).
        futures_util::future::join_all(fresh.iter().map(|(up, _)| up.refresh())).await;
        for (up, _) in &fresh {
            if let crate::upstream::Status::Down(reason) = &up.state().status {
                tracing::warn!(upstream = %up.id(), %reason, "upstream unavailable");
            }
        }
        for ep in &new.endpoints {
            match old.endpoints.iter().find(|o| o.path == ep.path) {
                None => report.endpoints_added.push(ep.path.clone()),
                Some(o) if o != ep => report.endpoints_changed.push(ep.path.clone()),
                Some(_) => {}
            }
        }
        report.endpoints_removed =
            old.endpoints.iter().filter(|o| !new.endpoints.iter().any(|e| e.path == o.path)).map(|o| o.path.clone()).collect();
        let retiring: Vec<_> = live.iter().filter(|u| !new.upstreams.iter().any(|c| *c == u.cfg)).cloned().collect();
        for up in &retiring {
            if !new.upstreams.iter().any(|c| c.id == up.cfg.id) {
                report.removed.push(up.cfg.id.clone());
            }
        }
        let mut next = current.to_vec();
        let mut ids = self.ids.load().to_vec();
        for (up, _) in &fresh {
            next.push(up.clone());
            ids.push(super::leak(up.id()));
        }
        self.ids.store(Arc::new(ids));
        self.upstreams.store(Arc::new(next));
        if new.console {
            self.audit.keep_recent();
        }
        self.config.store(Arc::new(new));
        self.loaded_at.store(mcpgate_protocol::toolbox::unix_ms(), std::sync::atomic::Ordering::Relaxed);
        self.guards.store(Arc::new(guard_set));
        self.definitions.clear();
        self.auth.store(Arc::new(auth));
        let previous_auth = std::mem::replace(&mut *mcpgate_protocol::sync::lock(&self.auth_tasks), auth_owner);
        previous_auth.stop();
        for up in &retiring {
            up.retire();
            self.stop_instances_of(up.index);
        }
        // Open subscriptions were judged by the old callers and policy: they end gracefully and
        // are judged by the new rules when their clients listen again.
        let new_cfg = self.config();
        self.hub.set_limit(new_cfg.server.max_streams_per_caller);
        // So do those of a virtual server whose definition changed (or that is gone).
        if format!("{:?}{:?}", old.callers, old.auth) != format!("{:?}{:?}", new_cfg.callers, new_cfg.auth)
            || old.endpoints != new_cfg.endpoints
        {
            self.hub.end_all();
        }
        self.rebuild();
        for (up, rx) in fresh {
            self.maintain(&up, Some(rx));
        }
        let kept: Vec<_> = live.iter().filter(|u| !retiring.iter().any(|r| Arc::ptr_eq(r, u))).cloned().collect();
        report.descriptions_changed = self.reread_descriptions(&kept).await;
        tracing::info!(%report, "configuration reloaded");
        Ok(report)
    }
}

impl Gateway {
    /// Reads the description of every kept OpenAPI upstream again: a shared one is re-listed now
    /// (its tools change in the catalogue before the reload is reported), each caller's own
    /// handle of a `user_auth` one is asked to re-list. The ids whose tools changed.
    async fn reread_descriptions(&self, kept: &[Arc<Upstream>]) -> Vec<String> {
        let mut shared = Vec::new();
        for up in kept.iter().filter(|u| u.reads_a_description()) {
            match self.personal.as_ref().filter(|_| self.is_personal(up.index)) {
                Some(p) => p.relist(up.index),
                None => shared.push(up),
            }
        }
        let before: Vec<_> = shared.iter().map(|u| u.state()).collect();
        futures_util::future::join_all(shared.iter().map(|u| self.refresh_one(u))).await;
        shared.iter().zip(before).filter(|(u, b)| !super::personal::same_lists(b, &u.state())).map(|(u, _)| u.id().to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    /// The operations guide's "Reload" section says when each section of the configuration takes
    /// effect: every section the configuration reference documents is named there (what each
    /// does on reload is tested in the e2e suite, `reload::*`).
    #[test]
    fn the_reload_guide_names_every_section_of_the_configuration() {
        let reference = include_str!("../../docs/configuration.md");
        let guide = include_str!("../../docs/operations.md");
        let start = guide.find("### Reload").expect("docs/operations.md has a Reload section");
        let reload = &guide[start..];
        let reload = &reload[..reload[4..].find("\n### ").map_or(reload.len(), |e| e + 4)];
        let sections: Vec<&str> = reference
            .lines()
            .filter_map(|l| l.strip_prefix("### `"))
            .filter_map(|l| l.strip_suffix('`'))
            .filter(|s| s.starts_with('['))
            .collect();
        assert!(sections.len() >= 15, "{sections:?}");
        let missing: Vec<&&str> = sections.iter().filter(|s| !reload.contains(&format!("`{s}`"))).collect();
        assert!(missing.is_empty(), "the Reload section of docs/operations.md does not say when these apply: {missing:?}");
    }
}
