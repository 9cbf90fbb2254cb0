//! Authentication: who is calling. Each request's `Authorization: Bearer` credential is checked
//! on its own (there is no session to trust): an API key against the SHA-256 hashes in the config
//! (constant-time), or a JWT against the issuer's keys (signature, issuer, audience = this
//! gateway, expiry). The result is a [`Principal`] carrying the caller's grants, scopes and rate
//! limit. Failures become RFC 6750/9728 challenges: 401 with `WWW-Authenticate`, or 403
//! `insufficient_scope` naming the scopes needed. The client's credential is never passed on.

pub mod jwt;
pub mod prm;

use http::{HeaderMap, StatusCode};
use mcpgate_config::Config;
use mcpgate_config::auth::{AuthConfig, AuthMode, CallerConfig};
use mcpgate_config::limits::Rate;
use mcpgate_model::catalog::Kind;
use mcpgate_model::policy::Grants;
use mcpgate_model::policy::facts::CallerFacts;
use mcpgate_model::policy::rules::{ALL_KINDS, Effect, Rule, Source};
use mcpgate_net::http::HttpClient;
use serde_json::Value;
use std::sync::Arc;

/// Globs on item names or URIs, each with the scopes a token needs for the matching items.
type ScopeTable = [(String, Vec<String>)];

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The caller's name for logs: the `[[caller]]` id (API keys) or the token subject (JWT).
    pub id: String,
    /// The ids of every `[[caller]]` entry that matched.
    pub rules: Vec<String>,
    pub grants: Grants,
    pub scopes: Vec<String>,
    pub rate: Option<Rate>,
    /// The virtual server (`[[endpoint]]` path) the caller came through; `None` for the root.
    pub endpoint: Option<Arc<str>>,
    /// The JWT this request carried, kept only when some upstream exchanges it (RFC 8693): the
    /// request's own token is the one exchanged, never another request's.
    pub subject_token: Option<SubjectToken>,
}

/// A caller's validated JWT, as a subject token for token exchange; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct SubjectToken(pub Arc<str>);

impl std::fmt::Debug for SubjectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubjectToken(..)")
    }
}

impl Principal {
    /// A caller of a gateway without authentication or policy (and the local stdio client).
    pub fn anonymous() -> Arc<Principal> {
        Arc::new(Principal {
            id: "anonymous".into(),
            rules: Vec::new(),
            grants: Grants::unrestricted(),
            scopes: Vec::new(),
            rate: None,
            endpoint: None,
            subject_token: None,
        })
    }

    /// The same caller, coming through the endpoint at `path` (`None`: the root).
    pub fn at(self: Arc<Self>, path: Option<&str>) -> Arc<Principal> {
        if self.endpoint.as_deref() == path {
            return self;
        }
        Arc::new(Principal { endpoint: path.map(Arc::from), grants: self.grants.at(path), ..(*self).clone() })
    }

    pub fn has_scopes(&self, needed: &[String]) -> bool {
        needed.iter().all(|s| self.scopes.contains(s))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// No credential at all: 401 without an error code (RFC 6750 §3.1).
    Missing,
    /// A credential that does not check out: 401.
    Unauthorized(String),
    /// A valid token without the scopes the operation needs: 403.
    InsufficientScope(Vec<String>),
}

pub struct Authenticator {
    mode: AuthMode,
    config: AuthConfig,
    callers: Vec<CallerConfig>,
    jwt: Option<jwt::JwtVerifier>,
    /// Each JWT caller's latest validated token and its expiry, kept (in memory only) when an
    /// upstream exchanges it for a token of its own (RFC 8693); never logged.
    subjects: Option<std::sync::Mutex<std::collections::HashMap<String, (String, u64)>>>,
    /// Each `[[caller]]` entry's `allow` and `deny` globs as rules, by entry.
    caller_rules: Vec<Vec<Arc<Rule>>>,
    /// The `[[rule]]`s.
    rules: Vec<Arc<Rule>>,
    /// Whether what no rule allows is allowed: no `[[caller]]` and no allowing `[[rule]]`.
    open: bool,
    /// The anonymous caller, made once (every request of a gateway without authentication is it).
    anonymous: std::sync::OnceLock<Arc<Principal>>,
}

/// The most subject tokens kept for token exchange.
const MAX_SUBJECTS: usize = 10_000;

impl Authenticator {
    pub fn new(cfg: &Config, client: HttpClient) -> Authenticator {
        let jwt = cfg.auth.jwt.as_ref().map(|j| jwt::JwtVerifier::new(j.clone(), client));
        let exchanges = cfg.upstreams.iter().any(|u| u.user_auth.as_ref().is_some_and(|a| a.exchange));
        let subjects = (exchanges && cfg.auth.mode == AuthMode::Jwt).then(Default::default);
        let caller_rules = cfg.callers.iter().map(caller_rules).collect();
        let open = cfg.callers.is_empty() && !cfg.rules.iter().any(|r| r.effect == Effect::Allow);
        Authenticator {
            mode: cfg.auth.mode,
            config: cfg.auth.clone(),
            callers: cfg.callers.clone(),
            jwt,
            subjects,
            caller_rules,
            rules: cfg.rules.clone(),
            open,
            anonymous: std::sync::OnceLock::new(),
        }
    }

    /// The grants of caller `id`, who matched the `[[caller]]` entries `matched` (indices).
    fn grants(&self, id: &str, matched: &[usize], claims: Value, scopes: &[String]) -> Grants {
        let entries: Vec<String> = matched.iter().filter_map(|&i| self.callers.get(i)).map(|c| c.id.clone()).collect();
        let own = matched.iter().filter_map(|&i| self.caller_rules.get(i)).flatten().cloned();
        let general = self.rules.iter().filter(|r| r.concerns(id, &entries)).cloned();
        let facts = Arc::new(CallerFacts::new(id, &entries, claims, scopes));
        Grants::new(self.open, own.chain(general), facts)
    }

    /// Who calls where no credential is asked for (`[auth] mode = "none"`, the local stdio client).
    pub fn anonymous(&self) -> Arc<Principal> {
        Arc::clone(self.anonymous.get_or_init(|| {
            let p = Principal::anonymous();
            if self.rules.is_empty() {
                return p;
            }
            Arc::new(Principal { grants: self.grants(&p.id, &[], Value::Object(Default::default()), &[]), ..(*p).clone() })
        }))
    }

    /// The latest validated token of JWT caller `id`, while it is unexpired (for token exchange).
    pub fn subject_token(&self, id: &str) -> Option<String> {
        let now = mcpgate_protocol::toolbox::unix_secs();
        let subjects = mcpgate_protocol::sync::lock(self.subjects.as_ref()?);
        subjects.get(id).filter(|(_, exp)| *exp > now).map(|(t, _)| t.clone())
    }

    fn keep_subject(&self, id: &str, token: &str, claims: &Value) {
        let Some(subjects) = &self.subjects else { return };
        let now = mcpgate_protocol::toolbox::unix_secs();
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(now + 300);
        let mut m = mcpgate_protocol::sync::lock(subjects);
        if m.len() >= MAX_SUBJECTS {
            m.retain(|_, (_, e)| *e > now);
            if m.len() >= MAX_SUBJECTS {
                m.clear();
            }
        }
        m.insert(id.to_string(), (token.to_string(), exp));
    }

    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// Loads the JWKS (and starts its refresh); call once at startup.
    pub async fn start(&self, tasks: &mcpgate_protocol::tasks::Background) -> Result<(), jwt::JwksError> {
        match &self.jwt {
            Some(j) => j.start(tasks).await,
            None => Ok(()),
        }
    }

    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Arc<Principal>, AuthError> {
        if self.mode == AuthMode::None {
            return Ok(self.anonymous());
        }
        let token = bearer(headers).ok_or(AuthError::Missing)?;
        let principal = match self.mode {
            AuthMode::ApiKey => self.api_key(token)?,
            AuthMode::Jwt => self.jwt(token).await?,
            AuthMode::None => return Ok(self.anonymous()),
        };
        if !principal.has_scopes(&self.config.required_scopes) && self.mode == AuthMode::Jwt {
            return Err(AuthError::InsufficientScope(self.config.required_scopes.clone()));
        }
        Ok(Arc::new(principal))
    }

    fn api_key(&self, key: &str) -> Result<Principal, AuthError> {
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key.as_bytes());
        // Compare against every key, in constant time each, so timing tells nothing.
        let mut found = None;
        for (i, c) in self.callers.iter().enumerate() {
            if let Some(h) = &c.key_sha256
                && aws_lc_rs::constant_time::verify_slices_are_equal(h, digest.as_ref()).is_ok()
            {
                found = Some(i);
            }
        }
        let index = found.ok_or_else(|| AuthError::Unauthorized("unknown API key".into()))?;
        let c = self.callers.get(index).ok_or_else(|| AuthError::Unauthorized("unknown API key".into()))?;
        Ok(Principal {
            id: c.id.clone(),
            rules: vec![c.id.clone()],
            grants: self.grants(&c.id, &[index], Value::Object(Default::default()), &[]),
            scopes: Vec::new(),
            rate: c.rate_limit,
            endpoint: None,
            subject_token: None,
        })
    }

    async fn jwt(&self, token: &str) -> Result<Principal, AuthError> {
        let verifier = self.jwt.as_ref().ok_or_else(|| AuthError::Unauthorized("JWT authentication is not configured".into()))?;
        let claims = verifier.verify(token).await.map_err(|e| AuthError::Unauthorized(e.to_string()))?;
        let mut principal = self.from_claims(&claims, verifier.subject_claim())?;
        self.keep_subject(&principal.id, token, &claims);
        principal.subject_token = self.subjects.as_ref().map(|_| SubjectToken(Arc::from(token)));
        Ok(principal)
    }

    /// The caller a validated token with `claims` is: its subject (the `subject_claim`), the
    /// `[[caller]]` entries it matches, its scopes and grants. `mcpgate policy explain` asks it too.
    pub fn from_claims(&self, claims: &Value, subject_claim: &str) -> Result<Principal, AuthError> {
        // A token must name its bearer: without one, every such token would share one identity
        // (legacy sessions, rate limits, logs). Tokens naming the client elsewhere (`client_id`,
        // `azp`) are accepted by setting `[auth] subject_claim` to that claim.
        let subject = match claims.get(subject_claim) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            // A numeric id (`uid`, `user_id`) names its bearer as well as a string.
            Some(Value::Number(n)) => n.to_string(),
            _ => return Err(AuthError::Unauthorized(format!("the token has no `{subject_claim}` claim naming its subject"))),
        };
        let scopes = token_scopes(claims);
        let indices: Vec<usize> =
            (0..self.callers.len()).filter(|&i| caller_matches(&self.callers[i], &subject, claims, &scopes)).collect();
        let matched: Vec<&CallerConfig> = indices.iter().filter_map(|&i| self.callers.get(i)).collect();
        let mut grants = self.grants(&subject, &indices, claims.clone(), &scopes);
        for (kinds, table) in self.scope_tables() {
            for (pattern, needed) in table {
                if !needed.iter().all(|s| scopes.contains(s)) {
                    grants.lack_scopes_for(kinds, pattern);
                }
            }
        }
        let rate = matched.iter().find_map(|c| c.rate_limit);
        Ok(Principal {
            id: subject,
            rules: matched.iter().map(|c| c.id.clone()).collect(),
            grants,
            scopes,
            rate,
            endpoint: None,
            subject_token: None,
        })
    }

    /// The caller `[[caller]]` entry `id` describes on its own, as its API key would be (the
    /// console's "view as", `mcpgate policy explain`).
    pub fn as_entry(&self, id: &str) -> Option<Principal> {
        let index = self.callers.iter().position(|c| c.id == id)?;
        let c = self.callers.get(index)?;
        let grants = self.grants(id, &[index], Value::Object(Default::default()), &[]);
        Some(Principal {
            id: id.to_string(),
            rules: vec![id.to_string()],
            grants,
            scopes: Vec::new(),
            rate: c.rate_limit,
            endpoint: None,
            subject_token: None,
        })
    }

    /// Each scope table with the kinds of item it covers.
    fn scope_tables(&self) -> [(&'static [Kind], &ScopeTable); 3] {
        [
            (&[Kind::Tool], &self.config.tool_scopes),
            (&[Kind::Prompt], &self.config.prompt_scopes),
            (&[Kind::Resource, Kind::Template, Kind::Skill], &self.config.resource_scopes),
        ]
    }

    /// The scopes using item `name` of `kind` needs (from `[auth] tool_scopes`,
    /// `prompt_scopes` and `resource_scopes`).
    pub fn scopes_for(&self, kind: Kind, name: &str) -> Vec<String> {
        if self.mode != AuthMode::Jwt {
            return Vec::new();
        }
        let mut out: Vec<String> = Vec::new();
        for (kinds, table) in self.scope_tables() {
            for (pattern, scopes) in table.iter().filter(|_| kinds.contains(&kind)) {
                if mcpgate_model::policy::restricts(pattern, &mcpgate_model::policy::Item { kind, name, upstream: "", json: None }) {
                    out.extend(scopes.iter().filter(|s| !out.contains(s)).cloned().collect::<Vec<_>>());
                }
            }
        }
        out
    }

    /// The HTTP status and `WWW-Authenticate` value for a failure; `metadata_url` is where the
    /// protected-resource metadata lives (JWT mode).
    pub fn challenge(&self, err: &AuthError, metadata_url: Option<&str>) -> (StatusCode, String) {
        let meta = metadata_url.map(|u| format!(", resource_metadata=\"{u}\"")).unwrap_or_default();
        let scope = if self.config.required_scopes.is_empty() || self.mode != AuthMode::Jwt {
            String::new()
        } else {
            format!(", scope=\"{}\"", self.config.required_scopes.join(" "))
        };
        match err {
            AuthError::Missing => (StatusCode::UNAUTHORIZED, format!("Bearer realm=\"mcpgate\"{scope}{meta}")),
            AuthError::Unauthorized(reason) => (
                StatusCode::UNAUTHORIZED,
                format!("Bearer realm=\"mcpgate\", error=\"invalid_token\", error_description=\"{}\"{scope}{meta}", quote_safe(reason)),
            ),
            AuthError::InsufficientScope(scopes) => (
                StatusCode::FORBIDDEN,
                format!("Bearer realm=\"mcpgate\", error=\"insufficient_scope\", scope=\"{}\"{meta}", scopes.join(" ")),
            ),
        }
    }
}

/// A `[[caller]]` entry's globs as rules of the engine.
fn caller_rules(c: &CallerConfig) -> Vec<Arc<Rule>> {
    let allow = Rule::new(format!("caller {} allow", c.id), Effect::Allow, Source::Caller).on(ALL_KINDS, &c.allow);
    let deny = Rule::new(format!("caller {} deny", c.id), Effect::Deny, Source::Caller).on(ALL_KINDS, &c.deny);
    [allow, deny].into_iter().filter(Rule::names_items).map(Arc::new).collect()
}

fn quote_safe(s: &str) -> String {
    s.chars().filter(|c| *c != '"' && *c != '\\' && !c.is_control()).collect()
}

pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// The scopes of a token: the space-separated `scope` claim, or the `scp` array.
pub fn token_scopes(claims: &Value) -> Vec<String> {
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) => s.split_whitespace().map(str::to_string).collect(),
        (_, Some(Value::Array(a))) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        (_, Some(Value::String(s))) => s.split_whitespace().map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

fn caller_matches(c: &CallerConfig, subject: &str, claims: &Value, scopes: &[String]) -> bool {
    if c.subject.as_deref().is_some_and(|s| s != subject) {
        return false;
    }
    let claims_ok = c.claims.iter().all(|(k, want)| match claims.get(k) {
        Some(Value::String(s)) => s == want,
        Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(want)),
        Some(Value::Bool(b)) => b.to_string() == *want,
        Some(Value::Number(n)) => n.to_string() == *want,
        _ => false,
    });
    claims_ok && c.scopes.iter().all(|s| scopes.contains(s))
}

/// `mcpgate hash-key`: the hex SHA-256 of an API key, as `key_sha256` expects it.
pub fn hash_key(key: &str) -> String {
    mcpgate_protocol::toolbox::sha256_hex(key.trim().as_bytes())
}

#[cfg(test)]
mod tests;
