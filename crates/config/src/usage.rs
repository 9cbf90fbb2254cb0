//! What operators see of the traffic, as `gateway.toml` says it: `[usage]` (where the usage
//! accounting is kept and for how long), `[[quota]]` (calls per caller, and per caller and tool
//! glob, per day, per month or per fixed window; [`QuotaError`] says why a limit is not one),
//! `[metrics]` (the per-tool and per-caller series, each behind a switch) and the export half of
//! `[audit]` (a JSON-lines file with rotation, OTLP logs). Quota windows are plain arithmetic on
//! UTC seconds here ([`Window::bounds`]), so every replica agrees on when a window starts and ends.
//! The commands that report on what was kept read the file without the upstreams' secrets
//! ([`Config::load_for_reports`]).

use super::{Config, ConfigError, Locator};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageSection {
    pub enabled: Option<bool>,
    pub store: Option<String>,
    pub flush_interval: Option<Spanned<String>>,
    pub keep_hourly: Option<Spanned<String>>,
    pub keep_daily: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    #[serde(default)]
    pub per_tool: bool,
    #[serde(default)]
    pub per_caller: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaSection {
    /// `[[caller]]` ids or globs over caller names (default: every caller).
    pub callers: Option<Vec<String>>,
    /// A glob over catalogue tool names (default: every tool).
    pub tools: Option<String>,
    pub limit: Spanned<String>,
    pub on_redis_error: Option<super::cluster::FailMode>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditSection {
    #[serde(default)]
    pub include_arguments: bool,
    pub file: Option<String>,
    pub max_file_size: Option<Spanned<String>>,
    pub keep_files: Option<usize>,
    #[serde(default)]
    pub otlp: bool,
    /// A PKCS#8 Ed25519 key that signs the chain's checkpoints.
    pub signing_key_file: Option<String>,
    /// A signed checkpoint every this many records (and at each rotation).
    pub checkpoint_every: Option<u64>,
}

/// `[usage]`, resolved.
#[derive(Debug, Clone)]
pub struct UsageConfig {
    pub enabled: bool,
    /// The embedded store's file (unused with `[cluster]`, where Redis keeps the counts).
    pub store: PathBuf,
    pub flush_interval: Duration,
    pub keep_hourly: Duration,
    pub keep_daily: Duration,
}

impl Default for UsageConfig {
    fn default() -> Self {
        UsageConfig {
            enabled: true,
            store: PathBuf::from("mcpgate-usage.json"),
            flush_interval: Duration::from_secs(5),
            keep_hourly: Duration::from_secs(14 * 86_400),
            keep_daily: Duration::from_secs(400 * 86_400),
        }
    }
}

/// `[metrics]`: series whose labels carry tool names (bounded by the catalogue) or caller ids
/// (bounded by the `[[caller]]` entries), each off unless switched on.
#[derive(Debug, Clone, Copy, Default)]
pub struct MetricsConfig {
    pub per_tool: bool,
    pub per_caller: bool,
}

/// One `[[quota]]`: at most `count` calls per caller in each `window`, of the tools `tools` matches.
#[derive(Debug, Clone, PartialEq)]
pub struct Quota {
    pub callers: Vec<String>,
    pub tools: String,
    pub count: u64,
    pub window: Window,
    pub on_redis_error: Option<super::cluster::FailMode>,
    /// How the rule is written (`callers|tools|limit`): its identity in the store, so that a
    /// reload that keeps the rule keeps its counts.
    pub id: String,
}

/// The windows a quota counts in: calendar days and months (UTC), or fixed windows of a length
/// counted from the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Day,
    Month,
    Every(Duration),
}

impl Window {
    /// The window holding `now` (seconds since the epoch): its start and its end (exclusive).
    pub fn bounds(&self, now: u64) -> (u64, u64) {
        match self {
            Window::Day => {
                let start = now - now % 86_400;
                (start, start + 86_400)
            }
            Window::Month => {
                let (y, m, _) = civil_from_days((now / 86_400) as i64);
                let start = days_from_civil(y, m, 1) as u64 * 86_400;
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (start, days_from_civil(ny, nm, 1) as u64 * 86_400)
            }
            Window::Every(d) => {
                let len = d.as_secs().max(1);
                let start = now - now % len;
                (start, start + len)
            }
        }
    }

    pub fn label(&self) -> String {
        match self {
            Window::Day => "day".into(),
            Window::Month => "month".into(),
            Window::Every(d) => humantime::format_duration(*d).to_string(),
        }
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (the inverse of [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
}

/// `[audit]`, resolved.
#[derive(Debug, Clone, Default)]
pub struct AuditConfig {
    pub include_arguments: bool,
    /// Audit records as JSON lines to this file, rotated at `max_file_bytes`.
    pub file: Option<PathBuf>,
    pub max_file_bytes: u64,
    /// Rotated files kept beside the live one (`audit.jsonl.1` is the newest).
    pub keep_files: usize,
    /// Audit records as OTLP logs too (builds with `--features otlp`, with an OTLP endpoint set).
    pub otlp: bool,
    /// The key that signs the chain's checkpoints (none: records are chained, not signed).
    pub signing_key_file: Option<PathBuf>,
    pub checkpoint_every: u64,
}

fn duration(at: &Locator, v: &Option<Spanned<String>>, key: &str, default: Duration) -> Result<Duration, ConfigError> {
    let Some(v) = v else { return Ok(default) };
    match humantime::parse_duration(v.get_ref()) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(at.err(v, key, format!("'{}' is not a duration", v.get_ref()), "write e.g. \"5s\", \"14d\"")),
    }
}

pub(super) fn resolve_usage(at: &Locator, s: UsageSection, base: &Path) -> Result<UsageConfig, ConfigError> {
    let d = UsageConfig::default();
    let keep_hourly = duration(at, &s.keep_hourly, "usage.keep_hourly", d.keep_hourly)?;
    let keep_daily = duration(at, &s.keep_daily, "usage.keep_daily", d.keep_daily)?;
    if let Some(v) = &s.keep_hourly
        && keep_hourly < Duration::from_secs(3600)
    {
        return Err(at.err(v, "usage.keep_hourly", "shorter than an hour".into(), "keep hourly counts for at least \"1h\""));
    }
    if let Some(v) = &s.keep_daily
        && keep_daily < Duration::from_secs(86_400)
    {
        return Err(at.err(v, "usage.keep_daily", "shorter than a day".into(), "keep daily counts for at least \"1d\""));
    }
    Ok(UsageConfig {
        enabled: s.enabled.unwrap_or(true),
        store: super::relative(base, s.store.as_deref().unwrap_or("mcpgate-usage.json")),
        flush_interval: duration(at, &s.flush_interval, "usage.flush_interval", d.flush_interval)?,
        keep_hourly,
        keep_daily,
    })
}

/// Why a quota's limit is not one (shown after the limit as written, with the line and a fix).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuotaError {
    #[error("write it as COUNT/WINDOW, e.g. \"1000/day\" or \"20000/month\"")]
    NoSlash,
    /// The count as written.
    #[error("'{0}' is not a whole number")]
    Count(String),
    #[error("the count must be at least 1")]
    ZeroCount,
    #[error("the window must be whole seconds, at least 1 s")]
    Fractional,
    #[error("'{text}' is not a window: day, month, or a duration ({source})")]
    Window {
        text: String,
        #[source]
        source: humantime::DurationError,
    },
}

/// Parses a quota's `COUNT/WINDOW`: `"1000/day"`, `"20000/month"`, `"50/10min"`.
pub fn parse_quota(text: &str) -> Result<(u64, Window), QuotaError> {
    let (count, per) = text.split_once('/').ok_or(QuotaError::NoSlash)?;
    let count: u64 = count.trim().parse().map_err(|_| QuotaError::Count(count.trim().to_string()))?;
    if count == 0 {
        return Err(QuotaError::ZeroCount);
    }
    let window = match per.trim() {
        "d" | "day" => Window::Day,
        "month" => Window::Month,
        "h" | "hour" => Window::Every(Duration::from_secs(3600)),
        "min" | "minute" => Window::Every(Duration::from_secs(60)),
        other => match humantime::parse_duration(other) {
            Ok(d) if d.as_secs() >= 1 && d.subsec_nanos() == 0 => Window::Every(d),
            Ok(_) => return Err(QuotaError::Fractional),
            Err(source) => return Err(QuotaError::Window { text: other.to_string(), source }),
        },
    };
    Ok((count, window))
}

pub(super) fn resolve_quotas(at: &Locator, quotas: Vec<QuotaSection>) -> Result<Vec<Quota>, ConfigError> {
    quotas
        .into_iter()
        .map(|q| {
            let (count, window) = parse_quota(q.limit.get_ref())
                .map_err(|e| at.err(&q.limit, "quota.limit", format!("'{}': {e}", q.limit.get_ref()), "write e.g. \"1000/day\""))?;
            let callers = q.callers.unwrap_or_else(|| vec!["*".into()]);
            let tools = q.tools.unwrap_or_else(|| "*".into());
            if callers.is_empty() {
                return Err(at.err(
                    &q.limit,
                    "quota.callers",
                    "an empty list matches no caller".into(),
                    "leave callers out for every caller",
                ));
            }
            let id = format!("{}|{}|{}", callers.join(","), tools, q.limit.get_ref().trim());
            Ok(Quota { callers, tools, count, window, on_redis_error: q.on_redis_error, id })
        })
        .collect()
}

pub(super) fn resolve_audit(at: &Locator, s: AuditSection, base: &Path) -> Result<AuditConfig, ConfigError> {
    let max_file_bytes = match &s.max_file_size {
        None => 100 * 1024 * 1024,
        Some(v) => parse_size(v.get_ref()).filter(|n| *n >= 4096).ok_or_else(|| {
            at.err(v, "audit.max_file_size", format!("'{}' is not a size of at least 4KB", v.get_ref()), "write e.g. \"100MB\"")
        })?,
    };
    Ok(AuditConfig {
        include_arguments: s.include_arguments,
        file: s.file.as_deref().map(|f| super::relative(base, f)),
        max_file_bytes,
        keep_files: s.keep_files.unwrap_or(5),
        otlp: s.otlp,
        signing_key_file: s.signing_key_file.as_deref().map(|f| super::relative(base, f)),
        checkpoint_every: s.checkpoint_every.unwrap_or(1000).max(1),
    })
}

/// `"100MB"`, `"512KB"`, `"1GB"`, or bytes.
pub(super) fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().ok()?;
    let factor = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "KB" | "KIB" | "K" => 1024,
        "MB" | "MIB" | "M" => 1024 * 1024,
        "GB" | "GIB" | "G" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(factor)
}

impl Config {
    /// [`Config::load`] for the commands that only read what gateways kept (`mcpgate usage`,
    /// `migrate`, `tokens list -c`): the secrets of upstreams, guards and sign-in providers (env
    /// or file) are not read, and stand as a placeholder; those of the state database and
    /// `[cluster]`, which such a command reads, are.
    pub fn load_for_reports(path: &Path) -> Result<Config, ConfigError> {
        let text = super::read_file(path)?;
        let at = Locator { text: &text, file: path.display().to_string(), read_secrets: false };
        Config::parse_at(&at, path, None, &|k| std::env::var(k).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read for a report, an upstream's secrets are not looked up (a placeholder stands for
    /// each), the state database's are; a malformed secret source is still refused.
    #[test]
    fn a_configuration_read_for_a_report_reads_no_upstream_secret() {
        let text = "[[upstream]]\nid = \"api\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
                    headers = { Authorization = { env = \"UNSET\", prefix = \"Bearer \" } }\n";
        let path = Path::new("/nowhere/gateway.toml");
        let none = |_: &str| None;
        assert!(Config::parse(text, path, None, &none).is_err_and(|e| e.to_string().contains("UNSET is not set")));
        let at = Locator { text, file: "gateway.toml".into(), read_secrets: false };
        let cfg = Config::parse_at(&at, path, None, &none).expect("read without the secret");
        assert_eq!(cfg.upstreams[0].headers[0].1.to_str().ok(), Some("Bearer (not read)"));
        let bad = text.replace("env = \"UNSET\"", "env = \"UNSET\", file = \"f\"");
        let at = Locator { text: &bad, file: "gateway.toml".into(), read_secrets: false };
        assert!(Config::parse_at(&at, path, None, &none).is_err_and(|e| e.to_string().contains("exactly one of")));
        let pg = "[state]\npostgres_env = \"UNSET_PG\"\n";
        let at = Locator { text: pg, file: "gateway.toml".into(), read_secrets: false };
        assert!(Config::parse_at(&at, path, None, &none).is_err(), "the state database's own secret is read");
    }

    #[test]
    fn windows_are_utc_days_months_and_fixed_lengths() {
        // 2026-12-02T18:30:00Z
        let now = 1_796_236_200;
        assert_eq!(Window::Day.bounds(now), (1_796_169_600, 1_796_256_000));
        // 2026-12-01 to 2027-01-01
        assert_eq!(Window::Month.bounds(now), (1_796_083_200, 1_798_761_600));
        // February of a leap year: 2028-02-01 .. 2028-03-01 (29 days).
        let feb = days_from_civil(2028, 2, 10) as u64 * 86_400;
        let (s, e) = Window::Month.bounds(feb);
        assert_eq!((e - s) / 86_400, 29);
        assert_eq!(Window::Every(Duration::from_secs(10)).bounds(1_000_007), (1_000_000, 1_000_010));
        for z in [-1000, 0, 19_000, 20_424, 100_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }

    #[test]
    fn parses_quotas_and_sizes() {
        assert_eq!(parse_quota("1000/day").unwrap(), (1000, Window::Day));
        assert_eq!(parse_quota("5/month").unwrap(), (5, Window::Month));
        assert_eq!(parse_quota("3/10s").unwrap(), (3, Window::Every(Duration::from_secs(10))));
        assert_eq!(parse_quota("0/day"), Err(QuotaError::ZeroCount));
        assert!(
            parse_quota("10/fortnightly")
                .is_err_and(|e| e.to_string().starts_with("'fortnightly' is not a window: day, month, or a duration ("))
        );
        assert_eq!(parse_quota("10/500ms").map_err(|e| e.to_string()), Err("the window must be whole seconds, at least 1 s".into()));
        assert_eq!(
            parse_quota("1000").map_err(|e| e.to_string()),
            Err("write it as COUNT/WINDOW, e.g. \"1000/day\" or \"20000/month\"".into())
        );
        assert_eq!(parse_quota("x/day").map_err(|e| e.to_string()), Err("'x' is not a whole number".into()));
        assert_eq!(parse_size("100MB"), Some(100 * 1024 * 1024));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("ten"), None);
    }
}
