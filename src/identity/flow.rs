//! The authorization-code flow's state, between the gateway's consent page and its redirect
//! endpoint (MCP basic/authorization; RFC 6749 §4.1, RFC 7636, RFC 8707, RFC 9207). A started
//! authorization is kept here under its `state`: a 256-bit random value, usable once, for at most
//! [`FLOW_TTL`], and bound to the browser that started it by a nonce the consent step set in a
//! `__Host-` cookie (compared in constant time), so a link or a redirect replayed elsewhere does
//! not complete. A started authorization is also put in the state database (or, with `[cluster]` and no
//! shared database, in Redis), sealed with the token keys, as a one-time entry only its browser's
//! nonce can take: it survives a restart, the browser may come back to any replica, and the state
//! is still spent once. This module also builds the two
//! requests of the flow (the authorization URL and the token request body) and checks the
//! authorization response's `iss`.

use super::discovery::ServerMetadata;
use super::pkce::Pkce;
use mcpgate_protocol::sync::lock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a started authorization may take to come back.
pub const FLOW_TTL: Duration = Duration::from_secs(600);
/// Started authorizations kept at once (the oldest go first), and per caller (so one caller
/// starting many cannot push out everyone else's).
const MAX_PENDING: usize = 10_000;
const MAX_PENDING_PER_CALLER: usize = 16;

/// One started authorization.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct Pending {
    pub caller: String,
    pub upstream: String,
    pub issuer: String,
    pub client_id: String,
    /// How the gateway authenticates at the token endpoint, as it was when the flow started (the
    /// code is exchanged by the same client, whichever replica the browser comes back to).
    pub client: super::client::ClientAuth,
    pub redirect_uri: String,
    pub resource: String,
    pub scope: Option<String>,
    pub verifier: String,
    /// The cookie nonce of the browser that started it.
    pub browser: String,
    /// Whether the server promised `iss` in its responses (RFC 9207).
    pub iss_required: bool,
    /// For a sign-in of the person on a consent page (not an upstream's authorization): the
    /// consent link's grant to go back to.
    #[serde(default)]
    pub sign_in: Option<String>,
    #[serde(skip, default = "Instant::now")]
    started: Instant,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("caller", &self.caller).field("upstream", &self.upstream).field("issuer", &self.issuer).finish()
    }
}

/// Why a redirect back from the authorization server is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    #[error("this sign-in link is unknown, used already, or expired: start again from your client")]
    UnknownState,
    #[error("this sign-in was started in another browser: finish it where it began")]
    OtherBrowser,
    #[error("the authorization response names issuer {found:?}, not {expected:?}")]
    WrongIssuer { expected: String, found: String },
    #[error("the authorization server promised to name itself (iss) and did not")]
    MissingIssuer,
    #[error("the authorization server refused: {0}")]
    Refused(String),
    #[error("the sign-in could not be kept or found: the shared store does not answer ({0})")]
    Unavailable(String),
}

/// The started authorizations of this replica (and, in a cluster, of every replica).
#[derive(Default)]
pub struct Flows {
    pending: Mutex<HashMap<String, Pending>>,
    /// Grant ids spent, and until when they are remembered (without `[cluster]`).
    spent: Mutex<HashMap<String, Instant>>,
    shared: Option<(Store, std::sync::Arc<mcpgate_model::token::Sealer>)>,
}

/// Where started authorizations and spent grants are kept beyond this process.
enum Store {
    /// The cluster's Redis.
    Redis(std::sync::Arc<mcpgate_net::cluster::Cluster>),
    /// The state database (shared by replicas when it is PostgreSQL).
    Db(std::sync::Arc<mcpgate_store::Db>),
}

impl Store {
    async fn claim(&self, key: String, ttl: Duration) -> Result<bool, FlowError> {
        match self {
            Store::Redis(c) => c.claim(&key, ttl).await.map_err(|e| FlowError::Unavailable(e.to_string())),
            Store::Db(db) => blocking(db, move |db| mcpgate_store::once::claim(db, &key, ttl)).await,
        }
    }

    async fn put(&self, key: String, check: String, value: String) -> Result<(), FlowError> {
        match self {
            Store::Redis(c) => c.once_put(&key, &check, &value, FLOW_TTL).await.map_err(|e| FlowError::Unavailable(e.to_string())),
            Store::Db(db) => blocking(db, move |db| mcpgate_store::once::put(db, &key, &check, &value, FLOW_TTL)).await,
        }
    }

    async fn take(&self, key: String, check: String) -> Result<Option<String>, FlowError> {
        match self {
            Store::Redis(c) => c.once_take(&key, &check).await.map_err(|e| FlowError::Unavailable(e.to_string())),
            Store::Db(db) => blocking(db, move |db| mcpgate_store::once::take(db, &key, &check)).await,
        }
    }
}

/// A state database call, off the async workers.
async fn blocking<T: Send + 'static>(
    db: &std::sync::Arc<mcpgate_store::Db>,
    f: impl FnOnce(&mcpgate_store::Db) -> Result<T, mcpgate_store::StoreError> + Send + 'static,
) -> Result<T, FlowError> {
    let db = db.clone();
    match tokio::task::spawn_blocking(move || f(&db)).await {
        Ok(done) => done.map_err(|e| FlowError::Unavailable(e.to_string())),
        Err(e) => Err(FlowError::Unavailable(e.to_string())),
    }
}

const SHARED_PURPOSE: &str = "mcpgate/identity/flow/v1";

/// What starting an authorization gives: the URL to send the browser to.
pub struct Started {
    pub state: String,
    pub authorize_url: String,
}

/// What the flow needs to start, besides the server's metadata.
pub struct Start<'a> {
    pub caller: &'a str,
    pub upstream: &'a str,
    pub client: &'a super::client::ClientAuth,
    pub redirect_uri: &'a str,
    /// The upstream's canonical URI (RFC 8707 `resource`).
    pub resource: &'a str,
    pub scope: Option<&'a str>,
    /// The cookie nonce of the browser starting it.
    pub browser: &'a str,
    /// For a sign-in on a consent page: that page's grant.
    pub sign_in: Option<&'a str>,
}

impl Flows {
    /// Started authorizations shared by the replicas of a cluster through Redis.
    pub fn shared(cluster: std::sync::Arc<mcpgate_net::cluster::Cluster>, sealer: std::sync::Arc<mcpgate_model::token::Sealer>) -> Flows {
        Flows { pending: Mutex::default(), spent: Mutex::default(), shared: Some((Store::Redis(cluster), sealer)) }
    }

    /// Started authorizations kept in the state database (they survive a restart, and, on a
    /// database the replicas share, reach every replica).
    pub fn in_db(db: std::sync::Arc<mcpgate_store::Db>, sealer: std::sync::Arc<mcpgate_model::token::Sealer>) -> Flows {
        Flows { pending: Mutex::default(), spent: Mutex::default(), shared: Some((Store::Db(db), sealer)) }
    }

    /// Spends the one-time id `id` for `ttl` (what a consent link's grant carries): `true` the
    /// first time, on any replica of a cluster.
    pub async fn spend(&self, id: &str, ttl: Duration) -> Result<bool, FlowError> {
        if let Some((store, _)) = &self.shared {
            return store.claim(format!("grant:{}", browser_check(id)), ttl).await;
        }
        let mut spent = lock(&self.spent);
        let now = Instant::now();
        spent.retain(|_, until| *until > now);
        if spent.len() >= MAX_PENDING {
            // A flood of spent links can make links reusable only by pushing out the oldest.
            if let Some(oldest) = spent.iter().min_by_key(|(_, until)| **until).map(|(k, _)| k.clone()) {
                spent.remove(&oldest);
            }
        }
        Ok(spent.insert(id.to_string(), now + ttl).is_none())
    }

    /// In a cluster, puts the authorization started as `state` where every replica can take it
    /// (nothing to do otherwise).
    pub async fn publish(&self, state: &str) -> Result<(), FlowError> {
        let Some((store, sealer)) = &self.shared else { return Ok(()) };
        let pending = lock(&self.pending).get(state).cloned().ok_or(FlowError::UnknownState)?;
        let sealed = sealer.seal(SHARED_PURPOSE, &pending).map_err(|e| FlowError::Unavailable(e.to_string()))?;
        store.put(format!("flow:{state}"), browser_check(&pending.browser), sealed).await
    }

    /// [`Self::finish`], from the shared store in a cluster (whichever replica started it).
    pub async fn take(&self, state: &str, browser: Option<&str>, iss: Option<&str>) -> Result<Pending, FlowError> {
        let Some((store, sealer)) = &self.shared else { return self.finish(state, browser, iss) };
        let browser = browser.ok_or(FlowError::OtherBrowser)?;
        let sealed = store.take(format!("flow:{state}"), browser_check(browser)).await?.ok_or(FlowError::UnknownState)?;
        lock(&self.pending).remove(state);
        let pending: Pending = sealer.open(SHARED_PURPOSE, &sealed, FLOW_TTL).ok_or(FlowError::UnknownState)?;
        check_iss(&pending, iss)?;
        Ok(pending)
    }

    /// Starts an authorization: a fresh `state` and PKCE pair, kept until the redirect comes back.
    /// `None` when the random generator fails.
    pub fn start(&self, server: &ServerMetadata, s: &Start<'_>) -> Option<Started> {
        let pkce = Pkce::new()?;
        let state = random_token()?;
        let authorize_url = authorize_url(server, s, &pkce.challenge, &state);
        let pending = Pending {
            caller: s.caller.into(),
            upstream: s.upstream.into(),
            issuer: server.issuer.clone(),
            client_id: s.client.client_id().into(),
            client: s.client.clone(),
            redirect_uri: s.redirect_uri.into(),
            resource: s.resource.into(),
            scope: s.scope.map(str::to_string),
            verifier: pkce.verifier,
            browser: s.browser.into(),
            iss_required: server.authorization_response_iss_parameter_supported == Some(true),
            sign_in: s.sign_in.map(str::to_string),
            started: Instant::now(),
        };
        let mut map = lock(&self.pending);
        map.retain(|_, p| p.started.elapsed() < FLOW_TTL);
        let mine = map.values().filter(|p| p.caller == s.caller).count();
        let evict = if mine >= MAX_PENDING_PER_CALLER {
            map.iter().filter(|(_, p)| p.caller == s.caller).min_by_key(|(_, p)| p.started).map(|(k, _)| k.clone())
        } else if map.len() >= MAX_PENDING {
            map.iter().min_by_key(|(_, p)| p.started).map(|(k, _)| k.clone())
        } else {
            None
        };
        if let Some(oldest) = evict {
            map.remove(&oldest);
        }
        map.insert(state.clone(), pending);
        Some(Started { state, authorize_url })
    }

    /// Takes the authorization a redirect names (once), checked against the browser it reached
    /// and the `iss` it carries. A redirect that reaches another browser leaves it waiting for
    /// the one that started it (someone who learnt the state cannot spend it for its owner).
    pub fn finish(&self, state: &str, browser: Option<&str>, iss: Option<&str>) -> Result<Pending, FlowError> {
        let pending = {
            let mut map = lock(&self.pending);
            let live = map.get(state).filter(|p| p.started.elapsed() < FLOW_TTL).ok_or(FlowError::UnknownState)?;
            if !browser.is_some_and(|b| constant_time_eq(b.as_bytes(), live.browser.as_bytes())) {
                return Err(FlowError::OtherBrowser);
            }
            map.remove(state).ok_or(FlowError::UnknownState)?
        };
        check_iss(&pending, iss)?;
        Ok(pending)
    }
}

/// What proves a browser to the shared store: a digest of its nonce (the nonce itself stays out).
fn browser_check(nonce: &str) -> String {
    mcpgate_protocol::toolbox::sha256_hex(nonce.as_bytes())
}

/// RFC 9207: an `iss` that is present must be the issuer, exactly; a server that promised it must
/// send it.
fn check_iss(pending: &Pending, iss: Option<&str>) -> Result<(), FlowError> {
    match iss {
        Some(found) if found != pending.issuer => Err(FlowError::WrongIssuer { expected: pending.issuer.clone(), found: found.into() }),
        None if pending.iss_required => Err(FlowError::MissingIssuer),
        _ => Ok(()),
    }
}

/// The authorization request (RFC 6749 §4.1.1 with PKCE and RFC 8707 `resource`).
fn authorize_url(server: &ServerMetadata, s: &Start<'_>, challenge: &str, state: &str) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("response_type", "code");
    q.append_pair("client_id", s.client.client_id());
    q.append_pair("redirect_uri", s.redirect_uri);
    q.append_pair("code_challenge", challenge);
    q.append_pair("code_challenge_method", "S256");
    q.append_pair("state", state);
    q.append_pair("resource", s.resource);
    if let Some(scope) = s.scope {
        q.append_pair("scope", scope);
    }
    let sep = if server.authorization_endpoint.contains('?') { '&' } else { '?' };
    format!("{}{sep}{}", server.authorization_endpoint, q.finish())
}

/// The token request that exchanges a code (RFC 6749 §4.1.3, PKCE verifier, RFC 8707 resource);
/// client authentication is added by the caller of this function.
pub fn code_exchange_body(pending: &Pending, code: &str) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("grant_type", "authorization_code");
    q.append_pair("code", code);
    q.append_pair("redirect_uri", &pending.redirect_uri);
    q.append_pair("code_verifier", &pending.verifier);
    q.append_pair("resource", &pending.resource);
    q.finish()
}

/// The token request that refreshes (RFC 6749 §6, with the RFC 8707 resource).
pub fn refresh_body(refresh_token: &str, resource: &str, scope: Option<&str>) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("grant_type", "refresh_token");
    q.append_pair("refresh_token", refresh_token);
    q.append_pair("resource", resource);
    if let Some(scope) = scope {
        q.append_pair("scope", scope);
    }
    q.finish()
}

pub use mcpgate_protocol::toolbox::random_token;

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::client::ClientAuth;

    fn server(iss: Option<bool>) -> ServerMetadata {
        ServerMetadata {
            issuer: "https://as.example.com".into(),
            authorization_endpoint: "https://as.example.com/authorize".into(),
            token_endpoint: "https://as.example.com/token".into(),
            registration_endpoint: None,
            code_challenge_methods_supported: Some(vec!["S256".into()]),
            scopes_supported: None,
            token_endpoint_auth_methods_supported: None,
            client_id_metadata_document_supported: None,
            authorization_response_iss_parameter_supported: iss,
            dpop_signing_alg_values_supported: None,
        }
    }

    static CLIENT: std::sync::LazyLock<ClientAuth> =
        std::sync::LazyLock::new(|| ClientAuth::None { client_id: "https://gw.example.com/oauth/client".into() });

    fn start<'a>(browser: &'a str) -> Start<'a> {
        Start {
            caller: "alice",
            upstream: "linear",
            client: &CLIENT,
            redirect_uri: "https://gw.example.com/oauth/callback",
            resource: "https://mcp.linear.app/mcp",
            scope: Some("read write"),
            browser,
            sign_in: None,
        }
    }

    fn query(url: &str) -> HashMap<String, String> {
        let q = url.split_once('?').map(|(_, q)| q).unwrap_or("");
        form_urlencoded::parse(q.as_bytes()).into_owned().collect()
    }

    #[test]
    fn the_authorization_request_carries_pkce_state_and_resource() {
        let flows = Flows::default();
        let started = flows.start(&server(None), &start("nonce-1")).expect("started");
        assert!(started.authorize_url.starts_with("https://as.example.com/authorize?"));
        let q = query(&started.authorize_url);
        assert_eq!(q["response_type"], "code");
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["resource"], "https://mcp.linear.app/mcp");
        assert_eq!(q["scope"], "read write");
        assert_eq!(q["state"], started.state);
        assert!(started.state.len() >= 43);
        let pending = flows.finish(&started.state, Some("nonce-1"), None).expect("finished");
        assert_eq!(Pkce::from_verifier(pending.verifier.clone()).challenge, q["code_challenge"], "the verifier matches the challenge sent");
        let body: HashMap<String, String> = form_urlencoded::parse(code_exchange_body(&pending, "c0de").as_bytes()).into_owned().collect();
        assert_eq!((body["grant_type"].as_str(), body["code"].as_str()), ("authorization_code", "c0de"));
        assert_eq!(body["code_verifier"], pending.verifier);
        assert_eq!(body["resource"], "https://mcp.linear.app/mcp");
    }

    #[test]
    fn a_state_is_used_once_in_the_browser_that_started_it() {
        let flows = Flows::default();
        let s = flows.start(&server(None), &start("nonce-1")).expect("started");
        assert_eq!(flows.finish(&s.state, Some("nonce-2"), None).err(), Some(FlowError::OtherBrowser));
        assert!(flows.finish(&s.state, Some("nonce-1"), None).is_ok(), "another browser cannot spend the owner's state");
        assert_eq!(flows.finish(&s.state, Some("nonce-1"), None).err(), Some(FlowError::UnknownState));
        assert_eq!(flows.finish("made-up", Some("nonce-1"), None).err(), Some(FlowError::UnknownState));
        let s = flows.start(&server(None), &start("nonce-1")).expect("started");
        assert_eq!(flows.finish(&s.state, None, None).err(), Some(FlowError::OtherBrowser), "no cookie, no completion");
    }

    #[test]
    fn one_caller_cannot_push_out_the_others_flows() {
        let flows = Flows::default();
        let bob = flows.start(&server(None), &Start { caller: "bob", ..start("nb") }).expect("started");
        let first = flows.start(&server(None), &start("na")).expect("started");
        for _ in 0..(MAX_PENDING_PER_CALLER * 2) {
            flows.start(&server(None), &start("na")).expect("started");
        }
        assert_eq!(flows.finish(&first.state, Some("na"), None).err(), Some(FlowError::UnknownState), "alice's oldest went");
        assert!(flows.finish(&bob.state, Some("nb"), None).is_ok(), "bob's flow is untouched");
        let alice = lock(&flows.pending).values().filter(|p| p.caller == "alice").count();
        assert_eq!(alice, MAX_PENDING_PER_CALLER);
    }

    #[test]
    fn the_issuer_is_checked_as_rfc_9207_says() {
        let flows = Flows::default();
        let s = flows.start(&server(Some(true)), &start("n")).expect("started");
        assert_eq!(flows.finish(&s.state, Some("n"), None).err(), Some(FlowError::MissingIssuer));
        let s = flows.start(&server(Some(true)), &start("n")).expect("started");
        assert!(matches!(flows.finish(&s.state, Some("n"), Some("https://as.example.com/")), Err(FlowError::WrongIssuer { .. })));
        let s = flows.start(&server(None), &start("n")).expect("started");
        assert!(matches!(flows.finish(&s.state, Some("n"), Some("https://evil.example.com")), Err(FlowError::WrongIssuer { .. })));
        let s = flows.start(&server(Some(true)), &start("n")).expect("started");
        assert!(flows.finish(&s.state, Some("n"), Some("https://as.example.com")).is_ok());
    }
}
