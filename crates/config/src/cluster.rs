//! The `[cluster]` part of `gateway.toml`: where replicas keep the state they must share (rate
//! limit buckets and ended legacy sessions) — a Redis server — and what a limit does while Redis
//! cannot answer (`on_redis_error`: "open" lets requests through, "closed" refuses them). The
//! Redis URL may carry a password only when it comes from the environment or a file.

use super::{ConfigError, Locator};
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;
use toml::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// The Redis URL written in the file (`redis://host:6379/0`), without a password.
    pub redis: Option<Spanned<String>>,
    /// The environment variable holding the Redis URL (which may carry a password).
    pub redis_env: Option<String>,
    /// A file holding the Redis password (e.g. a mounted Kubernetes secret).
    pub redis_password_file: Option<String>,
    pub key_prefix: Option<String>,
    pub timeout: Option<Spanned<String>>,
    pub on_redis_error: Option<FailMode>,
    pub sessions_on_redis_error: Option<FailMode>,
}

/// What a shared check does when Redis does not answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// Let the request through (decided by this replica alone where it can: its own bucket).
    #[default]
    Open,
    /// Refuse the request (a 429 with a retry hint for limits, a 503 for sessions).
    Closed,
}

impl FailMode {
    pub fn as_str(self) -> &'static str {
        match self {
            FailMode::Open => "open",
            FailMode::Closed => "closed",
        }
    }
}

/// The resolved `[cluster]` section.
#[derive(Clone, PartialEq)]
pub struct ClusterConfig {
    /// The full Redis URL (sensitive: it may carry a password; never logged whole).
    pub redis_url: String,
    /// Prepended to every key, so several gateways can share one Redis.
    pub key_prefix: String,
    /// The deadline of every Redis command (connecting included).
    pub timeout: Duration,
    /// The default for every rate limit without its own `on_redis_error`.
    pub on_redis_error: FailMode,
    /// Legacy sessions while Redis cannot say whether they were ended elsewhere.
    pub sessions_on_redis_error: FailMode,
}

impl ClusterConfig {
    /// The URL with any password hidden, for logs and `mcpgate check`.
    pub fn redacted_url(&self) -> String {
        redact(&self.redis_url)
    }
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("redis_url", &self.redacted_url())
            .field("key_prefix", &self.key_prefix)
            .field("timeout", &self.timeout)
            .field("on_redis_error", &self.on_redis_error)
            .field("sessions_on_redis_error", &self.sessions_on_redis_error)
            .finish()
    }
}

/// `redis://user:secret@host` → `redis://user:***@host`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (auth, host) = match rest.rsplit_once('@') {
        Some(parts) => parts,
        None => return url.to_string(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => format!("{scheme}://***@{host}"),
    }
}

/// The credentials part of a URL (`user:secret` in `scheme://user:secret@host/…`), if any.
pub fn url_userinfo(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    rest.split('/').next().and_then(|authority| authority.rsplit_once('@')).map(|(userinfo, _)| userinfo)
}

fn has_password(url: &str) -> bool {
    url_userinfo(url).is_some()
}

pub(super) fn resolve(
    at: &Locator,
    c: Option<ClusterSection>,
    base_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ClusterConfig>, ConfigError> {
    let Some(c) = c else { return Ok(None) };
    let file = &at.file;
    let mut url = match (&c.redis, &c.redis_env) {
        (Some(u), None) => {
            if has_password(u.get_ref()) {
                return Err(at.err(
                    u,
                    "cluster.redis",
                    "the URL carries credentials, and secrets may not be written in the file".into(),
                    "put the URL in an environment variable named by cluster.redis_env, or the password in cluster.redis_password_file",
                ));
            }
            u.get_ref().clone()
        }
        (None, Some(var)) => env(var).filter(|v| !v.trim().is_empty()).ok_or_else(|| {
            ConfigError(format!("{file}: cluster.redis_env: environment variable {var} is not set. Export the Redis URL in it."))
        })?,
        _ => {
            return Err(ConfigError(format!(
                "{file}: [cluster] needs exactly one of redis = \"redis://host:6379\" or redis_env = \"VAR\". Fix: give one of \
                    them (or remove [cluster] to keep every limit per replica)."
            )));
        }
    };
    let url_trimmed = url.trim().to_string();
    url = url_trimmed;
    if !(url.starts_with("redis://") || url.starts_with("redis+unix://") || url.starts_with("unix://")) {
        return Err(ConfigError(format!(
            "{file}: cluster: '{}' is not a Redis URL. Fix: write redis://host:6379/0 (TLS to Redis is not built in; use a local \
                TLS proxy).",
            redact(&url)
        )));
    }
    if let Some(p) = &c.redis_password_file {
        let path = super::relative(base_dir, p);
        let pw = std::fs::read_to_string(&path)
            .map_err(|e| ConfigError(format!("{file}: cluster.redis_password_file: cannot read {}: {e}", path.display())))?;
        let pw = pw.trim();
        if has_password(&url) {
            return Err(ConfigError(format!(
                "{file}: cluster: the URL already carries credentials and redis_password_file gives a password too. Fix: keep one."
            )));
        }
        if let Some((scheme, rest)) = url.split_once("://") {
            url = format!("{scheme}://:{}@{rest}", percent_encode(pw));
        }
    }
    let timeout = at.duration(c.timeout.as_ref(), "cluster.timeout", Duration::from_millis(250))?;
    if timeout.is_zero() {
        return Err(ConfigError(format!("{file}: cluster.timeout must be longer than zero. Fix: write e.g. \"250ms\".")));
    }
    let key_prefix = c.key_prefix.unwrap_or_else(|| "mcpgate".into());
    if key_prefix.is_empty() || key_prefix.contains(char::is_whitespace) {
        return Err(ConfigError(format!(
            "{file}: cluster.key_prefix must be a non-empty word without spaces. Fix: write e.g. \"mcpgate\"."
        )));
    }
    Ok(Some(ClusterConfig {
        redis_url: url,
        key_prefix,
        timeout,
        on_redis_error: c.on_redis_error.unwrap_or_default(),
        sessions_on_redis_error: c.sessions_on_redis_error.unwrap_or_default(),
    }))
}

/// Percent-encodes a password for the userinfo part of a URL.
pub(super) fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden_and_detected() {
        assert_eq!(redact("redis://:s3cret@db:6379/0"), "redis://:***@db:6379/0");
        assert_eq!(redact("redis://app:s3cret@db:6379"), "redis://app:***@db:6379");
        assert_eq!(redact("redis://db:6379"), "redis://db:6379");
        assert!(has_password("redis://:x@db"));
        assert!(!has_password("redis://db:6379/1"));
        assert_eq!(percent_encode("a b/c"), "a%20b%2Fc");
    }

    use crate::{Config, ConfigError};
    use std::path::Path;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("gateway.toml"), None, &|k| (k == "REDIS_URL").then(|| "redis://:pw@db:6379/1".to_string()))
    }

    #[test]
    fn cluster_section_resolves_with_defaults_and_overrides() {
        assert!(parse("").unwrap().cluster.is_none(), "no [cluster]: everything per replica");
        let c = parse("[cluster]\nredis = \"redis://db:6379/0\"\n").unwrap().cluster.unwrap();
        assert_eq!((c.key_prefix.as_str(), c.timeout.as_millis(), c.on_redis_error), ("mcpgate", 250, FailMode::Open));
        let cfg = parse(
            "[cluster]\nredis_env = \"REDIS_URL\"\non_redis_error = \"closed\"\n\n[[rate_limit]]\ntools = \"*\"\nlimit = \
                \"5/s\"\non_redis_error = \"open\"\n",
        )
        .unwrap();
        let c = cfg.cluster.unwrap();
        assert_eq!(c.redis_url, "redis://:pw@db:6379/1");
        assert_eq!(c.on_redis_error, FailMode::Closed);
        assert_eq!(cfg.rate_limits[0].rate.on_redis_error, Some(FailMode::Open));
        assert!(!format!("{c:?}").contains("pw"), "the password never reaches Debug output");
    }

    #[test]
    fn cluster_mistakes_are_refused_with_a_fix() {
        let e = parse("[cluster]\nredis = \"redis://:secret@db:6379\"\n").unwrap_err().to_string();
        assert!(e.contains("gateway.toml:2: cluster.redis") && e.contains("redis_env") && !e.contains("secret@"), "{e}");
        assert!(parse("[cluster]\nredis_env = \"NOPE\"\n").unwrap_err().to_string().contains("NOPE is not set"));
        assert!(parse("[cluster]\n").unwrap_err().to_string().contains("exactly one of"));
        assert!(parse("[cluster]\nredis = \"http://db\"\n").unwrap_err().to_string().contains("not a Redis URL"));
        assert!(parse("[cluster]\nredis = \"redis://db\"\non_redis_error = \"maybe\"\n").is_err());
    }
}
