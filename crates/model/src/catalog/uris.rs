//! The reversible mapping between upstream resource URIs and gateway URIs, and the one canonical
//! form every URI decision is taken on. An upstream with a non-empty prefix `p` serves `<uri>` as
//! `p+<uri>` (its scheme gains a `p+` part, so the result is still a URI); an upstream with an
//! empty prefix keeps its URIs. Routing a URI back: a listed URI goes to its owner; `p+<uri>`
//! goes to the configured upstream with prefix `p`, whether it is up or not (a URI in a prefix's
//! namespace never reaches another upstream); anything else goes to the unprefixed upstream
//! whose templates match it, else to the first unprefixed upstream that serves resources.
//! Every decision about a URI is taken on its canonical form (`protocol::uri::canonical`).

use super::Kind;
use super::merge::Catalog;
pub use crate::protocol::uri::{NotCanonical, canonical};

pub fn to_gateway(prefix: &str, uri: &str) -> String {
    if prefix.is_empty() { uri.to_string() } else { format!("{prefix}+{uri}") }
}

pub fn route(cat: &Catalog, uri: &str) -> Option<(usize, String)> {
    // The prefix is the scheme's first part; schemes are case-insensitive, so is the prefix.
    if let Some((head, _)) = crate::protocol::uri::scheme(uri).and_then(|s| s.split_once('+'))
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
}
