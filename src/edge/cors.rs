//! CORS for browser clients (web hosts of MCP Apps, the MCP Inspector's web UI). A browser page
//! from another origin may call the gateway only if the gateway says so: a preflight `OPTIONS`
//! is answered for an `Origin` the listener accepts (the same rule as every request: loopback
//! origins on a loopback listener, else `server.allowed_origins`), and every answer to such an
//! origin names it in `Access-Control-Allow-Origin` and exposes the headers a client must read
//! (`Mcp-Session-Id`, `WWW-Authenticate`, `Retry-After`). An origin the listener refuses gets no
//! CORS header at all (and a 403 from the origin check), so the browser blocks the page.

use crate::edge::render::{self, Body};
use http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS,
    ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS, VARY,
};
use http::{HeaderMap, HeaderValue, Response, StatusCode};

/// The request headers a browser client may send (besides the CORS-safelisted ones).
const ALLOWED: &str = "authorization, content-type, accept, last-event-id, mcp-protocol-version, mcp-session-id, mcp-method, mcp-name";

/// The response headers a browser client may read.
const EXPOSED: &str = "mcp-session-id, www-authenticate, retry-after, mcp-protocol-version";

/// The answer to a preflight from `origin` (already accepted by the origin check).
pub fn preflight(origin: &HeaderValue, request: &HeaderMap) -> Response<Body> {
    let mut r = render::plain(StatusCode::NO_CONTENT, "");
    let h = r.headers_mut();
    h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    h.insert(ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, DELETE, OPTIONS"));
    h.insert(ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_str(&allowed_headers(request)).unwrap_or(HeaderValue::from_static(ALLOWED)));
    h.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    h.insert(VARY, HeaderValue::from_static("Origin"));
    r
}

/// `Mcp-Param-*` headers are named after tool arguments, so the ones a preflight asks for are
/// allowed along with the fixed list; any other name it asks for is not.
fn allowed_headers(request: &HeaderMap) -> String {
    let asked = request.get(ACCESS_CONTROL_REQUEST_HEADERS).and_then(|v| v.to_str().ok()).unwrap_or("");
    let params = asked.split(',').map(|h| h.trim().to_ascii_lowercase()).filter(|h| {
        h.strip_prefix("mcp-param-")
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    });
    let mut out = ALLOWED.to_string();
    for p in params {
        out.push_str(", ");
        out.push_str(&p);
    }
    out
}

/// Marks an answer to `origin` (accepted by the origin check) as readable by its page.
pub fn allow(response: &mut Response<Body>, origin: &HeaderValue) {
    let h = response.headers_mut();
    h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    h.insert(ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED));
    h.append(VARY, HeaderValue::from_static("Origin"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preflights_allow_the_protocol_headers_and_asked_param_headers_only() {
        let mut req = HeaderMap::new();
        req.insert(ACCESS_CONTROL_REQUEST_HEADERS, HeaderValue::from_static("content-type, Mcp-Param-Region, x-evil, mcp-param-"));
        let origin = HeaderValue::from_static("http://localhost:5173");
        let r = preflight(&origin, &req);
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let allowed = r.headers()[ACCESS_CONTROL_ALLOW_HEADERS].to_str().unwrap().to_string();
        assert!(allowed.contains("mcp-session-id") && allowed.ends_with(", mcp-param-region"), "{allowed}");
        assert!(!allowed.contains("x-evil"), "{allowed}");
        assert_eq!(r.headers()[ACCESS_CONTROL_ALLOW_ORIGIN], "http://localhost:5173");
    }
}
