//! The consent routes over HTTP (per-user identity; the pages themselves are `consent`):
//! `GET /oauth/connect?grant=…` shows the consent page for the caller and upstream a sealed
//! consent link names (for an API-key upstream, the page asking for the caller's key), and sets
//! the browser's cookie nonce; `POST /oauth/connect` (the page's form, CSRF-checked against that
//! cookie) starts the authorization and sends the browser to the authorization server (or keeps
//! the key typed); `GET /oauth/callback` is the redirect URI, where the code is exchanged
//! (state, browser and `iss` checked) and the caller's own connection opens; and
//! `GET /oauth/client.json` is the gateway's client metadata document. `GET /oauth/tokens` and
//! `POST /oauth/tokens/revoke` list and revoke the accounts callers connected (never the tokens):
//! an authenticated caller its own, an admin caller anyone's (`mcpgate tokens` uses them). Served
//! only when `[identity]` is configured.

use crate::auth::Authenticator;
use crate::edge::origin::Rebinding;
use crate::edge::pages::consent::{self, ConsentView};
use crate::edge::render::{self, Body};
use crate::edge::shared::{Shared, authenticate};
use crate::identity::service::Completed;
use http::header::{CONTENT_TYPE, COOKIE, HOST, ORIGIN, SET_COOKIE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use mcpgate_config::auth::AuthMode;
use mcpgate_protocol::toolbox::random_token;
use std::collections::HashMap;
use std::sync::Arc;

/// The most a consent form may weigh.
const MAX_FORM: usize = 16 * 1024;

/// Whether `path` is one of these routes.
pub fn owns(path: &str) -> bool {
    matches!(path, "/oauth/connect" | "/oauth/signin" | "/oauth/callback" | "/oauth/client.json" | "/oauth/tokens" | "/oauth/tokens/revoke")
        || path.strip_prefix("/oauth/callback/").is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()).into_owned().collect()
}

fn page(status: StatusCode, title: &str, message: &str) -> Response<Body> {
    consent::html(status, consent::message_page(title, message))
}

/// What the request's browser brings: its cookie nonce, whom it signed in as, and whether the
/// cookies are the `__Host-` ones.
struct Browser {
    nonce: Option<String>,
    signed_in: Option<String>,
    secure: bool,
}

/// Where the pages run: the gateway, its identity engine, and whether the person must prove to
/// be the caller (`None`: no authentication, so there is one caller and nothing to prove).
struct Pages<'a> {
    gw: &'a crate::gateway::Gateway,
    identity: &'a crate::identity::service::Identity,
    auth: Option<Arc<Authenticator>>,
}

impl Pages<'_> {
    /// Whether the browser is (or need not be) the caller `caller`.
    fn is(&self, b: &Browser, caller: &str) -> bool {
        self.auth.is_none() || b.signed_in.as_deref() == Some(caller)
    }
}

/// Every page checks Host like the MCP endpoint, and a form's Origin: the gateway's own public
/// origin, or one the origin rule accepts. (A GET of these pages is a top-level navigation,
/// often from the authorization server's origin, and changes nothing.)
fn admitted(st: &Shared, req: &Request<Incoming>, public_url: &str) -> Result<(), Rebinding> {
    let host = req.headers().get(HOST).and_then(|v| v.to_str().ok());
    st.origin.check(None, host)?;
    if req.method() != Method::GET {
        let origin = req.headers().get(ORIGIN).and_then(|v| v.to_str().ok());
        let own = url::Url::parse(public_url).ok().map(|u| u.origin().ascii_serialization());
        if let Some(o) = origin
            && own.as_deref() != Some(o.trim_end_matches('/'))
        {
            st.origin.check(Some(o), None)?;
        }
    }
    Ok(())
}

pub(crate) async fn handle(st: &Shared, req: Request<Incoming>) -> Response<Body> {
    let Some(gw) = st.console.as_ref() else { return render::plain(StatusCode::NOT_FOUND, "not found\n") };
    let Some(personal) = gw.personal.as_ref() else {
        return render::plain(StatusCode::NOT_FOUND, "not found: per-user identity is off ([identity] turns it on)\n");
    };
    let identity = &personal.identity;
    let settings = identity.settings();
    if let Err(reason) = admitted(st, &req, &settings.consent_url) {
        tracing::info!(%reason, "refused a request to the consent pages");
        return page(StatusCode::FORBIDDEN, "Forbidden", &reason.to_string());
    }
    let path = req.uri().path().to_string();
    if path.starts_with("/oauth/tokens") {
        return tokens(st, gw, req).await;
    }
    let secure = settings.redirect_uri.starts_with("https://");
    let cookies: Vec<&str> = req.headers().get_all(COOKIE).iter().filter_map(|v| v.to_str().ok()).collect();
    let nonce = consent::cookie_nonce(cookies.iter().copied(), secure);
    let signed_in = consent::signed_in(&gw.sealer, cookies.iter().copied(), nonce.as_deref(), secure);
    let browser = Browser { nonce, signed_in, secure };
    let auth = st.authenticator().filter(|a| a.mode() != AuthMode::None);
    let pages = Pages { gw, identity, auth };
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/oauth/client.json") => {
            let doc = consent::client_metadata(&settings.client_metadata_url, &identity.redirect_uris());
            let mut r = Response::new(render::full(doc));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        (Method::GET, "/oauth/connect") => connect_page(&pages, &query(&req), browser).await,
        (Method::POST, "/oauth/signin") => match form(req).await {
            Ok(f) => sign_in(&pages, &f, browser).await,
            Err(r) => *r,
        },
        (Method::POST, "/oauth/connect") => match form(req).await {
            Ok(f) => start(&pages, &f, browser).await,
            Err(r) => *r,
        },
        (Method::GET, p) if p == "/oauth/callback" || p.starts_with("/oauth/callback/") => {
            let reached = format!("{}{}", settings.redirect_uri, &p["/oauth/callback".len()..]);
            callback(&pages, &query(&req), browser, &reached).await
        }
        _ => render::plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}

async fn form(req: Request<Incoming>) -> Result<HashMap<String, String>, Box<Response<Body>>> {
    match Limited::new(req.into_body(), MAX_FORM).collect().await {
        Ok(b) => Ok(form_urlencoded::parse(&b.to_bytes()).into_owned().collect()),
        Err(_) => Err(Box::new(page(StatusCode::PAYLOAD_TOO_LARGE, "Cannot connect", "The form was too large."))),
    }
}

fn invalid_link() -> Response<Body> {
    page(
        StatusCode::BAD_REQUEST,
        "This link is not valid",
        "The consent link is not valid or has expired (links last 15 minutes). Start again from your MCP client.",
    )
}

/// `GET /oauth/connect?grant=…`: the consent page for the link's caller, once the browser has
/// proved to be that caller; the sign-in page before.
async fn connect_page(pages: &Pages<'_>, q: &HashMap<String, String>, b: Browser) -> Response<Body> {
    let grant = q.get("grant").cloned().unwrap_or_default();
    let Some((caller, upstream)) = pages.identity.grant(&grant) else { return invalid_link() };
    let (nonce, fresh) = match b.nonce.clone() {
        Some(n) => (n, false),
        None => match random_token() {
            Some(n) => (n, true),
            None => return page(StatusCode::INTERNAL_SERVER_ERROR, "Cannot connect", "No randomness is available."),
        },
    };
    let Some(csrf) = consent::csrf_token(&pages.gw.sealer, &nonce, &grant) else {
        return page(StatusCode::INTERNAL_SERVER_ERROR, "Cannot connect", "The form could not be protected.");
    };
    let mut r = if !pages.is(&b, &caller) {
        let settings = pages.identity.settings();
        let proof = match (&pages.auth, &settings.sign_in) {
            (Some(a), Some(at)) if a.mode() == AuthMode::Jwt => consent::Proof::Issuer(&at.issuer),
            _ => consent::Proof::Key,
        };
        let other = b.signed_in.as_deref().filter(|o| *o != caller);
        let view = consent::SignInView { caller: &caller, upstream: &upstream, proof, other, grant: &grant, csrf: &csrf };
        let target = settings.sign_in.as_ref().map(|s| s.issuer.as_str());
        consent::html_sending_forms_to(StatusCode::OK, consent::sign_in_page(&view), target)
    } else if pages.identity.takes_api_key(&upstream) {
        let help = pages.identity.api_key_help(&upstream);
        let view = consent::KeyView { caller: &caller, upstream: &upstream, help: help.as_deref(), grant: &grant, csrf: &csrf };
        consent::html_sending_forms_to(StatusCode::OK, consent::api_key_page(&view), None)
    } else {
        if let Err(e) = pages.identity.discover(&upstream).await {
            tracing::warn!(%upstream, error = %e, "the upstream's authorization could not be discovered");
            return page(StatusCode::BAD_GATEWAY, "Cannot connect", &format!("{upstream}'s sign-in could not be found: {e}"));
        }
        let (server, scopes) = pages.identity.describe(&upstream).unwrap_or_default();
        let settings = pages.identity.settings();
        let view = ConsentView {
            caller: &caller,
            upstream: &upstream,
            scopes: scopes.as_deref(),
            authorization_server: &server,
            redirect_uri: &settings.redirect_uri,
            grant: &grant,
            csrf: &csrf,
        };
        consent::html_sending_forms_to(StatusCode::OK, consent::consent_page(&view), Some(&server))
    };
    if fresh && let Ok(v) = HeaderValue::from_str(&consent::set_cookie(&nonce, b.secure)) {
        r.headers_mut().append(SET_COOKIE, v);
    }
    r
}

/// The form's grant, once its CSRF token goes with this browser and that grant.
fn checked_form(pages: &Pages<'_>, f: &HashMap<String, String>, b: &Browser) -> Result<Checked, Box<Response<Body>>> {
    let grant = f.get("grant").cloned().unwrap_or_default();
    let csrf = f.get("csrf").map(String::as_str).unwrap_or_default();
    if !consent::csrf_ok(&pages.gw.sealer, csrf, b.nonce.as_deref(), &grant) {
        tracing::warn!("refused a consent form whose CSRF token does not go with this browser");
        return Err(Box::new(page(
            StatusCode::FORBIDDEN,
            "Cannot connect",
            "This form was not sent from the consent page this browser opened. Open the link from your client again.",
        )));
    }
    let Some(nonce) = b.nonce.clone() else {
        return Err(Box::new(page(StatusCode::FORBIDDEN, "Cannot connect", "Cookies are needed to connect.")));
    };
    let Some((caller, upstream)) = pages.identity.grant(&grant) else { return Err(Box::new(invalid_link())) };
    Ok(Checked { grant, nonce, caller, upstream })
}

/// A form that passed its CSRF check: its grant, the browser's nonce, the grant's caller and
/// upstream.
struct Checked {
    grant: String,
    nonce: String,
    caller: String,
    upstream: String,
}

/// The refusal of a person who proved to be another caller than the link's.
fn not_the_caller(link_caller: &str, upstream: &str) -> Response<Body> {
    tracing::warn!(caller = %link_caller, %upstream, "refused a consent link opened by someone who is not its caller");
    page(
        StatusCode::FORBIDDEN,
        "Not your link",
        &format!(
            "This link is for the caller {link_caller}, and you signed in as another caller. A consent link works only for the caller \
             who asked for it: start again from your own client."
        ),
    )
}

/// `POST /oauth/signin`: the person proves to be the link's caller, with its API key (checked
/// like a request's) or by a sign-in at the JWT callers' issuer.
async fn sign_in(pages: &Pages<'_>, f: &HashMap<String, String>, b: Browser) -> Response<Body> {
    let Checked { grant, nonce, caller, upstream } = match checked_form(pages, f, &b) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let Some(auth) = pages.auth.as_ref() else { return back_to_link(pages, &grant, None) };
    if auth.mode() == AuthMode::Jwt {
        return match pages.identity.begin_sign_in(&grant, &nonce).await {
            Ok(url) => consent::see_other(&url),
            Err(e) => {
                tracing::warn!(error = %e, "a sign-in at the callers' issuer could not be started");
                page(StatusCode::BAD_GATEWAY, "Cannot sign in", &format!("The sign-in could not be started: {e}"))
            }
        };
    }
    let key = f.get("key").map(|k| k.trim()).unwrap_or_default();
    match bearer_caller(auth, key).await {
        Some(id) if id == caller => back_to_link(pages, &grant, consent::set_signed_in(&pages.gw.sealer, &caller, &nonce, b.secure)),
        Some(_) => not_the_caller(&caller, &upstream),
        None => page(StatusCode::FORBIDDEN, "Not signed in", "That is not a key of this gateway. Try again from the link."),
    }
}

/// Who a bearer credential authenticates as, checked exactly as on a request.
async fn bearer_caller(auth: &Authenticator, credential: &str) -> Option<String> {
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {credential}")).ok()?);
    auth.authenticate(&headers).await.ok().map(|p| p.id.clone())
}

/// Back to the consent link (303), with the signed-in cookie when one was earned.
fn back_to_link(pages: &Pages<'_>, grant: &str, cookie: Option<String>) -> Response<Body> {
    let q: String = form_urlencoded::Serializer::new(String::new()).append_pair("grant", grant).finish();
    let mut r = consent::see_other(&format!("{}?{q}", pages.identity.settings().consent_url));
    if let Some(v) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        r.headers_mut().append(SET_COOKIE, v);
    }
    r
}

/// `POST /oauth/connect`: the consent form; only the link's own caller may start it, once.
async fn start(pages: &Pages<'_>, f: &HashMap<String, String>, b: Browser) -> Response<Body> {
    let Checked { grant, nonce, caller, upstream } = match checked_form(pages, f, &b) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if !pages.is(&b, &caller) {
        return match b.signed_in {
            Some(_) => not_the_caller(&caller, &upstream),
            None => {
                page(StatusCode::FORBIDDEN, "Not signed in", &format!("Sign in as {caller} first: open the link from your client again."))
            }
        };
    }
    if pages.identity.takes_api_key(&upstream) {
        let key = f.get("api_key").map(String::as_str).unwrap_or_default();
        return match pages.identity.store_api_key(&grant, key).await {
            Ok((caller, upstream)) => {
                tracing::info!(%caller, %upstream, "a caller connected an upstream with its own API key");
                pages.gw.consented(&caller, &upstream).await;
                page(
                    StatusCode::OK,
                    &format!("Connected {upstream}"),
                    &format!("{upstream} is connected for {caller} with your key. You can close this tab and return to your client."),
                )
            }
            Err(e) => {
                tracing::info!(%caller, %upstream, error = %e, "an API key was not taken");
                page(StatusCode::BAD_REQUEST, "Not connected", &format!("The key was not kept: {e}"))
            }
        };
    }
    match pages.identity.begin(&grant, &nonce).await {
        Ok(url) => consent::see_other(&url),
        Err(e) => {
            tracing::warn!(error = %e, "an authorization could not be started");
            page(StatusCode::BAD_GATEWAY, "Cannot connect", &format!("The sign-in could not be started: {e}"))
        }
    }
}

/// `GET /oauth/callback[/<server>]`: an authorization server sends the browser back.
async fn callback(pages: &Pages<'_>, q: &HashMap<String, String>, b: Browser, reached: &str) -> Response<Body> {
    if let Some(error) = q.get("error") {
        // The state is not consumed: the person may try again from the same page.
        let error = crate::audit::clean(error);
        return page(StatusCode::BAD_REQUEST, "Not connected", &format!("The sign-in was not completed ({error})."));
    }
    let (Some(state), Some(code)) = (q.get("state"), q.get("code")) else {
        return page(StatusCode::BAD_REQUEST, "Not connected", "The sign-in came back without a code or state.");
    };
    match pages.identity.complete(state, code, q.get("iss").map(String::as_str), b.nonce.as_deref(), reached).await {
        Ok(Completed::Connected { caller, upstream }) => {
            tracing::info!(%caller, %upstream, "a caller connected an upstream with its own account");
            pages.gw.consented(&caller, &upstream).await;
            page(
                StatusCode::OK,
                &format!("Connected {upstream}"),
                &format!("{upstream} is connected for {caller}. You can close this tab and return to your client."),
            )
        }
        Ok(Completed::SignedIn { caller, grant, token }) => {
            let upstream = pages.identity.grant(&grant).map(|(_, u)| u).unwrap_or_default();
            let who = match pages.auth.as_ref() {
                Some(auth) => bearer_caller(auth, &token).await,
                None => None,
            };
            match (who, b.nonce.as_deref()) {
                (Some(id), Some(nonce)) if id == caller => {
                    back_to_link(pages, &grant, consent::set_signed_in(&pages.gw.sealer, &caller, nonce, b.secure))
                }
                (Some(_), _) => not_the_caller(&caller, &upstream),
                (None, _) => page(
                    StatusCode::FORBIDDEN,
                    "Not signed in",
                    "The token the sign-in gave is not one this gateway accepts from its callers (issuer, audience or scopes).",
                ),
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "a redirect back from an authorization server was refused");
            page(StatusCode::BAD_REQUEST, "Not connected", &format!("The sign-in could not be completed: {e}"))
        }
    }
}

/// `GET /oauth/tokens[?caller=ID]` and `POST /oauth/tokens/revoke` (JSON `{caller?, upstream?}`):
/// a caller's own accounts, or, for an admin caller, anyone's.
async fn tokens(st: &Shared, gw: &crate::gateway::Gateway, req: Request<Incoming>) -> Response<Body> {
    let host = req.headers().get(HOST).and_then(|v| v.to_str().ok()).map(str::to_string);
    let origin = req.headers().get(ORIGIN).and_then(|v| v.to_str().ok());
    if let Err(reason) = st.origin.check(origin, host.as_deref()) {
        return json(StatusCode::FORBIDDEN, &serde_json::json!({ "error": format!("Forbidden: {reason}") }));
    }
    // Revoking is a change: from the console's own page (or a client that is no browser) only.
    if req.method() == Method::POST {
        let host = host.clone().or_else(|| req.uri().authority().map(|a| a.to_string()));
        if let Err((status, reason)) = crate::edge::origin::own_write(req.headers(), host.as_deref()) {
            return json(status, &serde_json::json!({ "error": format!("Refused: {reason}") }));
        }
    }
    let caller = match authenticate(st, &req, host.as_deref(), &st.cfg.path).await {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let admin = crate::console::may_read(gw, &caller, req.headers());
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
