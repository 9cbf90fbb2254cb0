//! Consent links and what a browser does with one (docs/security.md, "A consent is given by the
//! caller it binds"). A consent link is a sealed grant naming the caller, the upstream and a
//! random id; it starts at most one authorization (the id is spent, across replicas with
//! `[cluster]`). Before it may, the person in the browser proves to be that caller — with the
//! caller's API key on the page, or, for JWT callers, by signing in at the callers' own issuer,
//! whose token is checked like any caller's; that part is the edge's (`edge::pages::connect`). This
//! module starts both kinds of authorization (an upstream's, and the sign-in) with a redirect URI
//! of their authorization server's own, and completes them: the response must come back to the
//! redirect URI its flow was started with (OAuth mix-up, RFC 9700 §4.4).

use super::super::client::IdentityError;
use super::super::dpop::{self, DpopKey};
use super::super::flow::{self, Start};
use super::super::vault::{TokenSet, VaultKey};
use super::{CompleteError, Completed, GRANT_TTL, Identity, Protected};
use mcpgate_protocol::sync::lock;
use serde::{Deserialize, Serialize};

const GRANT_PURPOSE: &str = "mcpgate/identity/grant/v2";

/// A consent link's payload.
#[derive(Serialize, Deserialize)]
pub(super) struct Grant {
    pub(super) c: String,
    pub(super) u: String,
    /// A random id, spent by the one authorization the link may start.
    pub(super) i: String,
}

/// The id, in redirect URIs, of an authorization server: a digest of its issuer.
pub fn server_id(issuer: &str) -> String {
    use base64::Engine;
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, issuer.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest.as_ref()[..12])
}

impl Identity {
    /// A consent link for a caller and an upstream (sealed: it names them, expires, and starts
    /// one authorization).
    pub fn consent_link(&self, caller: &str, upstream: &str) -> Option<String> {
        let grant = self
            .sealer
            .seal(GRANT_PURPOSE, &Grant { c: caller.into(), u: upstream.into(), i: mcpgate_protocol::toolbox::random_token()? })
            .ok()?;
        let q: String = form_urlencoded::Serializer::new(String::new()).append_pair("grant", &grant).finish();
        Some(format!("{}?{q}", self.settings.consent_url))
    }

    /// Who and what a consent link is for, if it is genuine and current (spent or not).
    pub fn grant(&self, token: &str) -> Option<(String, String)> {
        self.open_grant(token).map(|g| (g.c, g.u))
    }

    pub(super) fn open_grant(&self, token: &str) -> Option<Grant> {
        let g: Grant = self.sealer.open(GRANT_PURPOSE, token, GRANT_TTL)?;
        self.protected.contains_key(&g.u).then_some(g)
    }

    /// The redirect URI of flows at the authorization server `issuer`: one of its own, unless
    /// the client is the one configured for that server (registered with the plain one).
    pub fn redirect_uri_for(&self, issuer: &str, configured: bool) -> String {
        if configured { self.settings.redirect_uri.clone() } else { format!("{}/{}", self.settings.redirect_uri, server_id(issuer)) }
    }

    /// Every redirect URI the gateway's client metadata document lists: the plain one and one per
    /// authorization server it knows now (a server fetches the document after discovery).
    pub fn redirect_uris(&self) -> Vec<String> {
        let mut issuers: Vec<String> = lock(&self.known).values().map(|k| k.server.issuer.clone()).collect();
        issuers.extend(lock(&self.sign_in_server).as_ref().map(|s| s.issuer.clone()));
        issuers.sort();
        issuers.dedup();
        std::iter::once(self.settings.redirect_uri.clone()).chain(issuers.iter().map(|i| self.redirect_uri_for(i, false))).collect()
    }

    /// Starts the authorization a consent link grants, in the browser whose cookie nonce is
    /// `browser` (whose person the edge has checked is the link's caller): the URL to send that
    /// browser to. The link is spent: a second start is refused.
    pub async fn begin(&self, grant: &str, browser: &str) -> Result<String, IdentityError> {
        let g = self.open_grant(grant).ok_or(IdentityError::NotFound("this consent link".into()))?;
        let (caller, upstream) = (g.c, g.u);
        self.discover(&upstream).await?;
        let known = lock(&self.known).get(&upstream).cloned().ok_or(IdentityError::NotFound(upstream.clone()))?;
        let p = self.protected.get(&upstream).ok_or(IdentityError::NotFound(upstream.clone()))?;
        let auth = self.client_for(p, &known.server).await?;
        let configured =
            p.client_id.as_deref() == Some(auth.client_id()) && p.client_issuer.as_deref() == Some(known.server.issuer.as_str());
        self.spend(&g.i).await?;
        let redirect_uri = self.redirect_uri_for(&known.server.issuer, configured);
        let start = Start {
            caller: &caller,
            upstream: &upstream,
            client: &auth,
            redirect_uri: &redirect_uri,
            resource: &known.resource,
            scope: known.scope.as_deref(),
            browser,
            sign_in: None,
        };
        self.started(&known.server, &start).await
    }

    /// Starts a sign-in at the JWT callers' issuer for the person who opened consent link
    /// `grant`, in the browser `browser`: the URL to send it to. The link is not spent.
    pub async fn begin_sign_in(&self, grant: &str, browser: &str) -> Result<String, IdentityError> {
        let g = self.open_grant(grant).ok_or(IdentityError::NotFound("this consent link".into()))?;
        let at = self.settings.sign_in.clone().ok_or(IdentityError::NotFound("the callers' issuer".into()))?;
        let cached = lock(&self.sign_in_server).clone();
        let server = match cached {
            Some(s) => s,
            None => {
                let s = self.http.server_metadata(&at.issuer).await?;
                *lock(&self.sign_in_server) = Some(s.clone());
                s
            }
        };
        let me = Protected {
            upstream: String::new(),
            resource: at.resource.clone(),
            client_id: None,
            client_issuer: None,
            client_secret: None,
            secret_in_body: false,
            scopes: None,
            exchange: false,
            api_key: None,
            id_jag: None,
        };
        let auth = self.client_for(&me, &server).await?;
        let redirect_uri = self.redirect_uri_for(&server.issuer, false);
        let start = Start {
            caller: &g.c,
            upstream: "",
            client: &auth,
            redirect_uri: &redirect_uri,
            resource: &at.resource,
            scope: at.scope.as_deref(),
            browser,
            sign_in: Some(grant),
        };
        self.started(&server, &start).await
    }

    async fn started(&self, server: &super::ServerMetadata, start: &Start<'_>) -> Result<String, IdentityError> {
        let started = self.flows.start(server, start).ok_or(IdentityError::NotFound("randomness".into()))?;
        self.flows
            .publish(&started.state)
            .await
            .map_err(|e| IdentityError::Fetch { url: "the shared store".into(), reason: e.to_string() })?;
        Ok(started.authorize_url)
    }

    /// Spends a grant's id, once across replicas.
    pub(super) async fn spend(&self, id: &str) -> Result<(), IdentityError> {
        match self.flows.spend(id, GRANT_TTL).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(IdentityError::Spent),
            Err(e) => Err(IdentityError::Fetch { url: "the shared store".into(), reason: e.to_string() }),
        }
    }

    /// Completes an authorization the server redirected back to `redirect_uri` (the URI the
    /// response reached): the code is exchanged, and the tokens are kept for the caller who
    /// started it, or, for a sign-in, handed back to be checked.
    pub async fn complete(
        &self,
        state: &str,
        code: &str,
        iss: Option<&str>,
        browser: Option<&str>,
        redirect_uri: &str,
    ) -> Result<Completed, CompleteError> {
        let pending = self.flows.take(state, browser, iss).await?;
        // The response came back where this flow's server sends its own, or it is a mix-up.
        if pending.redirect_uri != redirect_uri {
            tracing::warn!(issuer = %pending.issuer, "an authorization response came back to another server's redirect URI (mix-up); refused");
            return Err(CompleteError::MixUp);
        }
        if let Some(grant) = pending.sign_in.clone() {
            let server = lock(&self.sign_in_server).clone().filter(|s| s.issuer == pending.issuer).ok_or(CompleteError::Forgotten)?;
            let tokens = self.http.token(&server, &pending.client, flow::code_exchange_body(&pending, code)).await?;
            return Ok(Completed::SignedIn { caller: pending.caller, grant, token: tokens.access_token });
        }
        let known = lock(&self.known).get(&pending.upstream).cloned().ok_or(CompleteError::Forgotten)?;
        if known.server.issuer != pending.issuer {
            return Err(CompleteError::Forgotten);
        }
        // The client that started the flow exchanges its code (and keeps the tokens' refreshes).
        let auth = pending.client.clone();
        // Where the upstream takes DPoP-bound tokens and its server binds them, this caller's
        // tokens for this upstream get a key of their own, kept with them in the vault. (A server
        // that binds, in front of a resource that knows only Bearer, gets no proof: the resource
        // would refuse the bound token.)
        let bind = known.dpop && dpop::offered(known.server.dpop_signing_alg_values_supported.as_deref());
        let key = bind.then(DpopKey::generate).flatten();
        let body = flow::code_exchange_body(&pending, code);
        let mut tokens: TokenSet = self.http.token_with(&known.server, &auth, body, key.as_ref()).await?;
        if tokens.scope.is_none() {
            tokens.scope = known.scope.clone();
        }
        tokens.client = Some(auth);
        let key = VaultKey { caller: pending.caller.clone(), upstream: pending.upstream.clone(), issuer: pending.issuer.clone() };
        self.vault.put(&key, &tokens).map_err(|e| CompleteError::Vault(e.to_string()))?;
        Ok(Completed::Connected { caller: pending.caller, upstream: pending.upstream })
    }
}
