//! The `[auth]` and `[[caller]]` parts of `gateway.toml`: how callers prove who they are (none,
//! API keys stored as SHA-256 hashes, or JWTs checked against a JWKS) and what each named caller
//! may see and call, at which rate (see `limits`).

use super::limits::{Rate, parse_rate};
use super::{ConfigError, Locator};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    pub mode: Option<Spanned<String>>,
    pub issuer: Option<String>,
    #[serde(default)]
    pub audience: Vec<String>,
    pub jwks_url: Option<Spanned<String>>,
    pub jwks_file: Option<String>,
    pub jwks_refresh: Option<Spanned<String>>,
    pub resource: Option<String>,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    #[serde(default)]
    pub required_scopes: Vec<String>,
    #[serde(default)]
    pub tool_scopes: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub prompt_scopes: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub resource_scopes: BTreeMap<String, Vec<String>>,
    pub subject_claim: Option<String>,
    #[serde(default)]
    pub allow_unauthenticated_public: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallerSection {
    pub id: Spanned<String>,
    pub key_sha256: Option<Spanned<String>>,
    pub subject: Option<String>,
    #[serde(default)]
    pub claims: BTreeMap<String, String>,
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    pub rate_limit: Option<Spanned<String>>,
    /// With `[cluster]`: what this caller's limit does while Redis cannot answer.
    pub on_redis_error: Option<super::cluster::FailMode>,
    /// May read the web console (`[console]`).
    #[serde(default)]
    pub admin: bool,
    /// Tool-search mode for this caller (overrides `[catalog] tool_search`).
    pub tool_search: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    None,
    ApiKey,
    Jwt,
}

#[derive(Debug, Clone)]
pub enum JwksSource {
    Url(http::Uri),
    File(PathBuf),
}

#[derive(Debug, Clone)]
pub struct JwtConfig {
    pub issuer: String,
    pub audiences: Vec<String>,
    pub jwks: JwksSource,
    pub refresh: Duration,
    pub subject_claim: String,
}

#[derive(Debug, Clone)]
pub struct AuthConfig {
    pub mode: AuthMode,
    pub jwt: Option<JwtConfig>,
    /// The gateway's canonical resource URI (RFC 8707/9728), when configured.
    pub resource: Option<String>,
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Vec<String>,
    pub required_scopes: Vec<String>,
    /// Tool name glob → scopes a JWT must carry to see and call matching tools.
    pub tool_scopes: Vec<(String, Vec<String>)>,
    /// Prompt name glob → scopes a JWT must carry to see and get matching prompts.
    pub prompt_scopes: Vec<(String, Vec<String>)>,
    /// Resource (and template) URI glob → scopes a JWT must carry to see and read them.
    pub resource_scopes: Vec<(String, Vec<String>)>,
    pub allow_unauthenticated_public: bool,
}

#[derive(Debug, Clone)]
pub struct CallerConfig {
    pub id: String,
    pub key_sha256: Option<[u8; 32]>,
    pub subject: Option<String>,
    pub claims: BTreeMap<String, String>,
    pub scopes: Vec<String>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub rate_limit: Option<Rate>,
    /// May read the web console.
    pub admin: bool,
    /// Tool-search mode for this caller (`None`: `[catalog] tool_search` decides).
    pub tool_search: Option<bool>,
}

fn hex32(text: &str) -> Option<[u8; 32]> {
    let t = text.trim();
    if t.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(t.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

pub(super) fn resolve_auth(at: &Locator, a: AuthSection, base: &Path) -> Result<AuthConfig, ConfigError> {
    let mode = match a.mode.as_ref().map(|m| m.get_ref().as_str()) {
        None | Some("none") => AuthMode::None,
        Some("api_key") => AuthMode::ApiKey,
        Some("jwt") => AuthMode::Jwt,
        Some(other) => {
            let m = a.mode.as_ref().map(|m| m.span().start).unwrap_or(0);
            return Err(ConfigError(format!(
                "{}{}: auth.mode: '{other}' is not a mode. Fix: use \"none\", \"api_key\" or \"jwt\".",
                at.file,
                at.line(m)
            )));
        }
    };
    let jwt = if mode == AuthMode::Jwt {
        let issuer = a.issuer.clone().ok_or_else(|| {
            ConfigError(format!(
                "{}: auth.issuer: required with mode = \"jwt\". Fix: set the issuer your tokens carry in \"iss\".",
                at.file
            ))
        })?;
        let mut audiences = a.audience.clone();
        if audiences.is_empty() {
            audiences.extend(a.resource.clone());
        }
        if audiences.is_empty() {
            return Err(ConfigError(format!(
                "{}: auth.audience: required with mode = \"jwt\" (tokens must be issued for this gateway, RFC 8707). Fix: set \
                    auth.resource to the gateway's URL, or auth.audience.",
                at.file
            )));
        }
        let jwks = match (&a.jwks_url, &a.jwks_file) {
            (Some(u), None) => {
                let uri: http::Uri = u.get_ref().parse().map_err(|e| {
                    at.err(
                        u,
                        "auth.jwks_url",
                        format!("'{}' is not a URL ({e})", u.get_ref()),
                        "write e.g. \"https://issuer.example.com/.well-known/jwks.json\"",
                    )
                })?;
                // Keys fetched over plain http could be swapped in transit, and then any token forged.
                let loopback = uri
                    .host()
                    .is_some_and(|h| h == "localhost" || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) || h == "[::1]");
                match uri.scheme_str() {
                    Some("https") => {}
                    Some("http") if loopback => {}
                    Some("http") => {
                        return Err(at.err(
                            u,
                            "auth.jwks_url",
                            "plain http would let anyone on the path swap the keys and forge tokens".into(),
                            "use an https URL (http is accepted for loopback addresses only)",
                        ));
                    }
                    _ => return Err(at.err(u, "auth.jwks_url", "only https URLs are supported".into(), "use an https URL")),
                }
                JwksSource::Url(uri)
            }
            (None, Some(f)) => JwksSource::File(if Path::new(f).is_absolute() { PathBuf::from(f) } else { base.join(f) }),
            _ => return Err(ConfigError(format!("{}: auth: mode = \"jwt\" needs exactly one of jwks_url or jwks_file", at.file))),
        };
        Some(JwtConfig {
            issuer,
            audiences,
            jwks,
            refresh: at.duration(a.jwks_refresh.as_ref(), "auth.jwks_refresh", Duration::from_secs(600))?,
            subject_claim: a.subject_claim.clone().unwrap_or_else(|| "sub".into()),
        })
    } else {
        None
    };
    Ok(AuthConfig {
        mode,
        jwt,
        resource: a.resource,
        authorization_servers: a.authorization_servers,
        scopes_supported: a.scopes_supported,
        required_scopes: a.required_scopes,
        tool_scopes: a.tool_scopes.into_iter().collect(),
        prompt_scopes: a.prompt_scopes.into_iter().collect(),
        resource_scopes: a.resource_scopes.into_iter().collect(),
        allow_unauthenticated_public: a.allow_unauthenticated_public,
    })
}

pub(super) fn resolve_callers(at: &Locator, callers: Vec<CallerSection>, mode: AuthMode) -> Result<Vec<CallerConfig>, ConfigError> {
    let mut out: Vec<CallerConfig> = Vec::new();
    for c in callers {
        let id = c.id.get_ref().clone();
        if id.is_empty() || !id.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.@".contains(ch)) {
            return Err(at.err(&c.id, "caller.id", format!("'{id}' is not a valid caller id"), "use letters, digits and - _ . @"));
        }
        if out.iter().any(|o| o.id == id) {
            return Err(at.err(&c.id, "caller.id", format!("'{id}' is used twice"), "give each [[caller]] a unique id"));
        }
        let key_sha256 = match &c.key_sha256 {
            None => None,
            Some(k) => Some(hex32(k.get_ref()).ok_or_else(|| {
                at.err(k, "caller.key_sha256", "not 64 hex characters".into(), "run `mcpgate hash-key` and paste its output")
            })?),
        };
        if let (Some(k), Some(other)) = (key_sha256, out.iter().find(|o| o.key_sha256.is_some() && o.key_sha256 == key_sha256)) {
            let _ = k;
            return Err(at.err(
                &c.id,
                "caller.key_sha256",
                format!("caller '{id}' has the same key as '{}'", other.id),
                "give every caller its own key",
            ));
        }
        if mode == AuthMode::ApiKey && key_sha256.is_none() {
            return Err(at.err(
                &c.id,
                "caller.key_sha256",
                format!("caller '{id}' has no key while auth.mode = \"api_key\""),
                "run `mcpgate hash-key` and set key_sha256",
            ));
        }
        if mode == AuthMode::Jwt && c.subject.is_none() && c.claims.is_empty() && c.scopes.is_empty() {
            return Err(at.err(
                &c.id,
                "caller",
                format!("caller '{id}' matches no token"),
                "set subject, claims or scopes to say which tokens it describes",
            ));
        }
        let rate_limit = match &c.rate_limit {
            None => None,
            Some(r) => Some(Rate {
                on_redis_error: c.on_redis_error,
                ..parse_rate(r.get_ref())
                    .map_err(|e| at.err(r, "caller.rate_limit", format!("'{}': {e}", r.get_ref()), "write e.g. \"10/s\""))?
            }),
        };
        for pattern in c.allow.iter().chain(&c.deny) {
            if pattern.trim().is_empty() {
                return Err(at.err(&c.id, "caller.allow/deny", "an empty pattern".into(), "remove it, or write e.g. \"calc__*\""));
            }
        }
        out.push(CallerConfig {
            id,
            key_sha256,
            subject: c.subject,
            claims: c.claims,
            scopes: c.scopes,
            allow: c.allow,
            deny: c.deny,
            rate_limit,
            admin: c.admin,
            tool_search: c.tool_search,
        });
    }
    Ok(out)
}

/// Whether authentication fits the rest: callers need it, a public listener needs it (unless a
/// trusted proxy authenticates), and `caller_headers` name configured callers.
pub(super) fn check_authentication(
    at: &Locator,
    auth: &AuthConfig,
    callers: &[CallerConfig],
    server: &super::ServerConfig,
    upstreams: &[super::UpstreamConfig],
) -> Result<(), ConfigError> {
    if auth.mode == AuthMode::None && !callers.is_empty() {
        return Err(ConfigError(format!(
            "{}: [[caller]] entries need authentication to tell callers apart, but auth.mode is \"none\". Fix: set [auth] \
                mode = \"api_key\" or \"jwt\".",
            at.file
        )));
    }
    if auth.mode == AuthMode::None && !server.listen.ip().is_loopback() && !auth.allow_unauthenticated_public {
        return Err(ConfigError(format!(
            "{}: the gateway would listen on {} without authentication. Fix: configure [auth] mode = \"api_key\" or \"jwt\", \
                listen on 127.0.0.1, or set [auth] allow_unauthenticated_public = true if a trusted proxy authenticates callers.",
            at.file, server.listen
        )));
    }
    for u in upstreams {
        if let Some((caller, _)) = u.caller_headers.iter().find(|(c, _)| !callers.iter().any(|k| k.id == *c)) {
            return Err(ConfigError(format!(
                "{}: upstream '{}' has caller_headers for '{caller}', which is not a [[caller]] id",
                at.file, u.id
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_key_hashes() {
        assert_eq!(hex32(&"ab".repeat(32)).unwrap()[0], 0xab);
        assert!(hex32("abc").is_none());
        assert!(hex32(&"zz".repeat(32)).is_none());
    }
}
