//! The token vault: each caller's tokens for each protected upstream, keyed by (caller, upstream,
//! issuer), sealed at rest with the gateway's token keys (AES-256-GCM through [`Sealer`], whose
//! key list makes rotation work: entries sealed under an older key still open, and are sealed
//! again under the newest when next written). The key's three parts are the sealing purpose, so an
//! entry moved to another caller's slot does not open. Entries are read on a call's path from
//! memory and written only when a token is issued, refreshed or revoked, to the state database
//! (`db`: SQLite, or PostgreSQL shared by replicas, which poll its change counter each second);
//! with `[cluster]` and no shared database, to Redis (a versioned map, see `cluster`), every
//! change in order, each replica re-reading the map when its version moved; where no database can
//! be opened, to the JSON file earlier releases kept (written atomically, mode 0600).
//! Nothing here prints a token: [`TokenSet`]'s `Debug` leaves them out, and listings carry only
//! what a person needs to decide on a revocation.

mod db;

use mcpgate_model::token::Sealer;
use mcpgate_protocol::sync::lock;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a sealed entry may be kept at all (its tokens' own expiry is checked on top).
const MAX_AGE: Duration = Duration::from_secs(400 * 24 * 3600);

/// Whose tokens, for what.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VaultKey {
    pub caller: String,
    pub upstream: String,
    pub issuer: String,
}

impl VaultKey {
    fn purpose(&self) -> String {
        // Lengths first, so no choice of ids makes two keys share a purpose.
        format!(
            "mcpgate/vault/v1/{}:{}/{}:{}/{}:{}",
            self.caller.len(),
            self.caller,
            self.upstream.len(),
            self.upstream,
            self.issuer.len(),
            self.issuer
        )
    }

    fn slot(&self) -> String {
        serde_json::to_string(&(&self.caller, &self.upstream, &self.issuer)).unwrap_or_default()
    }
}

/// What an authorization server issued to the gateway for one caller.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenSet {
    pub access_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// Unix seconds; `None`: the server said nothing.
    #[serde(default)]
    pub expires_at: Option<u64>,
    #[serde(default)]
    pub scope: Option<String>,
    /// When it was issued (or last refreshed), Unix seconds.
    pub issued_at: u64,
    /// The client the tokens were issued to (refreshes go through it).
    #[serde(default)]
    pub client: Option<ClientAuth>,
    /// The DPoP key the tokens are bound to (RFC 9449; base64url PKCS#8), when the server bound
    /// them: every use and every refresh proves possession of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop: Option<String>,
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSet")
            .field("access_token", &"<redacted>")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "<redacted>"))
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish()
    }
}

impl TokenSet {
    /// Whether the access token is still good `margin` from now.
    pub fn fresh(&self, margin: Duration) -> bool {
        self.expires_at.is_none_or(|at| now() + margin.as_secs() < at)
    }
}

/// One vault entry as a listing shows it: never a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Held {
    pub caller: String,
    pub upstream: String,
    pub issuer: String,
    pub scope: Option<String>,
    pub expires_at: Option<u64>,
    pub refreshable: bool,
    pub issued_at: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("the token vault {path} cannot be read: {reason}")]
    Read { path: String, reason: String },
    #[error("the token vault {path} cannot be written: {reason}")]
    Write { path: String, reason: String },
    /// The state database it is kept in cannot be read (`path` is the database's place).
    #[error("the token vault {path} cannot be read: {source}")]
    DbRead {
        path: String,
        #[source]
        source: mcpgate_store::DbError,
    },
    /// The state database it is kept in refused a change.
    #[error("the token vault {path} cannot be written: {source}")]
    DbWrite {
        path: String,
        #[source]
        source: mcpgate_store::DbError,
    },
    #[error("a token cannot be sealed: {0}")]
    Seal(String),
}

/// Slot → sealed entry (its key, in the clear, and the sealed token set).
type Entries = BTreeMap<String, (VaultKey, String)>;

/// The name of the vault's shared map in a cluster.
const SHARED_MAP: &str = "identity-vault";
/// How often a replica looks whether another one changed the shared vault.
const SHARED_POLL: Duration = Duration::from_secs(1);

/// The vault in a cluster: its writes, in order, to Redis, and what this replica last read.
struct SharedStore {
    ops: tokio::sync::mpsc::UnboundedSender<Op>,
    /// Writes handed to the writer and not yet in Redis (no re-read replaces them meanwhile).
    pending: std::sync::atomic::AtomicUsize,
}

/// One change for the shared store.
enum Op {
    Set(String, String),
    Remove(Vec<String>),
}

/// The vault over its embedded file store (or, in a cluster, Redis).
pub struct Vault {
    sealer: Arc<Sealer>,
    path: Option<PathBuf>,
    entries: Arc<Mutex<Entries>>,
    shared: Option<Arc<SharedStore>>,
    /// The state database it is kept in (`mcpgate_store`), when it is.
    db: Option<db::InDb>,
    /// Held from a change's snapshot to the end of its write, so writes land in the order the
    /// changes were made (a stale snapshot never overwrites a newer one).
    writing: Arc<Mutex<()>>,
}

impl Vault {
    /// A vault kept in memory only (tokens end with the process).
    pub fn in_memory(sealer: Arc<Sealer>) -> Vault {
        Vault { sealer, path: None, entries: Arc::default(), shared: None, db: None, writing: Arc::default() }
    }

    /// The vault kept in the cluster's Redis: read from it now and whenever another replica
    /// changed it, written to it with every change. Its loops run on `tasks`.
    pub fn shared(sealer: Arc<Sealer>, cluster: Arc<mcpgate_net::cluster::Cluster>, tasks: &mcpgate_protocol::tasks::Background) -> Vault {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Op>();
        let store = Arc::new(SharedStore { ops: tx, pending: Default::default() });
        let entries: Arc<Mutex<Entries>> = Arc::default();
        let seen = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        // The writer: changes reach Redis in the order they were made.
        let (writer_cluster, writer_store, writer_seen) = (cluster.clone(), store.clone(), seen.clone());
        tasks.spawn(async move {
            use std::sync::atomic::Ordering::SeqCst;
            while let Some(op) = rx.recv().await {
                let done = match &op {
                    Op::Set(slot, value) => writer_cluster.map_set(SHARED_MAP, slot, value).await,
                    Op::Remove(slots) => writer_cluster.map_remove(SHARED_MAP, slots).await,
                };
                match done {
                    // Our own change: no need to read it back, unless another came in between.
                    Ok(v) if writer_seen.load(SeqCst) == v.saturating_sub(1) => writer_seen.store(v, SeqCst),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "a token vault change could not be written to the cluster's Redis"),
                }
                writer_store.pending.fetch_sub(1, SeqCst);
            }
        });
        // The reader: the whole map again whenever its version moved.
        let (reader_entries, reader_store) = (entries.clone(), store.clone());
        tasks.spawn(async move {
            use std::sync::atomic::Ordering::SeqCst;
            loop {
                if reader_store.pending.load(SeqCst) == 0
                    && let Ok(v) = cluster.map_version(SHARED_MAP).await
                    && v != seen.load(SeqCst)
                {
                    match cluster.map_all(SHARED_MAP).await {
                        Ok((v, all)) if reader_store.pending.load(SeqCst) == 0 => {
                            let fresh: Entries = all
                                .into_iter()
                                .filter_map(|(slot, value)| serde_json::from_str::<(VaultKey, String)>(&value).ok().map(|e| (slot, e)))
                                .collect();
                            *lock(&reader_entries) = fresh;
                            seen.store(v, SeqCst);
                        }
                        Ok(_) => {}
                        Err(e) => tracing::debug!(error = %e, "the shared token vault could not be read"),
                    }
                }
                tokio::time::sleep(SHARED_POLL).await;
            }
        });
        Vault { sealer, path: None, entries, shared: Some(store), db: None, writing: Arc::default() }
    }

    /// The vault stored at `path` (created on the first write).
    pub fn open(sealer: Arc<Sealer>, path: PathBuf) -> Result<Vault, VaultError> {
        let entries = match std::fs::read(&path) {
            Ok(bytes) => {
                let list: Vec<(VaultKey, String)> = serde_json::from_slice(&bytes)
                    .map_err(|e| VaultError::Read { path: path.display().to_string(), reason: e.to_string() })?;
                list.into_iter().map(|(k, v)| (k.slot(), (k, v))).collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(VaultError::Read { path: path.display().to_string(), reason: e.to_string() }),
        };
        Ok(Vault { sealer, path: Some(path), entries: Arc::new(Mutex::new(entries)), shared: None, db: None, writing: Arc::default() })
    }

    /// The vault kept in the state database `db`. The first time, the entries of the JSON vault
    /// file `legacy` (what earlier releases kept) are carried over, sealed as they were; the file
    /// is left in place, and the carry-over is recorded so it is never done twice.
    pub fn in_db(sealer: Arc<Sealer>, db: Arc<mcpgate_store::Db>, legacy: &std::path::Path) -> Result<Vault, VaultError> {
        let (n, entries) = db::load(&sealer, &db, legacy)?;
        let in_db = db::InDb { db, seen: Arc::new(std::sync::atomic::AtomicU64::new(n)) };
        Ok(Vault { sealer, path: None, entries: Arc::new(Mutex::new(entries)), shared: None, db: Some(in_db), writing: Arc::default() })
    }

    /// Every entry, sealed.
    fn entries(&self) -> Vec<(VaultKey, String)> {
        lock(&self.entries).values().cloned().collect()
    }

    /// The caller's tokens for an upstream and issuer, if held and still openable.
    pub fn get(&self, key: &VaultKey) -> Option<TokenSet> {
        let sealed = lock(&self.entries).get(&key.slot()).map(|(_, s)| s.clone())?;
        self.sealer.open(&key.purpose(), &sealed, MAX_AGE)
    }

    /// Keeps a caller's tokens (replacing what was held).
    pub fn put(&self, key: &VaultKey, tokens: &TokenSet) -> Result<(), VaultError> {
        let sealed = self.sealer.seal(&key.purpose(), tokens).map_err(|e| VaultError::Seal(e.to_string()))?;
        self.change(|entries| {
            entries.insert(key.slot(), (key.clone(), sealed));
            1
        })
        .map(|_| ())
    }

    /// Forgets one entry; whether it was held.
    pub fn remove(&self, key: &VaultKey) -> Result<bool, VaultError> {
        self.change(|entries| usize::from(entries.remove(&key.slot()).is_some())).map(|n| n > 0)
    }

    /// Applies a change to the entries and writes the result, one change at a time; the change
    /// returns how many entries it touched (nothing is written when none).
    fn change(&self, f: impl FnOnce(&mut Entries) -> usize) -> Result<usize, VaultError> {
        let _writing = lock(&self.writing);
        let (touched, before, snapshot) = {
            let mut entries = lock(&self.entries);
            let before = (self.shared.is_some() || self.db.is_some()).then(|| entries.clone());
            let touched = f(&mut entries);
            (touched, before, entries.clone())
        };
        if touched == 0 {
            return Ok(0);
        }
        match (&self.shared, before) {
            (Some(store), Some(before)) => {
                let removed: Vec<String> = before.keys().filter(|k| !snapshot.contains_key(*k)).cloned().collect();
                let mut ops: Vec<Op> = snapshot
                    .iter()
                    .filter(|(k, v)| before.get(*k) != Some(*v))
                    .filter_map(|(k, v)| serde_json::to_string(v).ok().map(|json| Op::Set(k.clone(), json)))
                    .collect();
                if !removed.is_empty() {
                    ops.push(Op::Remove(removed));
                }
                for op in ops {
                    store.pending.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if store.ops.send(op).is_err() {
                        store.pending.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                        return Err(VaultError::Write { path: "the cluster's Redis".into(), reason: "the writer stopped".into() });
                    }
                }
            }
            (None, Some(before)) => match &self.db {
                Some(in_db) => match db::write(&in_db.db, &before, &snapshot) {
                    Ok(n) => {
                        // Our own change: no need to read it back, unless another came in between.
                        let seen = &in_db.seen;
                        let _ = seen.compare_exchange(n.saturating_sub(1), n, Ordering::SeqCst, Ordering::SeqCst);
                    }
                    Err(e) => {
                        // Not kept: the memory goes back to what the database holds.
                        *lock(&self.entries) = before;
                        return Err(e);
                    }
                },
                None => self.persist(&snapshot.into_values().collect::<Vec<_>>())?,
            },
            _ => self.persist(&snapshot.into_values().collect::<Vec<_>>())?,
        }
        Ok(touched)
    }

    /// Forgets the tokens of `caller` (for one upstream, or all); how many entries went.
    pub fn revoke(&self, caller: &str, upstream: Option<&str>) -> Result<usize, VaultError> {
        self.change(|entries| {
            let before = entries.len();
            entries.retain(|_, (k, _)| !(k.caller == caller && upstream.is_none_or(|u| k.upstream == u)));
            before - entries.len()
        })
    }

    /// How many entries are kept (for one caller, or everyone), whether this key opens them or not.
    pub fn kept(&self, caller: Option<&str>) -> usize {
        lock(&self.entries).values().filter(|(k, _)| caller.is_none_or(|c| k.caller == c)).count()
    }

    /// What is held (for one caller, or everyone) and this key opens, without any token.
    pub fn list(&self, caller: Option<&str>) -> Vec<Held> {
        let entries: Vec<(VaultKey, String)> =
            lock(&self.entries).values().filter(|(k, _)| caller.is_none_or(|c| k.caller == c)).cloned().collect();
        entries
            .into_iter()
            .filter_map(|(k, sealed)| {
                let t: TokenSet = self.sealer.open(&k.purpose(), &sealed, MAX_AGE)?;
                Some(Held {
                    caller: k.caller,
                    upstream: k.upstream,
                    issuer: k.issuer,
                    scope: t.scope,
                    expires_at: t.expires_at,
                    refreshable: t.refresh_token.is_some(),
                    issued_at: t.issued_at,
                })
            })
            .collect()
    }

    fn persist(&self, entries: &[(VaultKey, String)]) -> Result<(), VaultError> {
        let Some(path) = &self.path else { return Ok(()) };
        let fail = |e: &dyn std::fmt::Display| VaultError::Write { path: path.display().to_string(), reason: e.to_string() };
        let bytes = serde_json::to_vec(entries).map_err(|e| fail(&e))?;
        mcpgate_net::files::write_atomic(path, &bytes).map_err(|e| fail(&e))
    }
}

/// Unix seconds now.
pub fn now() -> u64 {
    mcpgate_protocol::toolbox::unix_secs()
}

/// How the gateway authenticates to a token endpoint.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "method")]
pub enum ClientAuth {
    /// A public client: `client_id` in the body.
    None { client_id: String },
    /// `client_secret_basic`.
    Basic { client_id: String, secret: String },
    /// `client_secret_post`.
    Post { client_id: String, secret: String },
    /// RFC 7523 `private_key_jwt`: a signed assertion made for this request.
    Assertion { client_id: String, assertion: String },
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientAuth::None { client_id } => write!(f, "None({client_id})"),
            ClientAuth::Basic { client_id, .. } => write!(f, "Basic({client_id}, <secret>)"),
            ClientAuth::Post { client_id, .. } => write!(f, "Post({client_id}, <secret>)"),
            ClientAuth::Assertion { client_id, .. } => write!(f, "Assertion({client_id}, <assertion>)"),
        }
    }
}

impl ClientAuth {
    pub fn client_id(&self) -> &str {
        match self {
            ClientAuth::None { client_id }
            | ClientAuth::Basic { client_id, .. }
            | ClientAuth::Post { client_id, .. }
            | ClientAuth::Assertion { client_id, .. } => client_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgate_model::token::KeySource;

    fn sealer(keys: &[&[u8]]) -> Arc<Sealer> {
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        Arc::new(Sealer::from_keys(&keys, KeySource::File).expect("keys"))
    }

    fn key(caller: &str) -> VaultKey {
        VaultKey { caller: caller.into(), upstream: "linear".into(), issuer: "https://as.example.com".into() }
    }

    fn tokens(access: &str) -> TokenSet {
        TokenSet {
            access_token: access.into(),
            refresh_token: Some("r-secret".into()),
            expires_at: Some(now() + 3600),
            scope: Some("read".into()),
            issued_at: now(),
            client: None,
            dpop: None,
        }
    }

    #[test]
    fn the_state_database_takes_over_the_vault_file_once_and_keeps_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let k = [5u8; 32];
        // What an earlier release kept: the JSON vault file.
        let legacy = dir.path().join("mcpgate-vault.json");
        let old = Vault::open(sealer(&[&k]), legacy.clone()).expect("open");
        old.put(&key("alice"), &tokens("alice-token")).expect("put");
        old.put(&key("bob"), &tokens("bob-token")).expect("put");
        let db_path = dir.path().join("mcpgate-state.db");
        let db = Arc::new(mcpgate_store::Db::sqlite(&db_path).expect("db"));
        let v = Vault::in_db(sealer(&[&k]), db.clone(), &legacy).expect("carried over");
        assert_eq!(v.get(&key("alice")).map(|t| t.access_token).as_deref(), Some("alice-token"));
        assert!(legacy.exists(), "the old file is kept");
        assert!(db.meta("vault_migrated").unwrap().is_some_and(|m| m.starts_with("2 entries")));
        // Changes go to the database; the old file is not read again.
        v.put(&key("carol"), &tokens("carol-token")).expect("put");
        assert!(v.remove(&key("bob")).expect("remove"));
        old.put(&key("dave"), &tokens("dave-token")).expect("a late write to the old file");
        drop((v, db));
        let db = Arc::new(mcpgate_store::Db::sqlite(&db_path).expect("reopen"));
        let v = Vault::in_db(sealer(&[&k]), db.clone(), &legacy).expect("reopened");
        let mut held: Vec<String> = v.list(None).into_iter().map(|h| h.caller).collect();
        held.sort();
        assert_eq!(held, ["alice", "carol"], "no second carry-over, every change kept");
        // Sealed at rest, as in the file.
        let bytes =
            [std::fs::read(&db_path).unwrap_or_default(), std::fs::read(dir.path().join("mcpgate-state.db-wal")).unwrap_or_default()]
                .concat();
        assert!(!String::from_utf8_lossy(&bytes).contains("carol-token"));
    }

    #[test]
    fn tokens_are_sealed_at_rest_and_bound_to_their_slot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("vault.json");
        let k = [7u8; 32];
        let v = Vault::open(sealer(&[&k]), path.clone()).expect("open");
        v.put(&key("alice"), &tokens("a-secret-token")).expect("put");
        let on_disk = std::fs::read_to_string(&path).expect("file");
        assert!(!on_disk.contains("a-secret-token") && !on_disk.contains("r-secret"), "{on_disk}");
        #[cfg(unix)]
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).expect("meta").permissions()) & 0o777, 0o600);
        // A new process with the same key reads it back; another caller's slot does not open it.
        let again = Vault::open(sealer(&[&k]), path.clone()).expect("reopen");
        assert_eq!(again.get(&key("alice")).map(|t| t.access_token), Some("a-secret-token".into()));
        assert_eq!(again.get(&key("bob")), None);
        let moved = on_disk.replace("alice", "bob!!");
        std::fs::write(&path, moved).expect("tamper");
        let tampered = Vault::open(sealer(&[&k]), path.clone()).expect("reopen");
        assert_eq!(
            tampered.get(&VaultKey { caller: "bob!!".into(), ..key("alice") }),
            None,
            "an entry moved to another caller does not open"
        );
        // Rotation: a vault opened with a new key first and the old one second still reads old entries.
        std::fs::write(&path, on_disk).expect("restore");
        let rotated = Vault::open(sealer(&[&[9u8; 32], &k]), path).expect("reopen");
        assert!(rotated.get(&key("alice")).is_some());
    }

    #[test]
    fn revocation_and_listing_never_show_a_token() {
        let v = Vault::in_memory(sealer(&[&[1u8; 32]]));
        v.put(&key("alice"), &tokens("t1")).expect("put");
        v.put(&key("bob"), &tokens("t2")).expect("put");
        let listed = serde_json::to_string(&v.list(None)).expect("json");
        assert!(!listed.contains("t1") && !listed.contains("r-secret"), "{listed}");
        assert_eq!(v.list(Some("alice")).len(), 1);
        assert!(!format!("{:?}", tokens("t1")).contains("t1"));
        assert_eq!(v.revoke("alice", Some("other")).expect("revoke"), 0);
        assert_eq!(v.revoke("alice", None).expect("revoke"), 1);
        assert_eq!(v.get(&key("alice")), None);
        assert!(v.get(&key("bob")).is_some());
    }

    #[test]
    fn freshness_leaves_a_margin() {
        let mut t = tokens("x");
        assert!(t.fresh(Duration::from_secs(60)));
        t.expires_at = Some(now() + 30);
        assert!(!t.fresh(Duration::from_secs(60)));
        t.expires_at = None;
        assert!(t.fresh(Duration::from_secs(60)));
    }
}
