//! `[identity]` and `[upstream.user_auth]`: per-user upstream identity (docs/auth-and-policy.md).
//! An upstream with `user_auth` is reached with each caller's own OAuth token, obtained by the
//! authorization-code flow through the gateway's consent pages; `[identity]` says where browsers
//! reach the gateway (`public_url`: the redirect URI and the client metadata document live under
//! it) and where the token vault is kept.

use super::file::UserAuthSection;
use super::{ConfigError, Locator, TransportConfig};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// `[identity]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentitySection {
    pub public_url: Option<Spanned<String>>,
    pub vault: Option<String>,
    /// Let authorization servers and metadata be on loopback over http (development, tests).
    #[serde(default)]
    pub allow_loopback: bool,
    /// Where the gateway's client metadata document is published, when not at
    /// `<public_url>/oauth/client.json` (its URL is the gateway's `client_id`).
    pub client_metadata_url: Option<String>,
}

/// Where per-user identity lives.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityConfig {
    /// The gateway's public base URL, without a trailing slash.
    pub public_url: String,
    /// The token vault file.
    pub vault: PathBuf,
    pub allow_loopback: bool,
    /// A client metadata document URL published elsewhere (`None`: the gateway's own).
    pub client_metadata_url: Option<String>,
}

impl IdentityConfig {
    /// The redirect URI the authorization servers send browsers back to.
    pub fn redirect_uri(&self) -> String {
        format!("{}/oauth/callback", self.public_url)
    }

    /// The URL of the gateway's client metadata document (its `client_id` where servers take one).
    pub fn client_metadata_url(&self) -> String {
        self.client_metadata_url.clone().unwrap_or_else(|| format!("{}/oauth/client.json", self.public_url))
    }
}

/// An upstream reached with each caller's own token.
#[derive(Clone, PartialEq)]
pub struct UserAuthConfig {
    pub client_id: Option<String>,
    pub issuer: Option<String>,
    pub client_secret: Option<String>,
    /// The client was registered with `client_secret_post`.
    pub secret_in_body: bool,
    pub scopes: Option<Vec<String>>,
    /// RFC 8693 token exchange of the caller's JWT at `issuer` instead of a consent.
    pub exchange: bool,
    /// Each caller's own API key instead of OAuth.
    pub api_key: Option<ApiKeyConfig>,
    /// With `exchange`: the exchange yields an ID-JAG, presented at the upstream's authorization
    /// server by this client (its id, and its secret if it has one).
    pub id_jag: Option<(String, Option<String>)>,
}

/// How a caller's own API key is sent to the upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyConfig {
    /// A header name, lower-cased.
    pub header: String,
    pub prefix: String,
    pub help: Option<String>,
}

/// Headers an API key may not go in beyond those the gateway always sets: the browser's and
/// tracing's, and DPoP's.
const NOT_FOR_KEYS: &[&str] = &["cookie", "traceparent", "tracestate", "dpop"];

impl std::fmt::Debug for UserAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserAuthConfig").field("client_id", &self.client_id).field("scopes", &self.scopes).finish_non_exhaustive()
    }
}

/// `[upstream.user_auth]` of upstream `id`.
pub(super) fn user_auth(
    at: &Locator,
    u: &UserAuthSection,
    id: &Spanned<String>,
    transport: &TransportConfig,
    has_oauth: bool,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<UserAuthConfig, ConfigError> {
    let name = id.get_ref();
    if matches!(transport, TransportConfig::Stdio { .. }) {
        return Err(at.err(
            id,
            "upstream.user_auth",
            format!("upstream '{name}' is a command: user_auth applies only to url and openapi upstreams"),
            "remove it",
        ));
    }
    if has_oauth {
        return Err(at.err(
            id,
            "upstream.user_auth",
            format!("upstream '{name}' has both oauth (one token for everyone) and user_auth (each caller's own)"),
            "keep one of them",
        ));
    }
    let client_secret = match (&u.client_secret, &u.client_id) {
        (Some(_), None) => {
            return Err(at.err(id, "upstream.user_auth.client_secret", "a client_secret needs its client_id".into(), "add client_id"));
        }
        (Some(src), Some(_)) => {
            let (_, v) = super::headers::header(at, name, "client_secret", src, base, env)?;
            Some(
                v.to_str()
                    .map_err(|_| ConfigError(format!("{}: upstream '{name}' user_auth client_secret: not text", at.file)))?
                    .to_string(),
            )
        }
        (None, _) => None,
    };
    let secret_in_body = at.one_of(
        u.client_auth.as_ref(),
        "upstream.user_auth.client_auth",
        &["client_secret_basic", "client_secret_post"],
        "a way a caller's client authenticates",
    )? == "client_secret_post";
    if secret_in_body && client_secret.is_none() {
        return Err(at.err(id, "upstream.user_auth.client_auth", "client_secret_post needs a client_secret".into(), "add client_secret"));
    }
    if u.client_id.is_some() && u.issuer.is_none() {
        return Err(at.err(
            id,
            "upstream.user_auth.issuer",
            "a configured client_id belongs to one authorization server".into(),
            "add issuer = \"<that server's issuer URL>\"",
        ));
    }
    if u.scopes.as_ref().is_some_and(|s| s.iter().any(|x| x.is_empty() || x.contains(char::is_whitespace))) {
        return Err(at.err(
            id,
            "upstream.user_auth.scopes",
            "a scope is empty or contains a space".into(),
            "list each scope as its own string",
        ));
    }
    if u.exchange && u.client_id.is_none() {
        return Err(at.err(
            id,
            "upstream.user_auth.exchange",
            "token exchange is made by a client registered at the identity provider of the gateway's callers".into(),
            "add client_id, issuer (that provider's issuer URL) and client_secret",
        ));
    }
    let api_key = match u.kind.as_ref().map(|k| (k, k.get_ref().as_str())) {
        None | Some((_, "oauth")) => {
            if u.header.is_some() || u.prefix.is_some() || u.help.is_some() {
                return Err(at.err(
                    id,
                    "upstream.user_auth.header",
                    "header, prefix and help describe an API key".into(),
                    "add kind = \"api_key\", or remove them",
                ));
            }
            None
        }
        Some((k, "api_key")) => {
            if u.client_id.is_some() || u.issuer.is_some() || u.client_secret.is_some() || u.scopes.is_some() || u.exchange {
                return Err(at.err(
                    k,
                    "upstream.user_auth.kind",
                    "an API key upstream has no OAuth client, issuer, scopes or exchange".into(),
                    "remove client_id, issuer, client_secret, scopes and exchange",
                ));
            }
            let header = u.header.as_deref().unwrap_or("authorization").trim().to_ascii_lowercase();
            if http::HeaderName::from_bytes(header.as_bytes()).is_err()
                || super::headers::gateway_sets(&header)
                || NOT_FOR_KEYS.contains(&header.as_str())
                || header.starts_with("mcp-")
            {
                return Err(at.err(
                    k,
                    "upstream.user_auth.header",
                    format!("{header:?} cannot carry a key (not a header name, or one the gateway sets itself)"),
                    "name the header the upstream reads its key from, e.g. \"X-Api-Key\"",
                ));
            }
            let prefix = u.prefix.clone().unwrap_or_else(|| if header == "authorization" { "Bearer ".into() } else { String::new() });
            if http::HeaderValue::from_str(&prefix).is_err() {
                return Err(at.err(k, "upstream.user_auth.prefix", "the prefix is not header text".into(), "use printable ASCII"));
            }
            Some(ApiKeyConfig { header, prefix, help: u.help.clone() })
        }
        Some((k, other)) => {
            return Err(at.err(k, "upstream.user_auth.kind", format!("{other:?} is not a kind of user_auth"), "use oauth or api_key"));
        }
    };
    let id_jag = match &u.id_jag {
        None => None,
        Some(_) if !u.exchange => {
            return Err(at.err(
                id,
                "upstream.user_auth.id_jag",
                "an ID-JAG comes from exchanging the caller's JWT".into(),
                "add exchange = true with the identity provider's client_id, issuer and client_secret",
            ));
        }
        Some(j) => {
            let secret = match &j.client_secret {
                None => None,
                Some(src) => {
                    let (_, v) = super::headers::header(at, name, "client_secret", src, base, env)?;
                    Some(
                        v.to_str()
                            .map_err(|_| ConfigError(format!("{}: upstream '{name}' id_jag client_secret: not text", at.file)))?
                            .to_string(),
                    )
                }
            };
            Some((j.client_id.clone(), secret))
        }
    };
    Ok(UserAuthConfig {
        id_jag,
        client_id: u.client_id.clone(),
        issuer: u.issuer.clone(),
        client_secret,
        secret_in_body,
        scopes: u.scopes.clone(),
        exchange: u.exchange,
        api_key,
    })
}

/// `[identity]`; required (with `public_url`) when some upstream has `user_auth`.
pub(super) fn resolve(at: &Locator, s: Option<IdentitySection>, needed: bool, base: &Path) -> Result<Option<IdentityConfig>, ConfigError> {
    let Some(s) = s else {
        if needed {
            return Err(ConfigError(format!(
                "{}: an upstream has user_auth (consent in a browser), so [identity] public_url is needed. Fix: add [identity] with public_url = \
                 \"https://<where browsers reach the gateway>\".",
                at.file
            )));
        }
        return Ok(None);
    };
    let Some(url) = &s.public_url else {
        return Err(ConfigError(format!("{}: identity.public_url is missing. Fix: set it to where browsers reach the gateway.", at.file)));
    };
    let uri: http::Uri = url
        .get_ref()
        .parse()
        .map_err(|_| at.err(url, "identity.public_url", format!("{:?} is not a URL", url.get_ref()), "write an absolute https URL"))?;
    let loopback = uri
        .host()
        .is_some_and(|h| h == "localhost" || h.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()));
    match uri.scheme_str() {
        Some("https") => {}
        Some("http") if loopback => {}
        _ => {
            return Err(at.err(
                url,
                "identity.public_url",
                "consent pages and redirects need https".into(),
                "use an https URL (http only on loopback)",
            ));
        }
    }
    if uri.query().is_some() || url.get_ref().contains('#') {
        return Err(at.err(url, "identity.public_url", "a base URL has no query or fragment".into(), "remove them"));
    }
    let vault = s.vault.as_deref().unwrap_or("mcpgate-vault.json");
    let vault = if Path::new(vault).is_absolute() { PathBuf::from(vault) } else { base.join(vault) };
    if let Some(u) = &s.client_metadata_url
        && !u.starts_with("https://")
    {
        return Err(ConfigError(format!(
            "{}: identity.client_metadata_url {u:?}: authorization servers fetch it, so it must be https. Fix: use an https URL, or \
             leave it out to publish the document at <public_url>/oauth/client.json.",
            at.file
        )));
    }
    Ok(Some(IdentityConfig {
        public_url: url.get_ref().trim_end_matches('/').to_string(),
        vault,
        allow_loopback: s.allow_loopback,
        client_metadata_url: s.client_metadata_url,
    }))
}
