//! The reversible mapping between upstream resource URIs and gateway URIs, and the one canonical
//! form every URI decision is taken on. An upstream with a non-empty prefix `p` serves `<uri>` as
//! `p+<uri>` (its scheme gains a `p+` part, so the result is still a URI); an upstream with an
//! empty prefix keeps its URIs. Routing a URI back: a listed URI goes to its owner; `p+<uri>`
//! goes to the configured upstream with prefix `p`, whether it is up or not (a URI in a prefix's
//! namespace never reaches another upstream); anything else goes to the unprefixed upstream
//! whose templates match it, else to the first unprefixed upstream that serves resources.
//! [`canonical`] is what policy, endpoint selections and scopes compare: two spellings of the
//! same URI (`%73ecret` and `secret`, `MEM:` and `mem:`) are one URI to them.

use super::Kind;
use super::merge::Catalog;
use std::borrow::Cow;

pub fn to_gateway(prefix: &str, uri: &str) -> String {
    if prefix.is_empty() { uri.to_string() } else { format!("{prefix}+{uri}") }
}

/// The scheme of `uri` (what precedes the first `:`), if it is a valid RFC 3986 scheme.
fn scheme(uri: &str) -> Option<&str> {
    let (scheme, _) = uri.split_once(':')?;
    let mut chars = scheme.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    (first_ok && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))).then_some(scheme)
}

pub fn route(cat: &Catalog, uri: &str) -> Option<(usize, String)> {
    // The prefix is the scheme's first part; schemes are case-insensitive, so is the prefix.
    if let Some((head, _)) = scheme(uri).and_then(|s| s.split_once('+'))
        && let Some((upstream, _)) = cat.namespaces.iter().find(|(_, p)| !p.is_empty() && p.eq_ignore_ascii_case(head))
    {
        return Some((*upstream, uri[head.len() + 1..].to_string()));
    }
    let unprefixed = |up: usize| cat.owners.iter().any(|o| o.upstream == up && o.prefix.is_empty());
    if let Some(t) = cat.section(Kind::Template).entries.iter().find(|t| unprefixed(t.upstream) && template_matches(&t.original, uri)) {
        return Some((t.upstream, uri.to_string()));
    }
    cat.owners.iter().find(|o| o.prefix.is_empty() && o.has_resources).map(|o| (o.upstream, uri.to_string()))
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

/// Whether a URI holds anything that could make a string match say less than the URI reaches:
/// dot segments, encoded dots, slashes, backslashes or percent signs (a second decoding),
/// backslashes, or empty path segments.
pub fn has_path_tricks(uri: &str) -> bool {
    let lower = uri.to_ascii_lowercase();
    let path = lower.split_once("://").map(|(_, rest)| rest).unwrap_or(&lower);
    path.contains("%2e")
        || path.contains("%2f")
        || path.contains("%5c")
        || path.contains("%25")
        || path.contains('\\')
        || path.contains("//")
        || path.split(['/', '?', '#']).any(|seg| seg == "." || seg == "..")
}

/// Whether `uri` could be an expansion of the RFC 6570 `template`: the literal parts must appear
/// in order, each expression matching any run of characters.
pub fn template_matches(template: &str, uri: &str) -> bool {
    let mut literals = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        literals.push(&rest[..open]);
        match rest[open..].find('}') {
            Some(close) => rest = &rest[open + close + 1..],
            None => return false,
        }
    }
    let tail = rest;
    let Some(first) = literals.first() else {
        return template == uri;
    };
    if !uri.starts_with(first) || !uri.ends_with(tail) || uri.len() < first.len() + tail.len() {
        return false;
    }
    let mut pos = first.len();
    let end = uri.len() - tail.len();
    for lit in &literals[1..] {
        match uri[pos..end].find(lit) {
            Some(i) => pos += i + lit.len(),
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_templates() {
        assert!(template_matches("test://template/{id}/data", "test://template/42/data"));
        assert!(!template_matches("test://template/{id}/data", "test://template/42/other"));
        assert!(template_matches("file:///{+path}", "file:///a/b/c"));
        assert!(template_matches("x://{a}-{b}", "x://1-2"));
        assert!(!template_matches("x://{a}-{b}", "x://12"));
        assert!(template_matches("plain://uri", "plain://uri"));
        assert!(!template_matches("broken{", "broken{"));
    }

    #[test]
    fn spots_path_tricks() {
        for bad in [
            "f+file:///docs/../secrets",
            "f+file:///docs/%2e%2e/x",
            "f+file:///docs/..",
            "f+file:////etc/passwd",
            "f+file:///a/./b",
            "f+file:///a%2Fb",
            "f+file:///a\\b",
            "f+file:///a/%252e%252e/b",
        ] {
            assert!(has_path_tricks(bad), "{bad}");
        }
        for good in ["f+file:///docs/readme.md", "test://template/42/data", "f+file:///docs/a..b"] {
            assert!(!has_path_tricks(good), "{good}");
        }
    }

    #[test]
    fn prefixes_uris() {
        assert_eq!(to_gateway("files", "file:///x"), "files+file:///x");
        assert_eq!(to_gateway("", "file:///x"), "file:///x");
    }

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
