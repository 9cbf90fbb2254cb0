//! One-time entries in the state database, for what must be spent exactly once across restarts
//! and replicas: a started authorization (put with the hash of its browser's nonce, taken once by
//! whoever shows it) and a claim (a consent link's grant id, spent the first time). Expiry is
//! checked on read; expired rows are removed as new ones are put. `DELETE … RETURNING` makes a
//! take atomic on SQLite and PostgreSQL alike.

use super::{Db, StoreError, now_ms, params};
use std::time::Duration;

fn ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// Puts entry `key` for `ttl`: `value`, to be taken by whoever shows `check` (replacing an
/// entry of the same key).
pub fn put(db: &Db, key: &str, check: &str, value: &str, ttl: Duration) -> Result<(), StoreError> {
    let now = now_ms();
    db.tx(|t| {
        t.exec("DELETE FROM once WHERE expires_ms <= ?1", params![now])?;
        t.exec(
            "INSERT INTO once (key, check_hash, value, expires_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (key) DO UPDATE SET check_hash = excluded.check_hash, value = excluded.value, expires_ms = excluded.expires_ms",
            params![key, check, value, now.saturating_add(ms(ttl))],
        )?;
        Ok(())
    })
}

/// Takes entry `key` if it was put with `check` and has not expired: its value (then gone), or
/// `None` (none, expired, taken, or another check: then it stays).
pub fn take(db: &Db, key: &str, check: &str) -> Result<Option<String>, StoreError> {
    db.tx(|t| {
        let rows = t.query(
            "DELETE FROM once WHERE key = ?1 AND check_hash = ?2 AND expires_ms > ?3 RETURNING value",
            params![key, check, now_ms()],
        )?;
        Ok(rows.first().map(|r| r.text(0)))
    })
}

/// Claims `key` for `ttl`: `true` the first time, `false` while an earlier claim lasts.
pub fn claim(db: &Db, key: &str, ttl: Duration) -> Result<bool, StoreError> {
    let now = now_ms();
    db.tx(|t| {
        t.exec("DELETE FROM once WHERE key = ?1 AND expires_ms <= ?2", params![key, now])?;
        let n = t.exec(
            "INSERT INTO once (key, check_hash, value, expires_ms) VALUES (?1, '', '', ?2) ON CONFLICT (key) DO NOTHING",
            params![key, now.saturating_add(ms(ttl))],
        )?;
        Ok(n == 1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_taken_once_by_its_check_and_a_claim_is_spent_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::sqlite(&dir.path().join("s.db")).unwrap();
        put(&db, "flow:a", "browser-1", "sealed", Duration::from_secs(60)).unwrap();
        assert_eq!(take(&db, "flow:a", "browser-2").unwrap(), None, "another browser cannot take it");
        assert_eq!(take(&db, "flow:a", "browser-1").unwrap().as_deref(), Some("sealed"));
        assert_eq!(take(&db, "flow:a", "browser-1").unwrap(), None, "taken once");
        put(&db, "flow:b", "c", "v", Duration::from_millis(1)).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(take(&db, "flow:b", "c").unwrap(), None, "expired");
        assert!(claim(&db, "grant:x", Duration::from_secs(60)).unwrap());
        assert!(!claim(&db, "grant:x", Duration::from_secs(60)).unwrap(), "spent");
        assert!(claim(&db, "grant:y", Duration::from_millis(1)).unwrap());
        std::thread::sleep(Duration::from_millis(5));
        assert!(claim(&db, "grant:y", Duration::from_secs(60)).unwrap(), "an expired claim may be made again");
    }
}
