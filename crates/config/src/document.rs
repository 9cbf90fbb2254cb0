//! The whole of `gateway.toml` as written (unknown tables are errors): one field per table, each
//! the serde model of its section, which lives with the section's resolution (`auth`, `limits`,
//! `rules`, `confirm`, `pins`, `secrets`, `guards`, `usage`, `endpoint`, `cluster`, `identity`,
//! `state`, `discovery`, `code_mode`) or, for the tables the parent resolves and those several sections share, in `file`.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub server: super::file::ServerSection,
    #[serde(default)]
    pub catalog: super::file::CatalogSection,
    #[serde(default, rename = "upstream")]
    pub upstreams: Vec<super::file::UpstreamSection>,
    #[serde(default)]
    pub auth: super::auth::AuthSection,
    #[serde(default, rename = "caller")]
    pub callers: Vec<super::auth::CallerSection>,
    #[serde(default, rename = "rate_limit")]
    pub rate_limits: Vec<super::limits::RateLimitSection>,
    #[serde(default, rename = "rule")]
    pub rules: Vec<super::rules::RuleSection>,
    #[serde(default, rename = "confirm")]
    pub confirms: Vec<super::confirm::ConfirmSection>,
    #[serde(default)]
    pub pins: super::pins::PinsSection,
    #[serde(default)]
    pub secrets: super::secrets::SecretsSection,
    #[serde(default, rename = "guard")]
    pub guards: Vec<super::guards::GuardSection>,
    #[serde(default)]
    pub audit: super::usage::AuditSection,
    #[serde(default)]
    pub usage: super::usage::UsageSection,
    #[serde(default, rename = "quota")]
    pub quotas: Vec<super::usage::QuotaSection>,
    #[serde(default)]
    pub metrics: super::usage::MetricsSection,
    #[serde(default, rename = "endpoint")]
    pub endpoints: Vec<super::endpoint::EndpointSection>,
    pub cluster: Option<super::cluster::ClusterSection>,
    #[serde(default)]
    pub console: super::file::ConsoleSection,
    pub identity: Option<super::identity::IdentitySection>,
    /// `[state]`: where what must survive a restart is kept.
    pub state: Option<super::state::StateSection>,
    /// `[discovery]`: Server Cards, the AI Catalog and the registry API.
    pub discovery: Option<super::discovery::DiscoverySection>,
    /// `[code_mode]`: code mode's switch for the root endpoint and every program's limits.
    pub code_mode: Option<super::code_mode::CodeModeSection>,
}
