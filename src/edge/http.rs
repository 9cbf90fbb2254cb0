//! The Streamable HTTP listener (hyper, HTTP/1.1 and h2 on one port): routing (`POST <path>`,
//! `/healthz`, `/readyz`, the pages, the discovery documents of `discovery`, the registry API),
//! the transport-level checks in the order a request meets them — Host and Origin (403), method
//! (405), Content-Type (415), Accept (406), body size (413) and read deadline (408), JSON-RPC
//! envelope (400) — then era classification, and the modern or legacy adapter in front of the
//! service. Header size
//! (431) and header read timeouts are enforced by hyper before any of this runs.

use crate::auth::{Principal, prm};
use crate::edge::conns::Holding;
use crate::edge::era::modern;
use crate::edge::era::{BodyFacts, Era, classify};
use crate::edge::legacy_http;
use crate::edge::render;
use crate::edge::shared::{Shared, authenticate};
use crate::edge::stack;
use bytes::Bytes;
use http::header::{ACCEPT, ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use mcpgate_config::auth::AuthMode;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::jsonrpc::{Kind, Message};
use render::Body;
use std::convert::Infallible;
use std::sync::Arc;

pub(crate) async fn handle(st: Arc<Shared>, req: Request<Incoming>, peer: std::net::SocketAddr) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path();
    // Every page but the probes answers only a Host and Origin the listener accepts (a page
    // that rebinds a name to 127.0.0.1 must not read metrics or metadata either).
    let rebinding = || {
        let host = header_str(&req, HOST).or_else(|| req.uri().authority().map(|a| a.as_str()));
        st.origin.check(header_str(&req, ORIGIN), host).err().map(|r| r.to_string())
    };
    let private_metrics = peer.ip().is_loopback() && !st.cfg.metrics_public;
    if path == "/metrics"
        && private_metrics
        && let Some(reason) = rebinding()
    {
        return Ok(forbidden(&reason));
    }
    // On loopback without `metrics_public`, with authentication on, an admin's credential:
    // every local process is on loopback, sandboxed servers with an open network included.
    if path == "/metrics"
        && private_metrics
        && let Some(refused) = metrics_admin(&st, &req).await
    {
        return Ok(refused);
    }
    if path == "/metrics" && (peer.ip().is_loopback() || st.cfg.metrics_public) {
        let edge = crate::telemetry::EdgeStats { connections: st.conns.len(), in_flight: st.in_flight.in_progress() };
        if let Some(text) = st.svc.metrics(edge) {
            let mut r = Response::new(render::full(text));
            r.headers_mut()
                .insert(CONTENT_TYPE, http::HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"));
            return Ok(r);
        }
    }
    if path == "/healthz" {
        return Ok(render::plain(StatusCode::OK, "ok\n"));
    }
    if path == "/readyz" {
        return Ok(if st.svc.ready() {
            render::plain(StatusCode::OK, "ready\n")
        } else {
            render::plain(StatusCode::SERVICE_UNAVAILABLE, "starting\n")
        });
    }
    // The Server Cards and the AI Catalog: public, for any Origin (their own CORS).
    if let Some(r) = crate::edge::discovery::route(&st, &req) {
        return Ok(r);
    }
    // A browser page from an origin the listener accepts may read what it is answered (CORS).
    let cors_origin = req.headers().get(ORIGIN).filter(|_| rebinding().is_none()).cloned();
    if req.method() == Method::OPTIONS && cors_origin.is_some() && serves(&st, path) {
        let origin = cors_origin.as_ref().map_or_else(|| http::HeaderValue::from_static("null"), Clone::clone);
        return Ok(crate::edge::cors::preflight(&origin, req.headers()));
    }
    if let Some(mut r) = protected_resource_metadata(&st, &req) {
        if let Some(reason) = rebinding() {
            return Ok(forbidden(&reason));
        }
        if let Some(origin) = &cors_origin {
            crate::edge::cors::allow(&mut r, origin);
        }
        return Ok(r);
    }
    if path == "/console" || path.starts_with("/console/") {
        return Ok(crate::edge::pages::console::handle(&st, req).await);
    }
    if crate::edge::pages::connect::owns(path) {
        return Ok(crate::edge::pages::connect::handle(&st, req).await);
    }
    if crate::edge::registry::owns(&st, path) {
        let mut r = crate::edge::registry::handle(&st, req).await;
        if let Some(origin) = &cors_origin {
            crate::edge::cors::allow(&mut r, origin);
        }
        return Ok(r);
    }
    // The root endpoint, or a virtual server (checked against the current config, so a reload
    // adds and removes them).
    let endpoint = if path == st.cfg.path {
        None
    } else if st.svc.serves_endpoint(path) {
        Some(path.to_string())
    } else {
        return Ok(render::plain(StatusCode::NOT_FOUND, "not found: the MCP endpoint is elsewhere\n"));
    };
    let mut response = mcp(&st, req, endpoint.as_deref()).await;
    if let Some(origin) = &cors_origin {
        crate::edge::cors::allow(&mut response, origin);
    }
    Ok(response)
}

/// `None` when `req` may read the private metrics: without authentication (loopback is then the
/// whole boundary, as for every call), or with an admin caller's credential; else the refusal.
async fn metrics_admin(st: &Shared, req: &Request<Incoming>) -> Option<Response<Body>> {
    let auth = st.authenticator().filter(|a| a.mode() != AuthMode::None)?;
    let caller = match authenticate(st, req, None, &st.cfg.path).await {
        Ok(c) => c,
        Err(r) => return Some(*r),
    };
    let cfg = st.console.as_ref().map(|gw| gw.config());
    let admin = cfg.is_some_and(|c| c.callers.iter().any(|k| k.admin && caller.rules.contains(&k.id)));
    drop(auth);
    (!admin).then(|| {
        render::plain(
            StatusCode::FORBIDDEN,
            "Forbidden: /metrics is for admin callers ([[caller]] admin = true), or set server.metrics_public\n",
        )
    })
}

/// Whether `path` is one the listener answers browser clients on: an MCP endpoint, the
/// protected-resource metadata, or the registry API.
fn serves(st: &Shared, path: &str) -> bool {
    path == st.cfg.path
        || st.svc.serves_endpoint(path)
        || path.starts_with("/.well-known/oauth-protected-resource")
        || crate::edge::registry::owns(st, path)
}

/// The 403 of a request refused by the Host/Origin check.
fn forbidden(reason: &str) -> Response<Body> {
    tracing::warn!(%reason, "refused a request (DNS-rebinding protection)");
    render::error(None, &RpcError::invalid_request(format!("Forbidden: {reason}")).with_status(StatusCode::FORBIDDEN))
}

fn header_str(req: &Request<Incoming>, name: http::HeaderName) -> Option<&str> {
    req.headers().get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"))
}

async fn mcp(st: &Shared, req: Request<Incoming>, endpoint: Option<&str>) -> Response<Body> {
    // Borrowed from the request (its Host header, else the URI's authority): no copy per request.
    let host = header_str(&req, HOST).or_else(|| req.uri().authority().map(|a| a.as_str()));
    if let Err(reason) = st.origin.check(header_str(&req, ORIGIN), host) {
        return forbidden(&reason.to_string());
    }
    let caller = match authenticate(st, &req, host, endpoint.unwrap_or(&st.cfg.path)).await {
        Ok(p) => p.at(endpoint),
        Err(r) => return *r,
    };
    tracing::Span::current().record("caller", caller.id.as_str());
    if req.method() != Method::POST && classify(req.method(), req.headers(), BodyFacts::default()) == Era::Legacy {
        return legacy_http::get_or_delete(st.svc.as_ref(), &st.legacy, req.method(), req.headers(), caller).await;
    }
    if req.method() != Method::POST {
        let mut r = render::error(
            None,
            &RpcError::invalid_request(format!("Method {} is not allowed: this endpoint accepts POST only", req.method()))
                .with_status(StatusCode::METHOD_NOT_ALLOWED),
        );
        r.headers_mut().insert(ALLOW, http::HeaderValue::from_static("POST"));
        return r;
    }
    let ctype = header_str(&req, CONTENT_TYPE).unwrap_or("");
    if !ctype.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json")) {
        let what = if ctype.is_empty() { "missing".to_string() } else { format!("'{ctype}'") };
        return render::error(
            None,
            &RpcError::invalid_request(format!("Content-Type is {what}: send application/json"))
                .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE),
        );
    }
    if let Some(accept) = header_str(&req, ACCEPT) {
        let has = |t: &str| accept.as_bytes().windows(t.len()).any(|w| w.eq_ignore_ascii_case(t.as_bytes()));
        if !["application/json", "text/event-stream", "*/*", "application/*", "text/*"].iter().any(|t| has(t)) {
            return render::error(
                None,
                &RpcError::invalid_request("Accept must allow application/json or text/event-stream (clients should send both)")
                    .with_status(StatusCode::NOT_ACCEPTABLE),
            );
        }
    }
    let limit = st.cfg.max_body_bytes;
    let too_large = || {
        render::error(
            None,
            &RpcError::invalid_request(format!("Request body is larger than the limit of {limit} bytes"))
                .with_status(StatusCode::PAYLOAD_TOO_LARGE),
        )
    };
    if header_str(&req, CONTENT_LENGTH).and_then(|l| l.parse::<u64>().ok()).is_some_and(|l| l > limit as u64) {
        return too_large();
    }
    let (parts, body) = req.into_parts();
    let bytes: Bytes = match tokio::time::timeout(st.cfg.body_read_timeout, Limited::new(body, limit).collect()).await {
        Err(_) => {
            return render::error(
                None,
                &RpcError::invalid_request("Timed out reading the request body").with_status(StatusCode::REQUEST_TIMEOUT),
            );
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return too_large(),
        Ok(Err(e)) => {
            return render::error(None, &RpcError::invalid_request(format!("Could not read the request body: {e}")));
        }
        Ok(Ok(c)) => c.to_bytes(),
    };
    let msg = match Message::parse_bytes(&bytes) {
        Ok(m) => m,
        Err(e) => return render::error(None, &e),
    };
    let kind = match msg.kind() {
        Ok(k) => k,
        Err(e) => {
            let id = msg.id.as_ref().filter(|i| mcpgate_protocol::jsonrpc::valid_id(i).is_ok());
            return render::error(id, &e);
        }
    };
    // Change streams live long and are bounded by the connection limit instead.
    if kind == Kind::Request && msg.method.as_deref() != Some("subscriptions/listen") {
        let permit = match st.in_flight.admit(&caller.id) {
            Ok(p) => p,
            Err(e) => return render::error(msg.id.as_ref(), &e),
        };
        let resp = message(st, parts, msg, kind, caller).await;
        return resp.map(|b| BodyExt::boxed(Holding::new(b, permit)));
    }
    message(st, parts, msg, kind, caller).await
}

/// One JSON-RPC message of a POST, in its era.
async fn message(st: &Shared, parts: http::request::Parts, msg: Message, kind: Kind, caller: Arc<Principal>) -> Response<Body> {
    if classify(&Method::POST, &parts.headers, BodyFacts::of(&msg)) == Era::Legacy {
        return legacy_http::post(&st.svc, &st.legacy, &st.tasks, &parts.headers, msg, kind, caller).await;
    }
    match kind {
        Kind::Response => render::error(
            msg.id.as_ref(),
            &RpcError::invalid_request("A client must not POST a JSON-RPC response: this server sends no requests"),
        ),
        Kind::Notification => {
            tracing::debug!(method = ?msg.method, "notification accepted");
            let mut r = Response::new(render::full(Bytes::new()));
            *r.status_mut() = StatusCode::ACCEPTED;
            r
        }
        Kind::Request => {
            let id = msg.id.clone();
            match modern::to_request(msg, Some(&parts.headers), caller) {
                Err(e) => render::error(id.as_ref(), &e),
                Ok(mut request) => {
                    mcpgate_protocol::trace::adopt(&parts.headers, &mut request.meta.fields);
                    tracing::Span::current().record("method", request.method.as_str());
                    let id = request.id.clone();
                    render::reply(
                        id,
                        stack::serve(st.svc.clone(), &st.tasks, stack::Client::Modern, crate::telemetry::Transport::Tcp, request).await,
                    )
                }
            }
        }
    }
}

/// `/.well-known/oauth-protected-resource[/<path>]` (RFC 9728), served when tokens are JWTs.
fn protected_resource_metadata(st: &Shared, req: &Request<Incoming>) -> Option<Response<Body>> {
    let auth = st.authenticator().filter(|a| a.mode() == AuthMode::Jwt)?;
    let path = req.uri().path();
    let base = "/.well-known/oauth-protected-resource";
    let at = match path.strip_prefix(base) {
        Some("") => st.cfg.path.clone(),
        Some(p) if p == st.cfg.path || st.svc.serves_endpoint(p) => p.to_string(),
        _ => return None,
    };
    let host = req.headers().get(HOST).and_then(|v| v.to_str().ok());
    let resource = prm::resource_at(auth.config(), host, &st.cfg.path, &at, st.cfg.tls.is_some());
    let body = prm::document(auth.config(), &resource).to_string().into_bytes();
    Some(render::json(StatusCode::OK, body))
}
