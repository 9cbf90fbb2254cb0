//! The state database on PostgreSQL, shared by the replicas (`[state] postgres`). One connection
//! per replica, behind a lock: what goes through it is rare and short (a token change, a usage
//! flush every few seconds, a pin approval, a started authorization, a poll of the change
//! counters each second), so a pool would hold idle connections for nothing. The synchronous
//! client (`postgres`, tokio-postgres underneath) runs its round trips on a thread of its own
//! when called from the gateway's async tasks, and its connection is dropped there too.
//!
//! Deadlines: connecting and every statement (`statement_timeout`) are bounded by
//! `[state] timeout`, and a dead peer by `tcp_user_timeout`. While the database is down, a
//! failed connection is not retried for [`RETRY`]: calls fail fast with the reason, so the
//! stores above keep serving from memory (tokens read, counts buffered) and refuse only what
//! needs a write (a consent's tokens, an approval). A connection the server ended while idle is
//! found out by the next `BEGIN` and replaced at once; nothing is retried once work has begun.

use super::{DbError, Row, Tx, Value};
use crate::sync::lock;
use bytes::BytesMut;
use mcpgate_config::state::PostgresConfig;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, NoTls};
use std::error::Error;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a failed connection is not retried.
const RETRY: Duration = Duration::from_secs(2);
/// The advisory lock the migrations hold (any fixed number: "mcpgate" in ASCII).
const MIGRATION_LOCK: i64 = 0x006d_6370_6761_7465;

pub struct Postgres {
    config: postgres::Config,
    client: Mutex<Option<Client>>,
    /// Until when a failed connection is not retried, and why it failed.
    down: Mutex<Option<(Instant, Arc<postgres::Error>)>>,
}

impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self {
            Value::Int(v) if *ty == Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
            Value::Int(v) if *ty == Type::INT2 => i16::try_from(*v)?.to_sql(ty, out),
            Value::Int(v) => v.to_sql(ty, out),
            Value::Text(v) => v.as_str().to_sql(ty, out),
            Value::Null => Ok(IsNull::Yes),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// `?1` → `$1`: the one difference of dialect the stores above see.
fn dialect(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// A PostgreSQL error in words (the server's message and code where it sent one).
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => match e.source() {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

fn value(row: &postgres::Row, i: usize) -> Result<Value, postgres::Error> {
    let ty = row.columns()[i].type_();
    Ok(if *ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?.map_or(Value::Null, Value::Int)
    } else if *ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)?.map_or(Value::Null, |v| Value::Int(v.into()))
    } else if *ty == Type::INT2 {
        row.try_get::<_, Option<i16>>(i)?.map_or(Value::Null, |v| Value::Int(v.into()))
    } else if *ty == Type::BOOL {
        row.try_get::<_, Option<bool>>(i)?.map_or(Value::Null, |v| Value::Int(v.into()))
    } else {
        row.try_get::<_, Option<String>>(i)?.map_or(Value::Null, Value::Text)
    })
}

struct PgTx<'a>(postgres::Transaction<'a>);

impl Tx for PgTx<'_> {
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError> {
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        Ok(self.0.execute(dialect(sql).as_str(), &refs)?)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError> {
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let rows = self.0.query(dialect(sql).as_str(), &refs)?;
        Ok(rows
            .iter()
            .map(|r| (0..r.len()).map(|i| value(r, i)).collect::<Result<Vec<Value>, _>>().map(Row))
            .collect::<Result<Vec<Row>, _>>()?)
    }
}

impl Postgres {
    pub fn open(cfg: &PostgresConfig, migrations: &[&str]) -> Result<Postgres, DbError> {
        let mut config = postgres::Config::from_str(&cfg.url).map_err(DbError::Url)?;
        let ms = cfg.timeout.as_millis();
        let options = match config.get_options() {
            Some(o) if !o.trim().is_empty() => format!("{o} -c statement_timeout={ms}"),
            _ => format!("-c statement_timeout={ms}"),
        };
        config
            .options(&options)
            .connect_timeout(cfg.timeout)
            .tcp_user_timeout(cfg.timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30));
        if config.get_application_name().is_none() {
            config.application_name("mcpgate");
        }
        let pg = Postgres { config, client: Mutex::default(), down: Mutex::default() };
        pg.tx(|t| migrate(t, migrations))?;
        Ok(pg)
    }

    /// Runs `f` in one transaction on the connection (made again if it was lost).
    pub fn tx<T: Send>(&self, f: impl FnOnce(&mut dyn Tx) -> Result<T, DbError> + Send) -> Result<T, DbError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.run(f);
        }
        // The synchronous client blocks on a runtime of its own, which may not run inside the
        // gateway's: the round trips run on a short-lived thread (rare: see the module comment).
        std::thread::scope(|s| s.spawn(|| self.run(f)).join().unwrap_or(Err(DbError::Panicked)))
    }

    /// [`Postgres::tx`] from a thread of the blocking pool (no short-lived thread), with a
    /// commit that does not wait for the server's disk (`synchronous_commit = off`): committed
    /// for this process at once, lost only if the database server itself crashes within a
    /// fraction of a second.
    pub fn tx_quick<T>(&self, f: impl FnOnce(&mut dyn Tx) -> Result<T, DbError>) -> Result<T, DbError> {
        self.run(|t| {
            t.exec("SET LOCAL synchronous_commit TO OFF", &[])?;
            f(t)
        })
    }

    fn run<T>(&self, f: impl FnOnce(&mut dyn Tx) -> Result<T, DbError>) -> Result<T, DbError> {
        let mut slot = lock(&self.client);
        // A connection the server ended while it sat idle (a restart, a failover, an idle
        // timeout) is only found out by its next round trip, the BEGIN: then one fresh connection
        // is made, since nothing of `f` has run. A failure once `f` has begun is never retried.
        let mut fresh = false;
        let done = loop {
            if slot.as_ref().is_some_and(Client::is_closed) {
                *slot = None;
            }
            let client = match slot.as_mut() {
                Some(c) => c,
                None => slot.insert(self.connect()?),
            };
            let e = match client.transaction() {
                Ok(t) => {
                    let mut tx = PgTx(t);
                    break match f(&mut tx) {
                        Ok(out) => tx.0.commit().map(|_| out).map_err(DbError::from),
                        Err(e) => Err(e),
                    };
                }
                Err(e) => e,
            };
            let gone = slot.as_ref().is_none_or(Client::is_closed) || connection_ended(&e);
            if gone {
                *slot = None;
            }
            if gone && !fresh {
                tracing::info!(error = %describe(&e), "the state database had closed its connection: connecting again");
                fresh = true;
                continue;
            }
            return Err(e.into());
        };
        if slot.as_ref().is_none_or(Client::is_closed) {
            *slot = None;
        }
        done
    }

    /// A new connection, unless one failed less than [`RETRY`] ago.
    fn connect(&self) -> Result<Client, DbError> {
        if let Some((until, why)) = lock(&self.down).as_ref()
            && Instant::now() < *until
        {
            return Err(DbError::Unreachable(why.clone()));
        }
        match self.config.connect(NoTls) {
            Ok(c) => {
                if lock(&self.down).take().is_some() {
                    tracing::info!("the state database answers again");
                }
                Ok(c)
            }
            Err(e) => {
                let why = Arc::new(e);
                if lock(&self.down).replace((Instant::now() + RETRY, why.clone())).is_none() {
                    tracing::warn!(error = %describe(&why), "the state database cannot be reached; what needs it waits or is refused until it answers");
                }
                Err(DbError::Unreachable(why))
            }
        }
    }
}

/// Whether `e` says the server ended the connection (shut down, crashed, not accepting yet), so
/// that a new connection may succeed where this one cannot.
fn connection_ended(e: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    e.is_closed()
        || e.code().is_some_and(|c| [SqlState::ADMIN_SHUTDOWN, SqlState::CRASH_SHUTDOWN, SqlState::CANNOT_CONNECT_NOW].contains(c))
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // A client owns a runtime, which may not be dropped inside another.
        if let Some(c) = lock(&self.client).take() {
            std::thread::spawn(move || drop(c));
        }
    }
}

/// Brings the schema up to date, one replica at a time.
fn migrate(t: &mut dyn Tx, migrations: &[&str]) -> Result<(), DbError> {
    t.exec("SELECT pg_advisory_xact_lock(?1)", super::params![MIGRATION_LOCK])?;
    t.exec("CREATE TABLE IF NOT EXISTS mcpgate_schema (version BIGINT NOT NULL)", &[])?;
    let version = t.query("SELECT COALESCE(MAX(version), 0) FROM mcpgate_schema", &[])?.first().map_or(0, |r| r.int(0));
    let version = super::known_version(version, migrations)?;
    for (i, step) in migrations.iter().enumerate().skip(version) {
        for statement in step.split(';').filter(|s| !s.trim().is_empty()) {
            t.exec(statement, &[]).map_err(|e| DbError::Migration { step: i + 1, source: Box::new(e) })?;
        }
        t.exec("DELETE FROM mcpgate_schema", &[])?;
        t.exec("INSERT INTO mcpgate_schema (version) VALUES (?1)", super::params![(i + 1) as i64])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_numbered_the_postgresql_way() {
        assert_eq!(dialect("SELECT a FROM t WHERE b = ?1 AND c = ?12"), "SELECT a FROM t WHERE b = $1 AND c = $12");
        assert_eq!(dialect("SELECT '?' , ?"), "SELECT '?' , ?", "a ? without a number is left");
    }
}
