//! The `[[rate_limit]]` part of `gateway.toml`, and the rate syntax shared with `[[caller]]
//! rate_limit`: `COUNT/PERIOD` (`"10/s"`, `"100/min"`, `"5/2s"`), or a [`RateError`] saying why a
//! text is not one.

use super::{ConfigError, Locator};
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSection {
    pub tools: String,
    pub limit: Spanned<String>,
    /// With `[cluster]`: what this limit does while Redis cannot answer (default: the cluster's).
    pub on_redis_error: Option<super::cluster::FailMode>,
}

/// A rate: `count` requests per `per`, with bursts up to `count`; with `[cluster]`, what it does
/// while Redis cannot answer (`None`: the cluster's default).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub count: u32,
    pub per: Duration,
    pub on_redis_error: Option<super::cluster::FailMode>,
}

#[derive(Debug, Clone)]
pub struct ToolRateLimit {
    pub tools: String,
    pub rate: Rate,
}

/// Why a rate is not one (shown after the rate as written, with the line and a fix).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RateError {
    #[error("write it as COUNT/PERIOD, e.g. \"10/s\" or \"100/min\"")]
    NoSlash,
    /// The count as written.
    #[error("'{0}' is not a whole number")]
    Count(String),
    #[error("the count must be at least 1")]
    ZeroCount,
    #[error("'{text}' is not a period ({source})")]
    Period {
        text: String,
        #[source]
        source: humantime::DurationError,
    },
    #[error("the period must be longer than zero")]
    ZeroPeriod,
}

/// Parses `"10/s"`, `"100/min"`, `"5/2s"`, `"1000/h"`.
pub fn parse_rate(text: &str) -> Result<Rate, RateError> {
    let (count, per) = text.split_once('/').ok_or(RateError::NoSlash)?;
    let count: u32 = count.trim().parse().map_err(|_| RateError::Count(count.trim().to_string()))?;
    if count == 0 {
        return Err(RateError::ZeroCount);
    }
    let per = per.trim();
    let per = match per {
        "s" | "sec" | "second" => Duration::from_secs(1),
        "m" | "min" | "minute" => Duration::from_secs(60),
        "h" | "hour" => Duration::from_secs(3600),
        other => humantime::parse_duration(other).map_err(|source| RateError::Period { text: other.to_string(), source })?,
    };
    if per.is_zero() {
        return Err(RateError::ZeroPeriod);
    }
    Ok(Rate { count, per, on_redis_error: None })
}

pub(super) fn resolve_rate_limits(at: &Locator, limits: Vec<RateLimitSection>) -> Result<Vec<ToolRateLimit>, ConfigError> {
    limits
        .into_iter()
        .map(|l| {
            let mut rate = parse_rate(l.limit.get_ref())
                .map_err(|e| at.err(&l.limit, "rate_limit.limit", format!("'{}': {e}", l.limit.get_ref()), "write e.g. \"5/s\""))?;
            rate.on_redis_error = l.on_redis_error;
            Ok(ToolRateLimit { tools: l.tools, rate })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rates() {
        assert_eq!(parse_rate("10/s").unwrap(), Rate { count: 10, per: Duration::from_secs(1), on_redis_error: None });
        assert_eq!(parse_rate("100/min").unwrap().per, Duration::from_secs(60));
        assert_eq!(parse_rate("5/2s").unwrap().per, Duration::from_secs(2));
        assert_eq!(parse_rate("0/s"), Err(RateError::ZeroCount));
        assert_eq!(parse_rate("ten/s").map_err(|e| e.to_string()), Err("'ten' is not a whole number".into()));
        assert_eq!(parse_rate("10").map_err(|e| e.to_string()), Err("write it as COUNT/PERIOD, e.g. \"10/s\" or \"100/min\"".into()));
        assert_eq!(parse_rate("1/0s").map_err(|e| e.to_string()), Err("the period must be longer than zero".into()));
        assert!(parse_rate("1/fortnight").is_err_and(|e| e.to_string().starts_with("'fortnight' is not a period (")));
    }
}
