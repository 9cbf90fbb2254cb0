//! The pages a person sees when a caller connects a protected upstream (per-user identity,
//! `crate::identity`): the consent page (`GET /oauth/connect`), its form (`POST /oauth/connect`,
//! which sends the browser to the authorization server), the redirect endpoint
//! (`GET /oauth/callback`) and the gateway's client metadata document (`GET /oauth/client.json`).
//! The confused-deputy rules of the MCP authorization spec apply: the page names the caller, the
//! upstream, the scopes and where the browser goes next; the form carries a CSRF token bound to a
//! cookie nonce the page set (a `__Host-` cookie over https); framing is refused, nothing is
//! cached, no referrer leaves; the redirect is accepted only with the state the gateway issued,
//! once, in the browser that started it.

use crate::edge::render::{Body, full};
use http::{HeaderValue, Response, StatusCode};
use mcpgate_model::token::Sealer;
use serde::{Deserialize, Serialize};
use std::time::Duration;

const CSRF_PURPOSE: &str = "mcpgate/identity/consent-csrf/v1";
const CSRF_TTL: Duration = Duration::from_secs(15 * 60);
const SIGNED_IN_PURPOSE: &str = "mcpgate/identity/signed-in/v1";
/// How long a browser stays signed in as a caller for consent pages.
const SIGNED_IN_TTL: Duration = Duration::from_secs(15 * 60);

/// The cookie that binds a consent to one browser: `__Host-` (Secure, no Domain, Path=/) over
/// https; a plain name on http loopback, where browsers refuse Secure cookies.
pub fn cookie_name(secure: bool) -> &'static str {
    if secure { "__Host-mcpgate-consent" } else { "mcpgate-consent" }
}

/// The `Set-Cookie` value for a nonce.
pub fn set_cookie(nonce: &str, secure: bool) -> String {
    let secure_attr = if secure { "; Secure" } else { "" };
    format!("{}={nonce}; Path=/; HttpOnly; SameSite=Lax; Max-Age=900{secure_attr}", cookie_name(secure))
}

/// The nonce a request's `Cookie` header carries, if any.
pub fn cookie_nonce<'a>(cookies: impl IntoIterator<Item = &'a str>, secure: bool) -> Option<String> {
    cookie(cookies, cookie_name(secure))
}

fn cookie<'a>(cookies: impl IntoIterator<Item = &'a str>, name: &str) -> Option<String> {
    cookies.into_iter().flat_map(|h| h.split(';')).find_map(|c| {
        let (k, v) = c.trim().split_once('=')?;
        (k == name && !v.is_empty()).then(|| v.to_string())
    })
}

/// The cookie that says which caller the person in this browser proved to be.
fn signed_in_name(secure: bool) -> &'static str {
    if secure { "__Host-mcpgate-signed-in" } else { "mcpgate-signed-in" }
}

#[derive(Serialize, Deserialize)]
struct SignedIn {
    /// The caller.
    c: String,
    /// The browser's cookie nonce it goes with.
    n: String,
}

/// The `Set-Cookie` value that signs this browser (nonce `nonce`) in as `caller`.
pub fn set_signed_in(sealer: &Sealer, caller: &str, nonce: &str, secure: bool) -> Option<String> {
    let sealed = sealer.seal(SIGNED_IN_PURPOSE, &SignedIn { c: caller.into(), n: nonce.into() }).ok()?;
    let secure_attr = if secure { "; Secure" } else { "" };
    Some(format!("{}={sealed}; Path=/; HttpOnly; SameSite=Lax; Max-Age=900{secure_attr}", signed_in_name(secure)))
}

/// The caller this browser (nonce `nonce`) signed in as, if any and still current.
pub fn signed_in<'a>(sealer: &Sealer, cookies: impl IntoIterator<Item = &'a str>, nonce: Option<&str>, secure: bool) -> Option<String> {
    let sealed = cookie(cookies, signed_in_name(secure))?;
    let s: SignedIn = sealer.open(SIGNED_IN_PURPOSE, &sealed, SIGNED_IN_TTL)?;
    nonce.is_some_and(|n| n == s.n).then_some(s.c)
}

#[derive(Serialize, Deserialize)]
struct Csrf {
    /// The cookie nonce.
    n: String,
    /// The grant it may start.
    g: String,
}

/// The form's CSRF token: sealed, naming the cookie nonce and the grant.
pub fn csrf_token(sealer: &Sealer, nonce: &str, grant: &str) -> Option<String> {
    sealer.seal(CSRF_PURPOSE, &Csrf { n: nonce.into(), g: grant.into() }).ok()
}

/// Whether a submitted form's token goes with this browser's cookie and this grant.
pub fn csrf_ok(sealer: &Sealer, token: &str, nonce: Option<&str>, grant: &str) -> bool {
    let Some(c) = sealer.open::<Csrf>(CSRF_PURPOSE, token, CSRF_TTL) else { return false };
    nonce.is_some_and(|n| n == c.n) && c.g == grant
}

/// What the consent page shows.
pub struct ConsentView<'a> {
    pub caller: &'a str,
    pub upstream: &'a str,
    pub scopes: Option<&'a str>,
    /// Where the browser goes next (the authorization server's origin).
    pub authorization_server: &'a str,
    pub redirect_uri: &'a str,
    pub grant: &'a str,
    pub csrf: &'a str,
}

/// The consent page.
pub fn consent_page(v: &ConsentView<'_>) -> String {
    let scopes = v.scopes.filter(|s| !s.is_empty()).map(escape).unwrap_or_else(|| "(what the server grants by default)".into());
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Connect {upstream} — mcpgate</title>\
         <style>body{{font:16px system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem}}dt{{font-weight:600}}\
         button{{font-size:1rem;padding:.5rem 1.2rem}}</style></head><body>\
         <h1>Connect {upstream}</h1>\
         <p>An MCP client signed in to this gateway as <strong>{caller}</strong> wants to use <strong>{upstream}</strong> \
         with your account there. Only continue if you started this from your own client.</p>\
         <dl><dt>Caller</dt><dd>{caller}</dd><dt>Upstream</dt><dd>{upstream}</dd><dt>Permissions asked</dt><dd>{scopes}</dd>\
         <dt>You will sign in at</dt><dd>{server}</dd><dt>and come back to</dt><dd>{redirect}</dd></dl>\
         <form method=\"post\" action=\"/oauth/connect\"><input type=\"hidden\" name=\"grant\" value=\"{grant}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><button type=\"submit\" id=\"allow\">Continue to sign in</button></form>\
         </body></html>",
        upstream = escape(v.upstream),
        caller = escape(v.caller),
        server = escape(v.authorization_server),
        redirect = escape(v.redirect_uri),
        grant = escape(v.grant),
        csrf = escape(v.csrf),
    )
}

/// What the page asking for a caller's own API key shows.
pub struct KeyView<'a> {
    pub caller: &'a str,
    pub upstream: &'a str,
    /// The configured line (where to create a key), if any.
    pub help: Option<&'a str>,
    pub grant: &'a str,
    pub csrf: &'a str,
}

/// The page where a caller enters an API key of their own for an upstream. The field is a
/// password field the browser does not fill or keep; what is typed is never shown again.
pub fn api_key_page(v: &KeyView<'_>) -> String {
    let help = v.help.map(|h| format!("<p id=\"help\">{}</p>", escape(h))).unwrap_or_default();
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Connect {upstream} — mcpgate</title>\
         <style>body{{font:16px system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem}}\
         button{{font-size:1rem;padding:.5rem 1.2rem}}</style></head><body>\
         <h1>Connect {upstream}</h1>\
         <p>An MCP client signed in to this gateway as <strong>{caller}</strong> wants to use <strong>{upstream}</strong> \
         with your own API key there. The gateway keeps it sealed, sends it only to {upstream}, and never shows it again; \
         you can disconnect at any time. Only continue if you started this from your own client.</p>{help}\
         <form method=\"post\" action=\"/oauth/connect\"><input type=\"hidden\" name=\"grant\" value=\"{grant}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <label for=\"api_key\">Your API key for {upstream}</label><br><input type=\"password\" id=\"api_key\" name=\"api_key\" \
         autocomplete=\"off\" required maxlength=\"4096\" size=\"48\"><br><br>\
         <button type=\"submit\" id=\"save\">Connect</button></form></body></html>",
        upstream = escape(v.upstream),
        caller = escape(v.caller),
        grant = escape(v.grant),
        csrf = escape(v.csrf),
    )
}

/// How the person proves to be the caller a consent link is for.
pub enum Proof<'a> {
    /// The caller's API key, typed on the page.
    Key,
    /// A sign-in at the JWT callers' issuer.
    Issuer(&'a str),
}

/// What the sign-in page shows.
pub struct SignInView<'a> {
    pub caller: &'a str,
    pub upstream: &'a str,
    pub proof: Proof<'a>,
    /// Whom this browser is signed in as now, if someone else.
    pub other: Option<&'a str>,
    pub grant: &'a str,
    pub csrf: &'a str,
}

/// The page that asks the person to prove they are the caller before consent.
pub fn sign_in_page(v: &SignInView<'_>) -> String {
    let other = v
        .other
        .map(|o| {
            format!("<p id=\"other\">This browser is signed in as <strong>{}</strong>, not as the caller this link is for.</p>", escape(o))
        })
        .unwrap_or_default();
    let proof = match v.proof {
        Proof::Key => "<label for=\"key\">API key of this caller</label><br><input type=\"password\" id=\"key\" name=\"key\" \
                       autocomplete=\"off\" required size=\"48\"><br><br><button type=\"submit\" id=\"sign-in\">Sign in</button>"
            .to_string(),
        Proof::Issuer(issuer) => format!("<button type=\"submit\" id=\"sign-in\">Sign in at {}</button>", escape(issuer)),
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sign in to connect {upstream} — mcpgate</title>\
         <style>body{{font:16px system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem}}\
         button{{font-size:1rem;padding:.5rem 1.2rem}}</style></head><body>\
         <h1>Sign in as {caller}</h1>\
         <p>This link connects <strong>{upstream}</strong> for the caller <strong>{caller}</strong> of this gateway. \
         Only {caller} may use it: sign in as {caller} first. If someone sent you this link, close this page: \
         continuing would let them act with your account.</p>{other}\
         <form method=\"post\" action=\"/oauth/signin\"><input type=\"hidden\" name=\"grant\" value=\"{grant}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">{proof}</form></body></html>",
        upstream = escape(v.upstream),
        caller = escape(v.caller),
        grant = escape(v.grant),
        csrf = escape(v.csrf),
    )
}

/// A short page with a title and a message (the outcome of the redirect, or a refusal).
pub fn message_page(title: &str, message: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t} — mcpgate</title></head>\
         <body style=\"font:16px system-ui,sans-serif;max-width:36rem;margin:3rem auto\"><h1>{t}</h1><p>{m}</p></body></html>",
        t = escape(title),
        m = escape(message)
    )
}

/// An HTML response with the headers every page of the flow carries.
pub fn html(status: StatusCode, body: String) -> Response<Body> {
    html_sending_forms_to(status, body, None)
}

/// [`html`] for the consent page, whose form leads (through the gateway's redirect) to the
/// authorization server at `origin`: browsers apply `form-action` to the redirects a form
/// submission follows, so that origin is allowed too.
pub fn html_sending_forms_to(status: StatusCode, body: String, origin: Option<&str>) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    let extra = origin.and_then(form_origin).map(|o| format!(" {o}")).unwrap_or_default();
    let csp = format!("default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'{extra}; base-uri 'none'");
    if let Ok(v) = HeaderValue::from_str(&csp) {
        h.insert(http::header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // `same-origin`: no referrer leaves for another origin, and the pages' own forms carry their
    // Origin (with `no-referrer` browsers send `Origin: null`, which the Origin check refuses).
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    r
}

/// A redirect (303) to where the authorization starts (the consent page's CSP allows its origin).
pub fn see_other(location: &str) -> Response<Body> {
    let mut r = html(StatusCode::SEE_OTHER, String::new());
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(http::header::LOCATION, v);
    }
    r
}

/// The gateway's OAuth client metadata document (draft-ietf-oauth-client-id-metadata-document):
/// its own URL is the `client_id`.
pub fn client_metadata(url: &str, redirect_uris: &[String]) -> String {
    serde_json::json!({
        "client_id": url,
        "client_name": "mcpgate",
        "redirect_uris": redirect_uris,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "web",
    })
    .to_string()
}

/// The `scheme://host[:port]` of a URL, for a CSP source (nothing else of the URL gets in).
fn form_origin(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    matches!(u.scheme(), "https" | "http").then(|| u.origin().ascii_serialization()).filter(|o| o != "null")
}

/// HTML-escapes text for element content and quoted attributes.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgate_model::token::KeySource;

    fn sealer() -> Sealer {
        Sealer::from_keys(&[vec![5u8; 32]], KeySource::File).expect("key")
    }

    #[test]
    fn the_form_token_goes_with_one_browser_and_one_grant() {
        let s = sealer();
        let t = csrf_token(&s, "nonce-a", "grant-1").expect("token");
        assert!(csrf_ok(&s, &t, Some("nonce-a"), "grant-1"));
        assert!(!csrf_ok(&s, &t, Some("nonce-b"), "grant-1"), "another browser");
        assert!(!csrf_ok(&s, &t, None, "grant-1"), "no cookie");
        assert!(!csrf_ok(&s, &t, Some("nonce-a"), "grant-2"), "another grant");
        assert!(!csrf_ok(&s, "forged", Some("nonce-a"), "grant-1"));
    }

    #[test]
    fn cookies_are_host_prefixed_over_https() {
        assert_eq!(set_cookie("n1", true), "__Host-mcpgate-consent=n1; Path=/; HttpOnly; SameSite=Lax; Max-Age=900; Secure");
        assert!(!set_cookie("n1", false).contains("Secure"));
        assert_eq!(cookie_nonce(["a=1; __Host-mcpgate-consent=n1", "b=2"], true).as_deref(), Some("n1"));
        assert_eq!(cookie_nonce(["mcpgate-consent=n1"], true), None, "over https only the __Host- cookie counts");
        assert_eq!(cookie_nonce(["__Host-mcpgate-consent="], true), None);
    }

    #[test]
    fn the_page_names_everything_and_escapes_it() {
        let page = consent_page(&ConsentView {
            caller: "alice<script>",
            upstream: "linear",
            scopes: Some("read write"),
            authorization_server: "https://linear.app",
            redirect_uri: "https://gw.example.com/oauth/callback",
            grant: "g\"x",
            csrf: "c",
        });
        assert!(page.contains("alice&lt;script&gt;") && !page.contains("<script>"));
        assert!(
            page.contains("read write") && page.contains("https://linear.app") && page.contains("https://gw.example.com/oauth/callback")
        );
        assert!(page.contains("value=\"g&quot;x\""));
        let r = html(StatusCode::OK, page);
        assert_eq!(r.headers()["x-frame-options"], "DENY");
        assert!(r.headers()["content-security-policy"].to_str().unwrap_or("").contains("frame-ancestors 'none'"));
        assert_eq!(r.headers()["cache-control"], "no-store");
        let csp_of = |url: &str| {
            let r = html_sending_forms_to(StatusCode::OK, String::new(), Some(url));
            r.headers()["content-security-policy"].to_str().unwrap_or("").to_string()
        };
        let csp = csp_of("https://linear.app/oauth/authorize?x=1");
        assert!(csp.contains("form-action 'self' https://linear.app;"), "{csp}");
        let csp = csp_of("https://linear.app/authorize?x=1;script-src");
        assert!(csp.contains("form-action 'self' https://linear.app;") && !csp.contains("script-src"), "only the origin gets in: {csp}");
    }

    #[test]
    fn the_client_metadata_document_names_itself() {
        let doc: serde_json::Value = serde_json::from_str(&client_metadata(
            "https://gw.example.com/oauth/client.json",
            &["https://gw.example.com/oauth/callback".into()],
        ))
        .expect("json");
        assert_eq!(doc["client_id"], "https://gw.example.com/oauth/client.json");
        assert_eq!(doc["redirect_uris"][0], "https://gw.example.com/oauth/callback");
        assert_eq!(doc["token_endpoint_auth_method"], "none");
    }
}
