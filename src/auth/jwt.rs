//! JWT bearer tokens: the issuer's signing keys come from a JWKS (a file, or a URL fetched with
//! a deadline and a size limit), cached and refreshed on a timer and — at most once per 30 s —
//! when a token names a key id the cache does not know. A token passes when its signature is
//! valid under an asymmetric algorithm, its issuer is the configured one, its audience includes
//! this gateway (RFC 8707) and it has not expired.

use arc_swap::ArcSwap;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use mcpgate_config::auth::{JwksSource, JwtConfig};
use mcpgate_net::http::HttpClient;
use mcpgate_protocol::sync::lock;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

const ASYMMETRIC: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];
const MAX_JWKS_BYTES: usize = 1024 * 1024;
const UNKNOWN_KID_COOLDOWN: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, DecodingKey>,
    without_kid: Vec<DecodingKey>,
}

pub struct JwtVerifier {
    cfg: JwtConfig,
    client: HttpClient,
    keys: Arc<ArcSwap<Keys>>,
    last_fetch: Mutex<Option<Instant>>,
}

impl JwtVerifier {
    pub fn new(cfg: JwtConfig, client: HttpClient) -> JwtVerifier {
        JwtVerifier { cfg, client, keys: Arc::default(), last_fetch: Mutex::new(None) }
    }

    pub fn subject_claim(&self) -> &str {
        &self.cfg.subject_claim
    }

    /// Loads the keys once (an error here stops the gateway from starting) and keeps them fresh.
    pub async fn start(&self, tasks: &mcpgate_protocol::tasks::Background) -> Result<(), JwksError> {
        self.refresh().await?;
        let keys = self.keys.clone();
        let cfg = self.cfg.clone();
        let client = self.client.clone();
        tasks.spawn(async move {
            loop {
                tokio::time::sleep(cfg.refresh).await;
                match load(&cfg.jwks, &client).await {
                    Ok(k) => keys.store(Arc::new(k)),
                    Err(e) => tracing::warn!(error = %e, "JWKS refresh failed; keeping the previous keys"),
                }
            }
        });
        Ok(())
    }

    async fn refresh(&self) -> Result<(), JwksError> {
        {
            let mut last = lock(&self.last_fetch);
            *last = Some(Instant::now());
        }
        let k = load(&self.cfg.jwks, &self.client).await?;
        tracing::info!(keys = k.by_kid.len() + k.without_kid.len(), "JWKS loaded");
        self.keys.store(Arc::new(k));
        Ok(())
    }

    /// Verifies a token; on success, its claims.
    pub async fn verify(&self, token: &str) -> Result<Value, Rejected> {
        let header = jsonwebtoken::decode_header(token).map_err(Rejected::Malformed)?;
        if !ASYMMETRIC.contains(&header.alg) {
            return Err(Rejected::Algorithm(header.alg));
        }
        let key = match self.key_for(header.kid.as_deref()) {
            Some(k) => k,
            None => {
                let may_refetch = (*lock(&self.last_fetch)).is_none_or(|t| t.elapsed() >= UNKNOWN_KID_COOLDOWN);
                if header.kid.is_some() && may_refetch {
                    let _ = self.refresh().await;
                }
                self.key_for(header.kid.as_deref()).ok_or(Rejected::UnknownKey)?
            }
        };
        let mut v = Validation::new(header.alg);
        v.set_issuer(&[&self.cfg.issuer]);
        v.set_audience(&self.cfg.audiences);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        v.leeway = 30;
        v.validate_nbf = true;
        let data = jsonwebtoken::decode::<Value>(token, &key, &v).map_err(Rejected::Invalid)?;
        Ok(data.claims)
    }

    fn key_for(&self, kid: Option<&str>) -> Option<DecodingKey> {
        let keys = self.keys.load();
        match kid {
            Some(k) => keys.by_kid.get(k).cloned(),
            None if keys.without_kid.len() + keys.by_kid.len() == 1 => keys.without_kid.first().or(keys.by_kid.values().next()).cloned(),
            None => None,
        }
    }
}

/// Why a token was not accepted (told to the client in the 401).
#[derive(Debug, thiserror::Error)]
pub enum Rejected {
    #[error("malformed token: {0}")]
    Malformed(jsonwebtoken::errors::Error),
    #[error("algorithm {0:?} is not accepted")]
    Algorithm(jsonwebtoken::Algorithm),
    #[error("no key of the issuer matches the token")]
    UnknownKey,
    #[error("invalid token: {0}")]
    Invalid(jsonwebtoken::errors::Error),
}

/// Why the issuer's keys could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("cannot read JWKS file {}: {source}", path.display())]
    File { path: std::path::PathBuf, source: std::io::Error },
    #[error("fetching the JWKS from {url} {reason}")]
    Fetch { url: String, reason: String },
    #[error("the JWKS is not valid: {0}")]
    Invalid(#[from] serde_json::Error),
    #[error("the JWKS holds no usable key")]
    NoUsableKey,
}

async fn load(source: &JwksSource, client: &HttpClient) -> Result<Keys, JwksError> {
    let text = match source {
        JwksSource::File(p) => tokio::fs::read(p).await.map_err(|source| JwksError::File { path: p.clone(), source })?,
        JwksSource::Url(u) => {
            let failed = |reason: String| JwksError::Fetch { url: u.to_string(), reason };
            let req = http::Request::get(u.clone())
                .header("accept", "application/json")
                .body(Full::new(Bytes::new()))
                .map_err(|e| failed(format!("failed: {e}")))?;
            let resp = tokio::time::timeout(Duration::from_secs(10), client.request(req))
                .await
                .map_err(|_| failed("timed out".into()))?
                .map_err(|e| failed(format!("failed: {e}")))?;
            if !resp.status().is_success() {
                return Err(failed(format!("got HTTP {}", resp.status())));
            }
            let body = tokio::time::timeout(Duration::from_secs(10), Limited::new(resp.into_body(), MAX_JWKS_BYTES).collect())
                .await
                .map_err(|_| failed("timed out while reading it".into()))?
                .map_err(|e| failed(format!("failed while reading it: {e}")))?;
            body.to_bytes().to_vec()
        }
    };
    let set: JwkSet = serde_json::from_slice(&text)?;
    let mut keys = Keys::default();
    for jwk in &set.keys {
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            tracing::warn!(kid = ?jwk.common.key_id, "skipping a JWKS key that cannot be used");
            continue;
        };
        match &jwk.common.key_id {
            Some(kid) => {
                keys.by_kid.insert(kid.clone(), key);
            }
            None => keys.without_kid.push(key),
        }
    }
    if keys.by_kid.is_empty() && keys.without_kid.is_empty() {
        return Err(JwksError::NoUsableKey);
    }
    Ok(keys)
}
