//! The per-user identity engine: what the request path and the consent pages ask of it. For a
//! caller and a protected upstream it gives a usable access token from the vault (refreshing it
//! when it is about to expire), or a consent link; a consent link, opened in the caller's browser,
//! becomes an authorization request (discovery, client registration in the spec's order, PKCE,
//! `resource`); the redirect back completes it (state, browser and `iss` checks, code exchange)
//! and the tokens go to the vault under (caller, upstream, issuer).
//!
//! Client registration follows the MCP spec's order for each authorization server: the gateway's
//! Client ID Metadata Document (its URL is the `client_id`) when the server supports it, else the
//! credentials configured for the upstream, else Dynamic Client Registration (RFC 7591), whose
//! result is kept per issuer and never used with another.

use super::challenge::Challenge;
use super::client::{ClientAuth, IdentityError, OAuthHttp};
use super::discovery::{self, ServerMetadata};
use super::dpop::Access;
use super::flow::{self, Flows};
use super::single::Flights;
use super::vault::{TokenSet, Vault, VaultKey};
use mcpgate_model::token::Sealer;
use mcpgate_protocol::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a consent link stays good.
const GRANT_TTL: Duration = Duration::from_secs(15 * 60);
/// The most one discovery of an upstream's authorization may take (every fetch included), and
/// the most a request waits for one already running.
const DISCOVERY_DEADLINE: Duration = Duration::from_secs(20);
/// The same for one refresh of a caller's token.
const REFRESH_DEADLINE: Duration = Duration::from_secs(20);
/// A token closer to its expiry than this is refreshed first.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// How many times in a row one caller is sent to consent to more scopes for one upstream before
/// the gateway stops asking (an upstream that keeps answering `insufficient_scope`).
const MAX_STEP_UPS: u32 = 2;
/// When a run of step-ups is forgotten.
const STEP_UP_WINDOW: Duration = Duration::from_secs(10 * 60);

/// What the gateway knows about one protected upstream.
#[derive(Clone)]
pub struct Protected {
    pub upstream: String,
    /// Its canonical URI (RFC 8707 `resource`).
    pub resource: String,
    /// Configured client credentials, if any, and the authorization server they belong to: they
    /// are never sent to another one.
    pub client_id: Option<String>,
    pub client_issuer: Option<String>,
    pub client_secret: Option<String>,
    /// The configured client was registered with `client_secret_post` (`client_auth`): its
    /// secret goes in the body, whatever else the server lists.
    pub secret_in_body: bool,
    /// Configured scopes, instead of what the upstream names.
    pub scopes: Option<Vec<String>>,
    /// The caller's JWT is exchanged at `client_issuer` (RFC 8693) instead of a consent.
    pub exchange: bool,
    /// Each caller enters an API key of their own instead (`keys`).
    pub api_key: Option<mcpgate_config::identity::ApiKeyConfig>,
    /// With `exchange`: the exchange yields an ID-JAG (SEP-990) that this client of the gateway's
    /// (id, secret) presents at the upstream's own authorization server.
    pub id_jag: Option<(String, Option<String>)>,
}

/// Where the gateway is and how it presents itself to authorization servers.
#[derive(Clone)]
pub struct Settings {
    pub redirect_uri: String,
    pub client_metadata_url: String,
    /// Whether the client metadata document URL is one servers can fetch (https).
    pub client_metadata_usable: bool,
    pub consent_url: String,
    /// Where JWT callers sign in on the consent page (their issuer), when callers are JWTs.
    pub sign_in: Option<SignInAt>,
}

/// The authorization server that issues the gateway's own JWT callers their tokens, and the
/// resource (the gateway's) a sign-in asks a token for.
#[derive(Clone)]
pub struct SignInAt {
    pub issuer: String,
    pub resource: String,
    pub scope: Option<String>,
}

/// What the engine learnt about an upstream's authorization, kept until it fails.
#[derive(Clone)]
struct Known {
    server: ServerMetadata,
    scope: Option<String>,
    /// The resource as its metadata names it (RFC 8707 `resource`, exactly as declared).
    resource: String,
    /// The resource takes DPoP-bound tokens (its challenge offers the `DPoP` scheme, or its
    /// metadata lists DPoP algorithms): where its authorization server binds, tokens are bound.
    dpop: bool,
}

pub struct Identity {
    settings: Settings,
    sealer: Arc<Sealer>,
    vault: Vault,
    flows: Flows,
    http: OAuthHttp,
    protected: HashMap<String, Protected>,
    known: Mutex<HashMap<String, Known>>,
    /// Clients registered dynamically, by issuer.
    registered: Mutex<HashMap<String, ClientAuth>>,
    /// One refresh at a time per (caller, upstream), so concurrent calls refresh once (servers
    /// that rotate refresh tokens take each one once) and a slow server holds only its own.
    refreshing: Flights<(String, String)>,
    /// One discovery at a time per upstream.
    learning: Flights<String>,
    /// The sign-in server's metadata, once fetched.
    sign_in_server: Mutex<Option<ServerMetadata>>,
    /// Step-ups in a row per (caller, upstream), and when the run started.
    step_ups: Mutex<HashMap<(String, String), (u32, std::time::Instant)>>,
    /// Tokens got by token exchange, per (caller, upstream): the token, its expiry, and a digest
    /// of the subject token it was exchanged for (a new subject token exchanges again).
    exchanged: Mutex<HashMap<(String, String), Exchanged>>,
}

/// What a refused token leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A new token was obtained: retry once.
    Retry,
    /// The caller has to consent (again, perhaps to more scopes).
    Consent,
    /// The upstream keeps asking for more scopes than consent gave: stop asking.
    GiveUp,
}

/// A token got by exchange: the token, its expiry, and the digest of the subject token.
type Exchanged = (String, u64, Vec<u8>);

/// What the redirect back completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completed {
    /// A caller connected an upstream with its own account.
    Connected { caller: String, upstream: String },
    /// A person signed in at the JWT callers' issuer on a consent page: the token they got (to be
    /// checked as any caller's), the caller the consent link is for, and that link's grant.
    SignedIn { caller: String, grant: String, token: String },
}

impl Identity {
    pub fn new(settings: Settings, sealer: Arc<Sealer>, vault: Vault, http: OAuthHttp, protected: Vec<Protected>) -> Self {
        Identity {
            settings,
            sealer,
            vault,
            flows: Flows::default(),
            http,
            protected: protected.into_iter().map(|p| (p.upstream.clone(), p)).collect(),
            known: Mutex::default(),
            registered: Mutex::default(),
            refreshing: Flights::default(),
            learning: Flights::default(),
            sign_in_server: Mutex::default(),
            step_ups: Mutex::default(),
            exchanged: Mutex::default(),
        }
    }

    /// Whether the upstream's tokens come by token exchange (no consent).
    pub fn exchanges(&self, upstream: &str) -> bool {
        self.protected.get(upstream).is_some_and(|p| p.exchange)
    }

    /// A token for `upstream` on behalf of `caller`, exchanged for the caller's validated JWT
    /// `subject` at the identity provider that issued it (RFC 8693: the subject token is an
    /// access token; the upstream's canonical URI is the `resource` and `audience`). Kept until
    /// shortly before it expires, or until the caller presents another subject token.
    pub async fn exchanged(&self, caller: &str, upstream: &str, subject: &str) -> Result<String, IdentityError> {
        let p = self.protected.get(upstream).filter(|p| p.exchange).ok_or_else(|| IdentityError::NotFound(upstream.into()))?;
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, subject.as_bytes()).as_ref().to_vec();
        let key = (caller.to_string(), upstream.to_string());
        let now = super::vault::now();
        if let Some((token, exp, d)) = lock(&self.exchanged).get(&key)
            && *d == digest
            && *exp > now + REFRESH_MARGIN.as_secs()
        {
            return Ok(token.clone());
        }
        let issuer = p.client_issuer.clone().ok_or_else(|| IdentityError::NotFound(format!("{upstream}: the issuer to exchange at")))?;
        if let Some((jag_client, jag_secret)) = &p.id_jag {
            let t = self.id_jag_exchange(p, &issuer, subject, jag_client, jag_secret.as_deref()).await?;
            let exp = t.expires_at.unwrap_or(now + 300);
            lock(&self.exchanged).insert(key, (t.access_token.clone(), exp, digest));
            return Ok(t.access_token);
        }
        let cached = lock(&self.known).get(upstream).map(|k| k.server.clone());
        let server = match cached {
            Some(s) if s.issuer == issuer => s,
            _ => {
                let server = self.http.server_metadata(&issuer).await?;
                let scope = p.scopes.as_ref().map(|s| s.join(" "));
                lock(&self.known)
                    .insert(upstream.into(), Known { server: server.clone(), scope, resource: p.resource.clone(), dpop: false });
                server
            }
        };
        let auth = p.configured_client(&server).ok_or(IdentityError::NoRegistration(issuer))?;
        let body = {
            let mut q = form_urlencoded::Serializer::new(String::new());
            q.append_pair("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange");
            q.append_pair("subject_token", subject);
            q.append_pair("subject_token_type", "urn:ietf:params:oauth:token-type:access_token");
            q.append_pair("requested_token_type", "urn:ietf:params:oauth:token-type:access_token");
            q.append_pair("resource", &p.resource);
            q.append_pair("audience", &p.resource);
            if let Some(scopes) = &p.scopes {
                q.append_pair("scope", &scopes.join(" "));
            }
            q.finish()
        };
        let t = self.http.token(&server, &auth, body).await?;
        let exp = t.expires_at.unwrap_or(now + 300);
        lock(&self.exchanged).insert(key, (t.access_token.clone(), exp, digest));
        Ok(t.access_token)
    }

    /// Enterprise-managed authorization (SEP-990) for one caller: the caller's JWT (an ID token of
    /// the identity provider `issuer`) is exchanged there for an ID-JAG naming the upstream's own
    /// authorization server (discovered as for a consent) and the upstream, which that server
    /// takes with the JWT-bearer grant from the gateway's client `jag_client`.
    async fn id_jag_exchange(
        &self,
        p: &Protected,
        issuer: &str,
        subject: &str,
        jag_client: &str,
        jag_secret: Option<&str>,
    ) -> Result<TokenSet, IdentityError> {
        let idp = self.http.server_metadata(issuer).await?;
        let at_idp = p.configured_client(&idp).ok_or(IdentityError::NoRegistration(issuer.into()))?;
        self.discover(&p.upstream).await?;
        let known = lock(&self.known).get(&p.upstream).cloned().ok_or_else(|| IdentityError::NotFound(p.upstream.clone()))?;
        let scope = p.scopes.as_ref().map(|s| s.join(" "));
        let grant = super::assertion::id_jag(
            &self.http,
            &idp.token_endpoint,
            &at_idp,
            subject,
            &known.server.issuer,
            &known.resource,
            scope.as_deref(),
        )
        .await?;
        super::assertion::check_audience(
            "ID-JAG from the identity provider",
            &grant,
            Some(&known.server.issuer),
            &known.server.token_endpoint,
        )?;
        let at_upstream = client_at(&known.server, Some(jag_client), jag_secret, false)
            .ok_or(IdentityError::NoRegistration(known.server.issuer.clone()))?;
        self.http.token(&known.server, &at_upstream, super::assertion::jwt_bearer_body(&grant, scope.as_deref(), None)).await
    }

    /// Forgets an exchanged token the upstream refused.
    pub fn forget_exchanged(&self, caller: &str, upstream: &str) {
        lock(&self.exchanged).remove(&(caller.to_string(), upstream.to_string()));
    }

    /// With the started authorizations kept in `flows` (shared by the replicas of a cluster).
    pub fn with_flows(mut self, flows: Flows) -> Self {
        self.flows = flows;
        self
    }

    /// The settings the pages use (redirect URI, client metadata URL).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The protected upstreams' ids.
    pub fn upstreams(&self) -> impl Iterator<Item = &str> {
        self.protected.keys().map(String::as_str)
    }

    /// The issuer and scopes a consent for `upstream` goes to, once discovered.
    pub fn describe(&self, upstream: &str) -> Option<(String, Option<String>)> {
        lock(&self.known).get(upstream).map(|k| (k.server.authorization_endpoint.clone(), k.scope.clone()))
    }

    /// Discovers an upstream's authorization, unless it is known: from its challenge to an
    /// unauthenticated request, else from the well-known URLs.
    /// One discovery runs per upstream at a time, under [`DISCOVERY_DEADLINE`]; a slow
    /// authorization server holds only its own upstream's.
    pub async fn discover(&self, upstream: &str) -> Result<(), IdentityError> {
        let slow = || IdentityError::Fetch { url: format!("{upstream}'s authorization server"), reason: "no answer in time".into() };
        let _learning = self.learning.enter(&upstream.to_string(), DISCOVERY_DEADLINE).await.ok_or_else(slow)?;
        if lock(&self.known).contains_key(upstream) {
            return Ok(());
        }
        let Some(p) = self.protected.get(upstream).filter(|p| p.api_key.is_none()) else { return Ok(()) };
        let learnt = async {
            let challenge = match self.http.challenge(&p.resource).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(%upstream, error = %e, "no challenge from the upstream; discovery goes by the well-known URLs");
                    None
                }
            };
            self.learn(upstream, challenge.as_ref()).await
        };
        tokio::time::timeout(DISCOVERY_DEADLINE, learnt).await.map_err(|_| slow())?
    }

    /// The upstream refused a caller's token with HTTP `status` and `challenge` (its
    /// `WWW-Authenticate` values). A 401 re-learns where the upstream's authorization lives (an
    /// upstream may move to another authorization server) and refreshes the token once; a 403
    /// `insufficient_scope` asks the caller to consent to the union of the scopes held and asked,
    /// at most [`MAX_STEP_UPS`] times in a row.
    pub async fn refused(&self, caller: &str, upstream: &str, status: u16, challenge: &[String]) -> Refusal {
        if let Some(r) = self.api_key_refused(caller, upstream, status) {
            return r;
        }
        let challenge = super::challenge::bearer(challenge.iter().map(String::as_str));
        let Some(before) = lock(&self.known).get(upstream).cloned() else { return Refusal::Consent };
        let key = VaultKey { caller: caller.into(), upstream: upstream.into(), issuer: before.server.issuer.clone() };
        if status == 403 && challenge.as_ref().is_some_and(Challenge::insufficient_scope) {
            let ch = challenge.as_ref().map(|c| c.scopes.clone()).unwrap_or_default();
            let run = {
                let mut runs = lock(&self.step_ups);
                let entry = runs.entry((caller.into(), upstream.into())).or_insert((0, std::time::Instant::now()));
                if entry.1.elapsed() > STEP_UP_WINDOW {
                    *entry = (0, std::time::Instant::now());
                }
                entry.0 += 1;
                entry.0
            };
            if run > MAX_STEP_UPS {
                tracing::warn!(%upstream, "the upstream keeps asking for more scopes than consent gave; not asking again");
                return Refusal::GiveUp;
            }
            let held = self.vault.get(&key).and_then(|t| t.scope).or(before.scope.clone()).unwrap_or_default();
            let wanted = match challenge.as_ref() {
                Some(c) if !ch.is_empty() => discovery::step_up_scopes(&held, c),
                _ => held.clone(),
            };
            // Consent to what was already granted would change nothing.
            let granted: Vec<&str> = held.split_ascii_whitespace().collect();
            if wanted.split_ascii_whitespace().all(|s| granted.contains(&s)) && self.vault.get(&key).is_some() {
                tracing::warn!(%upstream, "the upstream asks for scopes the caller's token already has; not asking again");
                return Refusal::GiveUp;
            }
            if let Some(k) = lock(&self.known).get_mut(upstream) {
                k.scope = Some(wanted).filter(|s| !s.is_empty());
            }
            let _ = self.vault.remove(&key);
            return Refusal::Consent;
        }
        if status != 401 {
            return Refusal::Consent;
        }
        // Where the authorization lives may have moved: learn again from this challenge.
        if let Err(e) = self.learn(upstream, challenge.as_ref()).await {
            tracing::info!(%upstream, error = %e, "re-discovering the upstream's authorization failed");
        }
        let moved = lock(&self.known).get(upstream).is_none_or(|k| k.server.issuer != before.server.issuer);
        if moved {
            tracing::info!(%upstream, "the upstream's authorization server changed; consent is needed there");
            return Refusal::Consent;
        }
        let Some(held) = self.vault.get(&key) else { return Refusal::Consent };
        if held.refresh_token.is_some() {
            // Refreshed as if expired; a refresh that fails leaves consent as the way on.
            let stale = TokenSet { expires_at: Some(0), ..held.clone() };
            if self.vault.put(&key, &stale).is_ok()
                && let Some(fresh) = self.token(caller, upstream).await
                && fresh != held.access_token
            {
                return Refusal::Retry;
            }
        }
        let _ = self.vault.remove(&key);
        Refusal::Consent
    }

    /// Forgets a caller's tokens for one upstream, or all of them; how many were held.
    pub fn revoke(&self, caller: &str, upstream: Option<&str>) -> usize {
        match self.vault.revoke(caller, upstream) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "revoking tokens failed");
                0
            }
        }
    }

    /// Whether the caller holds a token for the upstream (fresh or refreshable), without
    /// touching the network.
    pub fn holds(&self, caller: &str, upstream: &str) -> bool {
        let Some(issuer) = lock(&self.known).get(upstream).map(|k| k.server.issuer.clone()) else {
            return self.vault.list(Some(caller)).iter().any(|h| h.upstream == upstream);
        };
        self.vault.get(&VaultKey { caller: caller.into(), upstream: upstream.into(), issuer }).is_some()
    }

    pub fn vault(&self) -> &Vault {
        &self.vault
    }

    /// Whether an upstream is reached with each caller's own token.
    pub fn protects(&self, upstream: &str) -> bool {
        self.protected.contains_key(upstream)
    }

    /// The caller's access token for an upstream, refreshed first when it is about to expire;
    /// `None` when the caller has to consent (again).
    pub async fn token(&self, caller: &str, upstream: &str) -> Option<String> {
        self.access(caller, upstream).await.map(|a| a.token)
    }

    /// [`Identity::token`] with the DPoP key the token is bound to, if it is.
    pub async fn access(&self, caller: &str, upstream: &str) -> Option<Access> {
        if let Some(key) = self.api_key_access(caller, upstream) {
            return key;
        }
        if !lock(&self.known).contains_key(upstream) {
            if !self.holds(caller, upstream) {
                return None;
            }
            if let Err(e) = self.discover(upstream).await {
                tracing::info!(%upstream, error = %e, "the upstream's authorization could not be discovered");
                return None;
            }
        }
        let known = lock(&self.known).get(upstream).cloned()?;
        let key = VaultKey { caller: caller.into(), upstream: upstream.into(), issuer: known.server.issuer.clone() };
        let held = self.vault.get(&key)?;
        if held.fresh(REFRESH_MARGIN) {
            return Some(Access::of(&held));
        }
        let flight = (caller.to_string(), upstream.to_string());
        let _refreshing = self.refreshing.enter(&flight, REFRESH_DEADLINE).await?;
        // Another call may have refreshed it meanwhile.
        let held = self.vault.get(&key)?;
        if held.fresh(REFRESH_MARGIN) {
            return Some(Access::of(&held));
        }
        let refresh = held.refresh_token.clone()?;
        let p = self.protected.get(upstream)?;
        // Refresh tokens belong to the client they were issued to.
        let auth = match held.client.clone() {
            Some(c) => c,
            None => self.client_for(p, &known.server).await.ok()?,
        };
        let body = flow::refresh_body(&refresh, &known.resource, held.scope.as_deref());
        // A bound refresh token is refreshed with a proof of the same key (RFC 9449 §5).
        let bound = Access::of(&held).dpop;
        let refreshed = tokio::time::timeout(REFRESH_DEADLINE, self.http.token_with(&known.server, &auth, body, bound.as_ref())).await;
        let Ok(refreshed) = refreshed else {
            tracing::info!(%upstream, "refreshing a caller's token took too long; this call goes without");
            return None;
        };
        match refreshed {
            Ok(mut fresh) => {
                // A server that does not rotate refresh tokens keeps the old one valid.
                if fresh.refresh_token.is_none() {
                    fresh.refresh_token = Some(refresh);
                }
                fresh.client = Some(auth);
                if let Err(e) = self.vault.put(&key, &fresh) {
                    tracing::warn!(%upstream, error = %e, "a refreshed token could not be kept");
                }
                Some(Access::of(&fresh))
            }
            // The grant is gone (expired, revoked, used): consent is needed again.
            Err(IdentityError::TokenRefused { error: Some(e), .. }) if e == "invalid_grant" => {
                tracing::info!(%upstream, "a caller's refresh token was refused; consent is needed again");
                let _ = self.vault.remove(&key);
                None
            }
            // Anything else may pass: the tokens stay, this call goes without.
            Err(e) => {
                tracing::info!(%upstream, error = %e, "refreshing a caller's token failed for now");
                None
            }
        }
    }

    /// Learns (or re-learns) where an upstream's authorization lives, from its challenge.
    pub async fn learn(&self, upstream: &str, challenge: Option<&Challenge>) -> Result<(), IdentityError> {
        let Some(p) = self.protected.get(upstream) else { return Ok(()) };
        let (server, prm) = self.http.authorization_server(&p.resource, challenge).await?;
        let mut scope = match &p.scopes {
            Some(s) if !s.is_empty() => Some(s.join(" ")),
            _ => discovery::scopes_to_request(challenge, prm.as_ref()),
        };
        // Refresh tokens where the server offers them (MCP authorization, "offline_access").
        if server.scopes_supported.as_ref().is_some_and(|s| s.iter().any(|x| x == "offline_access"))
            && !scope.as_deref().unwrap_or("").split_ascii_whitespace().any(|s| s == "offline_access")
        {
            scope = Some(scope.map_or_else(|| "offline_access".to_string(), |s| format!("{s} offline_access")));
        }
        let dpop = challenge.is_some_and(|c| c.dpop)
            || prm.as_ref().is_some_and(|m| {
                m.dpop_bound_access_tokens_required == Some(true) || super::dpop::offered(m.dpop_signing_alg_values_supported.as_deref())
            });
        let resource = prm.map_or_else(|| p.resource.clone(), |m| m.resource);
        lock(&self.known).insert(upstream.into(), Known { server, scope, resource, dpop });
        Ok(())
    }

    /// How the gateway is known to an authorization server, in the spec's order.
    async fn client_for(&self, p: &Protected, server: &ServerMetadata) -> Result<ClientAuth, IdentityError> {
        if server.client_id_metadata_document_supported == Some(true) && self.settings.client_metadata_usable {
            return Ok(ClientAuth::None { client_id: self.settings.client_metadata_url.clone() });
        }
        if p.client_issuer.as_deref() == Some(server.issuer.as_str())
            && let Some(auth) = p.configured_client(server)
        {
            return Ok(auth);
        }
        if p.client_id.is_some() {
            tracing::warn!(upstream = %p.upstream, issuer = %server.issuer, "the upstream names another authorization server than its configured client's; registering anew");
        }
        if let Some(auth) = lock(&self.registered).get(&server.issuer).cloned() {
            return Ok(auth);
        }
        let auth = self.http.register(server, &self.redirect_uri_for(&server.issuer, false)).await?;
        lock(&self.registered).insert(server.issuer.clone(), auth.clone());
        Ok(auth)
    }
}

impl Protected {
    /// How the configured client (if any) authenticates at `server` (see [`client_at`]).
    pub(super) fn configured_client(&self, server: &ServerMetadata) -> Option<ClientAuth> {
        client_at(server, self.client_id.as_deref(), self.client_secret.as_deref(), self.secret_in_body)
    }
}

/// How a configured client authenticates at `server`: as it was registered when that is said
/// (`post`: `client_secret_post`), else HTTP Basic with a secret, unless the server lists only
/// `client_secret_post`; without a secret, a public client. `None` without a client.
pub(super) fn client_at(server: &ServerMetadata, id: Option<&str>, secret: Option<&str>, post: bool) -> Option<ClientAuth> {
    let id = id?.to_string();
    let methods = server.token_endpoint_auth_methods_supported.clone().unwrap_or_default();
    Some(match secret {
        None => ClientAuth::None { client_id: id },
        Some(s) if post => ClientAuth::Post { client_id: id, secret: s.into() },
        Some(s) if !methods.iter().any(|m| m == "client_secret_basic") && methods.iter().any(|m| m == "client_secret_post") => {
            ClientAuth::Post { client_id: id, secret: s.into() }
        }
        Some(s) => ClientAuth::Basic { client_id: id, secret: s.into() },
    })
}

/// Why a redirect back did not complete.
#[derive(Debug, thiserror::Error)]
pub enum CompleteError {
    #[error(transparent)]
    Flow(#[from] flow::FlowError),
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error("the upstream's authorization changed while you signed in: start again from your client")]
    Forgotten,
    #[error("the token could not be kept: {0}")]
    Vault(String),
    #[error(
        "the sign-in came back to the address of another authorization server than it started at (a mix-up): start again from your client"
    )]
    MixUp,
}

mod explain;
mod grant;
mod keys;
#[cfg(test)]
mod tests;
