//! The one builder and sender of every HTTP request the gateway sends an upstream: calls and
//! notifications (POST), the legacy GET stream, answers to an upstream's own requests, and (their
//! credentials) a REST upstream's operations. A call goes through the outbound exchange
//! (`identity::exchange`): the upstream's DPoP nonce is kept from every answer, its nonce
//! challenge answered once, and a refused credential renewed once. The credential rules live here
//! and nowhere else: the upstream's configured headers first, then its OAuth token *replacing* any
//! configured `Authorization`, then the credentials configured for the caller the request is made
//! for replacing both; a caller's own upstream token (per-user identity, a [`UserToken`]) replaces
//! everything else. The protocol headers are set last and never duplicated. Nothing of the
//! client's own request is ever copied in.

use super::error::UpstreamError;
use super::oauth::OAuthClient;
use crate::identity::dpop::Access;
use crate::identity::exchange::{Refused, Retries, Verdict};
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use mcpgate_net::http::HttpClients;
use mcpgate_protocol::headers;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One caller's own access token for an upstream (per-user identity): what a caller's own
/// handle of a `user_auth` upstream sends.
pub trait UserToken: Send + Sync {
    /// The current token (with its DPoP key when it is bound to one); `None` when the caller has
    /// to consent (again).
    fn token(&self) -> BoxFuture<'_, Option<Access>>;
    /// The upstream refused the token (HTTP `status`, with its `WWW-Authenticate` values;
    /// `retried`: a renewed token was refused too): what to do next.
    fn refused(&self, status: u16, challenge: Vec<String>, retried: bool) -> BoxFuture<'_, Renewal>;
}

/// What a refused credential leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// A new credential was obtained: send the request once more.
    Retry,
    /// The caller has to consent (again): [`UpstreamError::ConsentNeeded`].
    Consent,
    /// Nothing to renew: the refusal stands.
    Refuse,
}

/// How an endpoint authenticates the gateway.
#[derive(Clone, Default)]
pub enum Credential {
    /// Only what the configured headers carry.
    #[default]
    Headers,
    /// One token for the whole upstream (`[upstream.oauth]`).
    Client(Arc<OAuthClient>),
    /// One caller's own token.
    User(Arc<dyn UserToken>),
}

/// Where and with which credentials one endpoint is reached.
pub struct Outbound {
    pub url: http::Uri,
    /// `url` as text (a DPoP proof names it), written once.
    url_text: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    caller_headers: Vec<(String, Vec<(HeaderName, HeaderValue)>)>,
    credential: Credential,
    timeout: Duration,
    /// The upstream's latest DPoP nonce (RFC 9449 §9), sent in the proofs that follow.
    nonce: std::sync::Mutex<Option<String>>,
}

/// The modern per-request headers (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`).
#[derive(Debug, Clone, Default)]
pub struct McpHeaders {
    pub method: String,
    /// The unencoded value `Mcp-Name` mirrors.
    pub name: Option<String>,
    /// Already encoded `Mcp-Param-*` headers.
    pub params: Vec<(String, String)>,
}

/// What surrounds a message on the wire: the protocol version header, the legacy session, the
/// modern headers, and the callers the request is made for (per-caller credentials).
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    pub version: Option<String>,
    pub session: Option<HeaderValue>,
    pub mcp: Option<McpHeaders>,
    pub on_behalf_of: Vec<String>,
    /// The caller's W3C trace context, sent as the `traceparent` header.
    pub traceparent: Option<String>,
}

impl Outbound {
    pub fn new(
        url: http::Uri,
        headers: Vec<(HeaderName, HeaderValue)>,
        caller_headers: Vec<(String, Vec<(HeaderName, HeaderValue)>)>,
        credential: Credential,
        timeout: Duration,
    ) -> Self {
        let url_text = url.to_string();
        Outbound { url, url_text, headers, caller_headers, credential, timeout, nonce: std::sync::Mutex::new(None) }
    }

    /// A POST carrying `body` (a JSON-RPC message).
    pub async fn post(&self, body: Bytes, env: &Envelope, deadline: Instant) -> Result<Request<Full<Bytes>>, UpstreamError> {
        self.build(Method::POST, body, env, deadline).await
    }

    /// The GET that opens a standalone SSE stream.
    pub async fn get(&self, env: &Envelope, deadline: Instant) -> Result<Request<Full<Bytes>>, UpstreamError> {
        self.build(Method::GET, Bytes::new(), env, deadline).await
    }

    /// The DELETE that ends a legacy session.
    pub async fn delete(&self, env: &Envelope, deadline: Instant) -> Result<Request<Full<Bytes>>, UpstreamError> {
        self.build(Method::DELETE, Bytes::new(), env, deadline).await
    }

    /// Sends one request on the calling thread's client of `client`, answered by `deadline`.
    pub async fn send(
        &self,
        client: &HttpClients,
        req: Request<Full<Bytes>>,
        deadline: Instant,
    ) -> Result<Response<Incoming>, UpstreamError> {
        match timeout_at(deadline, client.with(|c| c.request(req))).await {
            Err(_) => Err(UpstreamError::Timeout { after: self.timeout }),
            Ok(r) => r.map_err(|e| UpstreamError::Unreachable(describe_client_error(&e))),
        }
    }

    /// Sends the request `build` makes for each attempt (with the credential and DPoP proof of the
    /// moment) until the answer is final (`identity::exchange`, whose bounds `retries` keeps): a
    /// nonce challenge is answered once, and a refused credential renewed once; one that only the
    /// caller can renew is [`UpstreamError::ConsentNeeded`].
    pub async fn exchange<F, Fut>(
        &self,
        retries: &mut Retries,
        client: &HttpClients,
        deadline: Instant,
        mut build: F,
    ) -> Result<Response<Incoming>, UpstreamError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Request<Full<Bytes>>, UpstreamError>>,
    {
        // The nonce a proof carries is the one kept here (`dpop_nonce`), from every answer.
        let attempt = |_: Option<String>| {
            let req = build();
            async move {
                let resp = self.send(client, req.await?, deadline).await?;
                self.dpop_nonce(resp.headers());
                Ok(resp)
            }
        };
        let renew = |refused: Refused| async move {
            match self.renew_token(refused.status, refused.challenge, refused.retried).await {
                Renewal::Retry if !refused.retried => Ok(true),
                Renewal::Retry | Renewal::Consent => Err(UpstreamError::ConsentNeeded),
                Renewal::Refuse => Ok(false),
            }
        };
        retries.run(attempt, |resp| Verdict::of_resource(resp.status().as_u16(), resp.headers()), renew).await
    }

    /// The upstream refused the request with `status` (401, or 403): renews the credential
    /// where that can help (`retried`: this is the answer to a retry with a renewed one).
    async fn renew_token(&self, status: u16, challenge: Vec<String>, retried: bool) -> Renewal {
        match &self.credential {
            Credential::Client(o) if status == 401 && !retried => {
                o.invalidate().await;
                Renewal::Retry
            }
            Credential::User(u) => u.refused(status, challenge, retried).await,
            _ => Renewal::Refuse,
        }
    }

    /// Keeps the DPoP nonce a response of the upstream carried, for the proofs that follow.
    pub fn dpop_nonce(&self, headers: &HeaderMap) {
        if matches!(self.credential, Credential::User(_))
            && let Some(n) = headers.get("dpop-nonce").and_then(|v| v.to_str().ok())
            && n.len() <= 512
        {
            *mcpgate_protocol::sync::lock(&self.nonce) = Some(n.to_string());
        }
    }

    async fn build(&self, method: Method, body: Bytes, env: &Envelope, deadline: Instant) -> Result<Request<Full<Bytes>>, UpstreamError> {
        let mut h = self.credentials(&method, &self.url_text, env, deadline).await?;
        if method == Method::GET {
            h.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        } else {
            h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            h.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        }
        if let Some(v) = &env.version {
            h.insert(MCP_PROTOCOL_VERSION, known_value(v, &[mcpgate_protocol::SUPPORTED_VERSIONS, mcpgate_protocol::LEGACY_VERSIONS])?);
        }
        if let Some(sid) = &env.session {
            h.insert(MCP_SESSION_ID, sid.clone());
        }
        if let Some(mcp) = &env.mcp {
            h.insert(MCP_METHOD, known_value(&mcp.method, &[mcpgate_protocol::MODERN_METHODS])?);
            if let Some(name) = &mcp.name {
                h.insert(MCP_NAME, value(&headers::encoded(name))?);
            }
            for (k, v) in &mcp.params {
                let name =
                    HeaderName::from_bytes(k.as_bytes()).map_err(|_| UpstreamError::Protocol(format!("invalid header name {k:?}")))?;
                h.insert(name, value(v)?);
            }
        }
        let mut req = Request::builder().method(method).uri(self.url.clone());
        if let Some(slot) = req.headers_mut() {
            *slot = h;
        }
        req.body(Full::new(body)).map_err(|e| UpstreamError::Protocol(format!("cannot build the request: {e}")))
    }

    /// The headers that authenticate a `method` request to `url` (the configured headers, the
    /// upstream's or the caller's token, a DPoP proof for that method and URL, the caller's own
    /// headers) and carry its trace context: what every request to this upstream starts with,
    /// MCP or REST.
    pub async fn credentials(&self, method: &Method, url: &str, env: &Envelope, deadline: Instant) -> Result<HeaderMap, UpstreamError> {
        // Room for the usual dozen, so the map is allocated once.
        let mut h = HeaderMap::with_capacity(12);
        for (k, v) in &self.headers {
            h.append(k, v.clone());
        }
        if let Credential::Client(oauth) = &self.credential {
            let token = match timeout_at(deadline, oauth.token()).await {
                Err(_) => return Err(UpstreamError::Timeout { after: self.timeout }),
                Ok(t) => t?,
            };
            h.insert(AUTHORIZATION, bearer(&token)?);
        }
        if let Some((_, set)) = self.caller_headers.iter().find(|(c, _)| env.on_behalf_of.contains(c)) {
            for (k, v) in set {
                h.insert(k, v.clone());
            }
        }
        if let Credential::User(user) = &self.credential {
            let token = match timeout_at(deadline, user.token()).await {
                Err(_) => return Err(UpstreamError::Timeout { after: self.timeout }),
                Ok(None) => return Err(UpstreamError::ConsentNeeded),
                Ok(Some(t)) => t,
            };
            match (&token.dpop, &token.header) {
                (_, Some((name, prefix))) => {
                    let name = HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| UpstreamError::Credentials(format!("{name:?} is not a header name")))?;
                    h.insert(name, sensitive(&format!("{prefix}{}", token.token))?);
                }
                (None, None) => {
                    h.insert(AUTHORIZATION, bearer(&token.token)?);
                }
                (Some(key), None) => {
                    // A bound token goes with a fresh proof of its key (RFC 9449 §7.1).
                    let nonce = mcpgate_protocol::sync::lock(&self.nonce).clone();
                    let proof = key
                        .proof(method.as_str(), url, Some(&token.token), nonce.as_deref())
                        .ok_or_else(|| UpstreamError::Credentials("no randomness for a DPoP proof".into()))?;
                    h.insert(AUTHORIZATION, sensitive(&format!("DPoP {}", token.token))?);
                    h.insert("dpop", sensitive(&proof)?);
                }
            }
        }
        if let Some(tp) = &env.traceparent
            && mcpgate_protocol::trace::valid_traceparent(tp)
        {
            h.insert("traceparent", value(tp)?);
        }
        Ok(h)
    }
}

// The names of the headers every request sends, made once (a name given as text is parsed and
// copied at each insert).
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// `v` as a header value, without a copy when it is one of `known` (a protocol version or method
/// name the gateway knows: every request sends one).
fn known_value(v: &str, known: &[&[&'static str]]) -> Result<HeaderValue, UpstreamError> {
    match known.iter().flat_map(|list| list.iter()).find(|k| **k == v) {
        Some(k) => Ok(HeaderValue::from_static(k)),
        None => value(v),
    }
}

fn value(v: &str) -> Result<HeaderValue, UpstreamError> {
    HeaderValue::from_str(v).map_err(|_| UpstreamError::Protocol(format!("{v:?} is not a valid header value")))
}

/// `Authorization: Bearer <token>`, marked sensitive so it is never logged.
fn bearer(token: &str) -> Result<HeaderValue, UpstreamError> {
    sensitive(&format!("Bearer {token}"))
}

/// A credential header's value, marked sensitive so it is never logged.
fn sensitive(text: &str) -> Result<HeaderValue, UpstreamError> {
    let mut v =
        HeaderValue::from_str(text).map_err(|_| UpstreamError::Credentials("the access token is not a valid header value".into()))?;
    v.set_sensitive(true);
    Ok(v)
}

/// A client error with its chain of causes, for [`UpstreamError::Unreachable`].
fn describe_client_error(e: &hyper_util::client::legacy::Error) -> String {
    let mut out = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}

/// The version header of a legacy request; 2025-03-26 predates it.
pub(super) fn version_header(version: &str) -> Option<String> {
    (version != "2025-03-26").then(|| version.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hv(s: &str) -> HeaderValue {
        HeaderValue::from_str(s).unwrap()
    }

    #[tokio::test]
    async fn caller_credentials_replace_the_upstream_wide_ones_and_protocol_headers_are_single() {
        let out = Outbound::new(
            "http://127.0.0.1:1/mcp".parse().unwrap(),
            vec![(AUTHORIZATION, hv("Bearer static")), (HeaderName::from_static("x-team"), hv("a")), (ACCEPT, hv("text/plain"))],
            vec![("alice".into(), vec![(AUTHORIZATION, hv("Bearer alice"))])],
            Credential::Headers,
            Duration::from_secs(1),
        );
        let deadline = Instant::now() + Duration::from_secs(1);
        let env = Envelope {
            version: Some("2025-11-25".into()),
            session: Some(hv("s1")),
            mcp: Some(McpHeaders {
                method: "tools/call".into(),
                name: Some("t".into()),
                params: vec![("Mcp-Param-Region".into(), "eu".into())],
            }),
            on_behalf_of: vec!["alice".into()],
            traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        };
        let req = out.post(Bytes::from_static(b"{}"), &env, deadline).await.unwrap();
        let h = req.headers();
        assert_eq!(h.get_all(AUTHORIZATION).iter().collect::<Vec<_>>(), vec!["Bearer alice"]);
        assert_eq!(h.get_all(ACCEPT).iter().count(), 1);
        assert_eq!(h["mcp-session-id"], "s1");
        assert_eq!(h["mcp-param-region"], "eu");
        assert_eq!(h["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        let get = out.get(&Envelope::default(), deadline).await.unwrap();
        assert_eq!(get.headers().get_all(AUTHORIZATION).iter().collect::<Vec<_>>(), vec!["Bearer static"]);
        assert_eq!(get.headers()[ACCEPT], "text/event-stream");
    }
}
