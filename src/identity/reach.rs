//! Which URLs learnt from an upstream or an authorization server the gateway may fetch (metadata
//! documents, token and registration endpoints, redirects): `https` only, except `http` to a
//! loopback host when development is allowed; and every address the host resolves to must be a
//! public one (no private, loopback, link-local, unique-local, shared, documentation, multicast or
//! unspecified ranges), unless the URL is a loopback one allowed for development. Addresses are
//! parsed by the standard library, never by hand. Redirects are not followed by the fetcher; each
//! hop is a new URL that passes through here again.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{0}: only https URLs are fetched")]
    Scheme(String),
    #[error("{0}: not an absolute URL with a host")]
    Malformed(String),
    #[error("{0}: it resolves to {1}, which is not a public address")]
    Private(String, IpAddr),
    #[error("{0}: its host could not be resolved")]
    Unresolved(String),
}

/// What the guard lets through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rules {
    /// `http://` and `https://` to loopback hosts (127.0.0.0/8, ::1, `localhost`) are allowed:
    /// development and tests on one machine.
    pub loopback: bool,
}

/// A URL that passed the checks that need no DNS: its host and port, and whether it is an
/// allowed loopback one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub loopback: bool,
}

/// The checks that need no DNS: scheme and shape; a literal address is checked at once.
pub fn check_url(url: &str, rules: Rules) -> Result<Target, Refused> {
    let uri: http::Uri = url.parse().map_err(|_| Refused::Malformed(url.into()))?;
    if !matches!(uri.scheme_str(), Some("https" | "http")) {
        return Err(Refused::Scheme(url.into()));
    }
    let host = uri.host().filter(|h| !h.is_empty()).ok_or_else(|| Refused::Malformed(url.into()))?;
    let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    let literal: Option<IpAddr> = host.parse().ok();
    let loopback = rules.loopback && (host == "localhost" || literal.is_some_and(|ip| ip.is_loopback()));
    let port = match uri.scheme_str() {
        Some("https") => uri.port_u16().unwrap_or(443),
        Some("http") if loopback => uri.port_u16().unwrap_or(80),
        _ => return Err(Refused::Scheme(url.into())),
    };
    if let Some(ip) = literal
        && !loopback
        && !is_public(ip)
    {
        return Err(Refused::Private(url.into(), ip));
    }
    Ok(Target { host, port, loopback })
}

/// The whole check as a lookup: [`check_url`], then every address the host resolves to (for a
/// verdict before any request; connections themselves go through `connect`'s resolver, which
/// applies the same rule to the answer it connects with).
pub async fn resolve(url: &str, rules: Rules) -> Result<Vec<std::net::SocketAddr>, Refused> {
    let target = check_url(url, rules)?;
    let addrs: Vec<std::net::SocketAddr> =
        tokio::net::lookup_host((target.host.as_str(), target.port)).await.map_err(|_| Refused::Unresolved(url.into()))?.collect();
    if addrs.is_empty() {
        return Err(Refused::Unresolved(url.into()));
    }
    for a in &addrs {
        let ok = if target.loopback { a.ip().is_loopback() } else { is_public(a.ip()) };
        if !ok {
            return Err(Refused::Private(url.into(), a.ip()));
        }
    }
    Ok(addrs)
}

/// Whether an address is a public unicast one. IPv6 forms that carry an IPv4 address (mapped,
/// compatible, 6to4, NAT64, Teredo's obfuscated server aside) are judged by that address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => public_v4(v4),
            None => public_v6(v6),
        },
    }
}

/// The IPv4 address an IPv6 one stands for, in the forms that route to it.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    // IPv4-compatible ::a.b.c.d (deprecated, still routed by some stacks); not :: and ::1.
    if s[..6] == [0; 6] && (s[6] != 0 || s[7] > 1) {
        return Some(low);
    }
    // NAT64: the well-known prefix 64:ff9b::/96 and the local-use 64:ff9b:1::/48.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || s[..3] == [0x64, 0xff9b, 1] {
        return Some(low);
    }
    // 6to4 2002:a.b.c.d::/48.
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8));
    }
    None
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let shared = a == 100 && (64..128).contains(&b); // 100.64.0.0/10, carrier-grade NAT
    let benchmarking = a == 198 && (b == 18 || b == 19); // 198.18.0.0/15
    let protocol_assignments = a == 192 && b == 0 && c == 0; // 192.0.0.0/24
    let relay_anycast = a == 192 && b == 88 && c == 99; // 192.88.99.0/24, 6to4 relays
    let reserved = a >= 240; // 240.0.0.0/4 and broadcast
    let this_network = a == 0;
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_unspecified()
        || shared
        || benchmarking
        || protocol_assignments
        || relay_anycast
        || reserved
        || this_network)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let documentation = s[0] == 0x2001 && s[1] == 0x0db8; // 2001:db8::/32
    let teredo_and_ietf = s[0] == 0x2001 && s[1] < 0x0200; // 2001::/23 (Teredo 2001::/32 among them)
    let discard = s[..4] == [0x100, 0, 0, 0]; // 100::/64
    let site_local = s[0] & 0xffc0 == 0xfec0; // fec0::/10
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_unique_local()
        || ip.is_unicast_link_local()
        || documentation
        || teredo_and_ietf
        || discard
        || site_local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_https_urls_pass_unless_loopback_is_allowed() {
        let strict = Rules::default();
        let dev = Rules { loopback: true };
        assert!(check_url("https://auth.example.com/.well-known/x", strict).is_ok());
        assert!(matches!(check_url("http://auth.example.com/", strict), Err(Refused::Scheme(_))));
        assert!(check_url("file:///etc/passwd", strict).is_err());
        assert!(matches!(check_url("ftp://files.example.com/x", strict), Err(Refused::Scheme(_))));
        assert!(matches!(check_url("https://10.0.0.5/token", strict), Err(Refused::Private(..))));
        assert!(matches!(check_url("https://[::1]/token", strict), Err(Refused::Private(..))));
        assert!(matches!(check_url("https://[::ffff:169.254.169.254]/", strict), Err(Refused::Private(..))));
        assert!(matches!(check_url("http://127.0.0.1:9000/token", strict), Err(Refused::Scheme(_))));
        assert_eq!(check_url("http://127.0.0.1:9000/token", dev).map(|t| t.loopback), Ok(true));
        assert_eq!(check_url("http://localhost/", dev).map(|t| t.port), Ok(80));
        assert!(matches!(check_url("http://10.0.0.5/", dev), Err(Refused::Scheme(_))), "dev allows loopback only");
        assert!(matches!(check_url("https:///nohost", strict), Err(Refused::Malformed(_))));
    }

    #[test]
    fn private_and_special_ranges_are_not_public() {
        for ip in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn resolution_is_checked_too() {
        assert!(matches!(resolve("https://localhost/x", Rules::default()).await, Err(Refused::Private(..))));
        assert!(resolve("http://localhost:1/x", Rules { loopback: true }).await.is_ok());
    }
}
