//! The console over HTTP: `/console` and its script and stylesheet (embedded, served with a
//! strict Content-Security-Policy: nothing external loads), and `/console/api/*` — `state`,
//! `view?caller=ID`, `calls`, `pins` (what is served, as pins) and `events` (SSE), and `POST pins/approve` (the console's one
//! change: approving a held tool) — behind the gateway's authentication, for admin callers only,
//! or without authentication for whoever sends the console key (see [`crate::console::may_read`]); and `usage?since=24h` for every caller (its own usage; an
//! admin's shows everyone's). Off unless `[console] enabled`.

use crate::edge::render::{self, Body};
use crate::edge::shared::{Shared, authenticate};
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HOST, ORIGIN};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// How often the live feed looks at upstream health and the catalogue.
const TICK: Duration = Duration::from_secs(2);

pub(crate) async fn handle(st: &Shared, req: Request<Incoming>) -> Response<Body> {
    let Some(gw) = st.console.as_ref().filter(|g| g.config().console) else {
        return render::plain(StatusCode::NOT_FOUND, "not found: the console is off ([console] enabled = true turns it on)\n");
    };
    let path = req.uri().path().to_string();
    // The one change the console makes: approving a held tool (its other change, revoking a
    // connected account, goes to /oauth/tokens/revoke).
    let approving = req.method() == Method::POST && path == "/console/api/pins/approve";
    if req.method() != Method::GET && !approving {
        return render::plain(StatusCode::METHOD_NOT_ALLOWED, "the console is read-only but for approving held tools\n");
    }
    let asset = |body: &'static str, kind: &'static str| {
        let mut r = Response::new(render::full(body));
        let h = r.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
        h.insert("content-security-policy", HeaderValue::from_static(CSP));
        h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
        h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        r
    };
    match path.as_str() {
        "/console" | "/console/" => return asset(crate::console::INDEX_HTML, "text/html; charset=utf-8"),
        "/console/app.js" => return asset(crate::console::APP_JS, "text/javascript; charset=utf-8"),
        "/console/app.css" => return asset(crate::console::APP_CSS, "text/css; charset=utf-8"),
        _ => {}
    }
    let Some(what) = path.strip_prefix("/console/api/") else {
        return render::plain(StatusCode::NOT_FOUND, "not found\n");
    };
    let host = req.headers().get(HOST).and_then(|v| v.to_str().ok()).map(str::to_string);
    let origin = req.headers().get(ORIGIN).and_then(|v| v.to_str().ok());
    if let Err(reason) = st.origin.check(origin, host.as_deref()) {
        return json_answer(StatusCode::FORBIDDEN, json!({ "error": format!("Forbidden: {reason}") }));
    }
    // A change comes from the console's own page only, never from another page the browser has
    // open (with `[auth] mode = "none"`, every local page is the anonymous admin).
    if approving {
        let host = host.clone().or_else(|| req.uri().authority().map(|a| a.to_string()));
        if let Err((status, reason)) = crate::edge::origin::own_write(req.headers(), host.as_deref()) {
            return json_answer(status, json!({ "error": format!("Refused: {reason}") }));
        }
    }
    let caller = match authenticate(st, &req, host.as_deref(), &st.cfg.path).await {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let admin = crate::console::may_read(gw, &caller, req.headers());
    // Usage is for everyone: an admin sees every caller's, a caller its own.
    if what == "usage" {
        let query = req.uri().query().unwrap_or("");
        let param = |k: &str| {
            query.split('&').find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('='))).map(mcpgate_protocol::toolbox::form_decode)
        };
        return json_answer_result(crate::console::usage(gw, &caller, admin, &param).await);
    }
    if !admin {
        tracing::info!(caller = %caller.id, "refused the console to a caller that is not an admin");
        let why = if gw.config().auth.mode == mcpgate_config::auth::AuthMode::None {
            "Forbidden: without authentication ([auth] mode = \"none\") the console needs its key: open the console link the gateway logged at start (/console#key=…), or enter the key from it"
        } else {
            "Forbidden: the console is for admin callers ([[caller]] admin = true)"
        };
        return json_answer(StatusCode::FORBIDDEN, json!({ "error": why }));
    }
    match what {
        "pins/approve" if approving => {
            let body = match http_body_util::Limited::new(req.into_body(), 16 * 1024).collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => return json_answer(StatusCode::PAYLOAD_TOO_LARGE, json!({ "error": "too large" })),
            };
            let asked: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let (Some(upstream), Some(tool), Some(fingerprint)) =
                (asked["upstream"].as_str(), asked["tool"].as_str(), asked["fingerprint"].as_str())
            else {
                return json_answer(
                    StatusCode::BAD_REQUEST,
                    json!({ "error": "send {\"upstream\": ..., \"tool\": ..., \"fingerprint\": ...} (the fingerprint of the definition you reviewed, from /console/api/state)" }),
                );
            };
            match gw.approve_pin(upstream, tool, fingerprint) {
                Ok(()) => {
                    tracing::info!(caller = %caller.id, %upstream, %tool, %fingerprint, "a held tool was approved from the console");
                    json_answer(StatusCode::OK, json!({ "approved": format!("{upstream}/{tool}"), "fingerprint": fingerprint }))
                }
                Err(e @ crate::gateway::pins::ApproveError::File(_)) => {
                    json_answer(StatusCode::INTERNAL_SERVER_ERROR, json!({ "error": e.to_string() }))
                }
                Err(e) => {
                    tracing::warn!(caller = %caller.id, %upstream, %tool, error = %e, "a console approval was refused");
                    json_answer(StatusCode::CONFLICT, json!({ "error": e.to_string() }))
                }
            }
        }
        "state" => json_answer(StatusCode::OK, crate::console::state(gw)),
        // What the running gateway serves, for `mcpgate pin --url`.
        "pins" => json_answer(StatusCode::OK, json!({ "upstreams": gw.served_pins() })),
        "calls" => json_answer(StatusCode::OK, serde_json::to_value(gw.audit.recent()).unwrap_or(Value::Null)),
        "view" => {
            let query = req.uri().query().unwrap_or("");
            let id =
                query.split('&').find_map(|kv| kv.strip_prefix("caller=")).map(mcpgate_protocol::toolbox::form_decode).unwrap_or_default();
            match crate::console::view_as(gw, &id) {
                Some(v) => json_answer(StatusCode::OK, v),
                None => json_answer(StatusCode::NOT_FOUND, json!({ "error": format!("no [[caller]] has id '{id}'") })),
            }
        }
        "events" => events(gw.clone(), &st.tasks),
        _ => json_answer(StatusCode::NOT_FOUND, json!({ "error": "unknown console API" })),
    }
}

fn json_answer_result(r: Result<Value, (StatusCode, String)>) -> Response<Body> {
    match r {
        Ok(v) => json_answer(StatusCode::OK, v),
        Err((status, e)) => json_answer(status, json!({ "error": e })),
    }
}

fn json_answer(status: StatusCode, v: Value) -> Response<Body> {
    let mut r = Response::new(render::full(v.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn sse(event: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// The live feed: upstream health and the catalogue when they change, each call as it ends.
fn events(gw: Arc<crate::gateway::Gateway>, owner: &mcpgate_protocol::tasks::Background) -> Response<Body> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let closing = gw.closing.clone();
    owner.spawn(async move {
        let gw = gw.as_ref();
        let mut calls = gw.audit.subscribe();
        let mut tick = tokio::time::interval(TICK);
        let (mut last_upstreams, mut last_catalog) = (Value::Null, None);
        loop {
            let frame = tokio::select! {
                _ = tick.tick() => {
                    let ups = crate::console::upstreams(gw);
                    let cat = gw.catalog();
                    if last_catalog.as_ref().is_some_and(|c| !Arc::ptr_eq(c, &cat))
                        && tx.send(sse("catalog", &crate::console::catalog(gw))).await.is_err()
                    {
                        return;
                    }
                    last_catalog = Some(cat);
                    if ups == last_upstreams {
                        Bytes::from_static(b": tick\n\n")
                    } else {
                        last_upstreams = ups.clone();
                        sse("upstreams", &ups)
                    }
                }
                call = calls.recv() => match call {
                    Ok(c) => sse("call", &serde_json::to_value(c).unwrap_or(Value::Null)),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return,
                },
                _ = closing.cancelled() => return,
            };
            if tx.send(frame).await.is_err() {
                return;
            }
        }
    });
    let body = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx)) });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(body)));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}
