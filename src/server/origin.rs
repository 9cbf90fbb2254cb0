//! DNS-rebinding protection for the HTTP listener: a request whose `Origin` is not allowed, or
//! whose `Host` is not a loopback name while the listener is bound to loopback, is refused (403).
//! Allowed origins and hosts can be added in `[server]`; loopback origins are always allowed on a
//! loopback listener.

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

    /// `Err(reason)` when the request must be refused.
    pub fn check(&self, origin: Option<&str>, host: Option<&str>) -> Result<(), String> {
        if let Some(host) = host {
            let h = host.to_ascii_lowercase();
            let listed = self.allowed_hosts.iter().any(|a| *a == h || *a == strip_port(&h));
            if self.loopback_listener && !is_loopback_host(&h) && !listed {
                return Err(format!("Host '{host}' is not allowed on a loopback listener (add it to server.allowed_hosts)"));
            }
            if !self.loopback_listener && !self.allowed_hosts.is_empty() && !listed {
                return Err(format!("Host '{host}' is not in server.allowed_hosts"));
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
                return Err(format!("Origin '{origin}' is not allowed (add it to server.allowed_origins)"));
            }
        }
        Ok(())
    }
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
}
