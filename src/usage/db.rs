//! The usage counts in the state database (`state`): rows added to in place at each flush (one
//! transaction: the new counts, the pruned buckets, the open quota windows), read whole at start
//! and by `mcpgate usage`. The first time, the JSON store earlier releases kept (`[usage] store`)
//! is carried over, and left in place.

use super::store::{Buckets, DAY, Data, HOUR};
use super::{Pending, Row, Tally};
use crate::state::Db;
use std::path::Path;

/// The counts kept in `db`, after carrying over the file `legacy` once.
pub fn load(db: &Db, legacy: &Path) -> Result<Data, String> {
    if db.meta("usage_migrated").map_err(|e| e.to_string())?.is_none() {
        let old = match legacy.exists() {
            true => Data::read(legacy)?,
            false => Data::default(),
        };
        let note = format!("{} hours from {}", old.hours.len(), legacy.display());
        db.with(|c| {
            let tx = c.transaction()?;
            for (table, buckets) in [("usage_hour", &old.hours), ("usage_day", &old.days)] {
                for (start, rows) in buckets {
                    for (row, t) in rows {
                        add(&tx, table, *start, row, *t)?;
                    }
                }
            }
            for ((quota, start, end), callers) in &old.quotas {
                for (caller, n) in callers {
                    tx.execute(
                        "INSERT OR REPLACE INTO quota_count (quota, start, end_at, caller, count) VALUES (?1, ?2, ?3, ?4, ?5)",
                        rusqlite::params![quota, *start as i64, *end as i64, caller, *n as i64],
                    )?;
                }
            }
            tx.execute("INSERT INTO meta (key, value) VALUES ('usage_migrated', ?1)", [&note])?;
            tx.commit()
        })
        .map_err(|e| e.to_string())?;
        if !old.hours.is_empty() {
            tracing::info!(from = %legacy.display(), into = %db.path().display(), "the usage counts were carried over into the state database (the old file is kept)");
        }
    }
    db.with(|c| {
        let mut data = Data::default();
        for (table, buckets) in [("usage_hour", &mut data.hours), ("usage_day", &mut data.days)] {
            read(c, table, buckets)?;
        }
        let mut q = c.prepare("SELECT quota, start, end_at, caller, count FROM quota_count")?;
        let rows = q.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, String>(3)?, r.get::<_, i64>(4)?))
        })?;
        for row in rows {
            let (quota, start, end, caller, n) = row?;
            data.quotas.entry((quota, start as u64, end as u64)).or_default().insert(caller, n as u64);
        }
        Ok(data)
    })
    .map_err(|e| e.to_string())
}

fn read(c: &rusqlite::Connection, table: &str, into: &mut Buckets) -> rusqlite::Result<()> {
    let mut q = c.prepare(&format!("SELECT start, caller, tool, upstream, endpoint, outcome, calls, ms FROM {table}"))?;
    let rows = q.query_map([], |r| {
        let row = Row { caller: r.get(1)?, tool: r.get(2)?, upstream: r.get(3)?, endpoint: r.get(4)?, outcome: r.get(5)? };
        Ok((r.get::<_, i64>(0)? as u64, row, Tally { calls: r.get::<_, i64>(6)? as u64, ms: r.get::<_, i64>(7)? as u64 }))
    })?;
    for row in rows {
        let (start, row, t) = row?;
        into.entry(start).or_default().insert(row, t);
    }
    Ok(())
}

fn add(tx: &rusqlite::Transaction<'_>, table: &str, start: u64, row: &Row, t: Tally) -> rusqlite::Result<usize> {
    tx.execute(
        &format!(
            "INSERT INTO {table} (start, caller, tool, upstream, endpoint, outcome, calls, ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (start, caller, tool, upstream, endpoint, outcome) DO UPDATE SET calls = calls + excluded.calls, ms = ms + excluded.ms"
        ),
        rusqlite::params![start as i64, row.caller, row.tool, row.upstream, row.endpoint, row.outcome, t.calls as i64, t.ms as i64],
    )
}

/// One flush: `pending` added to the hourly and daily rows, buckets before the floors (and quota
/// windows that ended by `now`) removed, and, when they changed, the open quota windows of `data`.
pub fn write(db: &Db, pending: &Pending, data: &Data, now: u64, hour_floor: u64, day_floor: u64, quotas: bool) -> Result<(), String> {
    db.with(|c| {
        let tx = c.transaction()?;
        for ((hour, row), t) in pending {
            add(&tx, "usage_hour", *hour, row, *t)?;
            add(&tx, "usage_day", hour - hour % DAY, row, *t)?;
        }
        tx.execute("DELETE FROM usage_hour WHERE start + ?1 <= ?2", rusqlite::params![HOUR as i64, hour_floor as i64])?;
        tx.execute("DELETE FROM usage_day WHERE start + ?1 <= ?2", rusqlite::params![DAY as i64, day_floor as i64])?;
        tx.execute("DELETE FROM quota_count WHERE end_at <= ?1", [now as i64])?;
        if quotas {
            for ((quota, start, end), callers) in &data.quotas {
                for (caller, n) in callers {
                    tx.execute(
                        "INSERT OR REPLACE INTO quota_count (quota, start, end_at, caller, count) VALUES (?1, ?2, ?3, ?4, ?5)",
                        rusqlite::params![quota, *start as i64, *end as i64, caller, *n as i64],
                    )?;
                }
            }
        }
        tx.commit()
    })
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::usage::UsageConfig;
    use crate::usage::{RowRef, Usage};
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
        let db = Arc::new(Db::open(&dir.path().join("mcpgate-state.db")).unwrap());
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
}
