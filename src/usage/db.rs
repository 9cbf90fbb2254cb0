//! The usage counts in the state database (`mcpgate_store`): rows added to in place at each flush (one
//! transaction: the new counts, the pruned buckets, the open quota windows), read whole at start
//! and by `mcpgate usage`. Additions commute, so replicas sharing one database (PostgreSQL) each
//! add their own counts and a report reads the sum. The first time, the JSON store earlier
//! releases kept (`[usage] store`) is carried over, and left in place.

use super::store::{Buckets, DAY, Data, HOUR};
use super::{Pending, Row, Tally, UsageError};
use mcpgate_store::{Db, DbError, Tx, params};
use std::path::Path;

const QUOTA_UPSERT: &str = "INSERT INTO quota_count (quota, start, end_at, caller, count) VALUES (?1, ?2, ?3, ?4, ?5)
     ON CONFLICT (quota, start, end_at, caller) DO UPDATE SET count = excluded.count";

/// The counts kept in `db`, after carrying over the file `legacy` once.
pub fn load(db: &Db, legacy: &Path) -> Result<Data, UsageError> {
    if db.meta("usage_migrated")?.is_none() {
        let old = match legacy.exists() {
            true => Data::read(legacy)?,
            false => Data::default(),
        };
        let note = format!("{} hours from {}", old.hours.len(), legacy.display());
        let carried = db.tx(|t| {
            // Recorded first: of two replicas carrying over at once, one adds the counts.
            if t.exec("INSERT INTO meta (key, value) VALUES ('usage_migrated', ?1) ON CONFLICT (key) DO NOTHING", params![&note])? == 0 {
                return Ok(false);
            }
            for (table, buckets) in [("usage_hour", &old.hours), ("usage_day", &old.days)] {
                for (start, rows) in buckets {
                    for (row, tally) in rows {
                        add(t, table, *start, row, *tally)?;
                    }
                }
            }
            for ((quota, start, end), callers) in &old.quotas {
                for (caller, n) in callers {
                    t.exec(QUOTA_UPSERT, params![quota, *start, *end, caller, *n])?;
                }
            }
            Ok(true)
        })?;
        if carried && !old.hours.is_empty() {
            tracing::info!(from = %legacy.display(), into = %db.place(), "the usage counts were carried over into the state database (the old file is kept)");
        }
    }
    db.tx(|t| {
        let mut data = Data { hours: read(t, "usage_hour", 0)?, days: read(t, "usage_day", 0)?, ..Data::default() };
        for r in t.query("SELECT quota, start, end_at, caller, count FROM quota_count", &[])? {
            data.quotas.entry((r.text(0), r.uint(1), r.uint(2))).or_default().insert(r.text(3), r.uint(4));
        }
        Ok(data)
    })
    .map_err(UsageError::Db)
}

/// One quota window a call takes from.
pub struct Window {
    pub quota: String,
    pub start: u64,
    pub end: u64,
    pub limit: u64,
}

/// Takes one call of `caller` from every window, in one transaction, each only while it is under
/// its limit: `Some(i)` when window `i` is spent (nothing is taken then), `None` when all took it.
pub fn take(t: &mut dyn Tx, windows: &[Window], caller: &str) -> Result<Option<usize>, DbError> {
    for (i, w) in windows.iter().enumerate() {
        let took = w.limit > 0
            && t.exec(
                "INSERT INTO quota_count (quota, start, end_at, caller, count) VALUES (?1, ?2, ?3, ?4, 1)
                 ON CONFLICT (quota, start, end_at, caller) DO UPDATE SET count = quota_count.count + 1
                 WHERE quota_count.count < ?5",
                params![&w.quota, w.start, w.end, caller, w.limit],
            )? == 1;
        if !took {
            // Given back within the same transaction: a refused call spends nothing.
            for back in &windows[..i] {
                t.exec(
                    "UPDATE quota_count SET count = count - 1 WHERE quota = ?1 AND start = ?2 AND end_at = ?3 AND caller = ?4",
                    params![&back.quota, back.start, back.end, caller],
                )?;
            }
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// The hourly (`hourly`) or daily buckets from `from` on, as every replica added them.
pub fn buckets(db: &Db, hourly: bool, from: u64) -> Result<Buckets, UsageError> {
    Ok(db.tx(|t| read(t, if hourly { "usage_hour" } else { "usage_day" }, from))?)
}

fn read(t: &mut dyn Tx, table: &str, from: u64) -> Result<Buckets, DbError> {
    let mut out = Buckets::new();
    let rows = t.query(
        &format!("SELECT start, caller, tool, upstream, endpoint, outcome, calls, ms FROM {table} WHERE start >= ?1"),
        params![from],
    )?;
    for r in rows {
        let row = Row { caller: r.text(1), tool: r.text(2), upstream: r.text(3), endpoint: r.text(4), outcome: r.text(5) };
        out.entry(r.uint(0)).or_default().insert(row, Tally { calls: r.uint(6), ms: r.uint(7) });
    }
    Ok(out)
}

fn add(t: &mut dyn Tx, table: &str, start: u64, row: &Row, tally: Tally) -> Result<u64, DbError> {
    t.exec(
        &format!(
            "INSERT INTO {table} (start, caller, tool, upstream, endpoint, outcome, calls, ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (start, caller, tool, upstream, endpoint, outcome)
             DO UPDATE SET calls = {table}.calls + excluded.calls, ms = {table}.ms + excluded.ms"
        ),
        params![start, &row.caller, &row.tool, &row.upstream, &row.endpoint, &row.outcome, tally.calls, tally.ms],
    )
}

/// One flush: `pending` added to the hourly and daily rows, buckets before the floors (and quota
/// windows that ended by `now`) removed, and, when they changed, the open quota windows of `data`.
pub fn write(db: &Db, pending: &Pending, data: &Data, now: u64, hour_floor: u64, day_floor: u64, quotas: bool) -> Result<(), UsageError> {
    db.tx(|t| {
        for ((hour, row), tally) in pending {
            add(t, "usage_hour", *hour, row, *tally)?;
            add(t, "usage_day", hour - hour % DAY, row, *tally)?;
        }
        t.exec("DELETE FROM usage_hour WHERE start + ?1 <= ?2", params![HOUR, hour_floor])?;
        t.exec("DELETE FROM usage_day WHERE start + ?1 <= ?2", params![DAY, day_floor])?;
        t.exec("DELETE FROM quota_count WHERE end_at <= ?1", params![now])?;
        if quotas {
            for ((quota, start, end), callers) in &data.quotas {
                for (caller, n) in callers {
                    t.exec(QUOTA_UPSERT, params![quota, *start, *end, caller, *n])?;
                }
            }
        }
        Ok(())
    })
    .map_err(UsageError::Db)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::{RowRef, Usage};
    use mcpgate_config::usage::UsageConfig;
    use std::sync::Arc;

    fn row(caller: &'static str) -> RowRef<'static> {
        RowRef { caller, tool: "calc__add", upstream: "calc", endpoint: "-", outcome: "ok" }
    }

    #[tokio::test]
    async fn counts_carry_over_from_the_file_once_and_add_up_in_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = UsageConfig { store: dir.path().join("mcpgate-usage.json"), ..UsageConfig::default() };
        // What an earlier release kept: the JSON store, written by the file backend.
        let old = Usage::open(&cfg, None, None);
        old.record(row("alice"), 4);
        old.record(row("alice"), 6);
        old.flush().await;
        assert!(cfg.store.exists());
        let db = Arc::new(Db::sqlite(&dir.path().join("mcpgate-state.db")).unwrap());
        let u = Usage::open(&cfg, None, Some(db.clone()));
        u.record(row("alice"), 10);
        u.record(row("bob"), 1);
        u.flush().await;
        drop(u);
        // Reopened: the carried-over counts and the new ones, added in place; no second carry-over.
        let again = load(&db, &cfg.store).unwrap();
        let day = again.days.values().next().expect("a day");
        let alice = day.iter().find(|(r, _)| r.caller == "alice").map(|(_, t)| *t).expect("alice");
        assert_eq!((alice.calls, alice.ms), (3, 20));
        assert!(day.iter().any(|(r, t)| r.caller == "bob" && t.calls == 1));
        assert!(db.meta("usage_migrated").unwrap().is_some_and(|m| m.starts_with("1 hours")));
        assert!(cfg.store.exists(), "the old file is kept");
    }

    #[test]
    fn a_quota_is_taken_in_the_database_and_a_spent_one_takes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::sqlite(&dir.path().join("mcpgate-state.db")).unwrap();
        let day = Window { quota: "daily".into(), start: 0, end: 86_400, limit: 3 };
        let hour = Window { quota: "hourly".into(), start: 0, end: 3_600, limit: 2 };
        let both = [day, hour];
        assert_eq!(db.tx(|t| take(t, &both, "alice")).unwrap(), None);
        assert_eq!(db.tx(|t| take(t, &both, "alice")).unwrap(), None);
        // The hourly window is spent: the daily one is not taken from either.
        assert_eq!(db.tx(|t| take(t, &both, "alice")).unwrap(), Some(1));
        assert_eq!(db.tx(|t| take(t, &both[..1], "alice")).unwrap(), None);
        assert_eq!(db.tx(|t| take(t, &both[..1], "alice")).unwrap(), Some(0));
        assert_eq!(db.tx(|t| take(t, &both[..1], "bob")).unwrap(), None, "each caller has its own count");
        let count = |q: &str, c: &str| {
            db.tx(|t| Ok(t.query("SELECT count FROM quota_count WHERE quota = ?1 AND caller = ?2", params![q, c])?[0].uint(0))).unwrap()
        };
        assert_eq!((count("daily", "alice"), count("hourly", "alice")), (3, 2));
        let none = Window { quota: "none".into(), start: 0, end: 1, limit: 0 };
        assert_eq!(db.tx(|t| take(t, &[none], "alice")).unwrap(), Some(0), "a limit of 0 allows nothing");
    }
}
