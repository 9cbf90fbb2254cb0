//! The `[state]` part of `gateway.toml`: where what must survive a restart is kept (the token
//! vault, usage counts, pin approvals, started authorizations). By default an embedded SQLite
//! file beside the configuration; with `postgres` (or `postgres_env`), a PostgreSQL database the
//! replicas share. The PostgreSQL URL may carry a password only when it comes from the
//! environment or a file, like the Redis URL of `[cluster]`.

use super::cluster::{percent_encode, redact, url_userinfo};
use super::{ConfigError, Locator};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// `[state]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSection {
    /// The SQLite database file (default `mcpgate-state.db` beside this file).
    pub path: Option<String>,
    /// The PostgreSQL URL written in the file (`postgres://mcpgate@db:5432/mcpgate`), without a
    /// password.
    pub postgres: Option<Spanned<String>>,
    /// The environment variable holding the PostgreSQL URL (which may carry a password).
    pub postgres_env: Option<String>,
    /// A file holding the PostgreSQL password (e.g. a mounted Kubernetes secret).
    pub postgres_password_file: Option<String>,
    /// The deadline of connecting and of every statement.
    pub timeout: Option<Spanned<String>>,
}

/// The resolved `[state]` section.
#[derive(Clone, PartialEq)]
pub struct StateConfig {
    /// The SQLite file (used when `postgres` is not set).
    pub path: PathBuf,
    /// The shared PostgreSQL database, when configured.
    pub postgres: Option<PostgresConfig>,
    /// Begin with an empty SQLite file when the one at `path` cannot be read (it is moved aside):
    /// `mcpgate run --fresh-state`, never the configuration file.
    pub fresh: bool,
}

/// Where the replicas' shared database is.
#[derive(Clone, PartialEq)]
pub struct PostgresConfig {
    /// The full URL (sensitive: it may carry a password; never logged whole).
    pub url: String,
    /// The deadline of connecting and of every statement.
    pub timeout: Duration,
}

impl PostgresConfig {
    pub fn redacted_url(&self) -> String {
        redact(&self.url)
    }
}

impl std::fmt::Debug for StateConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateConfig")
            .field("path", &self.path)
            .field("postgres", &self.postgres.as_ref().map(|p| (p.redacted_url(), p.timeout)))
            .finish()
    }
}

impl StateConfig {
    /// The SQLite file at `path`, no PostgreSQL.
    pub fn file(path: PathBuf) -> StateConfig {
        StateConfig { path, postgres: None, fresh: false }
    }
}

pub(super) fn resolve(
    at: &Locator<'_>,
    s: Option<StateSection>,
    base_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<StateConfig, ConfigError> {
    let s = s.unwrap_or_default();
    let file = &at.file;
    let path = {
        let p = s.path.clone().unwrap_or_else(|| "mcpgate-state.db".into());
        if Path::new(&p).is_absolute() { PathBuf::from(p) } else { base_dir.join(p) }
    };
    let mut url = match (&s.postgres, &s.postgres_env) {
        (None, None) => {
            if s.postgres_password_file.is_some() || s.timeout.is_some() {
                return Err(ConfigError(format!(
                    "{file}: state.postgres_password_file and state.timeout apply to a PostgreSQL database. Fix: add postgres = \
                     \"postgres://user@host:5432/db\" (or postgres_env), or remove them."
                )));
            }
            return Ok(StateConfig { path, postgres: None, fresh: false });
        }
        (Some(u), None) => {
            if url_userinfo(u.get_ref()).is_some_and(|i| i.contains(':')) {
                return Err(at.err(
                    u,
                    "state.postgres",
                    "the URL carries a password, and secrets may not be written in the file".into(),
                    "put the URL in an environment variable named by state.postgres_env, or the password in state.postgres_password_file",
                ));
            }
            u.get_ref().trim().to_string()
        }
        (None, Some(var)) => env(var).map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).ok_or_else(|| {
            ConfigError(format!("{file}: state.postgres_env: environment variable {var} is not set. Export the PostgreSQL URL in it."))
        })?,
        (Some(_), Some(_)) => {
            return Err(ConfigError(format!("{file}: [state] takes one of postgres and postgres_env. Fix: keep one.")));
        }
    };
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(ConfigError(format!(
            "{file}: state: '{}' is not a PostgreSQL URL. Fix: write postgres://user@host:5432/database.",
            redact(&url)
        )));
    }
    if let Some(mode) = url.split(['?', '&']).find_map(|kv| kv.strip_prefix("sslmode="))
        && !matches!(mode, "disable" | "prefer")
    {
        return Err(ConfigError(format!(
            "{file}: state: sslmode={mode}: TLS to PostgreSQL is not built in. Fix: reach the database over a private network or \
             a local TLS proxy, and remove sslmode (or write sslmode=disable)."
        )));
    }
    if let Some(p) = &s.postgres_password_file {
        let pw_path = super::relative(base_dir, p);
        let pw = std::fs::read_to_string(&pw_path)
            .map_err(|e| ConfigError(format!("{file}: state.postgres_password_file: cannot read {}: {e}", pw_path.display())))?;
        let pw = pw.trim();
        if url_userinfo(&url).is_some_and(|i| i.contains(':')) {
            return Err(ConfigError(format!(
                "{file}: state: the URL already carries a password and postgres_password_file gives one too. Fix: keep one."
            )));
        }
        let Some((scheme, rest)) = url.split_once("://") else { unreachable!("checked above") };
        url = match url_userinfo(&url) {
            Some(user) => {
                let host = rest.split_once('@').map_or(rest, |(_, h)| h);
                format!("{scheme}://{user}:{}@{host}", percent_encode(pw))
            }
            None => {
                return Err(ConfigError(format!(
                    "{file}: state: postgres_password_file needs a user in the URL. Fix: write postgres://user@host:5432/database."
                )));
            }
        };
    }
    let timeout = at.duration(s.timeout.as_ref(), "state.timeout", Duration::from_secs(5))?;
    if timeout.is_zero() {
        return Err(ConfigError(format!("{file}: state.timeout must be longer than zero. Fix: write e.g. \"5s\".")));
    }
    Ok(StateConfig { path, postgres: Some(PostgresConfig { url, timeout }), fresh: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Locator<'static> {
        Locator { text: "", file: "gateway.toml".into(), read_secrets: true }
    }

    fn section(toml_text: &str) -> StateSection {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn a_password_comes_from_the_environment_or_a_file_never_the_config() {
        let base = tempfile::tempdir().unwrap();
        let none = |_: &str| None;
        let e = resolve(&at(), Some(section("postgres = \"postgres://u:hunter2@db/x\"")), base.path(), &none).unwrap_err().to_string();
        assert!(e.contains("carries a password") && !e.contains("hunter2"), "{e}");
        let env = |v: &str| (v == "PG").then(|| "postgres://u:s3@db:5432/x".to_string());
        let c = resolve(&at(), Some(section("postgres_env = \"PG\"")), base.path(), &env).unwrap();
        let pg = c.postgres.unwrap();
        assert_eq!(pg.url, "postgres://u:s3@db:5432/x");
        assert!(!format!("{:?}", resolve(&at(), Some(section("postgres_env = \"PG\"")), base.path(), &env).unwrap()).contains("s3"));
        std::fs::write(base.path().join("pw"), "p@ss\n").unwrap();
        let c =
            resolve(&at(), Some(section("postgres = \"postgres://u@db/x\"\npostgres_password_file = \"pw\"")), base.path(), &none).unwrap();
        assert_eq!(c.postgres.unwrap().url, "postgres://u:p%40ss@db/x");
        let e = resolve(&at(), Some(section("postgres = \"postgres://u@db/x?sslmode=require\"")), base.path(), &none).unwrap_err();
        assert!(e.to_string().contains("TLS to PostgreSQL is not built in"), "{e}");
        let e = resolve(&at(), Some(section("postgres_env = \"NOPE\"")), base.path(), &none).unwrap_err();
        assert!(e.to_string().contains("NOPE is not set"), "{e}");
        let c = resolve(&at(), None, base.path(), &none).unwrap();
        assert_eq!(c, StateConfig::file(base.path().join("mcpgate-state.db")));
    }
}
