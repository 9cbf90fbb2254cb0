//! The discovery documents over HTTP: the Server Card of each endpoint at `<path>/server-card`
//! (the root and every `[[endpoint]]`) and the AI Catalog at `/.well-known/ai-catalog.json` (and
//! at the older `/.well-known/mcp/catalog.json`), built by `discovery::card` and served while
//! `[discovery] enabled`. They are public by design: no authentication, CORS `*` for any Origin,
//! `Cache-Control: public` with a strong `ETag` (`If-None-Match` answers 304), GET, HEAD and the
//! preflight `OPTIONS` (anything else is 405), the same document for every caller. Only the Host
//! check against DNS rebinding still applies, as everywhere on the listener. Their base URL is
//! `[discovery] public_url` when set, else the request's own `Host` (then `Vary: Host`).

use crate::discovery::card;
use crate::edge::render::{self, Body};
use crate::edge::shared::Shared;
use bytes::Bytes;
use http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS,
    ACCESS_CONTROL_MAX_AGE, ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, ETAG, HOST, IF_NONE_MATCH, VARY,
};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use mcpgate_config::Config;
use mcpgate_protocol::errors::RpcError;

/// Where the AI Catalog is served: the well-known URI, and the one it replaced.
pub const CATALOG_PATHS: [&str; 2] = ["/.well-known/ai-catalog.json", "/.well-known/mcp/catalog.json"];

/// The suffix of an endpoint's path where its card is served.
pub const CARD_SUFFIX: &str = "/server-card";

/// One discovery document.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Doc {
    /// The card of the endpoint at this path.
    Card(String),
    Catalog,
}

/// Which document `path` asks for under `cfg`; `None`: not a discovery path (an endpoint's own
/// path is always its endpoint's, even where it ends in `/server-card`).
fn doc_at(cfg: &Config, path: &str) -> Option<Doc> {
    if !cfg.discovery.enabled || card::is_endpoint(cfg, path) {
        return None;
    }
    if CATALOG_PATHS.contains(&path) {
        return Some(Doc::Catalog);
    }
    let endpoint = path.strip_suffix(CARD_SUFFIX)?;
    card::is_endpoint(cfg, endpoint).then(|| Doc::Card(endpoint.to_string()))
}

/// The answer to a request for a discovery document; `None` when `req` asks for none (or
/// discovery is off, or the listener serves no gateway), so the router goes on.
pub(crate) fn route<B>(st: &Shared, req: &Request<B>) -> Option<Response<Body>> {
    let path = req.uri().path();
    // Most requests are MCP calls: they go on without reading the configuration.
    if !(path.ends_with(CARD_SUFFIX) || path.starts_with("/.well-known/")) {
        return None;
    }
    let cfg = st.console.as_ref()?.config();
    let doc = doc_at(&cfg, path)?;
    let host = req
        .headers()
        .get(HOST)
        .map(|v| v.to_str().unwrap_or("\u{fffd}").to_string())
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    // Public documents, but a Host a loopback listener does not accept is still a rebinding
    // attempt (and on any listener, a name outside `allowed_hosts` when that is set).
    if let Err(reason) = st.origin.check(None, host.as_deref()) {
        tracing::warn!(%reason, "refused a request (DNS-rebinding protection)");
        let refused = RpcError::invalid_request(format!("Forbidden: {reason}")).with_status(StatusCode::FORBIDDEN);
        return Some(render::error(None, &refused));
    }
    Some(answer(&cfg, &doc, req.method(), req.headers(), host.as_deref(), st.cfg.tls.is_some()))
}

/// The answer for `doc`, whatever the listener (the unit of this module's behaviour).
fn answer(cfg: &Config, doc: &Doc, method: &Method, headers: &HeaderMap, host: Option<&str>, tls: bool) -> Response<Body> {
    if *method == Method::OPTIONS {
        let mut r = render::plain(StatusCode::NO_CONTENT, "");
        r.headers_mut().remove(CONTENT_TYPE);
        cors(r.headers_mut());
        r.headers_mut().insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
        return r;
    }
    if *method != Method::GET && *method != Method::HEAD {
        let mut r = render::plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed: discovery documents are read with GET\n");
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD, OPTIONS"));
        cors(r.headers_mut());
        return r;
    }
    let Some((base, by_host)) = base_url(cfg, host, tls) else {
        return render::plain(
            StatusCode::BAD_REQUEST,
            "bad request: send the gateway's host:port as Host (or set [discovery] public_url)\n",
        );
    };
    let (value, media) = match doc {
        Doc::Card(path) => match card::card(cfg, &base, path) {
            Some(c) => (c, card::CARD_TYPE),
            None => return render::plain(StatusCode::NOT_FOUND, "not found\n"),
        },
        Doc::Catalog => (card::catalog(cfg, &base), card::CATALOG_TYPE),
    };
    let body = Bytes::from(value.to_string());
    let etag = format!("\"{}\"", mcpgate_protocol::toolbox::sha256_hex(&body));
    let fresh = headers.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| matches(v, &etag));
    let mut r = if fresh {
        let mut r = Response::new(render::full(Bytes::new()));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else if *method == Method::HEAD {
        let mut r = Response::new(render::full(Bytes::new()));
        r.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
        r
    } else {
        Response::new(render::full(body))
    };
    let h = r.headers_mut();
    if !fresh {
        h.insert(CONTENT_TYPE, HeaderValue::from_static(media));
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(ETAG, v);
    }
    h.insert(CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    if by_host {
        h.insert(VARY, HeaderValue::from_static("Host"));
    }
    cors(h);
    r
}

/// The CORS headers the discovery document asks every answer to carry.
fn cors(h: &mut HeaderMap) {
    h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    h.insert(ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET"));
    h.insert(ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("Content-Type, If-None-Match"));
    h.insert(ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("ETag"));
}

/// Whether an `If-None-Match` value names `etag` (`*`, or one of its list; the weak comparison
/// RFC 9110 asks of `If-None-Match`, so a `W/` the client or a proxy added still matches).
fn matches(if_none_match: &str, etag: &str) -> bool {
    if_none_match.split(',').map(str::trim).any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag)
}

/// The base URL the documents name (no trailing slash), and whether it came from the request's
/// `Host` (then the answer varies with it): `[discovery] public_url` (its path prefix kept, for a
/// gateway behind a proxy at `https://example.com/mcpgate`), else this listener's scheme and the
/// request's own `Host`, which must be a bare `host[:port]`.
fn base_url(cfg: &Config, host: Option<&str>, tls: bool) -> Option<(String, bool)> {
    if let Some(url) = &cfg.discovery.public_url {
        return Some((url.clone(), false));
    }
    let host = host.filter(|h| plain_authority(h))?;
    Some((format!("{}://{host}", if tls { "https" } else { "http" }), true))
}

/// A `host[:port]` and nothing else (no user info, path or space): what may go into a URL.
fn plain_authority(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 255
        && h.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        && h.parse::<http::uri::Authority>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn config(text: &str) -> Config {
        Config::parse(text, std::path::Path::new("gateway.toml"), None, &|_| None).expect("config")
    }

    fn get(cfg: &Config, doc: &Doc, extra: &[(http::HeaderName, &str)], host: Option<&str>) -> Response<Body> {
        let mut headers = HeaderMap::new();
        for (k, v) in extra {
            headers.insert(k.clone(), HeaderValue::from_str(v).expect("header"));
        }
        answer(cfg, doc, &Method::GET, &headers, host, false)
    }

    async fn body(r: Response<Body>) -> Bytes {
        r.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default()
    }

    #[test]
    fn paths_name_the_cards_of_endpoints_and_the_catalog() {
        let cfg = config("[[endpoint]]\npath = \"/eng\"\ninclude = [\"*\"]\n");
        assert_eq!(doc_at(&cfg, "/mcp/server-card"), Some(Doc::Card("/mcp".into())));
        assert_eq!(doc_at(&cfg, "/eng/server-card"), Some(Doc::Card("/eng".into())));
        assert_eq!(doc_at(&cfg, "/.well-known/ai-catalog.json"), Some(Doc::Catalog));
        assert_eq!(doc_at(&cfg, "/.well-known/mcp/catalog.json"), Some(Doc::Catalog));
        for other in ["/mcp", "/eng", "/nope/server-card", "/server-card", "/mcp/server-card/x"] {
            assert_eq!(doc_at(&cfg, other), None, "{other}");
        }
        let off = config("[discovery]\nenabled = false\n");
        assert_eq!(doc_at(&off, "/mcp/server-card"), None);
        assert_eq!(doc_at(&off, "/.well-known/ai-catalog.json"), None);
    }

    #[tokio::test]
    async fn answers_are_public_cacheable_and_revalidated() {
        let cfg = config("");
        let doc = Doc::Card("/mcp".into());
        let r = get(&cfg, &doc, &[], Some("127.0.0.1:8811"));
        assert_eq!(r.status(), StatusCode::OK);
        let h = r.headers().clone();
        assert_eq!(h[CONTENT_TYPE], card::CARD_TYPE);
        assert_eq!(h[ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert_eq!(h[ACCESS_CONTROL_EXPOSE_HEADERS], "ETag");
        assert_eq!(h[CACHE_CONTROL], "public, max-age=3600");
        assert_eq!(h[VARY], "Host");
        let etag = h[ETAG].to_str().expect("etag").to_string();
        assert!(etag.starts_with('"') && etag.len() == 66, "{etag}");
        let card: serde_json::Value = serde_json::from_slice(&body(r).await).expect("JSON");
        assert_eq!(card["remotes"][0]["url"], "http://127.0.0.1:8811/mcp");

        for inm in [etag.clone(), format!("W/{etag}"), format!("\"other\", {etag}"), "*".to_string()] {
            let r = get(&cfg, &doc, &[(IF_NONE_MATCH, &inm)], Some("127.0.0.1:8811"));
            assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{inm}");
            assert_eq!(r.headers()[ETAG], etag.as_str());
            assert!(body(r).await.is_empty());
        }
        assert_eq!(get(&cfg, &doc, &[(IF_NONE_MATCH, "\"other\"")], Some("127.0.0.1:8811")).status(), StatusCode::OK);
        // Another Host, another document (and another tag).
        let r = get(&cfg, &doc, &[(IF_NONE_MATCH, &etag)], Some("localhost:8811"));
        assert_eq!(r.status(), StatusCode::OK);

        let head = answer(&cfg, &doc, &Method::HEAD, &HeaderMap::new(), Some("127.0.0.1:8811"), false);
        assert_eq!((head.status(), head.headers()[ETAG].to_str().ok()), (StatusCode::OK, Some(etag.as_str())));
        assert!(body(head).await.is_empty());
        let pre = answer(&cfg, &doc, &Method::OPTIONS, &HeaderMap::new(), None, false);
        assert_eq!(pre.status(), StatusCode::NO_CONTENT);
        assert_eq!(pre.headers()[ACCESS_CONTROL_ALLOW_HEADERS], "Content-Type, If-None-Match");
        let post = answer(&cfg, &doc, &Method::POST, &HeaderMap::new(), None, false);
        assert_eq!((post.status(), post.headers()[ALLOW].to_str().ok()), (StatusCode::METHOD_NOT_ALLOWED, Some("GET, HEAD, OPTIONS")));
    }

    #[tokio::test]
    async fn the_base_is_the_public_url_else_a_plain_host() {
        let cfg = config("[discovery]\npublic_url = \"https://example.com/gw/\"\n");
        let r = get(&cfg, &Doc::Catalog, &[], Some("evil.example"));
        assert!(r.headers().get(VARY).is_none(), "a configured public URL does not vary with Host");
        let cat: serde_json::Value = serde_json::from_slice(&body(r).await).expect("JSON");
        assert_eq!(cat["entries"][0]["url"], "https://example.com/gw/mcp/server-card");
        let cfg = config("");
        for bad in [None, Some("user@host"), Some("host/path"), Some("a b"), Some("")] {
            assert_eq!(get(&cfg, &Doc::Catalog, &[], bad).status(), StatusCode::BAD_REQUEST, "{bad:?}");
        }
        let r = answer(&cfg, &Doc::Catalog, &Method::GET, &HeaderMap::new(), Some("[::1]:9"), true);
        let cat: serde_json::Value = serde_json::from_slice(&body(r).await).expect("JSON");
        assert_eq!(cat["entries"][0]["url"], "https://[::1]:9/mcp/server-card");
    }
}
