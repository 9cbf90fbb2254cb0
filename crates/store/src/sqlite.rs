//! The state database as an SQLite file: WAL mode with full synchronous commits (what a change
//! committed survives a `kill -9` and a power cut; a quota's use, taken on the call path, only
//! the `kill -9`: `tx_quick`), `PRAGMA user_version` saying how far its
//! schema is, one connection behind a lock (the writes are few and short).

use super::{DbError, Row, Tx, Value};
use rusqlite::Connection;
use rusqlite::types::{ToSqlOutput, ValueRef};
use std::path::Path;
use std::sync::Mutex;

pub struct Sqlite {
    conn: Mutex<Connection>,
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Int(v) => ToSqlOutput::from(*v),
            Value::Text(v) => ToSqlOutput::from(v.as_str()),
            Value::Null => ToSqlOutput::from(rusqlite::types::Null),
        })
    }
}

struct SqliteTx<'a>(rusqlite::Transaction<'a>);

impl Tx for SqliteTx<'_> {
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError> {
        let mut st = self.0.prepare_cached(sql)?;
        Ok(st.execute(rusqlite::params_from_iter(params.iter())).map(|n| n as u64)?)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError> {
        let mut st = self.0.prepare_cached(sql)?;
        let width = st.column_count();
        let rows = st.query_map(rusqlite::params_from_iter(params.iter()), |r| {
            (0..width)
                .map(|i| {
                    Ok(match r.get_ref(i)? {
                        ValueRef::Integer(v) => Value::Int(v),
                        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                        ValueRef::Real(f) => Value::Int(f as i64),
                        ValueRef::Null | ValueRef::Blob(_) => Value::Null,
                    })
                })
                .collect::<rusqlite::Result<Vec<Value>>>()
                .map(Row)
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<Row>>>()?)
    }
}

impl Sqlite {
    pub fn open(path: &Path, migrations: &[&str]) -> Result<Sqlite, DbError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(DbError::Folder)?;
        }
        let fresh = !path.exists();
        let mut conn = Connection::open(path)?;
        if fresh {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let version = super::known_version(version, migrations)?;
        for (i, step) in migrations.iter().enumerate().skip(version) {
            let tx = conn.transaction()?;
            tx.execute_batch(step).map_err(|e| DbError::Migration { step: i + 1, source: Box::new(e.into()) })?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
        }
        Ok(Sqlite { conn: Mutex::new(conn) })
    }

    /// [`Sqlite::tx`] with a commit that is in the file for every process at once but reaches
    /// the disk at the next checkpoint (`synchronous = NORMAL` for this one): it survives this
    /// process's crash, not a power cut of the last moments.
    pub fn tx_quick<T>(&self, f: impl FnOnce(&mut dyn Tx) -> Result<T, DbError>) -> Result<T, DbError> {
        let mut conn = crate::sync::lock(&self.conn);
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        let out = run(&mut conn, f);
        conn.pragma_update(None, "synchronous", "FULL")?;
        out
    }

    pub fn tx<T>(&self, f: impl FnOnce(&mut dyn Tx) -> Result<T, DbError>) -> Result<T, DbError> {
        run(&mut crate::sync::lock(&self.conn), f)
    }
}

/// `f` in one transaction on `conn`, committed when it returns `Ok`.
fn run<T>(conn: &mut Connection, f: impl FnOnce(&mut dyn Tx) -> Result<T, DbError>) -> Result<T, DbError> {
    let mut tx = SqliteTx(conn.transaction()?);
    let out = f(&mut tx)?;
    tx.0.commit()?;
    Ok(out)
}
