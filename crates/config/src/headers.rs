//! Secrets and header values from the places a configuration may name them (an environment
//! variable of the gateway or a file, never a literal), for every section that sends one
//! upstream (`[[upstream]]` headers and OAuth, `user_auth` clients, guards), and the headers the
//! gateway sets itself, which no configured value may replace.

use super::file::HeaderSource;
use super::{ConfigError, Locator};
use http::{HeaderName, HeaderValue};
use std::path::{Path, PathBuf};

/// Whether the gateway sets header `name` (lower-cased) itself on every upstream request, so no
/// configured value may take its place.
pub fn gateway_sets(name: &str) -> bool {
    const SET: &[&str] = &[
        "host",
        "content-type",
        "content-length",
        "accept",
        "connection",
        "transfer-encoding",
        "te",
        "upgrade",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
    ];
    SET.contains(&name) || name.starts_with("mcp-param-")
}

/// A configured header: its checked name and its value (marked sensitive) read from `src`.
pub(super) fn header(
    at: &Locator,
    id: &str,
    name: &str,
    src: &HeaderSource,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(HeaderName, HeaderValue), ConfigError> {
    let key = format!("upstream '{id}' header '{name}'");
    let hname: HeaderName = name.parse().map_err(|_| ConfigError(format!("{}: {key}: not a valid header name", at.file)))?;
    if gateway_sets(hname.as_str()) {
        return Err(ConfigError(format!(
            "{}: {key}: the gateway sets this header itself. Fix: remove it from the upstream's headers.",
            at.file
        )));
    }
    let secret = secret(at, &key, src, base, env)?;
    let full = format!("{}{secret}", src.prefix.as_deref().unwrap_or(""));
    let mut value = HeaderValue::from_str(&full)
        .map_err(|_| ConfigError(format!("{}: {key}: the value contains characters not allowed in a header", at.file)))?;
    value.set_sensitive(true);
    Ok((hname, value))
}

/// The text a secret source names: an environment variable of the gateway, or a file (a
/// placeholder when the configuration is read for a report, `Config::load_for_reports`).
pub(super) fn secret(
    at: &Locator,
    key: &str,
    src: &HeaderSource,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    match (&src.env, &src.file) {
        (Some(_), None) | (None, Some(_)) if !at.read_secrets => Ok("(not read)".to_string()),
        (Some(var), None) => env(var).ok_or_else(|| {
            ConfigError(format!("{}: {key}: environment variable {var} is not set. Export it before starting mcpgate.", at.file))
        }),
        (None, Some(f)) => {
            let p = if Path::new(f).is_absolute() { PathBuf::from(f) } else { base.join(f) };
            Ok(std::fs::read_to_string(&p)
                .map_err(|e| ConfigError(format!("{}: {key}: cannot read secret file {}: {e}", at.file, p.display())))?
                .trim_end_matches(['\n', '\r'])
                .to_string())
        }
        _ => Err(ConfigError(format!(
            "{}: {key}: give exactly one of env = \"VAR\" or file = \"path\" (literal secrets are not allowed in the file)",
            at.file
        ))),
    }
}
