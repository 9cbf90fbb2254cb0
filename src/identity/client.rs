//! The gateway's requests to authorization infrastructure: fetching protected-resource and
//! authorization-server metadata in the spec's order (`discovery`), and token requests with the
//! client authentication the server supports. Every URL passes the SSRF guard (`guard`) first,
//! and connections go only to the addresses it allows (`connect`);
//! redirects are followed by hand, at most [`MAX_REDIRECTS`], each hop guarded again; bodies are
//! bounded and every request has a deadline. Error bodies of token endpoints go to the debug log
//! only, cut short, since they may echo what was sent.

use super::challenge::Challenge;
use super::connect::{GuardedClient, guarded_client};
use super::discovery::{self, ResourceMetadata, ServerMetadata};
use super::dpop::DpopKey;
use super::exchange::{self, Retries, Verdict};
use super::reach::{self, Rules};
pub use super::vault::ClientAuth;
use super::vault::{TokenSet, now};
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use serde::de::DeserializeOwned;
use std::time::Duration;

const MAX_REDIRECTS: usize = 3;
const MAX_BODY: usize = 256 * 1024;
const DEADLINE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error(transparent)]
    Refused(#[from] reach::Refused),
    #[error(transparent)]
    Discovery(#[from] discovery::DiscoveryError),
    #[error("{url}: {reason}")]
    Fetch { url: String, reason: String },
    #[error("no authorization metadata was found for {0}")]
    NotFound(String),
    #[error(
        "the authorization server {0} offers no way to register the gateway (no client metadata documents, no registration endpoint, no configured client_id)"
    )]
    NoRegistration(String),
    /// `description` is the server's `error_description`, for the log (never shown to a caller),
    /// with the request's own values taken out of it.
    #[error("the token endpoint refused the request (HTTP {status}{})", .error.as_deref().map(|e| format!(", {e}")).unwrap_or_default())]
    TokenRefused { status: u16, error: Option<String>, description: Option<String> },
    #[error("this consent link was used already: start again from your client")]
    Spent,
    /// An assertion the gateway holds names other audiences than the server it would go to.
    #[error("{0}")]
    Audience(String),
}

impl IdentityError {
    /// Whether the token endpoint refused the request for good (RFC 6749 §5.2: a 400 or 401 that
    /// names an `error`), rather than failing for now (a 5xx, a 429, a proxy's page): only a
    /// refusal for good makes an assertion not worth presenting again.
    pub fn is_definitive_refusal(&self) -> bool {
        matches!(self, IdentityError::TokenRefused { status: 400 | 401, error: Some(_), .. })
    }
}

/// A token endpoint's answer (RFC 6749 §5.1), the members the gateway uses.
#[derive(serde::Deserialize)]
pub(crate) struct TokenResponse {
    pub access_token: String,
    #[serde(default)]
    pub token_type: Option<String>,
    #[serde(default)]
    pub expires_in: Option<u64>,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    /// RFC 8693 §2.2.1: what a token exchange issued.
    #[serde(default)]
    pub issued_token_type: Option<String>,
}

/// The HTTP side of per-user identity.
#[derive(Clone)]
pub struct OAuthHttp {
    client: GuardedClient,
    rules: Rules,
    /// The latest DPoP nonce each token endpoint sent (RFC 9449 §8), for the next proof there:
    /// a refresh does not pay a refused request first. At most [`NONCES_KEPT`] endpoints.
    nonces: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
}

/// Token endpoints whose DPoP nonce is remembered (a few per gateway; the map starts over past it).
const NONCES_KEPT: usize = 64;

impl OAuthHttp {
    /// With its own guarded client (`connect`): identity traffic never shares a connection with
    /// upstream traffic, and goes only to addresses the rules allow.
    pub fn new(rules: Rules) -> Self {
        OAuthHttp { client: guarded_client(rules), rules, nonces: Default::default() }
    }

    /// The protected-resource metadata of `resource` (the upstream's canonical URI): the
    /// challenge's `resource_metadata` if it named one, else the well-known URLs in order; the
    /// document must be about that resource.
    pub async fn resource_metadata(&self, resource: &str, challenge: Option<&Challenge>) -> Result<ResourceMetadata, IdentityError> {
        let urls = match challenge.and_then(|c| c.resource_metadata.clone()) {
            Some(url) => vec![url],
            None => discovery::resource_metadata_urls(resource)?,
        };
        let mut last = IdentityError::NotFound(resource.into());
        for url in urls {
            match self.get_json::<ResourceMetadata>(&url).await {
                Ok(Some(doc)) => {
                    doc.check(resource)?;
                    return Ok(doc);
                }
                // Not there, or not a metadata document (an HTML catch-all, an error): the next URL.
                Ok(None) => {}
                Err(e @ IdentityError::Fetch { .. }) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// The metadata of authorization server `issuer`, from the first URL of the spec's order that
    /// has it; the document must name the same issuer and offer PKCE S256.
    pub async fn server_metadata(&self, issuer: &str) -> Result<ServerMetadata, IdentityError> {
        let mut last = IdentityError::NotFound(issuer.into());
        for url in discovery::server_metadata_urls(issuer)? {
            let doc = match self.get_json::<ServerMetadata>(&url).await {
                Ok(Some(doc)) => Some(doc),
                Ok(None) => None,
                Err(e @ IdentityError::Fetch { .. }) => {
                    last = e;
                    None
                }
                Err(e) => return Err(e),
            };
            if let Some(doc) = doc {
                doc.check(issuer)?;
                for endpoint in
                    [Some(&doc.authorization_endpoint), Some(&doc.token_endpoint), doc.registration_endpoint.as_ref()].into_iter().flatten()
                {
                    reach::check_url(endpoint, self.rules)?;
                }
                return Ok(doc);
            }
        }
        Err(last)
    }

    /// Where `resource`'s authorization lives: the server its protected-resource metadata names
    /// (with that metadata), or, when it publishes none that can be read (not found, or refused:
    /// a server on the 2025-03-26 rules may put every path behind its own authorization) and the
    /// challenge named none, the authorization server at its origin (2025-03-26 rules). Should
    /// that fail too after a refusal, the refusal is what is reported.
    pub async fn authorization_server(
        &self,
        resource: &str,
        challenge: Option<&Challenge>,
    ) -> Result<(ServerMetadata, Option<ResourceMetadata>), IdentityError> {
        let named = challenge.is_some_and(|c| c.resource_metadata.is_some());
        match self.resource_metadata(resource, challenge).await {
            Ok(prm) => {
                let issuer = prm.authorization_servers.first().cloned().ok_or(discovery::DiscoveryError::NoAuthorizationServer)?;
                Ok((self.server_metadata(&issuer).await?, Some(prm)))
            }
            Err(e @ (IdentityError::NotFound(_) | IdentityError::Fetch { .. })) if !named => {
                tracing::info!(%resource, "no protected-resource metadata; using the origin's authorization server (2025-03-26 rules)");
                match self.legacy_server_metadata(resource).await {
                    Ok(server) => Ok((server, None)),
                    Err(_) if matches!(e, IdentityError::Fetch { .. }) => Err(e),
                    Err(legacy) => Err(legacy),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// The authorization server of a 2025-03-26 server that has no protected-resource metadata
    /// (`discovery::legacy_base`): its metadata at the origin's RFC 8414 well-known URL, with the
    /// origin as issuer and the same checks as any metadata; the default endpoints where that URL
    /// answers 404.
    pub async fn legacy_server_metadata(&self, resource: &str) -> Result<ServerMetadata, IdentityError> {
        let base = discovery::legacy_base(resource).ok_or(discovery::DiscoveryError::Url(resource.into(), "no origin"))?;
        let url = format!("{base}/.well-known/oauth-authorization-server");
        let doc = match self.get_json::<ServerMetadata>(&url).await? {
            Some(doc) => {
                doc.check(&base)?;
                doc
            }
            None => discovery::legacy_defaults(&base),
        };
        for endpoint in
            [Some(&doc.authorization_endpoint), Some(&doc.token_endpoint), doc.registration_endpoint.as_ref()].into_iter().flatten()
        {
            reach::check_url(endpoint, self.rules)?;
        }
        Ok(doc)
    }

    /// A token request (`body` is the grant's form) to the server's token endpoint.
    pub async fn token(&self, server: &ServerMetadata, auth: &ClientAuth, body: String) -> Result<TokenSet, IdentityError> {
        self.token_with(server, auth, body, None).await
    }

    /// A token request proving possession of `key` (DPoP, RFC 9449 §5) when one is given: a token
    /// the server binds to it (`token_type` `DPoP`) is kept with it; an unbound one is a bearer
    /// token as any other.
    pub async fn token_with(
        &self,
        server: &ServerMetadata,
        auth: &ClientAuth,
        body: String,
        key: Option<&DpopKey>,
    ) -> Result<TokenSet, IdentityError> {
        let url = server.token_endpoint.as_str();
        let t = self.token_at(url, auth, body, key).await?;
        let bound = key.is_some() && t.token_type.as_deref().is_some_and(|k| k.eq_ignore_ascii_case("dpop"));
        if !bound && t.token_type.as_deref().is_some_and(|k| !k.eq_ignore_ascii_case("bearer")) {
            return Err(fetch_error(url, "a token of a type the gateway cannot present was issued"));
        }
        let issued_at = now();
        Ok(TokenSet {
            access_token: t.access_token,
            refresh_token: t.refresh_token,
            expires_at: t.expires_in.map(|s| issued_at.saturating_add(s.min(400 * 24 * 3600))),
            scope: t.scope,
            issued_at,
            client: None,
            dpop: key.filter(|_| bound).map(DpopKey::export),
        })
    }

    /// A token endpoint's answer at `url`, whatever the token's type (a token exchange may issue
    /// an ID-JAG). With a DPoP `key`, the request carries a proof, and a `use_dpop_nonce` refusal
    /// is answered once with the server's nonce (RFC 9449 §8, by [`exchange`]).
    pub(crate) async fn token_at(
        &self,
        url: &str,
        auth: &ClientAuth,
        body: String,
        key: Option<&DpopKey>,
    ) -> Result<TokenResponse, IdentityError> {
        reach::check_url(url, self.rules)?;
        let (base, body) = authenticate(Request::builder(), body, auth);
        let (base, body) = (&base, &body);
        let kept: Option<String> = key.and_then(|_| mcpgate_protocol::sync::lock(&self.nonces).get(url).cloned());
        let attempt = |asked: Option<String>| {
            // The nonce the server just asked for, else the one it sent last time.
            let nonce = asked.or_else(|| kept.clone());
            async move {
                let mut req = Request::builder()
                    .method(Method::POST)
                    .uri(url)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .header("accept", "application/json");
                if let Some(auth) = base.headers_ref().and_then(|h| h.get("authorization")) {
                    req = req.header("authorization", auth.clone());
                }
                if let Some(key) = key {
                    let proof =
                        key.proof("POST", url, None, nonce.as_deref()).ok_or_else(|| fetch_error(url, "no randomness for a DPoP proof"))?;
                    req = req.header("dpop", proof);
                }
                let req = req.body(Full::new(Bytes::from(body.clone()))).map_err(|e| fetch_error(url, e))?;
                let answer = self.send(url, req).await?;
                if let Some(fresh) = answer.nonce.as_ref().filter(|_| key.is_some()) {
                    let mut kept = mcpgate_protocol::sync::lock(&self.nonces);
                    if kept.len() >= NONCES_KEPT && !kept.contains_key(url) {
                        kept.clear();
                    }
                    kept.insert(url.to_string(), fresh.clone());
                }
                let refused = (!answer.status.is_success()).then(|| refusal(answer.status, &answer.bytes, body));
                Ok::<_, IdentityError>((answer, refused))
            }
        };
        // A `use_dpop_nonce` refusal is answered once with the server's nonce (RFC 9449 §8).
        let verdict = |(answer, refused): &(Answer, Option<IdentityError>)| {
            let error = match refused {
                Some(IdentityError::TokenRefused { error, .. }) => error.as_deref(),
                _ => None,
            };
            Verdict::of_token_endpoint(error, key.is_some(), answer.nonce.clone())
        };
        let (answer, refused) = Retries::default().run(attempt, verdict, exchange::no_renewal).await?;
        if let Some(refused) = refused {
            return Err(refused);
        }
        let t: TokenResponse = serde_json::from_slice(&answer.bytes).map_err(|e| fetch_error(url, format!("no usable token: {e}")))?;
        if t.access_token.is_empty() || t.access_token.bytes().any(|b| !(0x21..0x7f).contains(&b)) {
            return Err(fetch_error(url, "an unusable access token was issued"));
        }
        Ok(t)
    }

    /// Dynamic Client Registration (RFC 7591) of the gateway as a web client with one redirect
    /// URI, asking for the strongest token-endpoint authentication the server lists.
    pub async fn register(&self, server: &ServerMetadata, redirect_uri: &str) -> Result<ClientAuth, IdentityError> {
        let endpoint = server.registration_endpoint.clone().ok_or_else(|| IdentityError::NoRegistration(server.issuer.clone()))?;
        reach::check_url(&endpoint, self.rules)?;
        let method = registration_method(server);
        let mut body = serde_json::json!({
            "client_name": "mcpgate",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": "web",
        });
        // Every scope the server offers: servers that keep a client to the scopes it registered
        // with (the MCP Python SDK's) would otherwise refuse each scope at /authorize, and the
        // registration serves every upstream behind this server, whatever scope each asks for.
        if let Some(scopes) = server.scopes_supported.as_ref().filter(|s| !s.is_empty()) {
            body["scope"] = serde_json::Value::String(scopes.join(" "));
        }
        let req = Request::post(&endpoint)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| fetch_error(&endpoint, e))?;
        let Answer { status, bytes, .. } = self.send(&endpoint, req).await?;
        if !status.is_success() {
            // RFC 7591 §3.2.2: the server's error and description.
            let (error, description) = server_words(&bytes);
            tracing::warn!(%status, endpoint = %endpoint, error = error.as_deref().unwrap_or("-"), description = description.as_deref().unwrap_or("-"), "client registration refused");
            let named = error.map(|e| format!(", {e}")).unwrap_or_default();
            return Err(fetch_error(&endpoint, format!("registration refused (HTTP {status}{named})")));
        }
        #[derive(serde::Deserialize)]
        struct Registered {
            client_id: String,
            #[serde(default)]
            client_secret: Option<String>,
            #[serde(default)]
            token_endpoint_auth_method: Option<String>,
        }
        let r: Registered = serde_json::from_slice(&bytes).map_err(|e| fetch_error(&endpoint, format!("no usable registration: {e}")))?;
        Ok(match (r.client_secret, r.token_endpoint_auth_method.as_deref().unwrap_or(method)) {
            (Some(secret), "client_secret_post") => ClientAuth::Post { client_id: r.client_id, secret },
            (Some(secret), _) => ClientAuth::Basic { client_id: r.client_id, secret },
            (None, _) => ClientAuth::None { client_id: r.client_id },
        })
    }

    /// The `Bearer` challenge `resource` answers an unauthenticated MCP request with (where
    /// discovery starts, MCP authorization "Protected Resource Metadata Discovery"); `None` when
    /// it answers without one.
    pub async fn challenge(&self, resource: &str) -> Result<Option<Challenge>, IdentityError> {
        reach::check_url(resource, self.rules)?;
        // A request servers only answer to authenticated clients (some let `initialize` through).
        let body = r#"{"jsonrpc":"2.0","id":"mcpgate-discovery","method":"tools/list","params":{}}"#;
        let req = Request::post(resource)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .map_err(|e| fetch_error(resource, e))?;
        let resp = tokio::time::timeout(DEADLINE, self.client.request(req))
            .await
            .map_err(|_| fetch_error(resource, "no answer within 10 s"))?
            .map_err(|e| fetch_error(resource, format!("unreachable: {e}")))?;
        let values: Vec<&str> = resp.headers().get_all(http::header::WWW_AUTHENTICATE).iter().filter_map(|v| v.to_str().ok()).collect();
        Ok(super::challenge::bearer(values))
    }

    /// A JSON document, following redirects by hand; `None` for a 404 (try the next URL).
    async fn get_json<T: DeserializeOwned>(&self, url: &str) -> Result<Option<T>, IdentityError> {
        let mut url = url.to_string();
        for _ in 0..=MAX_REDIRECTS {
            reach::check_url(&url, self.rules)?;
            let req =
                Request::get(&url).header("accept", "application/json").body(Full::new(Bytes::new())).map_err(|e| fetch_error(&url, e))?;
            let Answer { status, bytes, location, .. } = self.send(&url, req).await?;
            if status.is_redirection() {
                url = location.ok_or_else(|| fetch_error(&url, "a redirect without Location"))?;
                continue;
            }
            if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
                return Ok(None);
            }
            if !status.is_success() {
                return Err(fetch_error(&url, format!("HTTP {status}")));
            }
            return serde_json::from_slice(&bytes).map(Some).map_err(|e| fetch_error(&url, format!("not the expected JSON: {e}")));
        }
        Err(fetch_error(&url, "too many redirects"))
    }

    async fn send(&self, url: &str, req: Request<Full<Bytes>>) -> Result<Answer, IdentityError> {
        let resp = tokio::time::timeout(DEADLINE, self.client.request(req))
            .await
            .map_err(|_| fetch_error(url, "no answer within 10 s"))?
            .map_err(|e| fetch_error(url, format!("unreachable: {e}")))?;
        let status = resp.status();
        let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let location = header("location").map(|l| absolute(url, &l));
        let nonce = header("dpop-nonce");
        let bytes = tokio::time::timeout(DEADLINE, Limited::new(resp.into_body(), MAX_BODY).collect())
            .await
            .map_err(|_| fetch_error(url, "the body did not arrive within 10 s"))?
            .map_err(|e| fetch_error(url, format!("the body could not be read: {e}")))?
            .to_bytes();
        Ok(Answer { status, bytes, location, nonce })
    }
}

/// What a server answered: status, body, where it redirects, and its DPoP nonce.
struct Answer {
    status: StatusCode,
    bytes: Bytes,
    location: Option<String>,
    nonce: Option<String>,
}

/// The token-endpoint authentication a dynamic registration at `server` asks for: the strongest
/// the server lists, else a public client.
pub fn registration_method(server: &ServerMetadata) -> &'static str {
    let methods = server.token_endpoint_auth_methods_supported.as_deref().unwrap_or_default();
    ["client_secret_basic", "client_secret_post"].into_iter().find(|m| methods.iter().any(|x| x == m)).unwrap_or("none")
}

/// A token request's client authentication (RFC 6749 §2.3, RFC 7523 §2.2): in the body or as an
/// HTTP Basic header.
pub fn authenticate(req: http::request::Builder, body: String, auth: &ClientAuth) -> (http::request::Builder, String) {
    let mut body = body;
    let mut req = req;
    match auth {
        ClientAuth::None { client_id } => append(&mut body, &[("client_id", client_id)]),
        ClientAuth::Post { client_id, secret } => append(&mut body, &[("client_id", client_id), ("client_secret", secret)]),
        ClientAuth::Assertion { client_id, assertion } => append(
            &mut body,
            &[
                ("client_id", client_id),
                ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                ("client_assertion", assertion),
            ],
        ),
        ClientAuth::Basic { client_id, secret } => {
            // `client_id` in the body too: RFC 6749 §4.1.3 allows it beside client
            // authentication (it is no second method: it proves nothing), and real servers
            // require it (the MCP Python SDK's `mcp.server.auth` answers 401 "Missing client_id"
            // without it). The secret stays in the header only.
            append(&mut body, &[("client_id", client_id)]);
            // RFC 6749 §2.3.1: each part form-encoded before base64.
            let pair = format!("{}:{}", form(client_id), form(secret));
            let basic = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pair);
            req = req.header("authorization", format!("Basic {basic}"));
        }
    }
    (req, body)
}

/// A token endpoint's refusal (RFC 6749 §5.2), logged with the server's own words, bounded, on one
/// line, and without the values the request sent (a server may quote a code or a refresh token).
pub(crate) fn refusal(status: StatusCode, bytes: &[u8], body_sent: &str) -> IdentityError {
    let (error, description) = server_words(bytes);
    let sent: Vec<String> = form_urlencoded::parse(body_sent.as_bytes()).map(|(_, v)| v.into_owned()).filter(|v| v.len() >= 4).collect();
    let description = description.map(|d| sent.iter().fold(d, |d, v| d.replace(v.as_str(), "[redacted]")));
    tracing::warn!(%status, error = error.as_deref().unwrap_or("-"), description = description.as_deref().unwrap_or("-"), "token request refused");
    IdentityError::TokenRefused { status: status.as_u16(), error, description }
}

/// An OAuth error answer's `error` and `error_description` (RFC 6749 §5.2, RFC 7591 §3.2.2),
/// each bounded to 300 characters and without control characters, so a log line stays one line.
fn server_words(bytes: &[u8]) -> (Option<String>, Option<String>) {
    let answer = serde_json::from_slice::<serde_json::Value>(bytes).ok();
    let said = |key: &str| {
        answer.as_ref().and_then(|v| v[key].as_str()).map(|t| t.chars().filter(|c| !c.is_control()).take(300).collect::<String>())
    };
    (said("error"), said("error_description"))
}

/// A `Location` resolved against the URL it answered (RFC 3986 §5.2, by the `url` crate); an
/// unresolvable one is kept as is, and the guard refuses it.
fn absolute(base: &str, location: &str) -> String {
    url::Url::parse(base).and_then(|b| b.join(location)).map(String::from).unwrap_or_else(|_| location.to_string())
}

fn append(body: &mut String, pairs: &[(&str, &str)]) {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        q.append_pair(k, v);
    }
    if !body.is_empty() {
        body.push('&');
    }
    body.push_str(&q.finish());
}

/// A client credential for HTTP Basic, form-encoded (RFC 6749 §2.3.1), with a space as `%20`
/// rather than `+`: both decode it (the MCP Python SDK's server decodes with `unquote`, which
/// leaves `+` a plus), and `+` itself is always `%2B`.
fn form(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>().replace('+', "%20")
}

fn fetch_error(url: &str, reason: impl std::fmt::Display) -> IdentityError {
    IdentityError::Fetch { url: url.into(), reason: reason.to_string() }
}

#[cfg(test)]
mod tests;
