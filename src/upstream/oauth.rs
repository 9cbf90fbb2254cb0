//! OAuth 2.0 client credentials (RFC 6749 §4.4) for upstreams that want their own token: the
//! gateway asks the upstream's authorization server for an access token (client secret from the
//! environment or a file, `resource` per RFC 8707 so the token is for that upstream only), caches
//! it until shortly before it expires, fetches one at a time, and drops it when the upstream
//! answers 401. The client's own credentials are never involved.

use super::error::UpstreamError;
use crate::config::OAuthConfig;
use crate::net::HttpClient;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// Refresh this long before the server's expiry, so a token never expires in flight.
const EARLY: Duration = Duration::from_secs(30);

pub struct OAuthClient {
    cfg: OAuthConfig,
    client: HttpClient,
    cached: Mutex<Option<(String, Instant)>>,
}

/// `application/x-www-form-urlencoded` encoding of one value.
fn form(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            b' ' => "+".to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

impl OAuthClient {
    pub fn new(cfg: OAuthConfig, client: HttpClient) -> Self {
        OAuthClient { cfg, client, cached: Mutex::new(None) }
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

    async fn fetch(&self) -> Result<(String, Duration), UpstreamError> {
        use UpstreamError::Credentials as Fail;
        let mut body = format!("grant_type=client_credentials&client_id={}", form(&self.cfg.client_id));
        if let Some(scope) = &self.cfg.scope {
            body.push_str(&format!("&scope={}", form(scope)));
        }
        if let Some(resource) = &self.cfg.resource {
            body.push_str(&format!("&resource={}", form(resource)));
        }
        let basic = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            format!("{}:{}", form(&self.cfg.client_id), form(&self.cfg.client_secret)),
        );
        let req = http::Request::post(self.cfg.token_url.clone())
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .header("authorization", format!("Basic {basic}"))
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Fail(e.to_string()))?;
        let url = &self.cfg.token_url;
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
            // The body of an error response may echo request details: it goes to the log only.
            tracing::warn!(%status, body = %String::from_utf8_lossy(&bytes[..bytes.len().min(300)]), "token request refused");
            return Err(Fail(format!("the token endpoint {url} refused the request (HTTP {status})")));
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
}

/// How long a token with this lifetime is used: until shortly before it expires, and never more
/// than a day (an absurd `expires_in` must not overflow the clock).
fn cache_for(lifetime: Duration) -> Duration {
    lifetime.saturating_sub(EARLY).min(Duration::from_secs(86_400))
}

#[cfg(test)]
mod tests {
    use super::{cache_for, form};
    use std::time::Duration;

    #[test]
    fn token_lifetimes_never_overflow_the_clock() {
        assert_eq!(cache_for(Duration::from_secs(3600)), Duration::from_secs(3570));
        assert_eq!(cache_for(Duration::from_secs(5)), Duration::ZERO);
        let huge = cache_for(Duration::from_secs(u64::MAX));
        assert_eq!(huge, Duration::from_secs(86_400));
        let _ = tokio::time::Instant::now() + huge;
    }

    #[test]
    fn form_encodes() {
        assert_eq!(form("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
        assert_eq!(form("Az09-._~"), "Az09-._~");
    }
}
