//! The Streamable HTTP upstream transport (modern protocol): one pooled hyper client (HTTP/1.1
//! and h2, rustls for https) shared by all upstreams; each call is one POST carrying the headers
//! a modern server requires, answered by JSON or by an SSE stream that is relayed event by event.
//! Client credentials never appear here: only the upstream's configured headers are sent.

use super::sse::SseDecoder;
use super::{Call, Wire, rejected, timed_out, unavailable};
use crate::config::UpstreamConfig;
use crate::flow::{Event, EventStream, Outcome, Reply};
use crate::protocol::headers;
use crate::protocol::jsonrpc::{Kind, Message};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The one upstream HTTP client: connection pooling, HTTP/1.1 and h2 (ALPN), system roots with
/// the bundled Mozilla roots as a fallback.
pub fn new_http_client() -> HttpClient {
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match builder.with_native_roots() {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "no usable system root certificates; using the bundled Mozilla roots");
            hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots()
        }
    };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    let connector = builder.https_or_http().enable_http1().enable_http2().wrap_connector(http);
    Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(90)).build(connector)
}

pub struct HttpTransport {
    id: String,
    url: http::Uri,
    client: HttpClient,
    headers: Vec<(HeaderName, HeaderValue)>,
    caller_headers: Vec<(String, Vec<(HeaderName, HeaderValue)>)>,
    oauth: Option<Arc<super::oauth::OAuthClient>>,
    max_bytes: usize,
    timeout: Duration,
    /// The legacy session (`Mcp-Session-Id`) the upstream gave us, if any.
    session: Arc<Mutex<Option<HeaderValue>>>,
    /// The legacy handshake was done on this endpoint (stateless legacy servers give no session).
    initialized: std::sync::atomic::AtomicBool,
    changed: Arc<Notify>,
}

impl HttpTransport {
    pub fn new(
        cfg: &UpstreamConfig,
        url: http::Uri,
        client: HttpClient,
        changed: Arc<Notify>,
        oauth: Option<Arc<super::oauth::OAuthClient>>,
    ) -> Self {
        HttpTransport {
            oauth,
            id: cfg.id.clone(),
            url,
            client,
            headers: cfg.headers.clone(),
            caller_headers: cfg.caller_headers.clone(),
            max_bytes: cfg.max_message_bytes,
            timeout: cfg.timeout,
            session: Arc::default(),
            initialized: Default::default(),
            changed,
        }
    }

    pub fn has_session(&self) -> bool {
        self.session.lock().is_ok_and(|s| s.is_some())
    }

    pub fn clear_session(&self) {
        if let Ok(mut s) = self.session.lock() {
            *s = None;
        }
        self.initialized.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn session_of(&self) -> Option<HeaderValue> {
        self.session.lock().ok().and_then(|s| s.clone())
    }

    pub fn is_initialized(&self) -> bool {
        self.initialized.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn mark_initialized(&self) {
        self.initialized.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// A POST to the upstream with its configured headers, the version and the session.
    fn post(&self, wire: Wire<'_>) -> http::request::Builder {
        let mut b = Request::post(self.url.clone());
        for (k, v) in &self.headers {
            b = b.header(k, v);
        }
        b = b.header(CONTENT_TYPE, "application/json").header(ACCEPT, "application/json, text/event-stream");
        if let Some(v) = wire.version {
            b = b.header("MCP-Protocol-Version", v);
        }
        if let Some(sid) = self.session.lock().ok().and_then(|s| s.clone()) {
            b = b.header("Mcp-Session-Id", sid);
        }
        b
    }

    /// Posts a notification (legacy handshake); a 2xx is success.
    pub async fn notify(&self, method: &str, wire: Wire<'_>) -> Result<(), String> {
        let body = format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#).into_bytes();
        let mut b = self.post(wire);
        if let Some(oauth) = &self.oauth {
            let token = oauth.token().await?;
            b = b.header(http::header::AUTHORIZATION, bearer_value(&token)?);
        }
        let req = b.body(Full::new(Bytes::from(body))).map_err(|e| e.to_string())?;
        let resp = tokio::time::timeout(self.timeout, self.client.request(req))
            .await
            .map_err(|_| "timed out".to_string())?
            .map_err(|e| describe_client_error(&e))?;
        if resp.status().is_success() { Ok(()) } else { Err(format!("{method} got HTTP {}", resp.status())) }
    }

    fn request(
        &self,
        id: u64,
        call: &Call,
        wire: Wire<'_>,
        bearer: Option<&str>,
    ) -> Result<Request<Full<Bytes>>, crate::protocol::errors::RpcError> {
        let body = call.encode(id)?;
        let mut b = self.post(wire);
        if let (Some(token), Some(h)) = (bearer, b.headers_mut())
            && let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {token}"))
        {
            v.set_sensitive(true);
            h.insert(http::header::AUTHORIZATION, v);
        }
        // Credentials for the caller this call is made for replace the upstream-wide ones.
        if let Some((_, set)) = self.caller_headers.iter().find(|(c, _)| call.on_behalf_of.contains(c))
            && let Some(h) = b.headers_mut()
        {
            for (k, v) in set {
                h.insert(k, v.clone());
            }
        }
        if wire.modern {
            b = b.header("Mcp-Method", call.method.as_str());
            if let Some(name) = &call.name {
                b = b.header("Mcp-Name", headers::encode(name));
            }
            for (k, v) in &call.param_headers {
                b = b.header(k.as_str(), v.as_str());
            }
        }
        b.body(Full::new(Bytes::from(body))).map_err(|e| unavailable(&self.id, format!("cannot build the request: {e}")))
    }

    /// The upstream's own OAuth token, when it has one configured.
    async fn bearer(&self, deadline: Instant) -> Result<Option<String>, crate::protocol::errors::RpcError> {
        let Some(oauth) = &self.oauth else { return Ok(None) };
        match timeout_at(deadline, oauth.token()).await {
            Err(_) => Err(timed_out(&self.id, self.timeout)),
            Ok(Err(e)) => Err(unavailable(&self.id, format!("cannot get an access token: {e}"))),
            Ok(Ok(t)) => Ok(Some(t)),
        }
    }

    pub async fn send(&self, id: u64, call: &Call, wire: Wire<'_>, deadline: Instant) -> Reply {
        let mut retried = false;
        let resp = loop {
            let bearer = match self.bearer(deadline).await {
                Ok(b) => b,
                Err(e) => return Reply::error(e),
            };
            let req = match self.request(id, call, wire, bearer.as_deref()) {
                Ok(r) => r,
                Err(e) => return Reply::error(e),
            };
            let resp = match timeout_at(deadline, self.client.request(req)).await {
                Err(_) => return Reply::error(timed_out(&self.id, self.timeout)),
                Ok(Err(e)) => return Reply::error(unavailable(&self.id, describe_client_error(&e))),
                Ok(Ok(r)) => r,
            };
            // A refused token (revoked, rotated) is fetched again, once.
            if let (StatusCode::UNAUTHORIZED, Some(oauth), false) = (resp.status(), &self.oauth, retried) {
                oauth.invalidate().await;
                retried = true;
                continue;
            }
            break resp;
        };
        let status = resp.status();
        if let Some(sid) = resp.headers().get("mcp-session-id").filter(|_| call.method == "initialize")
            && let Ok(mut s) = self.session.lock()
        {
            *s = Some(sid.clone());
        }
        let ctype = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
        if status.is_success() && ctype.starts_with("text/event-stream") {
            return Reply::Stream(self.relay(resp.into_body(), id, wire.version.map(str::to_string)));
        }
        let bytes = match timeout_at(deadline, Limited::new(resp.into_body(), self.max_bytes).collect()).await {
            Err(_) => return Reply::error(timed_out(&self.id, self.timeout)),
            Ok(Err(e)) => {
                return Reply::error(unavailable(&self.id, format!("reading the response failed: {e}")));
            }
            Ok(Ok(c)) => c.to_bytes(),
        };
        if status == StatusCode::NOT_FOUND && !wire.modern && self.has_session() {
            // The legacy session is gone (the upstream restarted or expired it).
            return Reply::error(rejected(&self.id, 404, "session not found"));
        }
        match Message::parse(&bytes) {
            Ok(m) if m.result.is_some() || m.error.is_some() => Reply::Single(final_outcome(m)),
            _ => Reply::error(rejected(&self.id, status.as_u16(), describe_status(status, &bytes))),
        }
    }

    /// Relays an SSE response: notifications as they come, then the response to `id`.
    fn relay(&self, mut body: hyper::body::Incoming, id: u64, version: Option<String>) -> EventStream {
        let answerer = self.answerer(version);
        let (tx, rx) = mpsc::channel(32);
        let upstream = self.id.clone();
        let mut decoder = SseDecoder::new(self.max_bytes);
        let want_id = id.to_string();
        tokio::spawn(async move {
            loop {
                let frame = tokio::select! {
                    f = body.frame() => f,
                    _ = tx.closed() => return,
                };
                let chunk = match frame {
                    None => break,
                    Some(Err(e)) => {
                        let _ =
                            tx.send(Event::Done(Outcome::Error(unavailable(&upstream, format!("the response stream failed: {e}"))))).await;
                        return;
                    }
                    Some(Ok(f)) => match f.into_data() {
                        Ok(d) => d,
                        Err(_) => continue,
                    },
                };
                let events = match decoder.push(&chunk) {
                    Ok(ev) => ev,
                    Err(e) => {
                        let _ = tx
                            .send(Event::Done(Outcome::Error(unavailable(&upstream, format!("an SSE event exceeded {} bytes", e.0)))))
                            .await;
                        return;
                    }
                };
                for data in events {
                    if data.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let Ok(msg) = Message::parse(&data) else {
                        tracing::warn!(upstream = %upstream, "ignoring an SSE event that is not a JSON-RPC message");
                        continue;
                    };
                    match msg.kind() {
                        Ok(Kind::Response) if msg.id.as_ref().is_some_and(|i| i.get() == want_id) => {
                            let _ = tx.send(Event::Done(final_outcome(msg))).await;
                            return;
                        }
                        Ok(Kind::Notification) => {
                            if tx.send(Event::Notification(data)).await.is_err() {
                                return;
                            }
                        }
                        Ok(Kind::Request) => answerer.answer(&msg),
                        _ => {
                            tracing::warn!(upstream = %upstream, method = ?msg.method, "ignoring an unexpected message on a response stream")
                        }
                    }
                }
            }
            let _ = tx.send(Event::Done(Outcome::Error(unavailable(&upstream, "the response stream ended before the response")))).await;
        });
        EventStream::new(rx)
    }
}

/// Answers the requests a legacy upstream sends on its streams: `ping` with `{}`, anything else
/// (sampling, elicitation, roots: never declared by the gateway) with an error.
#[derive(Clone)]
struct Answerer {
    id: String,
    url: http::Uri,
    client: HttpClient,
    headers: Vec<(HeaderName, HeaderValue)>,
    session: Arc<Mutex<Option<HeaderValue>>>,
    version: Option<String>,
    oauth: Option<Arc<super::oauth::OAuthClient>>,
}

/// `Authorization: Bearer <token>`, marked sensitive.
fn bearer_value(token: &str) -> Result<HeaderValue, String> {
    let mut v =
        HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| "the access token is not a valid header value".to_string())?;
    v.set_sensitive(true);
    Ok(v)
}

impl HttpTransport {
    fn answerer(&self, version: Option<String>) -> Answerer {
        Answerer {
            id: self.id.clone(),
            url: self.url.clone(),
            client: self.client.clone(),
            headers: self.headers.clone(),
            session: self.session.clone(),
            version,
            oauth: self.oauth.clone(),
        }
    }

    /// Opens the legacy standalone GET stream, to hear `list_changed` (and answer pings), for
    /// as long as the session lasts; reconnects with a backoff.
    pub fn start_listening(&self, version: String) {
        let a = self.answerer(Some(version));
        let changed = self.changed.clone();
        let max = self.max_bytes;
        tokio::spawn(async move {
            let started = a.session.lock().ok().and_then(|s| s.clone());
            let mut backoff = Duration::from_secs(1);
            loop {
                let current = a.session.lock().ok().and_then(|s| s.clone());
                if current.is_none() || current != started {
                    return;
                }
                match a.listen_once(&changed, max).await {
                    Ok(()) => backoff = Duration::from_secs(1),
                    Err(true) => return,
                    Err(false) => {}
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(60));
            }
        });
    }
}

impl Answerer {
    async fn builder(&self, method: http::Method) -> http::request::Builder {
        let mut b = Request::builder().method(method).uri(self.url.clone());
        for (k, v) in &self.headers {
            b = b.header(k, v);
        }
        if let Some(oauth) = &self.oauth
            && let Ok(v) = oauth.token().await.and_then(|t| bearer_value(&t))
        {
            b = b.header(http::header::AUTHORIZATION, v);
        }
        if let Some(v) = &self.version {
            b = b.header("MCP-Protocol-Version", v.as_str());
        }
        if let Some(sid) = self.session.lock().ok().and_then(|s| s.clone()) {
            b = b.header("Mcp-Session-Id", sid);
        }
        b
    }

    fn answer(&self, msg: &Message) {
        let Some(id) = msg.id.as_ref() else { return };
        let reply = if msg.method.as_deref() == Some("ping") {
            format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, id.get()).into_bytes()
        } else {
            let e = crate::protocol::errors::RpcError::method_not_found(msg.method.as_deref().unwrap_or(""));
            crate::protocol::jsonrpc::error_message(Some(id), &e)
        };
        let me = self.clone();
        tokio::spawn(async move {
            let Ok(req) = me.builder(http::Method::POST).await.header(CONTENT_TYPE, "application/json").body(Full::new(Bytes::from(reply)))
            else {
                return;
            };
            let _ = tokio::time::timeout(Duration::from_secs(10), me.client.request(req)).await;
        });
    }

    /// One GET stream; `Err(true)` means the upstream has none (405) or the session is gone.
    async fn listen_once(&self, changed: &Notify, max: usize) -> Result<(), bool> {
        let req =
            self.builder(http::Method::GET).await.header(ACCEPT, "text/event-stream").body(Full::new(Bytes::new())).map_err(|_| true)?;
        let resp = self.client.request(req).await.map_err(|_| false)?;
        // No stream (405), no session (404/400), or refused credentials (401/403): stop trying.
        if matches!(
            resp.status(),
            StatusCode::METHOD_NOT_ALLOWED
                | StatusCode::NOT_FOUND
                | StatusCode::BAD_REQUEST
                | StatusCode::UNAUTHORIZED
                | StatusCode::FORBIDDEN
        ) {
            return Err(true);
        }
        if !resp.status().is_success() {
            return Err(false);
        }
        let mut body = resp.into_body();
        let mut decoder = SseDecoder::new(max);
        while let Some(frame) = body.frame().await {
            let Ok(chunk) = frame.map_err(|_| false)?.into_data() else { continue };
            for data in decoder.push(&chunk).map_err(|_| false)? {
                let Ok(msg) = Message::parse(&data) else { continue };
                match msg.kind() {
                    Ok(Kind::Notification) if msg.method.as_deref().is_some_and(|m| m.ends_with("/list_changed")) => {
                        tracing::debug!(upstream = %self.id, method = ?msg.method, "upstream list changed");
                        changed.notify_one();
                    }
                    Ok(Kind::Request) => self.answer(&msg),
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

fn final_outcome(m: Message) -> Outcome {
    match (m.result, m.error) {
        (Some(r), _) => Outcome::Result(r),
        (None, Some(e)) => Outcome::UpstreamError(e),
        (None, None) => Outcome::Error(crate::protocol::errors::RpcError::internal("response without result or error")),
    }
}

/// What a client is told about an upstream's non-JSON-RPC answer: the status only. The body
/// (which may hold upstream details a caller should not see) goes to the gateway's log.
fn describe_status(status: StatusCode, body: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(body).chars().take(200).collect();
    tracing::debug!(%status, body = %text.trim(), "upstream answered without a JSON-RPC response");
    format!("HTTP {status} without a JSON-RPC response")
}

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
