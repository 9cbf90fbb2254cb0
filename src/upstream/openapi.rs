//! An OpenAPI upstream: a REST API answered as if it were a modern MCP server, in process. It
//! answers `server/discover`, `tools/list` (the description read again each time, so a reload or
//! a probe picks up an edited file), `tools/call` (the operation's HTTP request, under the
//! upstream's deadline, with its credentials) and `ping`; the rest of the gateway sees an ordinary
//! upstream, so pins, validation, policy, guards and quotas apply unchanged.
//!
//! Where calls go: `base_url` when configured. Without it, the description's own server URL is
//! trusted only where the description cannot lie about it: a file the operator put beside the
//! configuration, or, for a description fetched from a URL, a server on that URL's own origin (a
//! relative one resolves against it). A description naming another host is refused with the reason,
//! since the upstream's credentials would follow it. A redirect is followed only to the path that
//! was called (a trailing `/` or the query may differ) on the base URL's origin, for `GET` and
//! `HEAD`, at most 3 times: another path is another operation, which the policy did not decide on.
//! Answers are read up to `max_message_bytes`, the description up to 16 MiB.

use super::error::UpstreamError;
use super::outbound::{Envelope, Outbound};
use crate::identity::exchange::Retries;
use arc_swap::ArcSwapOption;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use mcpgate_config::openapi::{OpenApiConfig, OpenApiSource};
use mcpgate_model::openapi::{self as api, Api};
use mcpgate_net::http::HttpClients;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::reply::{Outcome, Reply};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

/// The largest description read.
const MAX_DOCUMENT: usize = 16 * 1024 * 1024;
/// Redirects followed to the called path on the API's own origin.
const MAX_REDIRECTS: usize = 3;

/// Why the description does not say where calls go (shown after "the OpenAPI description <source>").
#[derive(Debug, thiserror::Error)]
enum BaseError {
    #[error("names the server {server:?}, which is not a URL ({source}): set base_url")]
    NotAUrl {
        server: String,
        #[source]
        source: http::uri::InvalidUri,
    },
    #[error("names the relative server {0:?}: set base_url to the API's absolute URL")]
    Relative(String),
    #[error("names no server: set base_url")]
    NoServer,
    /// A server on another origin than the description's URL.
    #[error("names the server {url}, on another origin than it was fetched from ({origin}): set base_url if that server is meant")]
    OtherOrigin { url: String, origin: String },
}

/// A description read, and where its calls go.
pub struct Loaded {
    pub api: Api,
    pub base: http::Uri,
}

pub struct RestTransport {
    id: String,
    cfg: OpenApiConfig,
    out: Outbound,
    client: HttpClients,
    max_bytes: usize,
    timeout: Duration,
    loaded: ArcSwapOption<Loaded>,
}

impl RestTransport {
    pub fn new(id: &str, cfg: OpenApiConfig, out: Outbound, client: HttpClients, max_bytes: usize, timeout: Duration) -> Self {
        RestTransport { id: id.to_string(), cfg, out, client, max_bytes, timeout, loaded: ArcSwapOption::empty() }
    }

    /// The description as last read (for `mcpgate check`).
    pub fn loaded(&self) -> Option<Arc<Loaded>> {
        self.loaded.load_full()
    }

    /// Answers one JSON-RPC request.
    pub async fn send(&self, method: &str, params: &Map<String, Value>, env: &Envelope, deadline: Instant) -> Result<Reply, UpstreamError> {
        let outcome = match method {
            "server/discover" => {
                let l = self.load(deadline).await?;
                ok(json!({
                    "resultType": "complete",
                    "supportedVersions": [mcpgate_protocol::MODERN_VERSION],
                    "capabilities": { "tools": { "listChanged": false } },
                    "serverInfo": { "name": l.api.title, "version": l.api.version },
                    "instructions": l.api.description,
                }))
            }
            "tools/list" => {
                let l = self.load(deadline).await?;
                ok(json!({ "resultType": "complete", "tools": l.api.operations.iter().map(|o| &o.tool).collect::<Vec<_>>() }))
            }
            "tools/call" => {
                let l = match self.loaded.load_full() {
                    Some(l) => l,
                    None => self.load(deadline).await?,
                };
                self.call(&l, params, env, deadline).await?
            }
            "ping" => ok(json!({})),
            other => Outcome::Error(RpcError::method_not_found(other)),
        };
        Ok(Reply::Single(outcome))
    }

    /// Reads the description again and works out where calls go.
    pub async fn load(&self, deadline: Instant) -> Result<Arc<Loaded>, UpstreamError> {
        let bad = |why: String| UpstreamError::Protocol(format!("the OpenAPI description {}: {why}", self.cfg.source));
        let text = match &self.cfg.source {
            OpenApiSource::File(p) => {
                let len = tokio::fs::metadata(p).await.map_err(|e| bad(format!("cannot be read: {e}")))?.len();
                if len > MAX_DOCUMENT as u64 {
                    return Err(bad(too_large()));
                }
                tokio::fs::read_to_string(p).await.map_err(|e| bad(format!("cannot be read: {e}")))?
            }
            OpenApiSource::Url(u) => self.fetch(u, deadline).await?,
        };
        let doc = api::doc::parse(&text).map_err(|e| bad(e.to_string()))?;
        let built = api::build(&doc, &self.cfg.select).map_err(|e| bad(e.to_string()))?;
        let base = self.base(&built).map_err(|e| bad(e.to_string()))?;
        let loaded = Arc::new(Loaded { api: built, base });
        self.loaded.store(Some(loaded.clone()));
        Ok(loaded)
    }

    /// A description served over HTTP (no credentials sent: it is read like a public page).
    async fn fetch(&self, url: &http::Uri, deadline: Instant) -> Result<String, UpstreamError> {
        let req = http::Request::get(url.clone())
            .header(http::header::ACCEPT, "application/json, application/yaml, text/yaml, */*;q=0.5")
            .body(Full::new(Bytes::new()))
            .map_err(|e| UpstreamError::Protocol(format!("cannot request the description: {e}")))?;
        let resp = self.out.send(&self.client, req, deadline).await?;
        if !resp.status().is_success() {
            return Err(UpstreamError::Protocol(format!(
                "the OpenAPI description {url} answered HTTP {} (redirects are not followed)",
                resp.status()
            )));
        }
        let body = match timeout_at(deadline, Limited::new(resp.into_body(), MAX_DOCUMENT).collect()).await {
            Err(_) => return Err(UpstreamError::Timeout { after: self.timeout }),
            Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
                return Err(UpstreamError::Protocol(format!("the OpenAPI description {url} {}", too_large())));
            }
            Ok(Err(e)) => return Err(UpstreamError::Protocol(format!("the OpenAPI description {url} could not be read whole: {e}"))),
            Ok(Ok(c)) => c.to_bytes(),
        };
        String::from_utf8(body.to_vec()).map_err(|_| UpstreamError::Protocol(format!("the OpenAPI description {url} is not UTF-8")))
    }

    /// Where calls go (see the module comment).
    fn base(&self, built: &Api) -> Result<http::Uri, BaseError> {
        if let Some(b) = &self.cfg.base_url {
            return Ok(b.clone());
        }
        let named = built.server.as_deref().filter(|s| !s.is_empty());
        match (&self.cfg.source, named) {
            (OpenApiSource::File(_), Some(s)) if s.starts_with("http://") || s.starts_with("https://") => {
                s.parse().map_err(|source| BaseError::NotAUrl { server: s.to_string(), source })
            }
            (OpenApiSource::File(_), Some(s)) => Err(BaseError::Relative(s.to_string())),
            (OpenApiSource::File(_), None) => Err(BaseError::NoServer),
            (OpenApiSource::Url(doc), named) => {
                let origin = format!("{}://{}", doc.scheme_str().unwrap_or("https"), doc.authority().map(|a| a.as_str()).unwrap_or(""));
                let url = match named {
                    None => origin.clone(),
                    Some(s) if s.starts_with('/') => format!("{origin}{s}"),
                    Some(s) => s.to_string(),
                };
                let uri: http::Uri = url.parse().map_err(|source| BaseError::NotAUrl { server: url.clone(), source })?;
                if same_origin(&uri, doc) { Ok(uri) } else { Err(BaseError::OtherOrigin { url, origin }) }
            }
        }
    }

    /// One tool call: the operation's request, its answer as the tool's result.
    async fn call(&self, l: &Loaded, params: &Map<String, Value>, env: &Envelope, deadline: Instant) -> Result<Outcome, UpstreamError> {
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        let Some(op) = l.api.operations.iter().find(|o| o.name == name) else {
            return Ok(Outcome::Error(RpcError::invalid_params(format!("Unknown tool: {name}"))));
        };
        let empty = Map::new();
        let args = params.get("arguments").and_then(Value::as_object).unwrap_or(&empty);
        let made = match api::request(op, args) {
            Ok(m) => m,
            Err(why) => return Ok(Outcome::Error(RpcError::invalid_params(why.to_string()))),
        };
        if let Some((_, body)) = &made.body
            && body.len() > self.max_bytes
        {
            return Ok(Outcome::Error(RpcError::invalid_params(format!("the request body is larger than {} bytes", self.max_bytes))));
        }
        let base = l.base.to_string();
        let mut url = format!("{}{}", base.trim_end_matches('/'), made.path_and_query);
        let called = url.clone();
        let method =
            http::Method::from_bytes(made.method.as_bytes()).map_err(|_| UpstreamError::Protocol(format!("method {}", made.method)))?;
        // The exchange's retries are shared by the redirects: one nonce retry, one renewal per call.
        let (mut retries, mut redirects) = (Retries::default(), 0);
        let resp = loop {
            let request = || self.request(&method, &url, &made, env, deadline);
            let resp = self.out.exchange(&mut retries, &self.client, deadline, request).await?;
            let status = resp.status().as_u16();
            if resp.status().is_redirection()
                && let Some(location) = resp.headers().get(http::header::LOCATION).and_then(|v| v.to_str().ok())
            {
                let next = resolve(&url, location);
                let allowed = matches!(method, http::Method::GET | http::Method::HEAD) && redirects < MAX_REDIRECTS;
                match next.parse::<http::Uri>() {
                    Ok(to) if allowed && same_operation(&called, &to, &l.base) => {
                        redirects += 1;
                        url = next;
                        continue;
                    }
                    _ => {
                        let text = format!(
                            "HTTP {status}: a redirect to {} was not followed (only GET and HEAD to the same path on the API's own origin, at most {MAX_REDIRECTS}: another path is another operation, which the policy did not decide on)",
                            origin_of(&next)
                        );
                        return Ok(Outcome::Result(complete(json!({ "content": [{ "type": "text", "text": text }], "isError": true }))?));
                    }
                }
            }
            break resp;
        };
        let status = resp.status().as_u16();
        let content_type = resp.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let (body, truncated) = self.read_capped(resp.into_body(), deadline).await?;
        let answer = api::Answer { status, content_type: content_type.as_deref(), body: &body, truncated, url: &url };
        Ok(Outcome::Result(complete(api::tool_result(op, &answer))?))
    }

    /// The HTTP request: credentials and trace context first, then the operation's own headers.
    async fn request(
        &self,
        method: &http::Method,
        url: &str,
        made: &api::HttpCall,
        env: &Envelope,
        deadline: Instant,
    ) -> Result<http::Request<Full<Bytes>>, UpstreamError> {
        let mut h = self.out.credentials(method, url, env, deadline).await?;
        for (k, v) in &made.headers {
            let name =
                http::HeaderName::from_bytes(k.as_bytes()).map_err(|_| UpstreamError::Protocol(format!("{k:?} is not a header name")))?;
            let value =
                http::HeaderValue::from_str(v).map_err(|_| UpstreamError::Protocol(format!("the header {k} cannot carry that value")))?;
            h.insert(name, value);
        }
        h.insert(http::header::ACCEPT, http::HeaderValue::from_static("application/json, */*;q=0.8"));
        let body = match &made.body {
            Some((ct, bytes)) => {
                let ct = http::HeaderValue::from_str(ct).map_err(|_| UpstreamError::Protocol("the body's content type".into()))?;
                h.insert(http::header::CONTENT_TYPE, ct);
                Bytes::from(bytes.clone())
            }
            None => Bytes::new(),
        };
        let mut req = http::Request::builder().method(method.clone()).uri(url);
        if let Some(slot) = req.headers_mut() {
            *slot = h;
        }
        req.body(Full::new(body)).map_err(|e| UpstreamError::Protocol(format!("cannot build the request for {}: {e}", self.id)))
    }

    /// The body up to `max_bytes`; whether there was more.
    async fn read_capped(&self, mut body: hyper::body::Incoming, deadline: Instant) -> Result<(Vec<u8>, bool), UpstreamError> {
        let mut out = Vec::new();
        loop {
            let frame = match timeout_at(deadline, body.frame()).await {
                Err(_) => return Err(UpstreamError::Timeout { after: self.timeout }),
                Ok(None) => return Ok((out, false)),
                Ok(Some(Err(e))) => return Err(UpstreamError::Unreachable(format!("reading the answer failed: {e}"))),
                Ok(Some(Ok(f))) => f,
            };
            if let Ok(data) = frame.into_data() {
                if out.len() + data.len() > self.max_bytes {
                    out.extend_from_slice(&data[..self.max_bytes - out.len()]);
                    return Ok((out, true));
                }
                out.extend_from_slice(&data);
            }
        }
    }
}

impl super::Upstream {
    /// Whether this upstream's tools come from an OpenAPI description it reads itself (which a
    /// reload reads again even when the upstream's settings did not change).
    pub fn reads_a_description(&self) -> bool {
        matches!(self.transport, super::Transport::Rest(_))
    }

    /// What an `openapi` upstream's description yielded, as last read (for `mcpgate check`).
    pub fn openapi(&self) -> Option<Arc<Loaded>> {
        match &self.transport {
            super::Transport::Rest(t) => t.loaded(),
            _ => None,
        }
    }
}

/// Why a description is not read: it names the limit.
fn too_large() -> String {
    format!("is larger than {} MiB, the most the gateway reads of a description", MAX_DOCUMENT >> 20)
}

fn ok(v: Value) -> Outcome {
    match result_json(v) {
        Ok(j) => Outcome::Result(j),
        Err(e) => Outcome::Error(RpcError::internal(e.to_string())),
    }
}

/// A tool result as a modern server sends it (`resultType: complete`).
fn complete(mut v: Value) -> Result<Json, UpstreamError> {
    if let Value::Object(m) = &mut v {
        m.insert("resultType".into(), "complete".into());
    }
    result_json(v)
}

fn result_json(v: Value) -> Result<Json, UpstreamError> {
    Json::to_json(&v).map_err(|e| UpstreamError::Protocol(format!("cannot write the result: {e}")))
}

fn same_origin(a: &http::Uri, b: &http::Uri) -> bool {
    let port = |u: &http::Uri| u.port_u16().unwrap_or(if u.scheme_str() == Some("https") { 443 } else { 80 });
    a.scheme_str() == b.scheme_str() && a.host().map(str::to_ascii_lowercase) == b.host().map(str::to_ascii_lowercase) && port(a) == port(b)
}

/// Whether a redirect to `to` asks for the operation that was called (`called`): the API's own
/// origin and the same path, but for a trailing `/` (a query may differ). Any other path is
/// another operation, which neither the policy nor a guard decided on, and the upstream's
/// credentials would go with it.
fn same_operation(called: &str, to: &http::Uri, base: &http::Uri) -> bool {
    let Ok(called) = called.parse::<http::Uri>() else { return false };
    same_origin(to, base) && same_origin(&called, base) && called.path().trim_end_matches('/') == to.path().trim_end_matches('/')
}

/// `location` (absolute, or relative to `from`) as an absolute URL, its dot-segments removed as
/// a server would remove them (`/v1/../v2` is `/v2`).
fn resolve(from: &str, location: &str) -> String {
    match url::Url::parse(from).and_then(|b| b.join(location)) {
        Ok(u) => u.to_string(),
        Err(_) => location.to_string(),
    }
}

/// Only the scheme and host of a URL, for a message (its path and query may carry anything).
fn origin_of(url: &str) -> String {
    match url.parse::<http::Uri>() {
        Ok(u) => format!("{}://{}", u.scheme_str().unwrap_or("?"), u.authority().map(|a| a.as_str()).unwrap_or("?")),
        Err(_) => "an unreadable URL".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_redirect_targets() {
        let base: http::Uri = "http://127.0.0.1:8080/v1".parse().unwrap();
        assert!(same_origin(&"http://127.0.0.1:8080/other".parse().unwrap(), &base));
        assert!(!same_origin(&"http://127.0.0.1:8081/v1".parse().unwrap(), &base));
        assert!(!same_origin(&"https://127.0.0.1:8080/v1".parse().unwrap(), &base));
        assert!(same_origin(&"https://api.example.com/x".parse().unwrap(), &"https://API.example.com:443/".parse().unwrap()));
        assert_eq!(resolve("http://h:1/a/b?x=1", "/c"), "http://h:1/c");
        assert_eq!(resolve("http://h:1/a/b", "c"), "http://h:1/a/c");
        assert_eq!(origin_of("http://evil.example/steal?token=1"), "http://evil.example");
        assert_eq!(resolve("http://h:1/a/b", "http://h:1/a/../v2/x"), "http://h:1/v2/x");
    }

    /// Only a redirect to the called path itself (a trailing `/` added or removed, a query
    /// changed) is followed; one to another path or origin is another operation.
    #[test]
    fn only_a_redirect_to_the_same_operation_is_followed() {
        let base: http::Uri = "http://127.0.0.1:8080/v1".parse().unwrap();
        let called = "http://127.0.0.1:8080/v1/users/alice";
        let to = |location: &str| resolve(called, location).parse::<http::Uri>().unwrap();
        assert!(same_operation(called, &to("/v1/users/alice/"), &base));
        assert!(same_operation(called, &to("/v1/users/alice?page=2"), &base));
        assert!(!same_operation(called, &to("/v2"), &base), "another path");
        assert!(!same_operation(called, &to("/v1/users/alice/../../admin"), &base), "dot-segments resolved first");
        assert!(!same_operation(called, &to("http://127.0.0.1:8080/v1/users/alice/../bob"), &base));
        assert!(!same_operation(called, &to("http://127.0.0.1:9/v1/users/alice"), &base), "another origin");
        let escaped = "http://127.0.0.1:8080/v1/users/%2E%2E";
        let cleaned = resolve(escaped, "/v1/").parse::<http::Uri>().unwrap();
        assert!(!same_operation(escaped, &cleaned, &base), "a Go-style clean of `..` is another path");
    }
}
