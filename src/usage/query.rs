//! Questions asked of the usage store: "who used which tool, how often, with what error rate" over
//! a period (hourly rows while the period fits in `keep_hourly`, daily rows beyond), narrowed to a
//! caller or a tool glob, one line per (caller, tool, upstream, endpoint) with its calls, errors,
//! error rate and mean duration; and what each caller has left of each quota. `mcpgate usage`
//! prints the answer as a table or JSON, the console reads the same JSON.

use super::store::{self, Buckets, DAY, HOUR};
use super::{Backend, Tally, Usage, UsageError, now_secs};
use mcpgate_config::usage::Quota;
use mcpgate_protocol::sync::lock;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// What to count.
#[derive(Debug, Clone)]
pub struct Query {
    pub caller: Option<String>,
    /// A glob over catalogue tool names.
    pub tool: Option<String>,
    pub since: Duration,
}

/// One line of the answer.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Line {
    pub caller: String,
    pub tool: String,
    pub upstream: String,
    pub endpoint: String,
    /// Every call counted, refused ones included.
    pub calls: u64,
    /// Calls refused before they ran (a rate limit or a quota): not errors of the tool.
    pub refused: u64,
    /// Calls that ran and failed (a tool error, a JSON-RPC error, the upstream's failure).
    pub errors: u64,
    /// Errors per call that ran (refusals left out), 0 to 1.
    pub error_rate: f64,
    /// Mean duration of the calls that ran.
    pub mean_ms: f64,
    /// Calls by outcome.
    pub outcomes: BTreeMap<String, u64>,
}

/// What one caller has left of one quota in the window now open.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct QuotaLine {
    pub caller: String,
    pub tools: String,
    pub limit: u64,
    pub window: String,
    pub used: u64,
    pub left: u64,
    /// Unix seconds, and as RFC 3339.
    pub resets_at: u64,
    pub resets: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    /// Unix seconds: the start of the first bucket counted, and now.
    pub from: u64,
    pub until: u64,
    /// `hour` or `day`: the rows the period was counted from.
    pub resolution: &'static str,
    pub lines: Vec<Line>,
    pub quotas: Vec<QuotaLine>,
}

/// Sums `buckets` into lines, narrowed by `q` (pure).
pub fn lines(buckets: &Buckets, q: &Query) -> Vec<Line> {
    /// Caller, tool, upstream and endpoint.
    type Group = (String, String, String, String);
    let mut by: BTreeMap<Group, (Tally, BTreeMap<String, u64>)> = BTreeMap::new();
    for rows in buckets.values() {
        for (r, t) in rows {
            if q.caller.as_deref().is_some_and(|c| c != r.caller)
                || q.tool.as_deref().is_some_and(|g| !mcpgate_model::policy::glob::matches(g, &r.tool))
            {
                continue;
            }
            let e = by.entry((r.caller.clone(), r.tool.clone(), r.upstream.clone(), r.endpoint.clone())).or_default();
            e.0.add(*t);
            *e.1.entry(r.outcome.clone()).or_default() += t.calls;
        }
    }
    by.into_iter()
        .map(|((caller, tool, upstream, endpoint), (t, outcomes))| {
            let count = |keep: fn(&str) -> bool| outcomes.iter().filter(|(o, _)| keep(o)).map(|(_, n)| n).sum::<u64>();
            let refused = count(super::is_refusal);
            let errors = count(|o| o != "ok" && !super::is_refusal(o));
            let ran = t.calls.saturating_sub(refused);
            let rate = |n: u64| if ran == 0 { 0.0 } else { n as f64 / ran as f64 };
            Line {
                caller,
                tool,
                upstream,
                endpoint,
                calls: t.calls,
                refused,
                errors,
                error_rate: rate(errors),
                mean_ms: rate(t.ms),
                outcomes,
            }
        })
        .collect()
}

fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

impl Usage {
    /// The answer to `q` as of now, from the store (this replica's pending counts are flushed
    /// first, so what it served is in).
    pub async fn report(&self, q: &Query, quotas: &[Quota], known_callers: &[String]) -> Result<Report, UsageError> {
        self.flush().await;
        let now = now_secs();
        let hourly = q.since <= self.cfg.keep_hourly;
        let len = if hourly { HOUR } else { DAY };
        let start = now.saturating_sub(q.since.as_secs());
        let from = start - start % len;
        let buckets: Buckets = match &self.backend {
            // Every replica's counts, as they added them.
            Backend::File { db: Some(db), .. } if db.shared() => {
                let db = db.clone();
                tokio::task::spawn_blocking(move || super::db::buckets(&db, hourly, from)).await.map_err(UsageError::ReportStopped)??
            }
            Backend::File { data, .. } => {
                let d = lock(data);
                let b = if hourly { &d.hours } else { &d.days };
                b.range(from..).map(|(k, v)| (*k, v.clone())).collect()
            }
            Backend::Shared(cluster) => store::read_shared(cluster, from, now + 1, len).await?,
        };
        let lines = lines(&buckets, q);
        let quotas = self.quota_lines(quotas, known_callers, q.caller.as_deref(), now).await?;
        Ok(Report { from, until: now, resolution: if hourly { "hour" } else { "day" }, lines, quotas })
    }

    /// Each quota's count per caller in its open window: the callers it counted, and the
    /// configured callers it applies to that have not called yet.
    async fn quota_lines(&self, quotas: &[Quota], known: &[String], only: Option<&str>, now: u64) -> Result<Vec<QuotaLine>, UsageError> {
        let mut out = Vec::new();
        for q in quotas {
            let (start, end) = q.window.bounds(now);
            let mut counts: BTreeMap<String, u64> = match (self.quotas_shared(), &self.backend) {
                (None, Backend::File { data, .. }) => lock(data).quotas.get(&(q.id.clone(), start, end)).cloned().unwrap_or_default(),
                (None, Backend::Shared(cluster)) | (Some(cluster), _) => {
                    let mut all = cluster.counts_get(&[store::quota_hash(&q.id, start)]).await.map_err(UsageError::Redis)?;
                    all.pop().unwrap_or_default().into_iter().map(|(c, n)| (c, u64::try_from(n).unwrap_or(0))).collect()
                }
            };
            for k in known.iter().filter(|k| q.callers.iter().any(|g| mcpgate_model::policy::glob::matches(g, k))) {
                counts.entry(k.clone()).or_insert(0);
            }
            for (caller, used) in counts {
                if only.is_some_and(|c| c != caller) {
                    continue;
                }
                out.push(QuotaLine {
                    caller,
                    tools: q.tools.clone(),
                    limit: q.count,
                    window: q.window.label(),
                    used,
                    left: q.count.saturating_sub(used),
                    resets_at: end,
                    resets: rfc3339(end),
                });
            }
        }
        Ok(out)
    }
}

/// The report as the terminal shows it.
pub fn table(r: &Report) -> String {
    let mut out = format!("usage from {} to {} (by {})\n", rfc3339(r.from), rfc3339(r.until), r.resolution);
    if r.lines.is_empty() {
        out.push_str("no calls counted\n");
    } else {
        let mut rows =
            vec![["CALLER", "TOOL", "UPSTREAM", "ENDPOINT", "CALLS", "REFUSED", "ERRORS", "ERROR%", "MEAN_MS"].map(String::from).to_vec()];
        for l in &r.lines {
            rows.push(vec![
                l.caller.clone(),
                l.tool.clone(),
                l.upstream.clone(),
                l.endpoint.clone(),
                l.calls.to_string(),
                l.refused.to_string(),
                l.errors.to_string(),
                format!("{:.1}", l.error_rate * 100.0),
                format!("{:.1}", l.mean_ms),
            ]);
        }
        out.push_str(&columns(&rows));
    }
    if !r.quotas.is_empty() {
        out.push_str("\nquotas\n");
        let mut rows = vec![["CALLER", "TOOLS", "LIMIT", "USED", "LEFT", "RESETS"].map(String::from).to_vec()];
        for q in &r.quotas {
            rows.push(vec![
                q.caller.clone(),
                q.tools.clone(),
                format!("{}/{}", q.limit, q.window),
                q.used.to_string(),
                q.left.to_string(),
                q.resets.clone(),
            ]);
        }
        out.push_str(&columns(&rows));
    }
    out
}

fn columns(rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..rows[0].len()).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Row;
    use super::*;
    use std::collections::HashMap;

    fn row(caller: &str, tool: &str, endpoint: &str, outcome: &str) -> Row {
        Row { caller: caller.into(), tool: tool.into(), upstream: "calc".into(), endpoint: endpoint.into(), outcome: outcome.into() }
    }

    #[test]
    fn lines_sum_outcomes_into_calls_refusals_errors_and_rates() {
        let mut b = Buckets::new();
        let mut h1: HashMap<Row, Tally> = HashMap::new();
        h1.insert(row("alice", "calc__add", "-", "ok"), Tally { calls: 3, ms: 30 });
        h1.insert(row("alice", "calc__add", "-", "tool_error"), Tally { calls: 1, ms: 10 });
        h1.insert(row("bob", "calc__add", "/mcp/dev", "ok"), Tally { calls: 2, ms: 2 });
        b.insert(3600, h1);
        let mut h2: HashMap<Row, Tally> = HashMap::new();
        h2.insert(row("alice", "calc__add", "-", "ok"), Tally { calls: 4, ms: 0 });
        h2.insert(row("alice", "echo__say", "-", "error"), Tally { calls: 2, ms: 4 });
        // Refusals are counted as calls, never as errors, and left out of the rate and the mean.
        h2.insert(row("alice", "calc__add", "-", "quota_exceeded"), Tally { calls: 3, ms: 0 });
        h2.insert(row("alice", "calc__add", "-", "rate_limited"), Tally { calls: 1, ms: 0 });
        b.insert(7200, h2);
        let all = lines(&b, &Query { caller: None, tool: None, since: Duration::from_secs(86_400) });
        assert_eq!(all.len(), 3);
        let a = &all[0];
        assert_eq!((a.caller.as_str(), a.tool.as_str(), a.calls, a.refused, a.errors), ("alice", "calc__add", 12, 4, 1));
        assert_eq!(a.error_rate, 0.125);
        assert_eq!(a.mean_ms, 5.0);
        let only = lines(&b, &Query { caller: Some("alice".into()), tool: Some("echo__*".into()), since: Duration::from_secs(60) });
        assert_eq!(only.len(), 1);
        assert_eq!((only[0].calls, only[0].errors, only[0].error_rate), (2, 2, 1.0));
        let text = table(&Report { from: 0, until: 7200, resolution: "hour", lines: all, quotas: vec![] });
        assert!(text.contains("CALLER  TOOL"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["alice", "calc__add", "calc", "-", "12", "4", "1", "12.5", "5.0"]),
            "{text}"
        );
    }
}
