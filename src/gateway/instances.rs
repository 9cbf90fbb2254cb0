//! One process per caller for stdio upstreams that keep user state (`instances = "per_caller"`,
//! docs/isolation.md): a caller's first request starts a process of its own, in a sandbox of its
//! own with its own private folder (`{instance_dir}`); later requests of that caller go to it; it
//! stops after `instance_idle` without use, when `max_instances` are running and another
//! caller needs one (the least recently used goes), or when a reload retires its upstream. The catalogue still comes from the shared
//! process's probe; a caller's process that announces a list change tells that caller only.

use super::{Gateway, Routed};
use crate::upstream::{Shared, Upstream};
use mcpgate_config::sandbox::Instances;
use mcpgate_config::{TransportConfig, UpstreamConfig};
use mcpgate_protocol::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How often idle instances are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// A caller and an upstream's index.
type Key = (String, usize);

/// The running per-caller processes.
#[derive(Default)]
pub struct PerCaller {
    held: Mutex<HashMap<Key, Held>>,
    /// One start at a time per (caller, upstream): concurrent first requests share it.
    starting: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
    /// Starts in progress per upstream, at most `max_instances` at once: a burst of new callers
    /// waits for a slot instead of starting a process each (running ones are bounded on insert).
    slots: Mutex<HashMap<usize, Arc<tokio::sync::Semaphore>>>,
    sweeping: std::sync::atomic::AtomicBool,
}

struct Held {
    up: Arc<Upstream>,
    used: Instant,
}

/// A caller id as a folder name: its safe characters (for people), and the whole SHA-256 of the
/// id, which keeps distinct ids apart (4 bytes of it did not: ids a user can shape collided).
fn folder_of(caller: &str) -> String {
    format!("{}-{}", readable(caller), hex(&digest_of(caller)))
}

/// The name the folder had before the whole digest (its first 4 bytes only).
fn old_folder_of(caller: &str) -> String {
    format!("{}-{}", readable(caller), hex(&digest_of(caller)[..4]))
}

fn readable(caller: &str) -> String {
    caller.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').take(32).collect()
}

fn digest_of(caller: &str) -> Vec<u8> {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, caller.as_bytes()).as_ref().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    mcpgate_protocol::toolbox::hex(bytes)
}

/// `caller`'s folder under `callers`; a folder made under the old name is this caller's and
/// moves to the new one once (if two ids had collided, it was already shared, and goes to
/// whichever comes first).
fn folder_in(callers: &std::path::Path, caller: &str) -> std::path::PathBuf {
    let new = callers.join(folder_of(caller));
    let old = callers.join(old_folder_of(caller));
    if !new.exists() && old.is_dir() {
        match std::fs::rename(&old, &new) {
            Ok(()) => tracing::info!(%caller, from = %old.display(), to = %new.display(), "moved a caller's folder to its new name"),
            Err(e) => tracing::warn!(%caller, from = %old.display(), error = %e, "a caller's folder could not be moved to its new name"),
        }
    }
    new
}

/// The configuration of `caller`'s own process: the upstream's, with a private folder of its own.
/// The callers' folders sit beside the shared process's (`<id>@callers/<caller>`), not inside it:
/// the shared process, which keeps running for the catalogue, can write its own folder and must
/// not reach any caller's.
fn for_caller(cfg: &UpstreamConfig, caller: &str) -> UpstreamConfig {
    let mut cfg = cfg.clone();
    if let TransportConfig::Stdio { sandbox: Some(s), .. } = &mut cfg.transport {
        let mut beside = s.private.as_os_str().to_os_string();
        beside.push("@callers");
        let callers = std::path::PathBuf::from(beside);
        s.private = folder_in(&callers, caller);
    }
    cfg
}

impl Gateway {
    /// For a `per_caller` upstream, the caller's own process (started now if it has none);
    /// `None` for any other upstream.
    pub(super) async fn own_instance(&self, caller: &str, shared: &Arc<Upstream>) -> Option<Routed> {
        let Instances::PerCaller { max, idle } = shared.cfg.instances.clone() else { return None };
        let key = (caller.to_string(), shared.index);
        if let Some(up) = self.running_instance(&key) {
            return Some(Routed::Up(up));
        }
        let gate = lock(&self.instances.starting).entry(key.clone()).or_default().clone();
        let _starting = gate.lock().await;
        if let Some(up) = self.running_instance(&key) {
            lock(&self.instances.starting).remove(&key);
            return Some(Routed::Up(up));
        }
        let slots =
            lock(&self.instances.slots).entry(shared.index).or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(max.max(1)))).clone();
        // Never the shared process instead: a caller's state stays in its own.
        let Ok(_slot) = slots.acquire_owned().await else {
            return Some(Routed::Failed(crate::upstream::UpstreamError::Unreachable("the gateway is stopping".into())));
        };
        let (tx, mut updates) = tokio::sync::mpsc::channel::<String>(8);
        let parts = Shared { client: self.client.clone(), tasks: self.tasks.child(), input_timeout: self.config().server.input_timeout };
        let up = Arc::new(Upstream::new(shared.index, for_caller(&shared.cfg, caller), parts, tx));
        if let Err(e) = up.refresh().await {
            tracing::warn!(upstream = %shared.id(), %caller, error = %e, "a caller's own process did not start");
            up.retire();
            lock(&self.instances.starting).remove(&key);
            return Some(Routed::Failed(e));
        }
        tracing::info!(upstream = %shared.id(), %caller, "started a caller's own process");
        // It tells about its changes as any upstream does (its listen stream, or a legacy one's
        // notifications).
        up.tasks().spawn(up.clone().keep_following());
        // Its list changes go to this caller's listeners only (the shared catalogue does not
        // change). Resource updates of its own are not relayed: they are drained.
        let (me, who, changed) = (self.me.clone(), caller.to_string(), up.changed.clone());
        up.tasks().spawn(async move {
            loop {
                tokio::select! {
                    _ = changed.notified() => match me.upgrade() {
                        Some(gw) => gw.hub.caller_changed(&who),
                        None => break,
                    },
                    more = updates.recv() => if more.is_none() { break },
                }
            }
        });
        let evicted = {
            let mut held = lock(&self.instances.held);
            held.insert(key.clone(), Held { up: up.clone(), used: Instant::now() });
            let mine: Vec<(String, usize)> = held.keys().filter(|(_, i)| *i == shared.index).cloned().collect();
            let mut out = Vec::new();
            if mine.len() > max
                && let Some(oldest) = mine.iter().min_by_key(|k| held.get(*k).map(|h| h.used)).cloned()
                && let Some(gone) = held.remove(&oldest)
            {
                out.push((oldest.0, gone.up));
            }
            out
        };
        lock(&self.instances.starting).remove(&key);
        for (who, gone) in evicted {
            tracing::info!(upstream = %shared.id(), caller = %who, "stopped a caller's process: max_instances reached");
            gone.retire();
        }
        self.sweep_instances_from_now_on(idle);
        Some(Routed::Up(up))
    }

    fn running_instance(&self, key: &(String, usize)) -> Option<Arc<Upstream>> {
        let mut held = lock(&self.instances.held);
        let h = held.get_mut(key)?;
        if h.up.is_retired() {
            held.remove(key);
            return None;
        }
        h.used = Instant::now();
        Some(h.up.clone())
    }

    /// Starts the loop that stops idle per-caller processes (once).
    fn sweep_instances_from_now_on(&self, _idle: Duration) {
        if self.instances.sweeping.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let me = self.me.clone();
        self.tasks.spawn(async move {
            loop {
                tokio::time::sleep(SWEEP_EVERY).await;
                let Some(gw) = me.upgrade() else { break };
                gw.stop_idle_instances();
            }
        });
    }

    /// Stops the per-caller processes idle longer than their upstream's `instance_idle`.
    pub fn stop_idle_instances(&self) {
        let ups = self.upstreams();
        let idle_of = |index: usize| match ups.get(index).map(|u| u.cfg.instances.clone()) {
            Some(Instances::PerCaller { idle, .. }) => idle,
            _ => Duration::ZERO,
        };
        let stopped: Vec<((String, usize), Arc<Upstream>)> = {
            let mut held = lock(&self.instances.held);
            // A process still answering a call is in use, however long ago the call began.
            for h in held.values_mut().filter(|h| h.up.busy()) {
                h.used = Instant::now();
            }
            let idle: Vec<(String, usize)> =
                held.iter().filter(|(k, h)| h.used.elapsed() >= idle_of(k.1)).map(|(k, _)| k.clone()).collect();
            idle.into_iter().filter_map(|k| held.remove(&k).map(|h| (k, h.up))).collect()
        };
        for ((caller, index), up) in stopped {
            tracing::info!(upstream = %self.upstream_id(index), %caller, "stopped a caller's idle process");
            up.retire();
        }
    }

    /// Stops every caller's process of upstream `index` (retired by a reload).
    pub(super) fn stop_instances_of(&self, index: usize) {
        let stopped: Vec<Arc<Upstream>> = {
            let mut held = lock(&self.instances.held);
            let keys: Vec<Key> = held.keys().filter(|(_, i)| *i == index).cloned().collect();
            keys.iter().filter_map(|k| held.remove(k)).map(|h| h.up).collect()
        };
        for up in stopped {
            up.retire();
        }
    }

    /// How many per-caller processes run now, per upstream id.
    pub fn instances_running(&self) -> HashMap<String, usize> {
        let mut out = HashMap::new();
        for (_, index) in lock(&self.instances.held).keys() {
            *out.entry(self.upstream_id(*index).to_string()).or_insert(0) += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{folder_in, folder_of, old_folder_of};

    /// A folder of the old name (4 bytes of the digest) keeps its content under the new name.
    #[test]
    fn a_callers_old_folder_moves_to_its_new_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join(old_folder_of("alice"))).expect("old folder");
        std::fs::write(dir.path().join(old_folder_of("alice")).join("memory.jsonl"), "hers").expect("write");
        let new = folder_in(dir.path(), "alice");
        assert_eq!(new, dir.path().join(folder_of("alice")));
        assert_eq!(std::fs::read_to_string(new.join("memory.jsonl")).expect("moved"), "hers");
        assert!(!dir.path().join(old_folder_of("alice")).exists());
        // Once there, the new folder is kept as it is.
        assert_eq!(folder_in(dir.path(), "alice"), new);
    }

    /// Caller ids a user can shape (the same safe characters, the rest chosen freely) never share
    /// a folder: with a 4-byte digest, two of these 200 000 ids did (a birthday collision).
    #[test]
    fn distinct_caller_ids_never_share_a_folder() {
        const SHAPES: [char; 10] = ['.', '@', '+', '!', '~', '%', '=', ',', ':', ' '];
        let mut seen = std::collections::HashMap::new();
        for i in 0u32..200_000 {
            let id: String = std::iter::once('u').chain(i.to_string().chars().map(|d| SHAPES[(d as u8 - b'0') as usize])).collect();
            if let Some(other) = seen.insert(folder_of(&id), id.clone()) {
                panic!("{id:?} and {other:?} share the folder {}", folder_of(&id));
            }
        }
    }
}
