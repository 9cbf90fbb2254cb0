//! Pin approvals in the state database, so every replica applies an approval made on any of
//! them (`[state] postgres`), and an approval survives a replica whose lock file is replaced by
//! a new image. The lock file stays the reviewable record (an approval is written to it too, on
//! the replica that took it); the pins in effect are the lock file's, with each approval from
//! the database that is newer than the file (or names a tool the file does not) in its place:
//! whichever was approved last wins.

use mcpgate_model::catalog::pins::{Pin, PinFile};
use mcpgate_store::{Db, StoreError, bump, now_ms, params};
use std::time::SystemTime;

/// The change counter approvals bump.
const COUNTER: &str = "pins";

/// One approval as kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Approved {
    pub upstream: String,
    pub item: String,
    pub pin: Pin,
    pub approved_ms: i64,
}

/// The approvals counter now.
pub fn counter(db: &Db) -> Result<u64, StoreError> {
    db.counter(COUNTER)
}

/// Every approval kept, and the counter they reflect.
pub fn read(db: &Db) -> Result<(u64, Vec<Approved>), StoreError> {
    db.tx(|t| {
        let n = t.query("SELECT n FROM counter WHERE name = ?1", params![COUNTER])?.first().map_or(0, |r| r.uint(0));
        let rows = t.query("SELECT upstream, item, sha256, definition, approved_ms FROM pin", &[])?;
        let approved = rows
            .into_iter()
            .filter_map(|r| {
                let definition = serde_json::from_str(&r.text(3)).ok()?;
                Some(Approved { upstream: r.text(0), item: r.text(1), pin: Pin { sha256: r.text(2), definition }, approved_ms: r.int(4) })
            })
            .collect();
        Ok((n, approved))
    })
}

/// Records the approval of `pin` for `item` of `upstream`.
pub fn record(db: &Db, upstream: &str, item: &str, pin: &Pin) -> Result<(), RecordError> {
    let definition = serde_json::to_string(&pin.definition)?;
    db.tx(|t| {
        t.exec(
            "INSERT INTO pin (upstream, item, sha256, definition, approved_ms) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (upstream, item) DO UPDATE SET sha256 = excluded.sha256, definition = excluded.definition,
             approved_ms = excluded.approved_ms",
            params![upstream, item, &pin.sha256, definition, now_ms()],
        )?;
        bump(t, COUNTER)?;
        Ok(())
    })?;
    Ok(())
}

/// Why an approval could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// The pins in effect: `file` (modified at `modified`), with the newer `approvals` in place.
pub fn overlay(file: &PinFile, modified: Option<SystemTime>, approvals: &[Approved]) -> PinFile {
    let file_ms = modified
        .and_then(|m| m.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(i64::MIN, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut out = file.clone();
    for a in approvals {
        let tools = out.upstreams.entry(a.upstream.clone()).or_default();
        if !tools.contains_key(&a.item) || a.approved_ms > file_ms {
            tools.insert(a.item.clone(), a.pin.clone());
        }
    }
    if !approvals.is_empty() {
        out.version = 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pin(sha: &str) -> Pin {
        Pin { sha256: sha.into(), definition: serde_json::json!({"name": "add"}) }
    }

    #[test]
    fn the_newer_approval_wins_and_a_tool_the_file_lacks_is_added() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::sqlite(&dir.path().join("s.db")).unwrap();
        record(&db, "calc", "add", &pin("new")).unwrap();
        record(&db, "calc", "mul", &pin("m1")).unwrap();
        let (n, approvals) = read(&db).unwrap();
        assert_eq!(n, 2);
        let mut file = PinFile { version: 1, ..PinFile::default() };
        file.upstreams.entry("calc".into()).or_default().insert("add".into(), pin("old"));
        let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1);
        let fx = overlay(&file, Some(long_ago), &approvals);
        assert_eq!(fx.upstreams["calc"]["add"].sha256, "new", "approved after the file was written");
        assert_eq!(fx.upstreams["calc"]["mul"].sha256, "m1");
        let later = SystemTime::now() + Duration::from_secs(60);
        let fx = overlay(&file, Some(later), &approvals);
        assert_eq!(fx.upstreams["calc"]["add"].sha256, "old", "the file was edited after the approval");
        assert_eq!(fx.upstreams["calc"]["mul"].sha256, "m1", "a tool the file lacks is still approved");
    }
}
