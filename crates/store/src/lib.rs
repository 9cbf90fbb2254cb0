//! mcpgate, layer 4: the state database (`[state]`; docs/configuration.md, docs/production.md):
//! what must survive a restart — the token vault, the usage counts, pin approvals, started
//! authorizations and one-time claims. By default SQLite compiled into the binary (`sqlite`), a
//! file beside the configuration; with `[state] postgres`, a PostgreSQL database every replica
//! shares (`postgres`). Both run the same schema, versioned: the migrations below run in order
//! at open, each in a transaction, and a database from a newer release is refused, never
//! rewritten. The stores above this crate speak one small dialect: `?N` parameters, integers and
//! text, `ON CONFLICT` upserts, `RETURNING`; each backend runs a change as one transaction
//! (`Db::tx`). `counter` rows are bumped by each change a replica must notice ([`bump`]), so the
//! others poll one number, not a table. What goes wrong is a [`DbError`] (a statement, a connection,
//! the schema), and, once it leaves a [`Db`], a [`StoreError`] naming which database.
//!
//! rusqlite over sqlx: synchronous, small, no runtime of its own; the writes are few and short,
//! so a lock and a blocking call cost less than an async pool would. The `postgres` crate (the
//! synchronous face of tokio-postgres) for the same reason, on one connection per replica:
//! see `postgres` for why a pool is not needed and what happens while the database is down.

pub mod once;
mod postgres;
mod sqlite;

use mcpgate_protocol::{sync, toolbox};
use std::path::Path;
use std::sync::Arc;

/// The schema, one step per release that changed it; never edited once released. Written in
/// the dialect both backends take (BIGINT, TEXT, composite primary keys).
const MIGRATIONS: &[&str] = &[
    // 1: the token vault (sealed token sets per caller, upstream and issuer) and one-time facts.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE vault (
         caller TEXT NOT NULL, upstream TEXT NOT NULL, issuer TEXT NOT NULL,
         sealed TEXT NOT NULL, updated_ms BIGINT NOT NULL,
         PRIMARY KEY (caller, upstream, issuer)
     );",
    // 2: usage counts (hourly and daily rows, added to in place) and the quota windows still open.
    "CREATE TABLE usage_hour (
         start BIGINT NOT NULL, caller TEXT NOT NULL, tool TEXT NOT NULL, upstream TEXT NOT NULL,
         endpoint TEXT NOT NULL, outcome TEXT NOT NULL, calls BIGINT NOT NULL, ms BIGINT NOT NULL,
         PRIMARY KEY (start, caller, tool, upstream, endpoint, outcome)
     );
     CREATE TABLE usage_day (
         start BIGINT NOT NULL, caller TEXT NOT NULL, tool TEXT NOT NULL, upstream TEXT NOT NULL,
         endpoint TEXT NOT NULL, outcome TEXT NOT NULL, calls BIGINT NOT NULL, ms BIGINT NOT NULL,
         PRIMARY KEY (start, caller, tool, upstream, endpoint, outcome)
     );
     CREATE TABLE quota_count (
         quota TEXT NOT NULL, start BIGINT NOT NULL, end_at BIGINT NOT NULL, caller TEXT NOT NULL, count BIGINT NOT NULL,
         PRIMARY KEY (quota, start, end_at, caller)
     );",
    // 3: change counters (what replicas poll), pin approvals, and one-time entries (started
    // authorizations, spent consent links).
    "CREATE TABLE counter (name TEXT PRIMARY KEY, n BIGINT NOT NULL);
     CREATE TABLE pin (
         upstream TEXT NOT NULL, item TEXT NOT NULL, sha256 TEXT NOT NULL, definition TEXT NOT NULL,
         approved_ms BIGINT NOT NULL,
         PRIMARY KEY (upstream, item)
     );
     CREATE TABLE once (key TEXT PRIMARY KEY, check_hash TEXT NOT NULL, value TEXT NOT NULL, expires_ms BIGINT NOT NULL);",
];

/// Every table the migrations make: each is read at open, so a database whose version says it is
/// up to date but that misses one (edited by hand, restored in part) is refused at the start
/// instead of failing the first request that needs it.
const TABLES: &[&str] = &["meta", "vault", "usage_hour", "usage_day", "quota_count", "counter", "pin", "once"];

/// Reads every table of [`TABLES`].
fn check_schema(t: &mut dyn Tx) -> Result<(), DbError> {
    for table in TABLES {
        t.query(&format!("SELECT 1 FROM {table} WHERE 1 = 0"), &[]).map_err(|e| DbError::Damaged { table, source: Box::new(e) })?;
    }
    Ok(())
}

/// What a statement, a connection or the schema ran into ([`StoreError`] says which database).
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite refused the file, a pragma or a statement.
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The folder of the SQLite file cannot be made.
    #[error("{0}")]
    Folder(#[source] std::io::Error),
    /// PostgreSQL refused a statement or ended the connection (the server's message and code
    /// where it sent one).
    #[error("{}", postgres::describe(.0))]
    Postgres(#[from] ::postgres::Error),
    /// `[state] postgres` names a URL the client cannot take.
    #[error("the URL is not usable: {0}")]
    Url(#[source] ::postgres::Error),
    /// No connection could be made now, or one failed a moment ago (not tried again yet).
    #[error("unreachable ({})", postgres::describe(.0))]
    Unreachable(#[source] Arc<::postgres::Error>),
    /// The thread that ran a PostgreSQL transaction panicked.
    #[error("the database call panicked")]
    Panicked,
    /// The schema is from a newer release: refused, never rewritten.
    #[error("its schema is version {version}, newer than this mcpgate knows ({known}): run the newer release, or restore a backup")]
    Newer { version: usize, known: usize },
    /// Migration `step` (from 1) failed; the database stays at the step before.
    #[error("migration {step}: {source}")]
    Migration {
        step: usize,
        #[source]
        source: Box<DbError>,
    },
    /// A table of the schema cannot be read although the version says it is there.
    #[error("its table {table} cannot be read ({source}): the schema is damaged; restore the database from a backup")]
    Damaged {
        table: &'static str,
        #[source]
        source: Box<DbError>,
    },
    /// The SQLite file is there but cannot be read: the gateway does not start on an empty one.
    #[error(
        "{0}. It cannot be read, so the gateway does not start: serving on an empty one would give back the quotas \
         already used and forget connected accounts and approvals. Restore it from a backup, or start once with \
         `mcpgate run --fresh-state` to move it aside and begin with an empty one"
    )]
    Unreadable(#[source] Box<DbError>),
    /// An unreadable SQLite file cannot be moved aside (`--fresh-state`).
    #[error("cannot move it aside: {0}")]
    MoveAside(#[source] std::io::Error),
}

/// A failure of the state database at `place` (a path, or a PostgreSQL URL without its password).
#[derive(Debug, thiserror::Error)]
#[error("the state database {place}: {source}")]
pub struct StoreError {
    pub place: String,
    #[source]
    pub source: DbError,
}

/// A parameter or a column value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Text(String),
    Null,
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_string())
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Value {
        Value::Text(v.clone())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}

/// Parameters: `params![a, b, c]`.
#[macro_export]
macro_rules! params {
    ($($v:expr),* $(,)?) => { &[$($crate::Value::from($v)),*][..] };
}

/// One result row.
#[derive(Debug, Clone)]
pub struct Row(pub Vec<Value>);

impl Row {
    /// Column `i` as an integer (0 when NULL or text).
    pub fn int(&self, i: usize) -> i64 {
        match self.0.get(i) {
            Some(Value::Int(v)) => *v,
            _ => 0,
        }
    }

    /// Column `i` as an unsigned integer (negative values as 0).
    pub fn uint(&self, i: usize) -> u64 {
        u64::try_from(self.int(i)).unwrap_or(0)
    }

    /// Column `i` as text (empty when NULL or a number).
    pub fn text(&self, i: usize) -> String {
        match self.0.get(i) {
            Some(Value::Text(v)) => v.clone(),
            _ => String::new(),
        }
    }
}

/// A transaction in progress. Statements use `?1`, `?2`… for parameters.
pub trait Tx {
    /// Runs a statement; the rows it changed.
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError>;
    /// Runs a query; its rows.
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError>;
}

enum Backend {
    Sqlite(sqlite::Sqlite),
    Postgres(Box<postgres::Postgres>),
}

/// The state database of this process.
pub struct Db {
    backend: Backend,
    /// Where it is, for messages (a path, or a PostgreSQL URL without its password).
    place: String,
}

impl Db {
    /// The database `cfg` names: PostgreSQL when configured, else the SQLite file.
    pub fn open(cfg: &mcpgate_config::state::StateConfig) -> Result<Db, StoreError> {
        match &cfg.postgres {
            Some(pg) => Db::postgres(pg),
            None => Db::sqlite(&cfg.path),
        }
    }

    /// Opens (or creates, mode 0600) the SQLite database at `path` and brings its schema up to date.
    pub fn sqlite(path: &Path) -> Result<Db, StoreError> {
        let place = path.display().to_string();
        let backend = sqlite::Sqlite::open(path, MIGRATIONS).map_err(|source| StoreError { place: place.clone(), source })?;
        let db = Db { backend: Backend::Sqlite(backend), place };
        db.tx(check_schema)?;
        Ok(db)
    }

    /// Connects to the PostgreSQL database and brings its schema up to date (one replica at a
    /// time: the migrations hold an advisory lock).
    pub fn postgres(cfg: &mcpgate_config::state::PostgresConfig) -> Result<Db, StoreError> {
        let place = cfg.redacted_url();
        let backend = postgres::Postgres::open(cfg, MIGRATIONS).map_err(|source| StoreError { place: place.clone(), source })?;
        let db = Db { backend: Backend::Postgres(Box::new(backend)), place };
        db.tx(check_schema)?;
        Ok(db)
    }

    /// Where it is (a path, or the PostgreSQL URL without its password).
    pub fn place(&self) -> &str {
        &self.place
    }

    /// Whether other processes (replicas) share it: their changes must be polled for.
    pub fn shared(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn kind(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Runs `f` in one transaction, committed when it returns `Ok` (one caller at a time). On
    /// PostgreSQL, from an async context, the round trips run on a thread of their own.
    pub fn tx<T: Send>(&self, f: impl FnOnce(&mut dyn Tx) -> Result<T, DbError> + Send) -> Result<T, StoreError> {
        let done = match &self.backend {
            Backend::Sqlite(s) => s.tx(f),
            Backend::Postgres(p) => p.tx(f),
        };
        done.map_err(|source| StoreError { place: self.place.clone(), source })
    }

    /// [`Db::tx`] for what is taken on the call path (a quota's use), from a thread of the
    /// blocking pool: committed for every process before it returns, so the gateway's crash
    /// loses nothing, but without waiting for the disk (SQLite `synchronous = NORMAL`,
    /// PostgreSQL `synchronous_commit = off` for this transaction), so a power cut of the
    /// database's machine may lose the last fraction of a second.
    pub fn tx_quick<T: Send>(&self, f: impl FnOnce(&mut dyn Tx) -> Result<T, DbError> + Send) -> Result<T, StoreError> {
        let done = match &self.backend {
            Backend::Sqlite(s) => s.tx_quick(f),
            Backend::Postgres(p) => p.tx_quick(f),
        };
        done.map_err(|source| StoreError { place: self.place.clone(), source })
    }

    /// A one-time fact, if recorded.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.tx(|t| Ok(t.query("SELECT value FROM meta WHERE key = ?1", params![key])?.first().map(|r| r.text(0))))
    }

    /// The value of change counter `name` (0 before its first change).
    pub fn counter(&self, name: &str) -> Result<u64, StoreError> {
        self.tx(|t| Ok(t.query("SELECT n FROM counter WHERE name = ?1", params![name])?.first().map_or(0, |r| r.uint(0))))
    }
}

/// The SQLite database of `cfg` for a starting gateway: `Ok(None)` when it cannot be made (a
/// read-only folder: the gateway keeps its files and memory, and says so), an error when the
/// file is there but cannot be read, unless `cfg.fresh`: then the file (and its journal) is moved
/// aside and an empty one begun, which the log says loudly.
pub fn open_file(cfg: &mcpgate_config::state::StateConfig) -> Result<Option<Db>, StoreError> {
    let e = match Db::sqlite(&cfg.path) {
        Ok(db) => return Ok(Some(db)),
        Err(e) => e,
    };
    if !cfg.path.exists() {
        tracing::warn!(error = %e, "the state database cannot be made; tokens and usage counts are kept in their files (set [state] path to a writable place)");
        return Ok(None);
    }
    if !cfg.fresh {
        return Err(StoreError { place: e.place, source: DbError::Unreadable(Box::new(e.source)) });
    }
    let aside = cfg.path.with_extension(format!("unreadable-{}", now_ms() / 1000));
    std::fs::rename(&cfg.path, &aside).map_err(|m| StoreError { place: e.place.clone(), source: DbError::MoveAside(m) })?;
    for journal in ["-wal", "-shm"] {
        let mut from = cfg.path.clone().into_os_string();
        from.push(journal);
        let mut to = aside.clone().into_os_string();
        to.push(journal);
        let _ = std::fs::rename(&from, &to);
    }
    tracing::error!(error = %e, moved_to = %aside.display(), "the state database could not be read: moved aside, beginning with an empty one (--fresh-state); quotas, connected accounts and approvals start afresh");
    Db::sqlite(&cfg.path).map(Some)
}

/// The schema version a database records, as a count of `migrations` applied; a database from
/// a newer release is refused, never rewritten.
fn known_version(version: i64, migrations: &[&str]) -> Result<usize, DbError> {
    let version = usize::try_from(version).unwrap_or(usize::MAX);
    if version > migrations.len() {
        return Err(DbError::Newer { version, known: migrations.len() });
    }
    Ok(version)
}

/// Bumps change counter `name` within a transaction; its new value.
pub fn bump(t: &mut dyn Tx, name: &str) -> Result<u64, DbError> {
    let rows = t.query(
        "INSERT INTO counter (name, n) VALUES (?1, 1) ON CONFLICT (name) DO UPDATE SET n = counter.n + 1 RETURNING n",
        params![name],
    )?;
    Ok(rows.first().map_or(0, |r| r.uint(0)))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    i64::try_from(toolbox::unix_ms()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_made_once_and_opens_again_at_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("mcpgate-state.db");
        let db = Db::sqlite(&path).expect("made");
        db.tx(|t| t.exec("INSERT INTO meta (key, value) VALUES (?1, ?2)", params!["k", "v"])).expect("insert");
        assert_eq!(db.tx(|t| bump(t, "vault")).unwrap(), 1);
        assert_eq!(db.tx(|t| bump(t, "vault")).unwrap(), 2);
        assert_eq!(db.counter("vault").unwrap(), 2);
        assert_eq!(db.counter("pins").unwrap(), 0);
        drop(db);
        let db = Db::sqlite(&path).expect("opened again, no migration twice");
        assert_eq!(db.meta("k").unwrap().as_deref(), Some("v"));
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
        // A failed change leaves nothing behind.
        let e = db.tx(|t| {
            t.exec("INSERT INTO meta (key, value) VALUES (?1, ?2)", params!["half", "done"])?;
            t.exec("INSERT INTO nowhere (key) VALUES (?1)", params!["stopped"])
        });
        assert!(e.is_err());
        assert_eq!(db.meta("half").unwrap(), None);
        // A file from a newer release is refused, not rewritten.
        drop(db);
        rusqlite::Connection::open(&path).unwrap().pragma_update(None, "user_version", 99).unwrap();
        let e = Db::sqlite(&path).err().expect("refused").to_string();
        assert!(e.contains("newer than this mcpgate knows"), "{e}");
    }

    #[test]
    fn every_table_of_the_schema_is_checked_and_a_missing_one_refuses_the_database() {
        let made: Vec<&str> =
            MIGRATIONS.iter().flat_map(|m| m.split("CREATE TABLE ").skip(1)).filter_map(|t| t.split_whitespace().next()).collect();
        assert_eq!(made, TABLES, "TABLES lists what the migrations make");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcpgate-state.db");
        drop(Db::sqlite(&path).expect("made"));
        rusqlite::Connection::open(&path).unwrap().execute_batch("DROP TABLE quota_count").unwrap();
        let e = Db::sqlite(&path).err().expect("refused").to_string();
        assert!(e.contains("quota_count cannot be read") && e.contains("backup"), "{e}");
    }
}
