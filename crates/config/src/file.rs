//! The serde model of the sections of `gateway.toml` that the parent resolves itself or that
//! several sections share (`[server]`, `[catalog]`, `[[upstream]]` with its TLS, OAuth and header
//! sources, `[console]`), exactly as written by users (unknown keys are errors). The whole file is
//! `document`; validation and defaults live in the parent module and each section's own module.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// `[console]`: the read-only web console at `/console`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleSection {
    #[serde(default)]
    pub enabled: bool,
}

/// One path or several (`token_key_file = "k"` or `["new", "old"]`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub listen: Option<Spanned<String>>,
    pub path: Option<Spanned<String>>,
    pub max_body_bytes: Option<usize>,
    pub max_header_bytes: Option<usize>,
    pub header_read_timeout: Option<Spanned<String>>,
    pub body_read_timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    pub instructions: Option<String>,
    pub token_key_file: Option<OneOrMany>,
    pub session_ttl: Option<Spanned<String>>,
    pub input_timeout: Option<Spanned<String>>,
    pub idle_timeout: Option<Spanned<String>>,
    pub drain_timeout: Option<Spanned<String>>,
    pub write_timeout: Option<Spanned<String>>,
    pub max_connections: Option<usize>,
    pub max_in_flight: Option<usize>,
    pub max_in_flight_per_caller: Option<usize>,
    pub max_streams_per_caller: Option<usize>,
    pub ready_when: Option<super::ReadyWhen>,
    #[serde(default)]
    pub metrics_public: bool,
    #[serde(default)]
    pub watch_config: bool,
    pub tls: Option<TlsSection>,
}

/// `[server.tls]` (cert, key, client_ca) and `[upstream.tls]` (ca, cert, key): PEM file paths.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    pub cert: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
    pub ca: Option<Spanned<String>>,
    pub client_ca: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogSection {
    pub separator: Option<Spanned<String>>,
    pub page_size: Option<usize>,
    pub refresh_interval: Option<Spanned<String>>,
    pub debounce: Option<Spanned<String>>,
    pub ttl_min: Option<Spanned<String>>,
    pub ttl_max: Option<Spanned<String>>,
    pub max_name_length: Option<usize>,
    pub name_charset: Option<Spanned<String>>,
    #[serde(default)]
    pub tool_search: bool,
    pub bare_names: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSection {
    pub id: Spanned<String>,
    pub url: Option<Spanned<String>>,
    pub command: Option<Spanned<Vec<String>>>,
    /// A REST API's OpenAPI description (a file or an http(s) URL) instead of an MCP server.
    pub openapi: Option<Spanned<String>>,
    /// Where an `openapi` upstream's calls go.
    pub base_url: Option<Spanned<String>>,
    /// Which of an `openapi` upstream's operations become tools.
    pub operations: Option<OperationsSection>,
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    pub cwd: Option<String>,
    pub prefix: Option<Spanned<String>>,
    pub timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderSource>,
    /// A pool of endpoints (replicas, regions) instead of one `url`.
    #[serde(default, rename = "endpoint")]
    pub endpoints: Vec<EndpointSection>,
    /// OAuth 2.0 client credentials for the upstream's own token.
    pub oauth: Option<OAuthSection>,
    /// Per-caller upstream credentials: caller id → header → source.
    #[serde(default)]
    pub caller_headers: BTreeMap<String, BTreeMap<String, HeaderSource>>,
    pub tls: Option<TlsSection>,
    pub max_pages: Option<usize>,
    pub max_message_bytes: Option<usize>,
    /// Served names for some of its tools and prompts: its name → the served name.
    #[serde(default)]
    pub rename: BTreeMap<String, Spanned<String>>,
    /// `auto` (default), `modern` or `legacy`.
    #[serde(default)]
    pub era: super::EraChoice,
    /// Each caller's own OAuth token for this upstream.
    pub user_auth: Option<UserAuthSection>,
    /// Check `tools/call` arguments against the tool's `inputSchema` at the gateway (default on).
    pub validate_arguments: Option<bool>,
    /// Pinned tool definitions for this upstream: `off`, `record` or `enforce` (default: `[pins] mode`).
    pub pin: Option<Spanned<String>>,
    /// What a command upstream's process may reach.
    pub sandbox: Option<super::sandbox::SandboxSection>,
    /// `shared` (default) or `per_caller`, with its bounds.
    pub instances: Option<Spanned<String>>,
    pub max_instances: Option<usize>,
    pub instance_idle: Option<Spanned<String>>,
}

/// One endpoint of a pool: used when every `when` entry (an `x-mcp-header` name → value)
/// matches the call's mirrored arguments; an endpoint without `when` is the default.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointSection {
    pub url: Spanned<String>,
    pub when: Option<Spanned<BTreeMap<String, toml::Value>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthSection {
    /// Discovered from the upstream (its protected-resource and authorization-server metadata)
    /// when left out.
    pub token_url: Option<Spanned<String>>,
    pub client_id: Spanned<String>,
    /// `client_secret_basic` (default), `client_secret_post` or `private_key_jwt` (RFC 7523;
    /// `client_secret` is then the PKCS#8 PEM of a P-256 key, and assertions are signed ES256).
    pub client_auth: Option<Spanned<String>>,
    /// Required but for the assertion grants, where it may be left out (a public client).
    pub client_secret: Option<HeaderSource>,
    pub scope: Option<String>,
    pub resource: Option<String>,
    /// `client_credentials` (default), `jwt_bearer` (workload identity) or `id_jag`
    /// (enterprise-managed authorization).
    pub grant: Option<Spanned<String>>,
    /// `jwt_bearer`: the workload JWT; `id_jag`: the identity assertion (an ID token).
    pub assertion: Option<HeaderSource>,
    /// `id_jag`: the enterprise identity provider's token endpoint and the gateway's client there.
    pub idp_token_url: Option<Spanned<String>>,
    pub idp_client_id: Option<String>,
    pub idp_client_secret: Option<HeaderSource>,
}

/// A command upstream's environment variable: a literal, or a secret read like a header's
/// (`{ env = "VAR" }` from the gateway's environment, `{ file = "path" }`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum EnvValue {
    Literal(String),
    From(HeaderSource),
}

/// Where an upstream header's value comes from: an environment variable or a file. A literal
/// string is refused with a fix, at its line (its text is never echoed).
#[derive(Debug, Default)]
pub struct HeaderSource {
    pub env: Option<String>,
    pub file: Option<String>,
    pub prefix: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceTable {
    env: Option<String>,
    file: Option<String>,
    prefix: Option<String>,
}

impl<'de> Deserialize<'de> for HeaderSource {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = HeaderSource;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("{ env = \"VAR\" } or { file = \"path\" }")
            }
            fn visit_str<E: serde::de::Error>(self, _literal: &str) -> Result<HeaderSource, E> {
                Err(E::custom(
                    "secrets may not be written in the file. Fix: write { env = \"VAR\" } (read from the environment) or { file \
                        = \"path\" }, with prefix = \"Bearer \" if the value needs one",
                ))
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(self, map: M) -> Result<HeaderSource, M::Error> {
                let t = SourceTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(HeaderSource { env: t.env, file: t.file, prefix: t.prefix })
            }
        }
        d.deserialize_any(Visit)
    }
}

/// `[upstream.operations]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationsSection {
    pub methods: Option<Vec<String>>,
    #[serde(default)]
    pub include_tags: Vec<String>,
    #[serde(default)]
    pub exclude_tags: Vec<String>,
    #[serde(default)]
    pub include_paths: Vec<String>,
    #[serde(default)]
    pub exclude_paths: Vec<String>,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// `[upstream.user_auth]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserAuthSection {
    /// A client registered in advance with the upstream's authorization server, and that
    /// server's issuer (the credentials are never sent to another).
    pub client_id: Option<String>,
    pub issuer: Option<String>,
    pub client_secret: Option<HeaderSource>,
    /// How that client was registered to authenticate: `client_secret_basic` (default) or
    /// `client_secret_post` (servers that enforce each client's registered method).
    pub client_auth: Option<Spanned<String>>,
    /// The scopes to ask for, instead of what the upstream's challenge or metadata names.
    pub scopes: Option<Vec<String>>,
    /// On behalf of the caller without a browser: the caller's validated JWT is exchanged for an
    /// upstream token at `issuer` (RFC 8693 token exchange) instead of a consent.
    #[serde(default)]
    pub exchange: bool,
    /// `oauth` (default) or `api_key`: each caller enters a key of their own on a gateway page.
    pub kind: Option<Spanned<String>>,
    /// `api_key`: the header the key goes in (default `Authorization`), and the text before it
    /// (default `Bearer ` in `Authorization`, nothing in another header).
    pub header: Option<String>,
    pub prefix: Option<String>,
    /// `api_key`: a line shown on the page, e.g. where a person creates a key.
    pub help: Option<String>,
    /// With `exchange`: enterprise-managed authorization (SEP-990). The caller's JWT is exchanged
    /// at `issuer` for an ID-JAG, which the upstream's own authorization server (discovered) takes
    /// with the JWT-bearer grant from this client of the gateway's.
    pub id_jag: Option<IdJagSection>,
}

/// `[upstream.user_auth.id_jag]`: the gateway's client at the upstream's authorization server.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdJagSection {
    pub client_id: String,
    pub client_secret: Option<HeaderSource>,
}
