//! The consent routes over HTTP (per-user identity; the pages themselves are `consent`):
//! `GET /oauth/connect?grant=…` shows the consent page for the caller and upstream a sealed
//! consent link names, and sets the browser's cookie nonce; `POST /oauth/connect` (the page's
//! form, CSRF-checked against that cookie) starts the authorization and sends the browser to the
//! authorization server; `GET /oauth/callback` is the redirect URI, where the code is exchanged
//! (state, browser and `iss` checked) and the caller's own connection opens; and
//! `GET /oauth/client.json` is the gateway's client metadata document. `GET /oauth/tokens` and
//! `POST /oauth/tokens/revoke` list and revoke the accounts callers connected (never the tokens):
//! an authenticated caller its own, an admin caller anyone's (`mcpgate tokens` uses them). Served
//! only when `[identity]` is configured.

use super::consent::{self, ConsentView};
use super::http::{State, authenticate};
use super::render::{self, Body};
use crate::identity::flow::random_token;
use http::header::{CONTENT_TYPE, COOKIE, HOST, ORIGIN, SET_COOKIE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use std::collections::HashMap;

/// The most a consent form may weigh.
const MAX_FORM: usize = 16 * 1024;

/// Whether `path` is one of these routes.
pub fn owns(path: &str) -> bool {
    matches!(path, "/oauth/connect" | "/oauth/callback" | "/oauth/client.json" | "/oauth/tokens" | "/oauth/tokens/revoke")
}

fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()).into_owned().collect()
}

fn page(status: StatusCode, title: &str, message: &str) -> Response<Body> {
    consent::html(status, consent::message_page(title, message))
}

pub(super) async fn handle(st: &State, req: Request<Incoming>, peer: std::net::SocketAddr) -> Response<Body> {
    let Some(gw) = st.console.as_ref() else { return render::plain(StatusCode::NOT_FOUND, "not found\n") };
    let Some(personal) = gw.personal.as_ref() else {
        return render::plain(StatusCode::NOT_FOUND, "not found: per-user identity is off ([identity] turns it on)\n");
    };
    let identity = &personal.identity;
    let settings = identity.settings();
    let secure = settings.redirect_uri.starts_with("https://");
    let cookies: Vec<&str> = req.headers().get_all(COOKIE).iter().filter_map(|v| v.to_str().ok()).collect();
    let nonce = consent::cookie_nonce(cookies, secure);
    let path = req.uri().path().to_string();
    if path.starts_with("/oauth/tokens") {
        return tokens(st, gw, req, peer).await;
    }
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/oauth/client.json") => {
            let mut r = Response::new(render::full(consent::client_metadata(&settings.client_metadata_url, &settings.redirect_uri)));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        (Method::GET, "/oauth/connect") => {
            let q = query(&req);
            let grant = q.get("grant").cloned().unwrap_or_default();
            let Some((caller, upstream)) = identity.grant(&grant) else {
                return page(
                    StatusCode::BAD_REQUEST,
                    "This link is not valid",
                    "The consent link is not valid or has expired (links last 15 minutes). Start again from your MCP client.",
                );
            };
            if let Err(e) = identity.discover(&upstream).await {
                tracing::warn!(%upstream, error = %e, "the upstream's authorization could not be discovered");
                return page(StatusCode::BAD_GATEWAY, "Cannot connect", &format!("{upstream}'s sign-in could not be found: {e}"));
            }
            let (server, scopes) = identity.describe(&upstream).unwrap_or_default();
            let (nonce, fresh) = match nonce {
                Some(n) => (n, false),
                None => match random_token() {
                    Some(n) => (n, true),
                    None => return page(StatusCode::INTERNAL_SERVER_ERROR, "Cannot connect", "No randomness is available."),
                },
            };
            let Some(csrf) = consent::csrf_token(&gw.sealer, &nonce, &grant) else {
                return page(StatusCode::INTERNAL_SERVER_ERROR, "Cannot connect", "The form could not be protected.");
            };
            let view = ConsentView {
                caller: &caller,
                upstream: &upstream,
                scopes: scopes.as_deref(),
                authorization_server: &server,
                redirect_uri: &settings.redirect_uri,
                grant: &grant,
                csrf: &csrf,
            };
            let mut r = consent::html_sending_forms_to(StatusCode::OK, consent::consent_page(&view), Some(&server));
            if fresh && let Ok(v) = HeaderValue::from_str(&consent::set_cookie(&nonce, secure)) {
                r.headers_mut().insert(SET_COOKIE, v);
            }
            r
        }
        (Method::POST, "/oauth/connect") => {
            let body = match Limited::new(req.into_body(), MAX_FORM).collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => return page(StatusCode::PAYLOAD_TOO_LARGE, "Cannot connect", "The form was too large."),
            };
            let form: HashMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
            let grant = form.get("grant").cloned().unwrap_or_default();
            let csrf = form.get("csrf").cloned().unwrap_or_default();
            if !consent::csrf_ok(&gw.sealer, &csrf, nonce.as_deref(), &grant) {
                tracing::warn!("refused a consent form whose CSRF token does not go with this browser");
                return page(
                    StatusCode::FORBIDDEN,
                    "Cannot connect",
                    "This form was not sent from the consent page this browser opened. Open the link from your client again.",
                );
            }
            let Some(nonce) = nonce else { return page(StatusCode::FORBIDDEN, "Cannot connect", "Cookies are needed to connect.") };
            match identity.begin(&grant, &nonce).await {
                Ok(url) => consent::see_other(&url),
                Err(e) => {
                    tracing::warn!(error = %e, "an authorization could not be started");
                    page(StatusCode::BAD_GATEWAY, "Cannot connect", &format!("The sign-in could not be started: {e}"))
                }
            }
        }
        (Method::GET, "/oauth/callback") => {
            let q = query(&req);
            if let Some(error) = q.get("error") {
                // The state is not consumed: the person may try again from the same page.
                let error = crate::audit::clean(error);
                return page(StatusCode::BAD_REQUEST, "Not connected", &format!("The sign-in was not completed ({error})."));
            }
            let (Some(state), Some(code)) = (q.get("state"), q.get("code")) else {
                return page(StatusCode::BAD_REQUEST, "Not connected", "The sign-in came back without a code or state.");
            };
            match identity.complete(state, code, q.get("iss").map(String::as_str), nonce.as_deref()).await {
                Ok(done) => {
                    tracing::info!(caller = %done.caller, upstream = %done.upstream, "a caller connected an upstream with its own account");
                    gw.consented(&done.caller, &done.upstream).await;
                    page(
                        StatusCode::OK,
                        &format!("Connected {}", done.upstream),
                        &format!("{} is connected for {}. You can close this tab and return to your client.", done.upstream, done.caller),
                    )
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a redirect back from an authorization server was refused");
                    page(StatusCode::BAD_REQUEST, "Not connected", &format!("The sign-in could not be completed: {e}"))
                }
            }
        }
        _ => render::plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}

/// `GET /oauth/tokens[?caller=ID]` and `POST /oauth/tokens/revoke` (JSON `{caller?, upstream?}`):
/// a caller's own accounts, or, for an admin caller, anyone's.
async fn tokens(st: &State, gw: &crate::gateway::Gateway, req: Request<Incoming>, peer: std::net::SocketAddr) -> Response<Body> {
    let host = req.headers().get(HOST).and_then(|v| v.to_str().ok()).map(str::to_string);
    let origin = req.headers().get(ORIGIN).and_then(|v| v.to_str().ok());
    if let Err(reason) = st.origin.check(origin, host.as_deref()) {
        return json(StatusCode::FORBIDDEN, &serde_json::json!({ "error": format!("Forbidden: {reason}") }));
    }
    // Revoking is a change: from the console's own page (or a client that is no browser) only.
    if req.method() == Method::POST {
        let host = host.clone().or_else(|| req.uri().authority().map(|a| a.to_string()));
        if let Err((status, reason)) = super::origin::own_write(req.headers(), host.as_deref()) {
            return json(status, &serde_json::json!({ "error": format!("Refused: {reason}") }));
        }
    }
    let caller = match authenticate(st, &req, host.as_deref(), &st.cfg.path).await {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let admin = crate::console::may_read(gw, &caller, peer.ip().is_loopback());
    let forbidden =
        || json(StatusCode::FORBIDDEN, &serde_json::json!({ "error": "only an admin caller may see or revoke another caller's accounts" }));
    // Whose accounts a request may touch: `None` when it names another caller and is no admin's;
    // `Some(None)`: everyone's.
    let whose = |asked: Option<String>| -> Option<Option<String>> {
        match asked {
            Some(other) if other != caller.id && !admin => None,
            Some(c) => Some(Some(c)),
            None if admin => Some(None),
            None => Some(Some(caller.id.clone())),
        }
    };
    match (req.method().clone(), req.uri().path()) {
        (Method::GET, "/oauth/tokens") => {
            let asked = query(&req).remove("caller");
            match whose(asked) {
                Some(who) => json(StatusCode::OK, &serde_json::json!({ "tokens": crate::console::tokens(gw, who.as_deref()) })),
                None => forbidden(),
            }
        }
        (Method::POST, "/oauth/tokens/revoke") => {
            let body = match Limited::new(req.into_body(), MAX_FORM).collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => return json(StatusCode::PAYLOAD_TOO_LARGE, &serde_json::json!({ "error": "the request is too large" })),
            };
            #[derive(serde::Deserialize, Default)]
            struct Revoke {
                caller: Option<String>,
                upstream: Option<String>,
            }
            let asked: Revoke = match body.is_empty() {
                true => Revoke::default(),
                false => match serde_json::from_slice(&body) {
                    Ok(r) => r,
                    Err(e) => return json(StatusCode::BAD_REQUEST, &serde_json::json!({ "error": format!("not the expected JSON: {e}") })),
                },
            };
            // Revoking everyone's needs naming nobody on purpose: an admin names a caller.
            let who = match whose(asked.caller.or_else(|| Some(caller.id.clone()))) {
                Some(Some(w)) => w,
                Some(None) => caller.id.clone(),
                None => return forbidden(),
            };
            let revoked = gw.disconnect(&who, asked.upstream.as_deref());
            tracing::info!(caller = %who, upstream = asked.upstream.as_deref().unwrap_or("*"), by = %caller.id, revoked, "upstream accounts revoked");
            json(StatusCode::OK, &serde_json::json!({ "revoked": revoked }))
        }
        _ => json(StatusCode::METHOD_NOT_ALLOWED, &serde_json::json!({ "error": "GET /oauth/tokens or POST /oauth/tokens/revoke" })),
    }
}

fn json(status: StatusCode, v: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(render::full(v.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
