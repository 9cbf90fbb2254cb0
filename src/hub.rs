//! Change notifications, per caller and exactly once. Every open subscription (a modern client's
//! `subscriptions/listen`, a legacy session's GET stream, `mcpgate stdio`'s legacy connection) is
//! registered in one concurrent map, the [`Hub`]. When the catalogue is rebuilt, the hub compares
//! each caller's *filtered* view before and after (callers with the same grants share the work),
//! so a caller hears only about a list it can see that really changed, and a caller whose policy
//! hides the changed item hears nothing. A resource update goes only to the subscriptions that
//! asked for that URI (or a parent of it), in the gateway's URI form.
//!
//! Delivery is bounded and coalescing: a subscription holds one bit per list kind and a small
//! queue of updated URIs; a burst of changes within the debounce interval becomes one
//! notification per kind. A subscription whose URI queue overflows (a client that does not keep
//! up) is ended with a log line instead of buffering without limit.

use crate::auth::Principal;
use dashmap::DashMap;
use mcpgate_model::catalog::view;
use mcpgate_model::catalog::{Catalog, Kind};
use mcpgate_protocol::sync::lock;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The list kinds a subscription can ask for (templates count as resources).
pub const LIST_KINDS: [Kind; 3] = [Kind::Tool, Kind::Prompt, Kind::Resource];

/// Updated URIs a subscription may hold undelivered before it is ended as too slow.
const MAX_QUEUED_UPDATES: usize = 256;

/// Which list changes a subscription wants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
}

impl Filter {
    pub const ALL: Filter = Filter { tools: true, prompts: true, resources: true };

    fn wants(&self, kind: Kind) -> bool {
        match kind {
            Kind::Tool => self.tools,
            Kind::Prompt => self.prompts,
            Kind::Resource | Kind::Template | Kind::Skill => self.resources,
        }
    }
}

/// The resource URIs (gateway form) a subscription follows; shared with whoever may change it
/// (a legacy session's `resources/subscribe`).
pub type UriSet = Arc<Mutex<BTreeSet<String>>>;

/// What a subscription is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The caller's view of this list changed.
    List(Kind),
    /// A subscribed resource (or a sub-resource of it) changed; the URI in gateway form.
    Updated(String),
    /// The subscription fell too far behind and is ended.
    TooSlow,
    /// The gateway ended the subscription (its callers or policy were reloaded): the client
    /// subscribes again, and is then judged by the new rules.
    Ended,
    /// An out-of-band step the caller was sent to (a URL elicitation: consent to an upstream)
    /// finished; the id it was given (2025-11-25 `notifications/elicitation/complete`).
    Completed(String),
}

fn bit(kind: Kind) -> u8 {
    match kind {
        Kind::Tool => 1,
        Kind::Prompt => 2,
        Kind::Resource | Kind::Template | Kind::Skill => 4,
    }
}

struct Sub {
    caller: Arc<Principal>,
    filter: Filter,
    uris: UriSet,
    pending: AtomicU8,
    updates: Mutex<VecDeque<String>>,
    completed: Mutex<VecDeque<String>>,
    overflow: AtomicBool,
    ended: AtomicBool,
    wake: Notify,
}

pub struct Hub {
    subs: DashMap<u64, Arc<Sub>>,
    next: AtomicU64,
    debounce: Duration,
    /// Signalled when the set of followed URIs may have changed.
    pub follows: Notify,
    /// Open subscriptions per caller id.
    per_caller: DashMap<String, usize>,
    /// The most one caller may hold (`[server] max_streams_per_caller`).
    limit: std::sync::atomic::AtomicUsize,
}

pub use mcpgate_config::MAX_STREAMS_PER_CALLER;
/// The most URIs one subscription may follow.
pub const MAX_FOLLOWED: usize = 64;

/// One registered subscription; dropping it unregisters it.
pub struct Subscription {
    hub: Arc<Hub>,
    id: u64,
    sub: Arc<Sub>,
    ready: VecDeque<Change>,
}

impl Hub {
    pub fn new(debounce: Duration) -> Arc<Hub> {
        Arc::new(Hub {
            subs: DashMap::new(),
            next: AtomicU64::new(1),
            debounce,
            follows: Notify::new(),
            per_caller: DashMap::new(),
            limit: MAX_STREAMS_PER_CALLER.into(),
        })
    }

    /// Sets the most change streams one caller may hold open (a reload may change it).
    pub fn set_limit(&self, per_caller: usize) {
        self.limit.store(per_caller.max(1), Ordering::Relaxed);
    }

    /// Registers a subscription; `None` when the caller already holds as many as the limit.
    pub fn subscribe(self: &Arc<Self>, caller: Arc<Principal>, filter: Filter, uris: UriSet) -> Option<Subscription> {
        {
            let mut n = self.per_caller.entry(caller.id.clone()).or_insert(0);
            if *n >= self.limit.load(Ordering::Relaxed) {
                return None;
            }
            *n += 1;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let sub = Arc::new(Sub {
            caller,
            filter,
            uris,
            pending: AtomicU8::new(0),
            updates: Mutex::default(),
            completed: Mutex::default(),
            overflow: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            wake: Notify::new(),
        });
        let follows_any = !lock(&sub.uris).is_empty();
        self.subs.insert(id, sub.clone());
        if follows_any {
            self.follows.notify_one();
        }
        Some(Subscription { hub: self.clone(), id, sub, ready: VecDeque::new() })
    }

    /// The number of open subscriptions.
    pub fn len(&self) -> usize {
        self.subs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// Every resource URI (gateway form) some subscription follows.
    pub fn followed_uris(&self) -> BTreeSet<String> {
        let mut all = BTreeSet::new();
        for s in self.subs.iter() {
            all.extend(lock(&s.uris).iter().cloned());
        }
        all
    }

    /// Tells every subscription whose caller's view of a list differs between `old` and `new`.
    pub fn catalog_changed<'a>(
        &self,
        old: &'a Catalog,
        new: &'a Catalog,
        upstream_id: &'a dyn Fn(usize) -> &'a str,
        endpoint: Option<&str>,
    ) {
        // Callers with the same [[caller]] rules have the same grants: compare their view once.
        let mut verdicts: HashMap<(bool, Vec<String>), u8> = HashMap::new();
        // Each endpoint's subscriptions hear about that endpoint's view only.
        for s in self.subs.iter().filter(|s| s.caller.endpoint.as_deref() == endpoint) {
            let key = (s.caller.grants.is_unrestricted(), s.caller.rules.clone());
            let changed = *verdicts.entry(key).or_insert_with(|| changed_kinds(old, new, &s.caller, upstream_id));
            let wanted: u8 = LIST_KINDS.iter().filter(|k| s.filter.wants(**k)).map(|k| bit(*k)).fold(0, |a, b| a | b);
            let hit = changed & wanted;
            if hit != 0 {
                s.pending.fetch_or(hit, Ordering::SeqCst);
                s.wake.notify_one();
            }
        }
    }

    /// Tells every subscription of caller `id` that its lists may have changed (its own view of
    /// an upstream reached with its own token: connected, listed again, or disconnected).
    pub fn caller_changed(&self, id: &str) {
        for s in self.subs.iter().filter(|s| s.caller.id == id) {
            let wanted: u8 = LIST_KINDS.iter().filter(|k| s.filter.wants(**k)).map(|k| bit(*k)).fold(0, |a, b| a | b);
            if wanted != 0 {
                s.pending.fetch_or(wanted, Ordering::SeqCst);
                s.wake.notify_one();
            }
        }
    }

    /// Tells every subscription of caller `id` that the out-of-band step `elicitation` finished.
    pub fn completed(&self, id: &str, elicitation: &str) {
        for s in self.subs.iter().filter(|s| s.caller.id == id) {
            let mut q = lock(&s.completed);
            if q.len() < MAX_QUEUED_UPDATES {
                q.push_back(elicitation.to_string());
            }
            drop(q);
            s.wake.notify_one();
        }
    }

    /// Ends every open subscription (callers and policy changed: each was judged by the old rules).
    pub fn end_all(&self) {
        for s in self.subs.iter() {
            s.ended.store(true, Ordering::SeqCst);
            s.wake.notify_one();
        }
    }

    /// Tells the subscriptions following `uri` (gateway form), or a resource it lies under,
    /// whose caller may read it now (`allowed`: the policy, with the current rules).
    pub fn resource_updated(&self, uri: &str, allowed: &dyn Fn(&Principal) -> bool) {
        for s in self.subs.iter() {
            if !lock(&s.uris).iter().any(|followed| covers(followed, uri)) || !allowed(&s.caller) {
                continue;
            }
            let mut q = lock(&s.updates);
            if q.len() >= MAX_QUEUED_UPDATES {
                s.overflow.store(true, Ordering::SeqCst);
            } else if !q.iter().any(|u| u == uri) {
                q.push_back(uri.to_string());
            }
            drop(q);
            s.wake.notify_one();
        }
    }
}

/// Whether a subscription to `followed` covers an update of `uri` (the same resource, or a
/// sub-resource below it).
pub fn covers(followed: &str, uri: &str) -> bool {
    uri == followed || uri.strip_prefix(followed).is_some_and(|rest| followed.ends_with('/') || rest.starts_with(['/', '#', '?']))
}

/// The list kinds whose caller-visible contents differ between two catalogues, as bits (skills
/// count as resources: SEP-2640 announces them with the resources notification).
fn changed_kinds<'a>(old: &'a Catalog, new: &'a Catalog, caller: &Principal, upstream_id: &'a dyn Fn(usize) -> &'a str) -> u8 {
    let mut bits = 0;
    for kind in Kind::ALL {
        if fingerprint(old, kind, caller, upstream_id) != fingerprint(new, kind, caller, upstream_id) {
            bits |= bit(kind);
        }
    }
    bits
}

fn fingerprint<'a>(cat: &'a Catalog, kind: Kind, caller: &Principal, upstream_id: &'a dyn Fn(usize) -> &'a str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for e in view::visible(cat, kind, &caller.grants, upstream_id) {
        e.json.get().hash(&mut h);
    }
    h.finish()
}

impl Subscription {
    /// The next change for this subscriber: list changes are collected for the debounce
    /// interval after the first one, so a burst costs one notification per kind.
    pub async fn next(&mut self) -> Change {
        loop {
            if let Some(c) = self.ready.pop_front() {
                return c;
            }
            if self.sub.overflow.load(Ordering::SeqCst) {
                return Change::TooSlow;
            }
            if self.sub.ended.load(Ordering::SeqCst) {
                return Change::Ended;
            }
            let updates: Vec<String> = lock(&self.sub.updates).drain(..).collect();
            self.ready.extend(updates.into_iter().map(Change::Updated));
            let completed: Vec<String> = lock(&self.sub.completed).drain(..).collect();
            self.ready.extend(completed.into_iter().map(Change::Completed));
            if self.sub.pending.load(Ordering::SeqCst) != 0 {
                tokio::time::sleep(self.hub.debounce).await;
                let bits = self.sub.pending.swap(0, Ordering::SeqCst);
                self.ready.extend(LIST_KINDS.iter().filter(|k| bits & bit(**k) != 0).map(|k| Change::List(*k)));
            }
            if self.ready.is_empty() {
                self.sub.wake.notified().await;
            }
        }
    }

    /// The URIs this subscription follows.
    pub fn uris(&self) -> &UriSet {
        &self.sub.uris
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.subs.remove(&self.id);
        if let Some(mut n) = self.hub.per_caller.get_mut(&self.sub.caller.id) {
            *n = n.saturating_sub(1);
        }
        self.hub.per_caller.remove_if(&self.sub.caller.id, |_, n| *n == 0);
        if !lock(&self.sub.uris).is_empty() {
            self.hub.follows.notify_one();
        }
    }
}

#[cfg(test)]
mod tests;
