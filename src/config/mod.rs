//! `gateway.toml`: the file model (serde, unknown keys rejected), its validation into a resolved
//! [`Config`], and error messages that name the file, the line and the key and say how to fix it.
//! Secrets (upstream credentials) are read here from environment variables or files, never from
//! literals in the file, and are marked sensitive so they never reach a log.

pub mod auth;
mod file;

use file::{FileConfig, HeaderSource, UpstreamSection};
use http::{HeaderName, HeaderValue};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// A configuration error, already rendered for a human: `file:line: key: problem. fix`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

#[derive(Debug, Clone)]
pub struct Config {
    pub source: PathBuf,
    pub server: ServerConfig,
    pub catalog: CatalogConfig,
    pub upstreams: Vec<UpstreamConfig>,
    pub auth: auth::AuthConfig,
    pub callers: Vec<auth::CallerConfig>,
    pub rate_limits: Vec<auth::ToolRateLimit>,
    pub audit_arguments: bool,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub path: String,
    pub max_body_bytes: usize,
    pub max_header_bytes: usize,
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub allowed_origins: Vec<String>,
    pub allowed_hosts: Vec<String>,
    pub instructions: Option<String>,
    /// A file holding the token key (hex or Base64, at least 32 bytes); `MCPGATE_TOKEN_KEY` wins.
    pub token_key_file: Option<PathBuf>,
    /// How long a legacy session stays valid after `initialize`.
    pub session_ttl: Duration,
}

#[derive(Debug, Clone)]
pub struct CatalogConfig {
    pub separator: String,
    pub page_size: usize,
    pub refresh_interval: Duration,
}

#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    pub id: String,
    pub prefix: String,
    pub transport: TransportConfig,
    pub timeout: Duration,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// OAuth client credentials, for upstreams that issue their own tokens.
    pub oauth: Option<OAuthConfig>,
    /// Credentials for calls made on behalf of a given caller (by caller id).
    pub caller_headers: Vec<(String, Vec<(HeaderName, HeaderValue)>)>,
    pub max_pages: usize,
    pub max_message_bytes: usize,
}

#[derive(Debug, Clone)]
pub enum TransportConfig {
    /// One or more endpoints serving the same tools; the default one (or the first) feeds the
    /// catalogue.
    Http {
        endpoints: Vec<EndpointConfig>,
    },
    Stdio {
        command: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
}

/// OAuth 2.0 client credentials for one upstream (see `upstream::oauth`).
#[derive(Clone)]
pub struct OAuthConfig {
    pub token_url: http::Uri,
    pub client_id: String,
    pub client_secret: String,
    pub scope: Option<String>,
    /// RFC 8707 `resource`: the upstream's canonical URI, so the token is for it only.
    pub resource: Option<String>,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig").field("token_url", &self.token_url).field("client_id", &self.client_id).finish_non_exhaustive()
    }
}

/// One endpoint of an HTTP upstream and the mirrored values that select it.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    pub url: http::Uri,
    /// `(header name, lower-cased; value)` pairs that must all match; empty for the default.
    pub when: Vec<(String, String)>,
}

impl TransportConfig {
    pub fn kind(&self) -> &'static str {
        match self {
            TransportConfig::Http { .. } => "http",
            TransportConfig::Stdio { .. } => "stdio",
        }
    }
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8811";
pub const LISTEN_ENV: &str = "MCPGATE_LISTEN";

impl Config {
    /// Reads and validates a config file. `MCPGATE_LISTEN`, when set, overrides `server.listen`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError(format!("{}: cannot read the config file: {e}. Pass the right path with -c/--config.", path.display()))
        })?;
        let listen_override = std::env::var(LISTEN_ENV).ok().filter(|s| !s.trim().is_empty());
        Self::parse(&text, path, listen_override.as_deref(), &|k| std::env::var(k).ok())
    }

    /// Parses config text; `env` looks up environment variables (injectable for tests).
    pub fn parse(
        text: &str,
        path: &Path,
        listen_override: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let at = Locator { text, file: path.display().to_string() };
        let file: FileConfig = toml::from_str(text).map_err(|e| {
            let where_ = e.span().map(|s| at.line(s.start)).unwrap_or_default();
            ConfigError(format!("{}{where_}: {}", at.file, e.message().trim_end()))
        })?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();

        let s = file.server;
        let listen = match listen_override {
            Some(addr) => addr
                .parse()
                .map_err(|e| ConfigError(format!("{LISTEN_ENV}={addr}: not a socket address ({e}); use e.g. 127.0.0.1:8811")))?,
            None => match &s.listen {
                Some(l) => l.get_ref().parse().map_err(|e| {
                    at.err(
                        l,
                        "server.listen",
                        format!("'{}' is not a socket address ({e})", l.get_ref()),
                        "use host:port, e.g. \"127.0.0.1:8811\"",
                    )
                })?,
                None => DEFAULT_LISTEN.parse().map_err(|_| ConfigError("invalid built-in default listen address".into()))?,
            },
        };
        let path_ = s.path.clone().unwrap_or_else(|| Spanned::new(0..0, "/mcp".into()));
        if !path_.get_ref().starts_with('/') {
            return Err(at.err(&path_, "server.path", format!("'{}' must start with '/'", path_.get_ref()), "write e.g. \"/mcp\""));
        }
        let server = ServerConfig {
            listen,
            path: path_.into_inner(),
            max_body_bytes: s.max_body_bytes.unwrap_or(4 * 1024 * 1024),
            max_header_bytes: s.max_header_bytes.unwrap_or(64 * 1024).max(8 * 1024),
            header_read_timeout: at.duration(s.header_read_timeout.as_ref(), "server.header_read_timeout", Duration::from_secs(10))?,
            body_read_timeout: at.duration(s.body_read_timeout.as_ref(), "server.body_read_timeout", Duration::from_secs(30))?,
            allowed_origins: s.allowed_origins,
            allowed_hosts: s.allowed_hosts,
            token_key_file: s.token_key_file.as_ref().map(|f| if Path::new(f).is_absolute() { PathBuf::from(f) } else { base_dir.join(f) }),
            session_ttl: at.duration(s.session_ttl.as_ref(), "server.session_ttl", Duration::from_secs(24 * 3600))?,
            instructions: s.instructions,
        };

        let c = file.catalog;
        let separator = c.separator.clone().unwrap_or_else(|| Spanned::new(0..0, "__".into()));
        let sep = separator.get_ref();
        if sep.is_empty() || !sep.chars().all(|ch| ch.is_ascii_alphanumeric() || "_.-".contains(ch)) {
            return Err(at.err(
                &separator,
                "catalog.separator",
                format!("'{sep}' is not a valid separator"),
                "use one or more of A-Z a-z 0-9 _ . - (the default is \"__\")",
            ));
        }
        let catalog = CatalogConfig {
            separator: sep.clone(),
            page_size: c.page_size.unwrap_or(1000).max(1),
            refresh_interval: at.duration(c.refresh_interval.as_ref(), "catalog.refresh_interval", Duration::from_secs(300))?,
        };

        let mut upstreams: Vec<UpstreamConfig> = Vec::new();
        for u in file.upstreams {
            let cfg = upstream(&at, u, &catalog.separator, &base_dir, env)?;
            if let Some(prev) = upstreams.iter().find(|p| p.id == cfg.id) {
                return Err(ConfigError(format!(
                    "{}: upstream id '{}' is used twice. Give each [[upstream]] a unique id.",
                    at.file, prev.id
                )));
            }
            if let Some(prev) = upstreams.iter().find(|p| !cfg.prefix.is_empty() && p.prefix == cfg.prefix) {
                return Err(ConfigError(format!(
                    "{}: upstreams '{}' and '{}' both use prefix '{}'. Give each a distinct prefix (or \"\" for none).",
                    at.file, prev.id, cfg.id, cfg.prefix
                )));
            }
            upstreams.push(cfg);
        }
        let auth = auth::resolve_auth(&at, file.auth, &base_dir)?;
        let callers = auth::resolve_callers(&at, file.callers, auth.mode)?;
        if auth.mode == auth::AuthMode::None && !callers.is_empty() {
            return Err(ConfigError(format!(
                "{}: [[caller]] entries need authentication to tell callers apart, but auth.mode is \"none\". Fix: set [auth] mode = \"api_key\" or \"jwt\".",
                at.file
            )));
        }
        if auth.mode == auth::AuthMode::None && !server.listen.ip().is_loopback() && !auth.allow_unauthenticated_public {
            return Err(ConfigError(format!(
                "{}: the gateway would listen on {} without authentication. Fix: configure [auth] mode = \"api_key\" or \"jwt\", listen on 127.0.0.1, or set [auth] allow_unauthenticated_public = true if a trusted proxy authenticates callers.",
                at.file, server.listen
            )));
        }
        for u in &upstreams {
            if let Some((caller, _)) = u.caller_headers.iter().find(|(c, _)| !callers.iter().any(|k| k.id == *c)) {
                return Err(ConfigError(format!(
                    "{}: upstream '{}' has caller_headers for '{caller}', which is not a [[caller]] id",
                    at.file, u.id
                )));
            }
        }
        let rate_limits = auth::resolve_rate_limits(&at, file.rate_limits)?;
        Ok(Config {
            source: path.to_path_buf(),
            server,
            catalog,
            upstreams,
            auth,
            callers,
            rate_limits,
            audit_arguments: file.audit.include_arguments,
        })
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn upstream(
    at: &Locator,
    u: UpstreamSection,
    sep: &str,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<UpstreamConfig, ConfigError> {
    let id = u.id.get_ref().clone();
    if !valid_id(&id) {
        return Err(at.err(
            &u.id,
            "upstream.id",
            format!("'{id}' is not a valid id"),
            "use lowercase letters, digits and '-', e.g. \"github\"",
        ));
    }
    if id.contains(sep) {
        return Err(at.err(
            &u.id,
            "upstream.id",
            format!("'{id}' contains the name separator '{sep}'"),
            "pick an id without it, so that prefixed names split unambiguously",
        ));
    }
    let prefix = match &u.prefix {
        None => id.clone(),
        Some(p) => {
            let v = p.get_ref();
            if !v.is_empty() && (!v.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) || v.contains(sep)) {
                return Err(at.err(
                    p,
                    "upstream.prefix",
                    format!("'{v}' is not a valid prefix"),
                    &format!("use A-Z a-z 0-9 _ . - without the separator '{sep}', or \"\" for no prefix"),
                ));
            }
            v.clone()
        }
    };
    let transport = match (&u.url, &u.command) {
        (_, None) if !u.endpoints.is_empty() || u.url.is_some() => {
            if u.url.is_some() && !u.endpoints.is_empty() {
                return Err(at.err(
                    &u.id,
                    "upstream.endpoint",
                    format!("upstream '{id}' has both url and [[upstream.endpoint]]"),
                    "keep one of them",
                ));
            }
            let endpoints = match &u.url {
                Some(url) => vec![EndpointConfig { url: parse_url(at, url, "upstream.url")?, when: Vec::new() }],
                None => u.endpoints.iter().map(|e| endpoint(at, e)).collect::<Result<Vec<_>, _>>()?,
            };
            if endpoints.iter().filter(|e| e.when.is_empty()).count() > 1 {
                return Err(at.err(
                    &u.id,
                    "upstream.endpoint",
                    format!("upstream '{id}' has more than one endpoint without `when`"),
                    "keep one default endpoint",
                ));
            }
            if !u.env.is_empty() || u.cwd.is_some() {
                return Err(at.err(
                    &u.id,
                    "upstream.env/cwd",
                    format!("upstream '{id}' has a url: env and cwd apply only to command upstreams"),
                    "remove env/cwd",
                ));
            }
            TransportConfig::Http { endpoints }
        }
        (None, Some(cmd)) => {
            if !u.endpoints.is_empty() {
                return Err(at.err(
                    cmd,
                    "upstream.command",
                    format!("upstream '{id}' has both a command and [[upstream.endpoint]]"),
                    "keep one of them",
                ));
            }
            if cmd.get_ref().is_empty() || cmd.get_ref()[0].trim().is_empty() {
                return Err(at.err(
                    cmd,
                    "upstream.command",
                    "the command is empty".into(),
                    "write the program and its arguments, e.g. [\"python3\", \"server.py\"]",
                ));
            }
            if !u.headers.is_empty() {
                return Err(at.err(
                    &u.id,
                    "upstream.headers",
                    format!("upstream '{id}' is a command: headers apply only to url upstreams"),
                    "pass credentials to a command upstream through env",
                ));
            }
            let cwd = u.cwd.as_ref().map(|c| if Path::new(c).is_absolute() { PathBuf::from(c) } else { base.join(c) });
            TransportConfig::Stdio { command: cmd.get_ref().clone(), env: u.env.clone(), cwd }
        }
        (Some(_), Some(_)) => {
            return Err(at.err(&u.id, "upstream", format!("upstream '{id}' has both url and command"), "keep exactly one of them"));
        }
        (_, None) => {
            return Err(at.err(
                &u.id,
                "upstream",
                format!("upstream '{id}' has neither url nor command"),
                "add url = \"http://…\" or command = [\"program\", \"arg\"]",
            ));
        }
    };
    let mut headers = Vec::new();
    for (name, src) in &u.headers {
        headers.push(header(at, &id, name, src, base, env)?);
    }
    let mut caller_headers = Vec::new();
    for (caller, set) in &u.caller_headers {
        let mut list = Vec::new();
        for (name, src) in set {
            list.push(header(at, &id, name, src, base, env)?);
        }
        caller_headers.push((caller.clone(), list));
    }
    let oauth = match &u.oauth {
        None => None,
        Some(o) => {
            if !matches!(transport, TransportConfig::Http { .. }) {
                return Err(at.err(
                    &o.token_url,
                    "upstream.oauth",
                    format!("upstream '{id}' is a command: oauth applies only to url upstreams"),
                    "remove it",
                ));
            }
            let token_url = parse_url(at, &o.token_url, "upstream.oauth.token_url")?;
            let loopback =
                token_url.host().is_some_and(|h| h == "localhost" || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()));
            if token_url.scheme_str() != Some("https") && !loopback {
                return Err(at.err(
                    &o.token_url,
                    "upstream.oauth.token_url",
                    "client secrets are only sent over https".into(),
                    "use an https URL (http is allowed for loopback only)",
                ));
            }
            let (_, secret) = header(at, &id, "client_secret", &o.client_secret, base, env)?;
            let client_secret = secret
                .to_str()
                .map_err(|_| ConfigError(format!("{}: upstream '{id}' oauth client_secret: not text", at.file)))?
                .to_string();
            let resource = o.resource.clone().or_else(|| match &transport {
                TransportConfig::Http { endpoints } => endpoints.first().map(|e| e.url.to_string()),
                TransportConfig::Stdio { .. } => None,
            });
            Some(OAuthConfig { token_url, client_id: o.client_id.clone(), client_secret, scope: o.scope.clone(), resource })
        }
    };
    if !caller_headers.is_empty() && !matches!(transport, TransportConfig::Http { .. }) {
        return Err(at.err(
            &u.id,
            "upstream.caller_headers",
            format!("upstream '{id}' is a command: caller_headers apply only to url upstreams"),
            "remove them",
        ));
    }
    Ok(UpstreamConfig {
        timeout: at.duration(u.timeout.as_ref(), "upstream.timeout", Duration::from_secs(30))?,
        id,
        prefix,
        transport,
        headers,
        oauth,
        caller_headers,
        max_pages: u.max_pages.unwrap_or(100).max(1),
        max_message_bytes: u.max_message_bytes.unwrap_or(64 * 1024 * 1024),
    })
}

fn parse_url(at: &Locator, url: &Spanned<String>, key: &str) -> Result<http::Uri, ConfigError> {
    let parsed: http::Uri = url
        .get_ref()
        .parse()
        .map_err(|e| at.err(url, key, format!("'{}' is not a URL ({e})", url.get_ref()), "write e.g. \"http://127.0.0.1:3000/mcp\""))?;
    if !matches!(parsed.scheme_str(), Some("http" | "https")) || parsed.host().is_none() {
        return Err(at.err(
            url,
            key,
            format!("'{}' is not an http(s) URL with a host", url.get_ref()),
            "write e.g. \"https://mcp.example.com/mcp\"",
        ));
    }
    Ok(parsed)
}

fn endpoint(at: &Locator, e: &file::EndpointSection) -> Result<EndpointConfig, ConfigError> {
    let url = parse_url(at, &e.url, "upstream.endpoint.url")?;
    let mut when = Vec::new();
    if let Some(w) = &e.when {
        for (name, value) in w.get_ref() {
            let value = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(at.err(
                        w,
                        "upstream.endpoint.when",
                        format!("'{name}' has a {} value", other.type_str()),
                        "use a string, an integer or a boolean",
                    ));
                }
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)) {
                return Err(at.err(
                    w,
                    "upstream.endpoint.when",
                    format!("'{name}' is not an x-mcp-header name"),
                    "use the name the tool's schema gives in x-mcp-header, e.g. Region",
                ));
            }
            when.push((name.to_ascii_lowercase(), value));
        }
    }
    Ok(EndpointConfig { url, when })
}

fn header(
    at: &Locator,
    id: &str,
    name: &str,
    src: &HeaderSource,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(HeaderName, HeaderValue), ConfigError> {
    let key = format!("upstream '{id}' header '{name}'");
    let hname: HeaderName = name.parse().map_err(|_| ConfigError(format!("{}: {key}: not a valid header name", at.file)))?;
    let reserved = [
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
    if reserved.contains(&hname.as_str()) || hname.as_str().starts_with("mcp-param-") {
        return Err(ConfigError(format!(
            "{}: {key}: the gateway sets this header itself. Fix: remove it from the upstream's headers.",
            at.file
        )));
    }
    let secret = match (&src.env, &src.file) {
        (Some(var), None) => env(var).ok_or_else(|| {
            ConfigError(format!("{}: {key}: environment variable {var} is not set. Export it before starting mcpgate.", at.file))
        })?,
        (None, Some(f)) => {
            let p = if Path::new(f).is_absolute() { PathBuf::from(f) } else { base.join(f) };
            std::fs::read_to_string(&p)
                .map_err(|e| ConfigError(format!("{}: {key}: cannot read secret file {}: {e}", at.file, p.display())))?
                .trim_end_matches(['\n', '\r'])
                .to_string()
        }
        _ => {
            return Err(ConfigError(format!(
                "{}: {key}: give exactly one of env = \"VAR\" or file = \"path\" (literal secrets are not allowed in the file)",
                at.file
            )));
        }
    };
    let full = format!("{}{secret}", src.prefix.as_deref().unwrap_or(""));
    let mut value = HeaderValue::from_str(&full)
        .map_err(|_| ConfigError(format!("{}: {key}: the value contains characters not allowed in a header", at.file)))?;
    value.set_sensitive(true);
    Ok((hname, value))
}

/// Turns byte offsets into `:line` and renders errors with a fix.
struct Locator<'a> {
    text: &'a str,
    file: String,
}

impl Locator<'_> {
    fn line(&self, offset: usize) -> String {
        let off = offset.min(self.text.len());
        format!(":{}", self.text[..off].matches('\n').count() + 1)
    }

    fn err<T>(&self, at: &Spanned<T>, key: &str, problem: String, fix: &str) -> ConfigError {
        let span = at.span();
        let line = if span.end > 0 { self.line(span.start) } else { String::new() };
        ConfigError(format!("{}{line}: {key}: {problem}. Fix: {fix}.", self.file))
    }

    fn duration(&self, v: Option<&Spanned<String>>, key: &str, default: Duration) -> Result<Duration, ConfigError> {
        match v {
            None => Ok(default),
            Some(s) => humantime::parse_duration(s.get_ref()).map_err(|e| {
                self.err(s, key, format!("'{}' is not a duration ({e})", s.get_ref()), "write e.g. \"30s\", \"500ms\" or \"2m\"")
            }),
        }
    }
}

#[cfg(test)]
mod tests;
