//! Where usage counts and quota counts are kept. On one machine: an embedded store, one JSON file
//! written atomically after each flush (hourly rows kept `keep_hourly`, daily rows `keep_daily`,
//! the quota counts of the windows still open), read once at start. With `[cluster]`: Redis
//! hashes, one per hour and one per day, whose fields are the rows' counts (`c…` calls, `m…`
//! milliseconds), added to by every replica, so every replica (and `mcpgate usage`) reads the same
//! totals. The row's parts are joined by the unit separator, which no part holds (every part is
//! cleaned of control characters before it is counted).

use super::{Row, Tally, UsageError};
use mcpgate_net::cluster::{Add, Cluster};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub const HOUR: u64 = 3600;
pub const DAY: u64 = 86_400;
const SEP: char = '\u{1f}';

/// Counts by bucket start (Unix seconds), then by row.
pub type Buckets = BTreeMap<u64, HashMap<Row, Tally>>;

/// Everything the embedded store keeps.
#[derive(Debug, Default)]
pub struct Data {
    pub hours: Buckets,
    pub days: Buckets,
    /// Quota counts: by `quota id`, window start and end, then by caller.
    pub quotas: BTreeMap<(String, u64, u64), BTreeMap<String, u64>>,
    /// Quota counts taken since the last write.
    pub quotas_dirty: bool,
}

/// Buckets as the file has them: each bucket's start and its rows with calls and milliseconds.
type FileBuckets = Vec<(u64, Vec<(Row, u64, u64)>)>;
/// Quota counts as the file has them: quota id, window start and end, counts by caller.
type FileQuotas = Vec<(String, u64, u64, Vec<(String, u64)>)>;

/// The file's form: rows as arrays, so the file stays small and readable.
#[derive(Serialize, Deserialize)]
struct FileForm {
    version: u32,
    hours: FileBuckets,
    days: FileBuckets,
    #[serde(default)]
    quotas: FileQuotas,
}

fn to_form(b: &Buckets) -> FileBuckets {
    b.iter()
        .map(|(start, rows)| {
            let mut rows: Vec<(Row, u64, u64)> = rows.iter().map(|(r, t)| (r.clone(), t.calls, t.ms)).collect();
            rows.sort_by(|a, b| a.0.cmp(&b.0));
            (*start, rows)
        })
        .collect()
}

fn from_form(v: FileBuckets) -> Buckets {
    v.into_iter().map(|(start, rows)| (start, rows.into_iter().map(|(r, calls, ms)| (r, Tally { calls, ms })).collect())).collect()
}

impl Data {
    /// Reads the store at `path` (empty when there is none yet).
    pub fn read(path: &Path) -> Result<Data, UsageError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Data::default()),
            Err(source) => return Err(UsageError::Read { path: path.to_path_buf(), source }),
        };
        let form: FileForm = serde_json::from_slice(&bytes).map_err(|source| UsageError::NotAStore { path: path.to_path_buf(), source })?;
        Ok(Data {
            hours: from_form(form.hours),
            days: from_form(form.days),
            quotas: form.quotas.into_iter().map(|(id, start, end, callers)| ((id, start, end), callers.into_iter().collect())).collect(),
            quotas_dirty: false,
        })
    }

    pub fn write(&self, path: &Path) -> Result<(), UsageError> {
        let form = FileForm {
            version: 1,
            hours: to_form(&self.hours),
            days: to_form(&self.days),
            quotas: self
                .quotas
                .iter()
                .map(|((id, start, end), c)| (id.clone(), *start, *end, c.iter().map(|(k, v)| (k.clone(), *v)).collect()))
                .collect(),
        };
        let bytes = serde_json::to_vec(&form).map_err(UsageError::Encode)?;
        mcpgate_net::files::write_atomic(path, &bytes).map_err(|source| UsageError::Write { path: path.to_path_buf(), source })
    }

    /// Adds counts of hour `hour` to the hourly and daily rows.
    pub fn add(&mut self, hour: u64, row: &Row, t: Tally) {
        self.hours.entry(hour).or_default().entry(row.clone()).or_default().add(t);
        self.days.entry(hour - hour % DAY).or_default().entry(row.clone()).or_default().add(t);
    }

    /// Takes back counts of hour `hour` that could not be written (they are pending again).
    pub fn sub(&mut self, hour: u64, row: &Row, t: Tally) {
        for bucket in [self.hours.get_mut(&hour), self.days.get_mut(&(hour - hour % DAY))].into_iter().flatten() {
            if let Some(held) = bucket.get_mut(row) {
                held.calls = held.calls.saturating_sub(t.calls);
                held.ms = held.ms.saturating_sub(t.ms);
            }
        }
    }

    /// Forgets hourly rows older than `keep_hourly`, daily rows older than `keep_daily` and the
    /// counts of quota windows that ended.
    pub fn prune(&mut self, now: u64, keep_hourly: u64, keep_daily: u64) {
        let hour_floor = now.saturating_sub(keep_hourly);
        self.hours.retain(|start, _| start + HOUR > hour_floor);
        let day_floor = now.saturating_sub(keep_daily);
        self.days.retain(|start, _| start + DAY > day_floor);
        self.quotas.retain(|(_, _, end), _| *end > now);
    }
}

/// The Redis hash of hour `hour`, or of day `day`.
pub fn hour_hash(hour: u64) -> String {
    format!("usage:h:{hour}")
}

pub fn day_hash(day: u64) -> String {
    format!("usage:d:{day}")
}

/// The quota hash of one window of quota `id`.
pub fn quota_hash(id: &str, start: u64) -> String {
    format!("quota:{id}:{start}")
}

fn field(kind: char, r: &Row) -> String {
    let mut f = String::with_capacity(8 + r.caller.len() + r.tool.len() + r.upstream.len() + r.endpoint.len() + r.outcome.len());
    f.push(kind);
    for part in [&r.caller, &r.tool, &r.upstream, &r.endpoint, &r.outcome] {
        f.push(SEP);
        f.push_str(part);
    }
    f
}

/// The additions that bring Redis up to date with `pending` (counts by hour and row).
/// The additions that bring Redis up to date with `pending` (counts by hour and row): to the
/// hourly hashes, and to the daily ones.
pub fn adds(pending: &super::Pending) -> (Vec<Add>, Vec<Add>) {
    let (mut hours, mut days) = (Vec::with_capacity(pending.len() * 2), Vec::with_capacity(pending.len() * 2));
    for ((hour, row), t) in pending {
        let (calls, ms) = (field('c', row), field('m', row));
        for (hash, out) in [(hour_hash(*hour), &mut hours), (day_hash(hour - hour % DAY), &mut days)] {
            out.push(Add { hash: hash.clone(), field: calls.clone(), by: i64::try_from(t.calls).unwrap_or(i64::MAX) });
            out.push(Add { hash, field: ms.clone(), by: i64::try_from(t.ms).unwrap_or(i64::MAX) });
        }
    }
    (hours, days)
}

/// The rows of one Redis hash read back.
pub fn rows_of(fields: Vec<(String, i64)>) -> HashMap<Row, Tally> {
    let mut rows: HashMap<Row, Tally> = HashMap::new();
    for (f, n) in fields {
        let mut parts = f.split(SEP);
        let kind = parts.next();
        let p: Vec<&str> = parts.collect();
        let ([caller, tool, upstream, endpoint, outcome], Some(kind)) = (p.as_slice(), kind) else { continue };
        let row = Row {
            caller: caller.to_string(),
            tool: tool.to_string(),
            upstream: upstream.to_string(),
            endpoint: endpoint.to_string(),
            outcome: outcome.to_string(),
        };
        let n = u64::try_from(n).unwrap_or(0);
        let t = rows.entry(row).or_default();
        match kind {
            "c" => t.calls += n,
            "m" => t.ms += n,
            _ => {}
        }
    }
    rows
}

/// The buckets in `[from, to)` of length `len`, read from Redis.
pub async fn read_shared(cluster: &Cluster, from: u64, to: u64, len: u64) -> Result<Buckets, UsageError> {
    let starts: Vec<u64> = (from - from % len..to).step_by(len as usize).collect();
    let hashes: Vec<String> = starts.iter().map(|s| if len == HOUR { hour_hash(*s) } else { day_hash(*s) }).collect();
    let all = cluster.counts_get(&hashes).await.map_err(UsageError::Redis)?;
    Ok(starts.into_iter().zip(all).filter(|(_, f)| !f.is_empty()).map(|(s, f)| (s, rows_of(f))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(caller: &str, outcome: &str) -> Row {
        Row { caller: caller.into(), tool: "calc__add".into(), upstream: "calc".into(), endpoint: "-".into(), outcome: outcome.into() }
    }

    #[test]
    fn redis_fields_round_trip() {
        let mut pending = super::super::Pending::new();
        pending.insert((7200, row("alice", "ok")), Tally { calls: 3, ms: 12 });
        pending.insert((7200, row("bob", "tool_error")), Tally { calls: 1, ms: 5 });
        let (hours, days) = adds(&pending);
        assert_eq!((hours.len(), days.len()), (4, 4), "calls and ms, to the hour and the day");
        let adds: Vec<Add> = hours.into_iter().chain(days).collect();
        let hour: Vec<(String, i64)> = adds.iter().filter(|a| a.hash == "usage:h:7200").map(|a| (a.field.clone(), a.by)).collect();
        let rows = rows_of(hour);
        assert_eq!(rows[&row("alice", "ok")], Tally { calls: 3, ms: 12 });
        assert_eq!(rows[&row("bob", "tool_error")], Tally { calls: 1, ms: 5 });
        assert!(adds.iter().any(|a| a.hash == "usage:d:0"));
    }

    #[test]
    fn the_file_round_trips_and_prunes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.json");
        let mut d = Data::default();
        d.add(10 * DAY + 5 * HOUR, &row("alice", "ok"), Tally { calls: 2, ms: 8 });
        d.add(10 * DAY + 6 * HOUR, &row("alice", "ok"), Tally { calls: 1, ms: 1 });
        d.add(2 * DAY, &row("bob", "ok"), Tally { calls: 1, ms: 1 });
        d.quotas.insert(("q".into(), 10 * DAY, 11 * DAY), [("alice".to_string(), 4)].into());
        d.quotas.insert(("q".into(), 9 * DAY, 10 * DAY), [("alice".to_string(), 9)].into());
        d.write(&path).unwrap();
        let mut back = Data::read(&path).unwrap();
        assert_eq!(back.days[&(10 * DAY)][&row("alice", "ok")], Tally { calls: 3, ms: 9 });
        assert_eq!(back.hours.len(), 3);
        assert_eq!(back.quotas[&("q".to_string(), 10 * DAY, 11 * DAY)]["alice"], 4);
        back.prune(10 * DAY + 7 * HOUR, 2 * HOUR, 5 * DAY);
        assert_eq!(back.hours.keys().copied().collect::<Vec<_>>(), vec![10 * DAY + 5 * HOUR, 10 * DAY + 6 * HOUR]);
        assert_eq!(back.days.keys().copied().collect::<Vec<_>>(), vec![10 * DAY]);
        assert_eq!(back.quotas.len(), 1);
    }
}
