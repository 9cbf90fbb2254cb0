//! DNS-rebinding protection for the HTTP listener: a request whose `Origin` is not allowed, or
//! whose `Host` is not a loopback name while the listener is bound to loopback, is refused (403).
//! Allowed origins and hosts can be added in `[server]`; loopback origins are always allowed on a
//! loopback listener. A request that changes something from the console's pages (approving a held
//! tool, revoking accounts) must also come from the gateway's own origin ([`own_write`]): an
//! origin allowed to call the MCP endpoint is not allowed to act as the console.

use http::header::{CONTENT_TYPE, ORIGIN};
use http::{HeaderMap, StatusCode};
use std::net::SocketAddr;

pub struct OriginPolicy {
    loopback_listener: bool,
    allowed_origins: Vec<String>,
    allowed_hosts: Vec<String>,
}

fn is_loopback_host(host: &str) -> bool {
    let name = strip_port(host);
    name.eq_ignore_ascii_case("localhost") || name == "[::1]" || name.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.find(']') {
            Some(i) => &host[..i + 2],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

impl OriginPolicy {
    pub fn new(listen: SocketAddr, allowed_origins: &[String], allowed_hosts: &[String]) -> Self {
        OriginPolicy {
            loopback_listener: listen.ip().is_loopback(),
            allowed_origins: allowed_origins.iter().map(|o| o.trim_end_matches('/').to_ascii_lowercase()).collect(),
            allowed_hosts: allowed_hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
        }
    }

    /// `Err(why)` when the request must be refused.
    pub fn check(&self, origin: Option<&str>, host: Option<&str>) -> Result<(), Rebinding> {
        if let Some(host) = host {
            // Lower-cased, copied only when it has capitals (every request passes here).
            let h: std::borrow::Cow<'_, str> =
                if host.bytes().any(|b| b.is_ascii_uppercase()) { host.to_ascii_lowercase().into() } else { host.into() };
            let listed = self.allowed_hosts.iter().any(|a| *a == *h || *a == strip_port(&h));
            if self.loopback_listener && !is_loopback_host(&h) && !listed {
                return Err(Rebinding::HostOnLoopback(host.to_string()));
            }
            if !self.loopback_listener && !self.allowed_hosts.is_empty() && !listed {
                return Err(Rebinding::HostNotListed(host.to_string()));
            }
        }
        if let Some(origin) = origin {
            let o = origin.trim_end_matches('/').to_ascii_lowercase();
            if self.allowed_origins.iter().any(|a| *a == o || a == "*") {
                return Ok(());
            }
            let loopback_origin =
                o.split_once("://").is_some_and(|(scheme, rest)| matches!(scheme, "http" | "https") && is_loopback_host(rest));
            if !(self.loopback_listener && loopback_origin) {
                return Err(Rebinding::Origin(origin.to_string()));
            }
        }
        Ok(())
    }
}

/// Why a request's Host or Origin is refused (the text is the 403's reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rebinding {
    #[error("Host '{0}' is not allowed on a loopback listener (add it to server.allowed_hosts)")]
    HostOnLoopback(String),
    #[error("Host '{0}' is not in server.allowed_hosts")]
    HostNotListed(String),
    #[error("Origin '{0}' is not allowed (add it to server.allowed_origins)")]
    Origin(String),
}

/// Whether a request that changes something (a console action) comes from the gateway's own
/// pages, whatever the browser, so that no other page a browser has open can act through it:
///
/// - its body is `application/json`: a page on another origin can send that only after a CORS
///   preflight, which the console's routes never answer, so every browser stops it (a form or a
///   `text/plain` fetch, which need no preflight, is refused with 415);
/// - its `Origin`, which browsers send with every POST, names the gateway itself (the request's
///   own `Host`), not merely an origin the listener accepts (another loopback port is another
///   origin);
/// - without `Origin`, its `Sec-Fetch-Site`, which browsers send with every request, is absent
///   (a client that is no browser: curl, `mcpgate tokens`) or `same-origin` or `none`.
pub fn own_write(headers: &HeaderMap, host: Option<&str>) -> Result<(), (StatusCode, String)> {
    let media = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).and_then(|v| v.split(';').next()).map(str::trim);
    if !media.is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
        return Err((StatusCode::UNSUPPORTED_MEDIA_TYPE, "send the request as application/json".into()));
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match header(ORIGIN.as_str()) {
        Some(origin) => {
            let own = origin
                .split_once("://")
                .zip(host)
                .is_some_and(|((scheme, authority), host)| same_authority(scheme, authority.trim_end_matches('/'), host));
            if !own {
                return Err((StatusCode::FORBIDDEN, format!("Origin '{origin}' is not this gateway's own: only its console may do this")));
            }
        }
        None => {
            if let Some(site) = header("sec-fetch-site").filter(|s| !matches!(s.to_ascii_lowercase().as_str(), "same-origin" | "none")) {
                return Err((StatusCode::FORBIDDEN, format!("a {site} request: only this gateway's console may do this")));
            }
        }
    }
    Ok(())
}

/// Whether an origin's `authority` (of `scheme`) is the `host` a request was sent to, with the
/// scheme's default port left out of either.
fn same_authority(scheme: &str, authority: &str, host: &str) -> bool {
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" => ":80",
        "https" => ":443",
        _ => return false,
    };
    let bare = |a: &str| a.to_ascii_lowercase().trim_end_matches(default).to_string();
    bare(authority) == bare(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> OriginPolicy {
        OriginPolicy::new("127.0.0.1:8811".parse().unwrap(), &["https://app.example.com".into()], &[])
    }

    #[test]
    fn loopback_listener_accepts_only_loopback_hosts() {
        let p = local();
        assert!(p.check(None, Some("127.0.0.1:8811")).is_ok());
        assert!(p.check(None, Some("localhost:8811")).is_ok());
        assert!(p.check(None, Some("[::1]:8811")).is_ok());
        assert!(p.check(None, Some("evil.example.com")).is_err());
        assert!(p.check(None, Some("127.0.0.1.evil.com")).is_err());
        assert!(p.check(None, None).is_ok());
    }

    #[test]
    fn origins_must_be_loopback_or_listed() {
        let p = local();
        assert!(p.check(Some("http://localhost:3000"), Some("localhost:8811")).is_ok());
        assert!(p.check(Some("https://app.example.com/"), Some("localhost:8811")).is_ok());
        assert!(p.check(Some("https://evil.example.com"), Some("localhost:8811")).is_err());
        assert!(p.check(Some("null"), Some("localhost:8811")).is_err());
    }

    #[test]
    fn public_listener_checks_listed_hosts_and_origins() {
        let p = OriginPolicy::new("0.0.0.0:80".parse().unwrap(), &[], &["mcp.example.com".into()]);
        assert!(p.check(None, Some("mcp.example.com")).is_ok());
        assert!(p.check(None, Some("mcp.example.com:443")).is_ok());
        assert!(p.check(None, Some("other.example.com")).is_err());
        assert!(p.check(Some("http://localhost:1"), Some("mcp.example.com")).is_err());
        let open = OriginPolicy::new("0.0.0.0:80".parse().unwrap(), &[], &[]);
        assert!(open.check(None, Some("anything")).is_ok());
    }

    #[test]
    fn only_the_gateways_own_json_requests_may_change_anything() {
        let req = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, http::HeaderValue::from_static(v));
            }
            h
        };
        let host = Some("127.0.0.1:8811");
        let json = ("content-type", "application/json; charset=utf-8");
        assert!(own_write(&req(&[json, ("origin", "http://127.0.0.1:8811")]), host).is_ok());
        assert!(own_write(&req(&[json, ("origin", "HTTP://127.0.0.1:8811/")]), host).is_ok());
        assert!(own_write(&req(&[json, ("origin", "https://gw.example.com")]), Some("gw.example.com:443")).is_ok());
        assert!(own_write(&req(&[json]), host).is_ok(), "no browser");
        assert!(own_write(&req(&[json, ("sec-fetch-site", "same-origin")]), host).is_ok());
        assert!(own_write(&req(&[json, ("sec-fetch-site", "none")]), host).is_ok());
        let refused = |pairs: &[(&'static str, &'static str)], status: StatusCode| {
            assert_eq!(own_write(&req(pairs), host).map_err(|e| e.0), Err(status), "{pairs:?}");
        };
        refused(&[("content-type", "text/plain"), ("origin", "http://127.0.0.1:8811")], StatusCode::UNSUPPORTED_MEDIA_TYPE);
        refused(&[("content-type", "application/x-www-form-urlencoded")], StatusCode::UNSUPPORTED_MEDIA_TYPE);
        refused(&[], StatusCode::UNSUPPORTED_MEDIA_TYPE);
        refused(&[json, ("origin", "http://localhost:3000")], StatusCode::FORBIDDEN);
        refused(&[json, ("origin", "http://127.0.0.1:1")], StatusCode::FORBIDDEN);
        refused(&[json, ("origin", "http://127.0.0.1:8811.evil.com")], StatusCode::FORBIDDEN);
        refused(&[json, ("origin", "null")], StatusCode::FORBIDDEN);
        refused(&[json, ("sec-fetch-site", "cross-site")], StatusCode::FORBIDDEN);
        refused(&[json, ("sec-fetch-site", "same-site")], StatusCode::FORBIDDEN);
        assert!(own_write(&req(&[json, ("origin", "http://127.0.0.1:8811")]), None).is_err(), "no Host: nothing to compare with");
    }
}
