//! mcpgate, layer 3: `gateway.toml` — the file model (serde, unknown keys rejected), its
//! validation into a resolved [`Config`] with error messages that name the file, the line and the
//! key and say how to fix it, and its resolution into the values the layers above run on. Secrets
//! (upstream credentials) are read here from environment variables or files, never from literals
//! in the file, and are marked sensitive so they never reach a log.

use mcpgate_model::{catalog, policy};

pub mod auth;
pub mod cluster;
pub mod code_mode;
pub mod confirm;
pub mod discovery;
mod document;
pub mod endpoint;
mod file;
mod grants;
pub mod guards;
mod headers;
pub use grants::{Assertion, IdpClient, OAuthGrant};
pub use headers::gateway_sets;
pub mod identity;
pub mod limits;
pub mod openapi;
pub mod pins;
pub mod rules;
pub mod sandbox;
pub mod secrets;
pub mod state;
mod tls;
mod upstream;
pub mod usage;

use document::FileConfig;
use file::{EnvValue, UpstreamSection};
use http::{HeaderName, HeaderValue};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// The default of the most change streams one caller may hold open (`server.max_streams_per_caller`).
pub const MAX_STREAMS_PER_CALLER: usize = 64;

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
    pub rate_limits: Vec<limits::ToolRateLimit>,
    /// `[[rule]]`s, in file order: policy as code.
    pub rules: Vec<std::sync::Arc<crate::policy::rules::Rule>>,
    /// Calls a person must confirm (`[[confirm]]`).
    pub confirms: Vec<confirm::ConfirmRule>,
    /// Pinned tool definitions (`[pins]`, and each upstream's `pin`).
    pub pins: pins::PinsConfig,
    /// The checks on what flows through (`[[guard]]`), in the order declared.
    pub guards: std::sync::Arc<Vec<guards::GuardConfig>>,
    /// Detectors results pass through before they reach a client (`[secrets]`; empty: none).
    pub secrets: std::sync::Arc<Vec<crate::policy::secrets::Detector>>,
    pub audit_arguments: bool,
    /// `[audit]`: where audit records go besides the log.
    pub audit: usage::AuditConfig,
    /// `[usage]`: the usage accounting and its store.
    pub usage: usage::UsageConfig,
    /// `[[quota]]`, in file order.
    pub quotas: Vec<usage::Quota>,
    /// `[metrics]`: the bounded per-tool and per-caller series.
    pub metrics: usage::MetricsConfig,
    /// Virtual servers: more endpoints, each a curated view of the catalogue.
    pub endpoints: Vec<endpoint::EndpointConfig>,
    /// Shared state across replicas (`[cluster]`); `None`: every limit is per replica.
    pub cluster: Option<cluster::ClusterConfig>,
    /// The web console at `/console` (`[console] enabled`).
    pub console: bool,
    /// Some caller may be served in tool-search mode (so the call path skips the check).
    pub tool_search_anywhere: bool,
    /// Per-user upstream identity (`[identity]`): set when some upstream has `user_auth`.
    pub identity: Option<identity::IdentityConfig>,
    /// `[state]`: the database of what must survive a restart (SQLite, or PostgreSQL for replicas).
    pub state: state::StateConfig,
    /// What is published for discovery: Server Cards, the AI Catalog, the registry API.
    pub discovery: discovery::DiscoveryConfig,
    /// `[code_mode]`: whether the root endpoint serves code mode, and the limits of every program.
    pub code_mode: code_mode::CodeModeConfig,
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
    /// Files holding token keys (hex or Base64, at least 32 bytes, one per line): the first key
    /// seals, every key opens (rotation). `MCPGATE_TOKEN_KEY` wins.
    pub token_key_file: Vec<PathBuf>,
    /// How long a legacy session stays valid after `initialize`.
    pub session_ttl: Duration,
    /// How long the gateway waits for a client to answer an input request (elicitation,
    /// sampling, roots), and how long a legacy upstream's call that asked one stays parked.
    pub input_timeout: Duration,
    /// A connection without a request in progress for this long is closed.
    pub idle_timeout: Duration,
    /// At shutdown, how long requests in progress may take to finish.
    pub drain_timeout: Duration,
    /// How long a write to a client may stay pending (a client that stops reading is cut off).
    pub write_timeout: Duration,
    pub max_connections: usize,
    /// Requests in progress, in total (then 503) and per caller (then 429).
    pub max_in_flight: usize,
    pub max_in_flight_per_caller: usize,
    /// The most change streams (listen, legacy GET) one caller may hold open.
    pub max_streams_per_caller: usize,
    /// What `/readyz` needs: any upstream ready, or all of them.
    pub ready_when: ReadyWhen,
    /// `/metrics` answers every client, not only loopback ones.
    pub metrics_public: bool,
    /// HTTPS on the listener.
    pub tls: Option<ListenerTls>,
    /// Reload when the configuration file changes (SIGHUP always reloads).
    pub watch_config: bool,
}

/// The listener's certificate and key (PEM files, re-read when they change), and the CA whose
/// client certificates it requires, if any (mTLS).
#[derive(Debug, Clone)]
pub struct ListenerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

/// How the gateway reaches an https upstream: its own CA instead of the system roots, and a
/// client certificate for mTLS.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpstreamTls {
    pub ca: Option<PathBuf>,
    pub cert: Option<(PathBuf, PathBuf)>,
}

/// When `/readyz` answers 200 (after the first probe round).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadyWhen {
    /// At least one upstream is ready (or none is configured).
    #[default]
    Any,
    /// Every upstream is ready.
    All,
}

#[derive(Debug, Clone)]
pub struct CatalogConfig {
    /// The separator, the maximum name length and the charset of served names.
    pub names: crate::catalog::names::NamePolicy,
    pub page_size: usize,
    pub refresh_interval: Duration,
    /// How long list changes are collected before clients are told (and before an upstream's
    /// announced change is re-read), so a burst costs one notification.
    pub debounce: Duration,
    /// Bounds on re-listing an upstream that announces no list changes, on the schedule its
    /// `ttlMs` implies.
    pub ttl_min: Duration,
    pub ttl_max: Duration,
    /// Serve two meta-tools (search, call) instead of the whole tool list.
    pub tool_search: bool,
    /// Resolve a tool name or resource URI that is not in the caller's view but is the upstream's
    /// own name of exactly one item the caller may use (MCP Apps call their server's tools by the
    /// names they know).
    pub bare_names: bool,
}

#[derive(Debug, Clone, PartialEq)]
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
    pub tls: Option<UpstreamTls>,
    /// Served names for some of its tools and prompts: (its name, the served name).
    pub rename: Vec<(String, String)>,
    /// Which protocol era the gateway speaks to it (docs/protocol.md, "Which era each upstream is
    /// spoken to in").
    pub era: EraChoice,
    /// Reached with each caller's own OAuth token (`[upstream.user_auth]`).
    pub user_auth: Option<identity::UserAuthConfig>,
    /// `tools/call` arguments are checked against the tool's `inputSchema` before they leave.
    pub validate_arguments: bool,
    /// Its own pin mode (`None`: `[pins] mode`).
    pub pin: Option<crate::catalog::pins::PinMode>,
    /// One process for every caller, or one per caller (stdio upstreams).
    pub instances: sandbox::Instances,
}

/// The era the gateway speaks to an upstream that may offer both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EraChoice {
    /// HTTP: the client's era when the upstream offers it (a legacy client gets a legacy upstream
    /// session of its own). stdio: the legacy era when the process offers it (its
    /// server-initiated requests then reach clients of both eras), else the modern one.
    #[default]
    Auto,
    /// Always 2026-07-28 (the upstream must offer it).
    Modern,
    /// Always the `initialize` handshake era.
    Legacy,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TransportConfig {
    /// One or more endpoints serving the same tools; the default one (or the first) feeds the
    /// catalogue.
    Http { endpoints: Vec<EndpointConfig> },
    Stdio {
        command: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
        /// `None`: the process runs with the gateway's own reach (`[upstream.sandbox]` absent).
        sandbox: Option<Box<sandbox::SandboxConfig>>,
    },
    /// A REST API described by OpenAPI, its operations served as tools.
    OpenApi(Box<openapi::OpenApiConfig>),
}

/// OAuth 2.0 client credentials for one upstream (see `upstream::oauth`).
#[derive(Clone, PartialEq)]
pub struct OAuthConfig {
    /// `None`: discovered from the upstream's metadata.
    pub token_url: Option<http::Uri>,
    pub client_id: String,
    pub client_auth: ClientAuthMethod,
    /// Empty for [`ClientAuthMethod::None`].
    pub client_secret: String,
    pub scope: Option<String>,
    /// RFC 8707 `resource`: the upstream's canonical URI, so the token is for it only.
    pub resource: Option<String>,
    /// How the token is asked for.
    pub grant: OAuthGrant,
}

/// How the gateway authenticates to a token endpoint for client credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuthMethod {
    #[default]
    Basic,
    Post,
    /// RFC 7523 `private_key_jwt`, ES256.
    PrivateKeyJwt,
    /// A public client: `client_id` in the body only (a workload whose assertion is its proof).
    None,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig").field("token_url", &self.token_url).field("client_id", &self.client_id).finish_non_exhaustive()
    }
}

/// One endpoint of an HTTP upstream and the mirrored values that select it.
#[derive(Debug, Clone, PartialEq)]
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
            TransportConfig::OpenApi(_) => "openapi",
        }
    }
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8811";
pub const LISTEN_ENV: &str = "MCPGATE_LISTEN";

impl Config {
    /// Reads and validates a config file. `MCPGATE_LISTEN`, when set, overrides `server.listen`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = read_file(path)?;
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
        Self::parse_at(&Locator { text, file: path.display().to_string(), read_secrets: true }, path, listen_override, env)
    }

    fn parse_at(
        at: &Locator,
        path: &Path,
        listen_override: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let text = at.text;
        let file: FileConfig = toml::from_str(text).map_err(|e| {
            let where_ = e.span().map(|s| at.line(s.start)).unwrap_or_default();
            ConfigError(format!("{}{where_}: {}", at.file, e.message().trim_end()))
        })?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();

        let server = resolve_server(at, file.server, listen_override, &base_dir)?;
        let catalog = resolve_catalog(at, file.catalog)?;
        let mut upstreams = resolve_upstreams(at, file.upstreams, &catalog.names.separator, &base_dir, env)?;
        let auth = auth::resolve_auth(at, file.auth, &base_dir)?;
        let callers = auth::resolve_callers(at, file.callers, auth.mode)?;
        auth::check_authentication(at, &auth, &callers, &server, &upstreams)?;
        let rate_limits = limits::resolve_rate_limits(at, file.rate_limits)?;
        let quotas = usage::resolve_quotas(at, file.quotas)?;
        let usage_cfg = usage::resolve_usage(at, file.usage, &base_dir)?;
        let audit = usage::resolve_audit(at, file.audit, &base_dir)?;
        let confirms = confirm::resolve(at, file.confirms)?;
        let rules = rules::resolve(at, file.rules, &server.path)?;
        let pins = pins::resolve(at, file.pins, &base_dir)?;
        let secrets = std::sync::Arc::new(secrets::resolve(at, file.secrets)?);
        let guards = std::sync::Arc::new(guards::resolve(at, file.guards, &upstreams, &base_dir, env)?);
        let endpoints = endpoint::resolve(at, file.endpoints, &server.path)?;
        // Password files are read here and not kept: their paths are noted to be hidden below.
        let mut secret_files: Vec<PathBuf> =
            file.cluster.as_ref().and_then(|c| c.redis_password_file.as_deref()).map(|f| relative(&base_dir, f)).into_iter().collect();
        secret_files.extend(file.state.as_ref().and_then(|s| s.postgres_password_file.as_deref()).map(|f| relative(&base_dir, f)));
        let cluster = cluster::resolve(at, file.cluster, &base_dir, env)?;
        let tool_search_anywhere = catalog.tool_search || callers.iter().any(|c| c.tool_search == Some(true));
        let consent = upstreams.iter().any(|u| u.user_auth.as_ref().is_some_and(|a| !a.exchange));
        let identity = identity::resolve(at, file.identity, consent, &base_dir)?;
        if let Some(u) = upstreams.iter().find(|u| u.user_auth.as_ref().is_some_and(|a| a.exchange))
            && auth.mode != auth::AuthMode::Jwt
        {
            return Err(ConfigError(format!(
                "{}: upstream '{}' exchanges the caller's token (user_auth.exchange), which needs callers with JWTs. Fix: set \
                 [auth] mode = \"jwt\", or remove exchange to have callers consent in a browser.",
                at.file, u.id
            )));
        }
        // The files the gateway keeps secrets and records in are hidden from every sandbox, wherever
        // they live (the config folder is hidden already).
        let state = state::resolve(at, file.state, &base_dir, env)?;
        let endpoint_paths: Vec<String> = std::iter::once(server.path.clone()).chain(endpoints.iter().map(|e| e.path.clone())).collect();
        let public_url = identity.as_ref().map(|i| i.public_url.as_str());
        let discovery = discovery::resolve(at, file.discovery.unwrap_or_default(), &endpoint_paths, public_url)?;
        let mut kept: Vec<PathBuf> = server.token_key_file.clone();
        kept.push(state.path.clone());
        kept.extend(identity.as_ref().map(|i| i.vault.clone()));
        kept.extend(usage_cfg.enabled.then(|| usage_cfg.store.clone()));
        kept.extend(audit.file.clone());
        kept.push(pins.file.clone());
        kept.extend(audit.signing_key_file.clone());
        kept.extend(secret_files);
        kept.extend(server.tls.as_ref().map(|t| t.key.clone()));
        kept.extend(upstreams.iter().filter_map(|u| u.tls.as_ref()?.cert.as_ref().map(|(_, key)| key.clone())));
        sandbox::hide(at, &mut upstreams, &kept)?;
        Ok(Config {
            source: path.to_path_buf(),
            server,
            catalog,
            upstreams,
            auth,
            callers,
            rate_limits,
            rules,
            confirms,
            pins,
            guards,
            secrets,
            audit_arguments: audit.include_arguments,
            audit,
            usage: usage_cfg,
            quotas,
            metrics: usage::MetricsConfig { per_tool: file.metrics.per_tool, per_caller: file.metrics.per_caller },
            endpoints,
            cluster,
            console: file.console.enabled,
            tool_search_anywhere,
            identity,
            state,
            discovery,
            code_mode: code_mode::resolve(at, file.code_mode.unwrap_or_default())?,
        })
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Turns byte offsets into `:line` and renders errors with a fix.
fn read_file(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("{}: cannot read the config file: {e}. Pass the right path with -c/--config.", path.display())))
}

struct Locator<'a> {
    text: &'a str,
    file: String,
    /// Whether secrets (env or file) are read; a placeholder stands for each when not.
    read_secrets: bool,
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

    /// One of a closed set of words (`words[0]` when the key is absent), or an error that names
    /// them all: `what` says what the value should have been ("an action").
    fn one_of(&self, v: Option<&Spanned<String>>, key: &str, words: &[&'static str], what: &str) -> Result<&'static str, ConfigError> {
        let Some(v) = v else { return Ok(words[0]) };
        words.iter().copied().find(|w| *w == v.get_ref()).ok_or_else(|| {
            let (last, rest) = words.split_last().unwrap_or((&"", &[]));
            let listed = if rest.is_empty() { (*last).to_string() } else { format!("{} or {last}", rest.join(", ")) };
            self.err(v, key, format!("{:?} is not {what}", v.get_ref()), &format!("use {listed} (default {})", words[0]))
        })
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

/// `p` as written, or beside the configuration when relative.
pub(crate) fn relative(base: &Path, p: &str) -> PathBuf {
    if Path::new(p).is_absolute() { PathBuf::from(p) } else { base.join(p) }
}

#[cfg(test)]
mod tests;

/// `[server]`: the listener (address, path, TLS), its limits and deadlines.
fn resolve_server(
    at: &Locator,
    s: file::ServerSection,
    listen_override: Option<&str>,
    base_dir: &Path,
) -> Result<ServerConfig, ConfigError> {
    let listen = match listen_override {
        Some(addr) => {
            addr.parse().map_err(|e| ConfigError(format!("{LISTEN_ENV}={addr}: not a socket address ({e}); use e.g. 127.0.0.1:8811")))?
        }
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
    Ok(ServerConfig {
        listen,
        path: path_.into_inner(),
        max_body_bytes: s.max_body_bytes.unwrap_or(4 * 1024 * 1024),
        max_header_bytes: s.max_header_bytes.unwrap_or(64 * 1024).max(8 * 1024),
        header_read_timeout: at.duration(s.header_read_timeout.as_ref(), "server.header_read_timeout", Duration::from_secs(10))?,
        body_read_timeout: at.duration(s.body_read_timeout.as_ref(), "server.body_read_timeout", Duration::from_secs(30))?,
        allowed_origins: s.allowed_origins,
        allowed_hosts: s.allowed_hosts,
        token_key_file: s
            .token_key_file
            .map(file::OneOrMany::into_vec)
            .unwrap_or_default()
            .iter()
            .map(|f| if Path::new(f).is_absolute() { PathBuf::from(f) } else { base_dir.join(f) })
            .collect(),
        session_ttl: at.duration(s.session_ttl.as_ref(), "server.session_ttl", Duration::from_secs(24 * 3600))?,
        input_timeout: at.duration(s.input_timeout.as_ref(), "server.input_timeout", Duration::from_secs(300))?,
        idle_timeout: at.duration(s.idle_timeout.as_ref(), "server.idle_timeout", Duration::from_secs(120))?,
        drain_timeout: at.duration(s.drain_timeout.as_ref(), "server.drain_timeout", Duration::from_secs(30))?,
        write_timeout: at.duration(s.write_timeout.as_ref(), "server.write_timeout", Duration::from_secs(30))?,
        max_connections: s.max_connections.unwrap_or(10_000).max(1),
        max_in_flight: s.max_in_flight.unwrap_or(1024).max(1),
        max_in_flight_per_caller: s.max_in_flight_per_caller.unwrap_or(64).max(1),
        max_streams_per_caller: s.max_streams_per_caller.unwrap_or(MAX_STREAMS_PER_CALLER).max(1),
        ready_when: s.ready_when.unwrap_or_default(),
        metrics_public: s.metrics_public,
        watch_config: s.watch_config,
        tls: tls::listener(at, s.tls.as_ref(), base_dir)?,
        instructions: s.instructions,
    })
}

/// `[catalog]`: the name policy, paging, refresh and cache bounds, tool search.
fn resolve_catalog(at: &Locator, c: file::CatalogSection) -> Result<CatalogConfig, ConfigError> {
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
    let max_length = c.max_name_length.unwrap_or(crate::catalog::names::MAX_TOOL_NAME);
    if !(crate::catalog::names::MIN_NAME_LENGTH..=crate::catalog::names::MAX_TOOL_NAME).contains(&max_length) {
        return Err(ConfigError(format!(
            "{}: catalog.max_name_length = {max_length} is out of range. Use {}..={} (64 suits most model APIs).",
            at.file,
            crate::catalog::names::MIN_NAME_LENGTH,
            crate::catalog::names::MAX_TOOL_NAME
        )));
    }
    let charset = match c.name_charset.as_ref().map(|s| s.get_ref().as_str()) {
        None | Some("mcp") => crate::catalog::names::Charset::Mcp,
        Some("strict") => crate::catalog::names::Charset::Strict,
        Some(other) => {
            let span = c.name_charset.as_ref().map(|s| s.span()).unwrap_or(0..0);
            return Err(at.err(
                &Spanned::new(span, other.to_string()),
                "catalog.name_charset",
                format!("'{other}' is not a charset profile"),
                "use \"mcp\" (A-Z a-z 0-9 _ . -, the default) or \"strict\" (no '.', for model APIs that refuse it)",
            ));
        }
    };
    let catalog = CatalogConfig {
        names: crate::catalog::names::NamePolicy { separator: sep.clone(), max_length, charset },
        page_size: c.page_size.unwrap_or(1000).max(1),
        refresh_interval: at.duration(c.refresh_interval.as_ref(), "catalog.refresh_interval", Duration::from_secs(300))?,
        debounce: at.duration(c.debounce.as_ref(), "catalog.debounce", Duration::from_millis(100))?,
        ttl_min: at.duration(c.ttl_min.as_ref(), "catalog.ttl_min", Duration::from_secs(2))?,
        ttl_max: Duration::ZERO,
        tool_search: c.tool_search,
        bare_names: c.bare_names.unwrap_or(true),
    };
    let mut catalog = catalog;
    catalog.ttl_max = at.duration(c.ttl_max.as_ref(), "catalog.ttl_max", catalog.refresh_interval)?.max(catalog.ttl_min);
    Ok(catalog)
}

/// Every `[[upstream]]`, with unique ids and prefixes.
fn resolve_upstreams(
    at: &Locator,
    sections: Vec<UpstreamSection>,
    separator: &str,
    base_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<UpstreamConfig>, ConfigError> {
    let mut upstreams: Vec<UpstreamConfig> = Vec::new();
    for u in sections {
        let cfg = upstream::upstream(at, u, separator, base_dir, env)?;
        if let Some(prev) = upstreams.iter().find(|p| p.id == cfg.id) {
            return Err(ConfigError(format!("{}: upstream id '{}' is used twice. Give each [[upstream]] a unique id.", at.file, prev.id)));
        }
        if let Some(prev) = upstreams.iter().find(|p| !cfg.prefix.is_empty() && p.prefix == cfg.prefix) {
            return Err(ConfigError(format!(
                "{}: upstreams '{}' and '{}' both use prefix '{}'. Give each a distinct prefix (or \"\" for none).",
                at.file, prev.id, cfg.id, cfg.prefix
            )));
        }
        upstreams.push(cfg);
    }
    Ok(upstreams)
}
