//! The MCP Registry API over HTTP (`GET /v0.1/servers…`, built by `discovery::registry`), served
//! when `[discovery] enabled` and `registry` are on: the Host and Origin check as for every page,
//! the caller authenticated as on the MCP endpoint (`shared::authenticate`: without `[auth]`
//! everyone is the anonymous caller; with API keys or JWTs, no credential is the same 401), its
//! rate limit, then the view it has of each endpoint — the same catalogue and the same decision
//! its lists are served from (`catalog_for`, `view::visible` through its grants at that
//! endpoint). Answers depend on the caller: `Cache-Control: private, no-store`, `Vary:
//! Authorization`. Errors are `{"error": "…"}`, as the registry's description has them.

use crate::auth::Principal;
use crate::discovery::registry::{self, Registry, Route, View};
use crate::edge::render::{self, Body};
use crate::edge::shared::{Shared, authenticate};
use crate::gateway::Gateway;
use http::header::{ALLOW, CACHE_CONTROL, CONTENT_LENGTH, HOST, ORIGIN, VARY};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use mcpgate_config::Config;
use mcpgate_model::catalog::{Kind, view};
use serde_json::{Value, json};
use std::sync::Arc;

/// Whether the listener answers `path` with the registry API: it is on, and no endpoint has
/// taken the path.
pub(crate) fn owns(st: &Shared, path: &str) -> bool {
    registry::owns(path)
        && !st.svc.serves_endpoint(path)
        && st.console.as_ref().is_some_and(|gw| {
            let d = &gw.config().discovery;
            d.enabled && d.registry
        })
}

pub(crate) async fn handle(st: &Shared, req: Request<Incoming>) -> Response<Body> {
    let Some(gw) = st.console.as_ref() else { return error(StatusCode::NOT_FOUND, "Not found") };
    if req.method() != Method::GET {
        let mut r = error(StatusCode::METHOD_NOT_ALLOWED, &format!("Method {} is not allowed: this registry is read-only", req.method()));
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET"));
        return r;
    }
    let header = |name: http::HeaderName| req.headers().get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let host = header(HOST).map(str::to_string).or_else(|| req.uri().authority().map(|a| a.to_string()));
    if let Err(reason) = st.origin.check(header(ORIGIN), host.as_deref()) {
        tracing::warn!(%reason, "refused a request (DNS-rebinding protection)");
        return error(StatusCode::FORBIDDEN, &format!("Forbidden: {reason}"));
    }
    let cfg = gw.config();
    let caller = match authenticate(st, &req, host.as_deref(), &cfg.server.path).await {
        Ok(c) => c,
        Err(refused) => return rest_error(*refused).await,
    };
    if let Some(rate) = caller.rate
        && let Err(wait) = gw.limiter.check(&format!("caller:{}", caller.id), rate).await
    {
        gw.metrics.refused(crate::telemetry::reasons::Refused::RateLimited);
        let e = crate::dispatch::rate_limited(&caller.id, wait);
        let mut r = error(e.status, &e.message);
        for (name, value) in &e.headers {
            if let Ok(v) = HeaderValue::from_str(value) {
                r.headers_mut().insert(*name, v);
            }
        }
        return r;
    }
    let Some(route) = registry::route(req.uri().path()) else { return error(StatusCode::NOT_FOUND, "Not found") };
    // As before any request: counts taken before the first probe round has finished, or before
    // the caller's own upstreams (`user_auth`) are opened, would be short of its lists'.
    gw.wait_ready().await;
    gw.prepare_personal(&caller).await;
    let views = views(gw, &caller, &cfg);
    let base = match &cfg.discovery.public_url {
        Some(url) => url.clone(),
        None => format!("{}://{}", if st.cfg.tls.is_some() { "https" } else { "http" }, host.as_deref().unwrap_or("localhost")),
    };
    let reg = Registry { cfg: &cfg, base: &base, loaded_at: gw.loaded_at() };
    let answer = match route {
        Route::List => registry::Query::parse(req.uri().query()).and_then(|q| reg.list(&views, &q, &gw.sealer)),
        Route::Versions(name) => reg.versions(&views, &name),
        Route::Version(name, version) => reg.version(&views, &name, &version),
    };
    match answer {
        Ok(body) => json(StatusCode::OK, &body),
        Err(e) => {
            if e.status() == StatusCode::INTERNAL_SERVER_ERROR {
                tracing::error!(error = %e, "the registry API could not answer");
            }
            json(e.status(), &e.body())
        }
    }
}

/// What `caller` may use through each endpoint, the root first.
fn views(gw: &Gateway, caller: &Arc<Principal>, cfg: &Config) -> Vec<View> {
    let root = cfg.server.path.as_str();
    std::iter::once(root)
        .chain(cfg.endpoints.iter().map(|e| e.path.as_str()))
        .map(|path| {
            let at = caller.clone().at((path != root).then_some(path));
            let cat = gw.catalog_for(&at);
            let id_of = |i: usize| gw.upstream_id(i);
            let count = |kind| view::visible(&cat, kind, &at.grants, &id_of).len();
            View {
                path: path.to_string(),
                unrestricted: at.grants.is_unrestricted(),
                tools: view::visible(&cat, Kind::Tool, &at.grants, &id_of).iter().map(|e| e.name.to_string()).collect(),
                prompts: count(Kind::Prompt),
                resources: count(Kind::Resource),
                templates: count(Kind::Template),
                skills: count(Kind::Skill),
            }
        })
        .collect()
}

/// A JSON answer that depends on the caller.
fn json(status: StatusCode, body: &Value) -> Response<Body> {
    let mut r = render::json(status, body.to_string().into_bytes());
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    r.headers_mut().insert(VARY, HeaderValue::from_static("Authorization"));
    r
}

fn error(status: StatusCode, message: &str) -> Response<Body> {
    json(status, &json!({ "error": message }))
}

/// The authentication's refusal (status and challenge kept), its message as the registry's
/// `{"error": …}` rather than a JSON-RPC error.
async fn rest_error(refused: Response<Body>) -> Response<Body> {
    let (mut parts, body) = refused.into_parts();
    let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
    let message = parsed.as_ref().and_then(|v| v["error"]["message"].as_str()).unwrap_or("Unauthorized").to_string();
    parts.headers.remove(CONTENT_LENGTH);
    let mut r = json(parts.status, &json!({ "error": message }));
    for (name, value) in &parts.headers {
        if !r.headers().contains_key(name) {
            r.headers_mut().insert(name.clone(), value.clone());
        }
    }
    r
}
