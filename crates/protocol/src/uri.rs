//! URI syntax the gateway decides on (RFC 3986): the scheme of a URI and its canonical form.
//! Two spellings of one URI (`%73ecret` and `secret`, `MEM:` and `mem:`) have one canonical form,
//! which is what policy, scopes, endpoint selections and routing compare.

use std::borrow::Cow;

/// The scheme of `uri` (what precedes the first `:`), if it is a valid RFC 3986 scheme.
pub fn scheme(uri: &str) -> Option<&str> {
    let (scheme, _) = uri.split_once(':')?;
    let mut chars = scheme.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    (first_ok && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))).then_some(scheme)
}

/// Why a URI has no canonical form (it is then refused wherever policy decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotCanonical {
    /// No valid scheme before the first `:`.
    Scheme,
    /// A `%` not followed by two hex digits.
    Escape,
}

/// Whether `b` is an RFC 3986 unreserved character (which percent-encoding never changes).
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Schemes whose authority is a DNS host (case-insensitive, RFC 3986 §6.2.2.1).
fn host_is_case_insensitive(scheme: &str) -> bool {
    let last = scheme.rsplit('+').next().unwrap_or(scheme);
    ["http", "https", "ws", "wss", "ftp"].iter().any(|s| last.eq_ignore_ascii_case(s))
}

/// The canonical form of a URI (RFC 3986 §6.2.2): the scheme lower-cased; percent-encoded
/// unreserved characters decoded (`%73` → `s`); every other escape's hex digits upper-cased;
/// bytes that may not appear in a URI (non-ASCII, spaces, controls) percent-encoded; and the
/// host lower-cased for schemes whose host is a DNS name. Borrowed when `uri` is already
/// canonical. URI templates canonicalise the same way (their `{…}` are kept).
pub fn canonical(uri: &str) -> Result<Cow<'_, str>, NotCanonical> {
    let scheme = scheme(uri).ok_or(NotCanonical::Scheme)?;
    let rest = &uri[scheme.len()..];
    let host_ci = host_is_case_insensitive(scheme) && rest.starts_with("://");
    let plain = |b: u8| (0x21..0x7f).contains(&b) && b != b'%';
    let upper_host = host_ci && authority_host(&rest[3..]).bytes().any(|b| b.is_ascii_uppercase());
    if !scheme.bytes().any(|b| b.is_ascii_uppercase()) && rest.bytes().all(plain) && !upper_host {
        return Ok(Cow::Borrowed(uri));
    }
    let mut out = String::with_capacity(uri.len() + 8);
    out.push_str(&scheme.to_ascii_lowercase());
    let bytes = rest.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let digit = |at: usize| bytes.get(at).and_then(|&d| (d as char).to_digit(16));
            let (Some(high), Some(low)) = (digit(i + 1), digit(i + 2)) else {
                return Err(NotCanonical::Escape);
            };
            let decoded = (high * 16 + low) as u8;
            if unreserved(decoded) {
                out.push(decoded as char);
            } else {
                out.push_str(&format!("%{decoded:02X}"));
            }
            i += 3;
        } else if plain(b) {
            out.push(b as char);
            i += 1;
        } else {
            out.push_str(&format!("%{b:02X}"));
            i += 1;
        }
    }
    if host_ci {
        let start = scheme.len() + 3;
        let auth = authority(&out[start..]);
        let host_end = start + auth.len() - port_len(auth);
        let host_start = out[start..host_end].rfind('@').map_or(start, |at| start + at + 1);
        out[host_start..host_end].make_ascii_lowercase();
    }
    Ok(if out == uri { Cow::Borrowed(uri) } else { Cow::Owned(out) })
}

/// The authority of what follows `//`: up to the first `/`, `?` or `#`.
fn authority(after_slashes: &str) -> &str {
    let end = after_slashes.find(['/', '?', '#']).unwrap_or(after_slashes.len());
    &after_slashes[..end]
}

/// The length of an authority's `:port` suffix (0 when there is none).
fn port_len(authority: &str) -> usize {
    match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') && authority[i + 1..].bytes().all(|b| b.is_ascii_digit()) => authority.len() - i,
        _ => 0,
    }
}

/// The host of an authority (without userinfo and port).
fn authority_host(after_slashes: &str) -> &str {
    let auth = authority(after_slashes);
    let auth = &auth[..auth.len() - port_len(auth)];
    auth.rsplit_once('@').map_or(auth, |(_, host)| host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms() {
        let c = |u: &str| canonical(u).map(|c| c.into_owned());
        assert_eq!(c("vault+mem://%73ecret/key"), Ok("vault+mem://secret/key".into()));
        assert_eq!(c("vault+mem://%53ecret/%6b%65%79"), Ok("vault+mem://Secret/key".into()));
        assert_eq!(c("VAULT+MEM://secret/key"), Ok("vault+mem://secret/key".into()));
        assert_eq!(c("mem://a%2fb%3a"), Ok("mem://a%2Fb%3A".into()), "reserved escapes stay, upper-cased");
        assert_eq!(c("mem://caf\u{e9} x"), Ok("mem://caf%C3%A9%20x".into()), "what may not stand in a URI is encoded");
        assert_eq!(c("web+HTTPS://User@Example.COM:8443/A"), Ok("web+https://User@example.com:8443/A".into()));
        assert_eq!(c("mem://Host/A"), Ok("mem://Host/A".into()), "only DNS hosts are case-insensitive");
        assert_eq!(c("x://{kind}/{item}"), Ok("x://{kind}/{item}".into()), "templates keep their expressions");
        assert_eq!(c("mem://a%zz"), Err(NotCanonical::Escape));
        assert_eq!(c("mem://a%4"), Err(NotCanonical::Escape));
        assert_eq!(c("no-scheme/path"), Err(NotCanonical::Scheme));
        assert_eq!(c("1x://a"), Err(NotCanonical::Scheme));
        assert_eq!(c("%76ault+mem://secret"), Err(NotCanonical::Scheme), "a scheme cannot be encoded");
        assert!(matches!(canonical("files+file:///docs/a.md"), Ok(Cow::Borrowed(_))), "the common case does not allocate");
    }

    #[test]
    fn canonical_is_idempotent() {
        for u in ["vault+mem://%73ecret/key", "A+B://x%2f%7e", "https://EX.com/%c3%a9", "mem://caf\u{e9}"] {
            let once = canonical(u).unwrap().into_owned();
            assert_eq!(canonical(&once).unwrap(), once, "{u}");
        }
    }
}
