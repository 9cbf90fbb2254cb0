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
use super::guard::{self, Rules};
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
    Refused(#[from] guard::Refused),
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
}

/// How the gateway authenticates to a token endpoint.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "method")]
pub enum ClientAuth {
    /// A public client: `client_id` in the body.
    None { client_id: String },
    /// `client_secret_basic`.
    Basic { client_id: String, secret: String },
    /// `client_secret_post`.
    Post { client_id: String, secret: String },
    /// RFC 7523 `private_key_jwt`: a signed assertion made for this request.
    Assertion { client_id: String, assertion: String },
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientAuth::None { client_id } => write!(f, "None({client_id})"),
            ClientAuth::Basic { client_id, .. } => write!(f, "Basic({client_id}, <secret>)"),
            ClientAuth::Post { client_id, .. } => write!(f, "Post({client_id}, <secret>)"),
            ClientAuth::Assertion { client_id, .. } => write!(f, "Assertion({client_id}, <assertion>)"),
        }
    }
}

impl ClientAuth {
    pub fn client_id(&self) -> &str {
        match self {
            ClientAuth::None { client_id }
            | ClientAuth::Basic { client_id, .. }
            | ClientAuth::Post { client_id, .. }
            | ClientAuth::Assertion { client_id, .. } => client_id,
        }
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
}

impl OAuthHttp {
    /// With its own guarded client (`connect`): identity traffic never shares a connection with
    /// upstream traffic, and goes only to addresses the rules allow.
    pub fn new(rules: Rules) -> Self {
        OAuthHttp { client: guarded_client(rules), rules }
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
                    guard::check_url(endpoint, self.rules)?;
                }
                return Ok(doc);
            }
        }
        Err(last)
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
            guard::check_url(endpoint, self.rules)?;
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
    /// is answered once with the server's nonce (RFC 9449 §8).
    pub(crate) async fn token_at(
        &self,
        url: &str,
        auth: &ClientAuth,
        body: String,
        key: Option<&DpopKey>,
    ) -> Result<TokenResponse, IdentityError> {
        guard::check_url(url, self.rules)?;
        let (base, body) = authenticate(Request::builder(), body, auth);
        let mut nonce: Option<String> = None;
        for attempt in 0..2 {
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
            if !answer.status.is_success() {
                let refused = refusal(answer.status, &answer.bytes, &body);
                if let IdentityError::TokenRefused { error: Some(e), .. } = &refused
                    && e == "use_dpop_nonce"
                    && key.is_some()
                    && attempt == 0
                    && answer.nonce.is_some()
                {
                    nonce = answer.nonce;
                    continue;
                }
                return Err(refused);
            }
            let t: TokenResponse = serde_json::from_slice(&answer.bytes).map_err(|e| fetch_error(url, format!("no usable token: {e}")))?;
            if t.access_token.is_empty() || t.access_token.bytes().any(|b| !(0x21..0x7f).contains(&b)) {
                return Err(fetch_error(url, "an unusable access token was issued"));
            }
            return Ok(t);
        }
        Err(fetch_error(url, "the server asked for a DPoP nonce twice"))
    }

    /// Dynamic Client Registration (RFC 7591) of the gateway as a web client with one redirect
    /// URI, asking for the strongest token-endpoint authentication the server lists.
    pub async fn register(&self, server: &ServerMetadata, redirect_uri: &str) -> Result<ClientAuth, IdentityError> {
        let endpoint = server.registration_endpoint.clone().ok_or_else(|| IdentityError::NoRegistration(server.issuer.clone()))?;
        guard::check_url(&endpoint, self.rules)?;
        let method = registration_method(server);
        let body = serde_json::json!({
            "client_name": "mcpgate",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": "web",
        });
        let req = Request::post(&endpoint)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| fetch_error(&endpoint, e))?;
        let Answer { status, bytes, .. } = self.send(&endpoint, req).await?;
        if !status.is_success() {
            return Err(fetch_error(&endpoint, format!("registration refused (HTTP {status})")));
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
        guard::check_url(resource, self.rules)?;
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
            guard::check_url(&url, self.rules)?;
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
    let answer = serde_json::from_slice::<serde_json::Value>(bytes).ok();
    let said = |key: &str| {
        answer.as_ref().and_then(|v| v[key].as_str()).map(|t| t.chars().filter(|c| !c.is_control()).take(300).collect::<String>())
    };
    let sent: Vec<String> = form_urlencoded::parse(body_sent.as_bytes()).map(|(_, v)| v.into_owned()).filter(|v| v.len() >= 4).collect();
    let description = said("error_description").map(|d| sent.iter().fold(d, |d, v| d.replace(v.as_str(), "[redacted]")));
    let error = said("error");
    tracing::warn!(%status, error = error.as_deref().unwrap_or("-"), description = description.as_deref().unwrap_or("-"), "token request refused");
    IdentityError::TokenRefused { status: status.as_u16(), error, description }
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
mod tests {
    use super::*;
    use crate::identity::testserver::server;
    use std::sync::{Arc, Mutex};

    /// The metadata of a server at `base` with its token endpoint at `/token`.
    fn metadata(base: &str) -> ServerMetadata {
        ServerMetadata { registration_endpoint: None, ..discovery::legacy_defaults(base) }
    }

    fn http() -> OAuthHttp {
        OAuthHttp::new(Rules { loopback: true })
    }

    fn first_lines(seen: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
        seen.lock().unwrap().iter().map(|r| r.lines().next().unwrap_or("").to_string()).collect()
    }

    #[tokio::test]
    async fn discovery_follows_the_spec_order_and_checks_what_it_finds() {
        let (base, seen) = server(|base| {
            let prm = format!(r#"{{"resource":"{base}/mcp","authorization_servers":["{base}/tenant"],"scopes_supported":["read"]}}"#);
            let asm = format!(
                r#"{{"issuer":"{base}/tenant","authorization_endpoint":"{base}/authorize","token_endpoint":"{base}/token","code_challenge_methods_supported":["S256"]}}"#
            );
            vec![
                ("/.well-known/oauth-protected-resource", 200, vec![], prm),
                ("/tenant/.well-known/openid-configuration", 200, vec![], asm),
                ("/moved", 302, vec![("location", "/.well-known/oauth-protected-resource".into())], String::new()),
            ]
        })
        .await;
        let http = http();
        let prm = http.resource_metadata(&format!("{base}/mcp"), None).await.expect("resource metadata");
        assert_eq!(prm.authorization_servers, [format!("{base}/tenant")]);
        let md = http.server_metadata(&prm.authorization_servers[0]).await.expect("server metadata");
        assert_eq!(md.token_endpoint, format!("{base}/token"));
        assert_eq!(
            first_lines(&seen),
            [
                "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1",
                "GET /.well-known/oauth-protected-resource HTTP/1.1",
                "GET /.well-known/oauth-authorization-server/tenant HTTP/1.1",
                "GET /.well-known/openid-configuration/tenant HTTP/1.1",
                "GET /tenant/.well-known/openid-configuration HTTP/1.1"
            ]
        );
        // The challenge's resource_metadata is used as given, redirects followed.
        let challenge = Challenge { resource_metadata: Some(format!("{base}/moved")), ..Default::default() };
        assert!(http.resource_metadata(&format!("{base}/mcp"), Some(&challenge)).await.is_ok());
        // A document about another resource is refused, not trusted.
        let err = http.resource_metadata(&format!("{base}/other"), Some(&challenge)).await.expect_err("mismatch");
        assert!(matches!(err, IdentityError::Discovery(discovery::DiscoveryError::ResourceMismatch { .. })), "{err}");
        // An issuer that does not match the one asked for is refused.
        let err = http.server_metadata(&format!("{base}/tenant/")).await.expect_err("no such issuer");
        assert!(matches!(err, IdentityError::Discovery(_) | IdentityError::NotFound(_)), "{err}");
    }

    #[tokio::test]
    async fn token_requests_authenticate_as_configured_and_parse_the_answer() {
        let answer = r#"{"access_token":"at-1","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-1","scope":"read"}"#.to_string();
        let (base, seen) = server(|_| vec![("/token", 200, vec![("content-type", "application/json".into())], answer)]).await;
        let md = metadata(&base);
        let http = http();
        let basic = ClientAuth::Basic { client_id: "gw id".into(), secret: "s&cret".into() };
        let t = http.token(&md, &basic, "grant_type=authorization_code&code=c".into()).await.expect("token");
        assert_eq!((t.access_token.as_str(), t.refresh_token.as_deref(), t.scope.as_deref()), ("at-1", Some("rt-1"), Some("read")));
        assert!(t.expires_at.is_some_and(|e| e > now() + 3500));
        let post = ClientAuth::Post { client_id: "gw".into(), secret: "s".into() };
        http.token(&md, &post, "grant_type=authorization_code&code=c".into()).await.expect("token");
        let public = ClientAuth::None { client_id: "https://gw.example.com/client".into() };
        http.token(&md, &public, "grant_type=authorization_code&code=c".into()).await.expect("token");
        let seen = seen.lock().unwrap().clone();
        let expected = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "gw%20id:s%26cret");
        assert!(seen[0].to_ascii_lowercase().contains(&format!("authorization: basic {}", expected.to_ascii_lowercase())), "{}", seen[0]);
        assert!(!seen[0].contains("client_secret"), "basic keeps the secret out of the body");
        assert!(seen[0].ends_with("grant_type=authorization_code&code=c&client_id=gw+id"), "and names the client there: {}", seen[0]);
        assert!(seen[1].ends_with("grant_type=authorization_code&code=c&client_id=gw&client_secret=s"), "{}", seen[1]);
        assert!(
            seen[2].ends_with("&client_id=https%3A%2F%2Fgw.example.com%2Fclient")
                && !seen[2].to_ascii_lowercase().contains("authorization:")
        );
        assert!(!format!("{basic:?}").contains("s&cret"));
    }

    #[tokio::test]
    async fn refusals_and_private_targets_do_not_leak_or_pass() {
        let (base, _) =
            server(|_| vec![("/token", 400, vec![], r#"{"error":"invalid_grant","error_description":"code c0de is bad"}"#.into())]).await;
        let md = metadata(&base);
        let auth = ClientAuth::None { client_id: "c".into() };
        let err = http().token(&md, &auth, "code=c0de".into()).await.expect_err("refused");
        assert_eq!(
            err,
            IdentityError::TokenRefused {
                status: 400,
                error: Some("invalid_grant".into()),
                description: Some("code [redacted] is bad".into())
            }
        );
        assert!(!err.to_string().contains("c0de") && !err.to_string().contains("is bad"), "{err}");
        let strict = OAuthHttp::new(Rules::default());
        assert!(matches!(strict.token(&md, &auth, String::new()).await, Err(IdentityError::Refused(_))));
        assert!(matches!(strict.server_metadata("https://10.0.0.1").await, Err(IdentityError::Refused(_))));
    }

    #[test]
    fn locations_are_made_absolute() {
        assert_eq!(absolute("https://a.example/x/y", "/z"), "https://a.example/z");
        assert_eq!(absolute("https://a.example/x/y", "https://b.example/"), "https://b.example/");
        assert_eq!(absolute("https://a.example", "z"), "https://a.example/z");
        assert_eq!(absolute("https://a.example/x/y", "z"), "https://a.example/x/z");
        assert_eq!(absolute("https://a.example/x", "//b.example/p"), "https://b.example/p");
        assert_eq!(absolute("https://a.example/x", "/p?u=https://c.example"), "https://a.example/p?u=https://c.example");
    }
}
