//! One token of the gateway's own for an upstream (`[upstream.oauth]`): OAuth 2.0 client
//! credentials (RFC 6749 §4.4; the MCP `oauth-client-credentials` extension), the gateway's
//! workload JWT presented with the JWT-bearer grant (RFC 7523, SEP-1933), or an identity
//! assertion turned into an ID-JAG and presented the same way (SEP-990; `identity::assertion`).
//! An assertion the server refused is not presented again (no retry, no other grant) until its
//! file holds a new one. The gateway asks the upstream's
//! authorization server for an access token (client secret or private key from the environment
//! or a file; `resource` per RFC 8707 so the token is for that upstream only), caches it until
//! shortly before it expires, fetches one at a time, and drops it when the upstream answers 401.
//! The token endpoint is the configured one, or the one the upstream's metadata names (discovered
//! as per-user identity discovers it, with its SSRF guard). The client authenticates with HTTP
//! Basic, in the body, or with an RFC 7523 `private_key_jwt` assertion (ES256) whose audience is
//! the authorization server's issuer. The client's own credentials are never involved. A workload
//! JWT or an ID-JAG is presented only to an authorization server its `aud` names (its issuer or
//! token endpoint; for a configured `token_url`, that URL or one it lies under): an upstream's
//! metadata naming another server does not get it.

use super::error::UpstreamError;
use crate::identity::assertion::{check_audience, jwt_bearer_body};
use crate::identity::client::{ClientAuth, OAuthHttp, authenticate};
use crate::identity::reach::Rules;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use mcpgate_config::{Assertion, ClientAuthMethod, OAuthConfig, OAuthGrant};
use mcpgate_net::http::HttpClient;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// Refresh this long before the server's expiry, so a token never expires in flight.
const EARLY: Duration = Duration::from_secs(30);

pub struct OAuthClient {
    cfg: OAuthConfig,
    client: HttpClient,
    cached: Mutex<Option<(String, Instant)>>,
    /// The discovered authorization server, when no token URL is configured.
    discovered: tokio::sync::OnceCell<crate::identity::discovery::ServerMetadata>,
    /// The digest of an assertion the authorization server refused, and why: it is not presented
    /// again (the JWT-bearer grant is not retried and falls back to no other grant); a new one
    /// (the file rotated) is.
    refused: std::sync::Mutex<Option<(Vec<u8>, String)>>,
}

/// How long a client assertion is valid.
const ASSERTION_LIFETIME: u64 = 300;

/// Why a token could not be had: the server refused for good (a 400/401 naming an RFC 6749 error:
/// the assertion is not presented again), or anything else (the network, a timeout, a 5xx or a
/// 429: tried again at the next call).
enum Failure {
    Refused(String),
    Other(String),
}

impl From<crate::identity::client::IdentityError> for Failure {
    fn from(e: crate::identity::client::IdentityError) -> Self {
        match e {
            refused if refused.is_definitive_refusal() => Failure::Refused(refused.to_string()),
            other => Failure::Other(other.to_string()),
        }
    }
}

impl OAuthClient {
    pub fn new(cfg: OAuthConfig, client: HttpClient) -> Self {
        OAuthClient {
            cfg,
            client,
            cached: Mutex::new(None),
            discovered: tokio::sync::OnceCell::new(),
            refused: std::sync::Mutex::new(None),
        }
    }

    /// A valid access token: the cached one, or a fresh one.
    pub async fn token(&self) -> Result<String, UpstreamError> {
        let mut cached = self.cached.lock().await;
        if let Some((token, until)) = cached.as_ref()
            && Instant::now() < *until
        {
            return Ok(token.clone());
        }
        let (token, lifetime) = self.fetch().await?;
        // An absurd `expires_in` must not overflow the clock: cap the lifetime at a day.
        let lifetime = cache_for(lifetime);
        *cached = Some((token.clone(), Instant::now() + lifetime));
        Ok(token)
    }

    /// Forgets the cached token (the upstream refused it).
    pub async fn invalidate(&self) {
        *self.cached.lock().await = None;
    }

    /// How the gateway authenticates to the token endpoint, for a request to `audience` (the
    /// authorization server's issuer, or the configured token URL).
    fn client_auth(&self, audience: &str) -> Result<ClientAuth, UpstreamError> {
        let (id, secret) = (self.cfg.client_id.clone(), self.cfg.client_secret.clone());
        Ok(match self.cfg.client_auth {
            ClientAuthMethod::Basic => ClientAuth::Basic { client_id: id, secret },
            ClientAuthMethod::Post => ClientAuth::Post { client_id: id, secret },
            ClientAuthMethod::PrivateKeyJwt => ClientAuth::Assertion { assertion: assertion(&id, audience, &secret)?, client_id: id },
            ClientAuthMethod::None => ClientAuth::None { client_id: id },
        })
    }

    /// The assertion the grant presents, read now (a file rotates); `None` for client credentials.
    async fn assertion(&self) -> Result<Option<String>, UpstreamError> {
        let source = match &self.cfg.grant {
            OAuthGrant::ClientCredentials => return Ok(None),
            OAuthGrant::JwtBearer { assertion } | OAuthGrant::IdJag { assertion, .. } => assertion,
        };
        Ok(Some(match source {
            Assertion::Value(v) => v.clone(),
            Assertion::File(path) => tokio::fs::read_to_string(path)
                .await
                .map_err(|e| UpstreamError::Credentials(format!("the assertion file {} cannot be read: {e}", path.display())))?
                .trim()
                .to_string(),
        }))
    }

    /// The request body of the grant for the authorization server `issuer` (when known) at
    /// `token_endpoint`, before client authentication. For an ID-JAG, the identity assertion is
    /// exchanged at the identity provider first, for that server. The workload JWT and the ID-JAG
    /// go only to a server their audience names (`assertion::check_audience`).
    async fn grant(&self, issuer: Option<&str>, token_endpoint: &str, assertion: Option<&str>) -> Result<String, Failure> {
        let scope = self.cfg.scope.as_deref();
        let resource = self.cfg.resource.as_deref();
        match (&self.cfg.grant, assertion) {
            (OAuthGrant::JwtBearer { .. }, Some(a)) => {
                check_audience("workload assertion", a, issuer, token_endpoint)?;
                Ok(jwt_bearer_body(a, scope, resource))
            }
            (OAuthGrant::IdJag { idp, .. }, Some(a)) => {
                let resource = resource.ok_or_else(|| Failure::Other("the upstream has no URL to name as the resource".into()))?;
                let http = OAuthHttp::new(Rules { loopback: loopback(&idp.token_url) });
                let auth = match &idp.client_secret {
                    Some(secret) => ClientAuth::Basic { client_id: idp.client_id.clone(), secret: secret.clone() },
                    None => ClientAuth::None { client_id: idp.client_id.clone() },
                };
                let audience = issuer.unwrap_or(token_endpoint);
                let jag = crate::identity::assertion::id_jag(&http, &idp.token_url, &auth, a, audience, resource, scope).await?;
                check_audience("ID-JAG from the identity provider", &jag, issuer, token_endpoint)?;
                Ok(jwt_bearer_body(&jag, scope, None))
            }
            _ => {
                let mut q = form_urlencoded::Serializer::new(String::new());
                q.append_pair("grant_type", "client_credentials");
                if let Some(scope) = scope {
                    q.append_pair("scope", scope);
                }
                if let Some(resource) = resource {
                    q.append_pair("resource", resource);
                }
                Ok(q.finish())
            }
        }
    }

    async fn fetch(&self) -> Result<(String, Duration), UpstreamError> {
        let assertion = self.assertion().await?;
        let digest = assertion.as_ref().map(|a| aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, a.as_bytes()).as_ref().to_vec());
        if let Some(d) = &digest
            && let Some((refused, why)) = mcpgate_protocol::sync::lock(&self.refused).as_ref()
            && refused == d
        {
            return Err(UpstreamError::Credentials(format!("{why}; the same assertion is not presented again")));
        }
        let got = match self.cfg.token_url.clone() {
            Some(url) => self.fetch_configured(url, assertion.as_deref()).await,
            None => self.fetch_discovered(assertion.as_deref()).await,
        };
        match got {
            Ok(t) => Ok(t),
            Err(Failure::Refused(why)) => {
                if let Some(d) = digest {
                    *mcpgate_protocol::sync::lock(&self.refused) = Some((d, why.clone()));
                }
                Err(UpstreamError::Credentials(why))
            }
            Err(Failure::Other(why)) => Err(UpstreamError::Credentials(why)),
        }
    }

    /// A token from the configured token endpoint (trusted as configured: it may be internal).
    async fn fetch_configured(&self, url: http::Uri, assertion: Option<&str>) -> Result<(String, Duration), Failure> {
        use Failure::Other as Fail;
        let audience = url.to_string();
        let req = http::Request::post(url.clone())
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json");
        let auth = self.client_auth(&audience).map_err(|e| Fail(e.to_string()))?;
        let (req, body) = authenticate(req, self.grant(None, &audience, assertion).await?, &auth);
        let req = req.body(Full::new(Bytes::from(body.clone()))).map_err(|e| Fail(e.to_string()))?;
        let url = &url;
        let resp = tokio::time::timeout(Duration::from_secs(10), self.client.request(req))
            .await
            .map_err(|_| Fail(format!("the token endpoint {url} did not answer within 10 s")))?
            .map_err(|e| Fail(format!("the token endpoint {url} is unreachable: {e}")))?;
        let status = resp.status();
        let bytes = tokio::time::timeout(Duration::from_secs(10), Limited::new(resp.into_body(), 64 * 1024).collect())
            .await
            .map_err(|_| Fail("reading the token response timed out".into()))?
            .map_err(|e| Fail(format!("reading the token response failed: {e}")))?
            .to_bytes();
        if !status.is_success() {
            // Logged as every token refusal is: the server's words, without what was sent (a
            // secret, an assertion) should it quote them.
            let refused = crate::identity::client::refusal(status, &bytes, &body);
            let why = format!("{url}: {refused}");
            return Err(if refused.is_definitive_refusal() { Failure::Refused(why) } else { Failure::Other(why) });
        }
        let t: crate::identity::client::TokenResponse =
            serde_json::from_slice(&bytes).map_err(|e| Fail(format!("the token endpoint {url} sent no usable token: {e}")))?;
        if t.token_type.as_deref().is_some_and(|k| !k.eq_ignore_ascii_case("bearer")) {
            return Err(Fail(format!("the token endpoint {url} issued a non-bearer token")));
        }
        if t.access_token.is_empty() || t.access_token.bytes().any(|b| !(0x21..0x7f).contains(&b)) {
            return Err(Fail(format!("the token endpoint {url} issued an unusable access token")));
        }
        Ok((t.access_token, Duration::from_secs(t.expires_in.unwrap_or(300).max(1))))
    }

    /// A token from the authorization server the upstream's metadata names (discovered once).
    async fn fetch_discovered(&self, assertion: Option<&str>) -> Result<(String, Duration), Failure> {
        use Failure::Other as Fail;
        let resource = self.cfg.resource.clone().ok_or_else(|| Fail("no token_url is configured and the upstream has no URL".into()))?;
        let resource = crate::identity::discovery::canonical_resource(&resource).unwrap_or(resource);
        // Metadata on loopback is followed only for an upstream on loopback (development).
        let http = OAuthHttp::new(Rules { loopback: loopback(&resource) });
        let server = self
            .discovered
            .get_or_try_init(|| async {
                let challenge = http.challenge(&resource).await.ok().flatten();
                http.authorization_server(&resource, challenge.as_ref()).await.map(|(server, _)| server)
            })
            .await
            .map_err(|e| Fail(format!("the token endpoint could not be discovered: {e}")))?;
        let auth = self.client_auth(&server.issuer).map_err(|e| Fail(e.to_string()))?;
        let body = self.grant(Some(&server.issuer), &server.token_endpoint, assertion).await?;
        let t = http.token(server, &auth, body).await?;
        let lifetime = t.expires_at.map_or(300, |at| at.saturating_sub(t.issued_at)).max(1);
        Ok((t.access_token, Duration::from_secs(lifetime)))
    }
}

/// Whether `url` is a loopback one (its metadata and endpoints may then be on loopback too).
fn loopback(url: &str) -> bool {
    crate::identity::reach::check_url(url, Rules { loopback: true }).is_ok_and(|t| t.loopback)
}

/// An RFC 7523 client assertion: `iss` and `sub` the client, `aud` the authorization server,
/// short-lived and unique, signed ES256 with the PKCS#8 P-256 key in `pem`.
fn assertion(client_id: &str, audience: &str, pem: &str) -> Result<String, UpstreamError> {
    use UpstreamError::Credentials as Fail;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).map(str::trim).collect();
    let der = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, body.as_bytes())
        .map_err(|_| Fail("the private key is not PEM (PKCS#8)".into()))?;
    let now = crate::identity::vault::now();
    let jti = mcpgate_protocol::toolbox::random_token().ok_or_else(|| Fail("no randomness for an assertion id".into()))?;
    let claims = serde_json::json!({
        "iss": client_id, "sub": client_id, "aud": audience, "iat": now, "exp": now + ASSERTION_LIFETIME, "jti": jti,
    });
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    jsonwebtoken::encode(&header, &claims, &jsonwebtoken::EncodingKey::from_ec_der(&der))
        .map_err(|e| Fail(format!("the client assertion could not be signed (the key must be a PKCS#8 P-256 key): {e}")))
}

/// How long a token with this lifetime is used: until shortly before it expires, and never more
/// than a day (an absurd `expires_in` must not overflow the clock).
fn cache_for(lifetime: Duration) -> Duration {
    lifetime.saturating_sub(EARLY).min(Duration::from_secs(86_400))
}

#[cfg(test)]
mod tests {
    use super::{OAuthClient, assertion, cache_for};
    use mcpgate_config::{Assertion, ClientAuthMethod, OAuthConfig, OAuthGrant};
    use std::time::Duration;

    /// A workload assertion refused for good is not presented again; one met by a server's passing
    /// failure (503, 429) is, at the next call.
    #[tokio::test]
    async fn only_a_refusal_for_good_retires_an_assertion() {
        for (status, body, asked_twice) in
            [(503, "<html>unavailable</html>", true), (429, r#"{"error":"slow_down"}"#, true), (400, r#"{"error":"invalid_grant"}"#, false)]
        {
            let (base, seen) = crate::identity::testserver::server(|_| {
                vec![("/token", status, vec![("content-type", "application/json".into())], body.into())]
            })
            .await;
            let cfg = OAuthConfig {
                token_url: Some(format!("{base}/token").parse().expect("url")),
                client_id: "gw".into(),
                client_auth: ClientAuthMethod::None,
                client_secret: String::new(),
                scope: None,
                resource: None,
                grant: OAuthGrant::JwtBearer {
                    assertion: Assertion::Value(crate::identity::assertion::tests::jwt(
                        serde_json::json!({ "aud": format!("{base}/token") }),
                    )),
                },
            };
            let client = OAuthClient::new(cfg, mcpgate_net::http::new_http_client());
            assert!(client.token().await.is_err(), "{status}");
            let second = client.token().await.expect_err("still failing");
            let asked = seen.lock().expect("log").len();
            assert_eq!(asked == 2, asked_twice, "HTTP {status}: asked {asked} times; {second}");
        }
    }

    #[test]
    fn token_lifetimes_never_overflow_the_clock() {
        assert_eq!(cache_for(Duration::from_secs(3600)), Duration::from_secs(3570));
        assert_eq!(cache_for(Duration::from_secs(5)), Duration::ZERO);
        let huge = cache_for(Duration::from_secs(u64::MAX));
        assert_eq!(huge, Duration::from_secs(86_400));
        let _ = tokio::time::Instant::now() + huge;
    }

    #[test]
    fn client_assertions_are_signed_es256_for_the_authorization_server() {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, UnparsedPublicKey};
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pkcs8.as_ref());
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n");
        let jwt = assertion("gw-client", "https://as.example.com", &pem).expect("signed");
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let decode = |p: &str| base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, p).expect("base64url");
        let header: serde_json::Value = serde_json::from_slice(&decode(parts[0])).expect("header");
        let claims: serde_json::Value = serde_json::from_slice(&decode(parts[1])).expect("claims");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(
            (claims["iss"].as_str(), claims["sub"].as_str(), claims["aud"].as_str()),
            (Some("gw-client"), Some("gw-client"), Some("https://as.example.com"))
        );
        assert!(claims["exp"].as_u64() > claims["iat"].as_u64() && claims["jti"].as_str().is_some_and(|j| j.len() >= 16));
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).expect("pair");
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, pair.public_key().as_ref().to_vec());
        public.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &decode(parts[2])).expect("a valid signature");
        assert!(assertion("gw-client", "https://as.example.com", "not a key").is_err());
    }
}
