//! The vault in the state database (`mcpgate_store`): the entries read whole at open (after carrying
//! over, once, the JSON file earlier releases kept), each change written as its difference in
//! one transaction that also bumps the `vault` change counter, and, when the database is shared
//! by replicas (PostgreSQL), a poll of that counter each second that reads the entries again
//! when another replica changed them.

use super::{Entries, Vault, VaultError, VaultKey};
use mcpgate_protocol::sync::lock;
use mcpgate_store::{Db, DbError, StoreError, Tx, bump, now_ms, params};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The change counter the vault bumps.
const COUNTER: &str = "vault";

/// The state database a vault is kept in, and the counter value its memory reflects.
pub(super) struct InDb {
    pub db: Arc<Db>,
    pub seen: Arc<AtomicU64>,
}

fn fail_read(e: StoreError) -> VaultError {
    VaultError::DbRead { path: e.place, source: e.source }
}

fn read_all(t: &mut dyn Tx) -> Result<(u64, Entries), DbError> {
    let n = t.query("SELECT n FROM counter WHERE name = ?1", params![COUNTER])?.first().map_or(0, |r| r.uint(0));
    let rows = t.query("SELECT caller, upstream, issuer, sealed FROM vault", &[])?;
    let entries = rows
        .into_iter()
        .map(|r| {
            let k = VaultKey { caller: r.text(0), upstream: r.text(1), issuer: r.text(2) };
            (k.slot(), (k, r.text(3)))
        })
        .collect();
    Ok((n, entries))
}

/// The entries kept in `db`, after carrying over the file `legacy` the first time.
pub(super) fn load(sealer: &Arc<mcpgate_model::token::Sealer>, db: &Db, legacy: &std::path::Path) -> Result<(u64, Entries), VaultError> {
    if db.meta("vault_migrated").map_err(fail_read)?.is_none() {
        let old = match legacy.exists() {
            true => Vault::open(sealer.clone(), legacy.to_path_buf())?.entries(),
            false => Vec::new(),
        };
        let note = format!("{} entries from {}", old.len(), legacy.display());
        db.tx(|t| {
            for (k, sealed) in &old {
                t.exec(
                    "INSERT INTO vault (caller, upstream, issuer, sealed, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (caller, upstream, issuer) DO NOTHING",
                    params![&k.caller, &k.upstream, &k.issuer, sealed, now_ms()],
                )?;
            }
            // Another replica carrying over at the same moment: one of them records it.
            t.exec("INSERT INTO meta (key, value) VALUES ('vault_migrated', ?1) ON CONFLICT (key) DO NOTHING", params![&note])?;
            if !old.is_empty() {
                bump(t, COUNTER)?;
            }
            Ok(())
        })
        .map_err(fail_read)?;
        if !old.is_empty() {
            tracing::info!(from = %legacy.display(), into = %db.place(), entries = old.len(), "the token vault was carried over into the state database (the old file is kept)");
        }
    }
    db.tx(read_all).map_err(fail_read)
}

/// Writes the difference between `before` and `after`, in one transaction; the new counter.
pub(super) fn write(db: &Db, before: &Entries, after: &Entries) -> Result<u64, VaultError> {
    db.tx(|t| {
        for (_, (k, _)) in before.iter().filter(|(slot, _)| !after.contains_key(*slot)) {
            t.exec("DELETE FROM vault WHERE caller = ?1 AND upstream = ?2 AND issuer = ?3", params![&k.caller, &k.upstream, &k.issuer])?;
        }
        for (_, (k, sealed)) in after.iter().filter(|(slot, v)| before.get(*slot) != Some(*v)) {
            t.exec(
                "INSERT INTO vault (caller, upstream, issuer, sealed, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (caller, upstream, issuer) DO UPDATE SET sealed = excluded.sealed, updated_ms = excluded.updated_ms",
                params![&k.caller, &k.upstream, &k.issuer, sealed, now_ms()],
            )?;
        }
        bump(t, COUNTER)
    })
    .map_err(|e| VaultError::DbWrite { path: e.place, source: e.source })
}

impl Vault {
    /// With a database shared by replicas: reads the entries again whenever another replica
    /// changed them (polled each second, off the async workers), until `tasks` shut down.
    pub fn watch(&self, tasks: &mcpgate_protocol::tasks::Background) {
        let Some(InDb { db, seen }) = &self.db else { return };
        if !db.shared() {
            return;
        }
        let (db, seen, entries, writing) = (db.clone(), seen.clone(), self.entries.clone(), self.writing.clone());
        tasks.spawn(async move {
            loop {
                tokio::time::sleep(super::SHARED_POLL).await;
                let (db, seen, entries, writing) = (db.clone(), seen.clone(), entries.clone(), writing.clone());
                let polled = tokio::task::spawn_blocking(move || {
                    let now = db.counter(COUNTER)?;
                    if now == seen.load(Ordering::SeqCst) {
                        return Ok(());
                    }
                    // Under the write lock: a change of this replica is never replaced by an
                    // older read.
                    let _writing = lock(&writing);
                    let (n, fresh) = db.tx(read_all)?;
                    *lock(&entries) = fresh;
                    seen.store(n, Ordering::SeqCst);
                    Ok::<(), StoreError>(())
                })
                .await;
                if let Ok(Err(e)) = polled {
                    tracing::debug!(error = %e, "the shared token vault could not be read");
                }
            }
        });
    }
}
