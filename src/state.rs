//! The embedded state database (`[state] path`, default `mcpgate-state.db` beside the
//! configuration; docs/configuration.md, `[state]`): the token vault and the usage counts; SQLite compiled into the binary (`rusqlite` with
//! its bundled library), in WAL mode with full synchronous commits, so what a change committed
//! survives a `kill -9` and a power cut. Its schema is versioned: the migrations below run in
//! order at open (`PRAGMA user_version` says how far a file is), each in a transaction. One
//! connection behind a lock serves the process: what is kept here (tokens) is written rarely
//! and read from memory. `meta` records one-time facts, such as a migration from the files the
//! gateway kept before.
//!
//! rusqlite over sqlx: synchronous, small, and no runtime of its own; the writes are few and
//! short, so a lock and a blocking call cost less than an async pool would.

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The schema, one step per release that changed it; never edited once released.
const MIGRATIONS: &[&str] = &[
    // 1: the token vault (sealed token sets per caller, upstream and issuer) and one-time facts.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE vault (
         caller TEXT NOT NULL, upstream TEXT NOT NULL, issuer TEXT NOT NULL,
         sealed TEXT NOT NULL, updated_ms INTEGER NOT NULL,
         PRIMARY KEY (caller, upstream, issuer)
     );",
    // 2: usage counts (hourly and daily rows, added to in place) and the quota windows still open.
    "CREATE TABLE usage_hour (
         start INTEGER NOT NULL, caller TEXT NOT NULL, tool TEXT NOT NULL, upstream TEXT NOT NULL,
         endpoint TEXT NOT NULL, outcome TEXT NOT NULL, calls INTEGER NOT NULL, ms INTEGER NOT NULL,
         PRIMARY KEY (start, caller, tool, upstream, endpoint, outcome)
     );
     CREATE TABLE usage_day (
         start INTEGER NOT NULL, caller TEXT NOT NULL, tool TEXT NOT NULL, upstream TEXT NOT NULL,
         endpoint TEXT NOT NULL, outcome TEXT NOT NULL, calls INTEGER NOT NULL, ms INTEGER NOT NULL,
         PRIMARY KEY (start, caller, tool, upstream, endpoint, outcome)
     );
     CREATE TABLE quota_count (
         quota TEXT NOT NULL, start INTEGER NOT NULL, end_at INTEGER NOT NULL, caller TEXT NOT NULL, count INTEGER NOT NULL,
         PRIMARY KEY (quota, start, end_at, caller)
     );",
];

#[derive(Debug, thiserror::Error)]
#[error("the state database {path}: {reason}")]
pub struct StateError {
    pub path: String,
    pub reason: String,
}

pub struct Db {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl Db {
    /// Opens (or creates, mode 0600) the database at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Db, StateError> {
        let err = |e: &dyn std::fmt::Display| StateError { path: path.display().to_string(), reason: e.to_string() };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| err(&e))?;
        }
        let fresh = !path.exists();
        let mut conn = Connection::open(path).map_err(|e| err(&e))?;
        if fresh {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(|e| err(&e))?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(|e| err(&e))?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(|e| err(&e))?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(|e| err(&e))?;
        let version = usize::try_from(version).unwrap_or(usize::MAX);
        if version > MIGRATIONS.len() {
            return Err(err(&format!(
                "its schema is version {version}, newer than this mcpgate knows ({}): run the newer release, or restore a backup",
                MIGRATIONS.len()
            )));
        }
        for (i, step) in MIGRATIONS.iter().enumerate().skip(version) {
            let tx = conn.transaction().map_err(|e| err(&e))?;
            tx.execute_batch(step).map_err(|e| err(&format!("migration {}: {e}", i + 1)))?;
            tx.pragma_update(None, "user_version", (i + 1) as i64).map_err(|e| err(&e))?;
            tx.commit().map_err(|e| err(&e))?;
        }
        Ok(Db { path: path.to_path_buf(), conn: Mutex::new(conn) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection (one caller at a time).
    pub fn with<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> Result<T, StateError> {
        let mut conn = crate::sync::lock(&self.conn);
        f(&mut conn).map_err(|e| StateError { path: self.path.display().to_string(), reason: e.to_string() })
    }

    /// A one-time fact, if recorded.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StateError> {
        self.with(|c| {
            use rusqlite::OptionalExtension;
            c.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0)).optional()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_made_once_and_opens_again_at_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("mcpgate-state.db");
        let db = Db::open(&path).expect("made");
        db.with(|c| c.execute("INSERT INTO meta (key, value) VALUES ('k', 'v')", [])).expect("insert");
        drop(db);
        let db = Db::open(&path).expect("opened again, no migration twice");
        assert_eq!(db.meta("k").unwrap().as_deref(), Some("v"));
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
        // A file from a newer release is refused, not rewritten.
        db.with(|c| c.pragma_update(None, "user_version", 99)).unwrap();
        drop(db);
        let e = Db::open(&path).err().expect("refused").to_string();
        assert!(e.contains("newer than this mcpgate knows"), "{e}");
    }
}
