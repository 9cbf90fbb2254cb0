//! The reversible mapping between upstream resource URIs and gateway URIs, and the one canonical
//! form every URI decision is taken on. An upstream with a non-empty prefix `p` serves `<uri>` as
//! `p+<uri>` (its scheme gains a `p+` part, so the result is still a URI); an upstream with an
//! empty prefix keeps its URIs. Routing a URI back: a listed URI goes to its owner; `p+<uri>`
//! goes to the configured upstream with prefix `p`, whether it is up or not (a URI in a prefix's
//! namespace never reaches another upstream); anything else goes to the unprefixed upstream
//! whose templates match it, else to the first unprefixed upstream that serves resources.
//! MCP Apps' `ui://` URIs and Agent Skills' `skill://` URIs keep their scheme, which hosts
//! require: an upstream with prefix `p` serves `ui://<rest>` as `ui://p/<rest>` (and
//! `skill://<skill-path>/SKILL.md` as `skill://p/<skill-path>/SKILL.md`, so the last segment of
//! the skill path is still the skill's name), and `ui://p/…` routes back to it the same way.
//! Every decision about a URI is taken on its canonical form (`protocol::uri::canonical`).

pub use crate::protocol::uri::{NotCanonical, canonical};

/// The schemes an extension requires a gateway URI to keep: MCP Apps' UI resources (SEP-1865)
/// and Agent Skills' files (SEP-2640). The prefix goes in front of their path instead.
const KEPT: [&str; 2] = ["ui://", "skill://"];

/// The scheme of Agent Skills' files.
pub const SKILL: &str = "skill://";

pub fn to_gateway(prefix: &str, uri: &str) -> String {
    if prefix.is_empty() {
        return uri.to_string();
    }
    match kept_rest(uri) {
        Some((scheme, rest)) => format!("{scheme}{prefix}/{rest}"),
        None => format!("{prefix}+{uri}"),
    }
}

/// The kept scheme a URI has (in lower case) and what follows it (the scheme in any case).
fn kept_rest(uri: &str) -> Option<(&'static str, &str)> {
    KEPT.iter().find_map(|k| uri.get(..k.len()).filter(|s| s.eq_ignore_ascii_case(k)).map(|_| (*k, &uri[k.len()..])))
}

/// Whether a URI is an Agent Skills file (`skill://`, in any case).
pub fn is_skill(uri: &str) -> bool {
    uri.get(..SKILL.len()).is_some_and(|s| s.eq_ignore_ascii_case(SKILL))
}

/// The namespace a gateway URI names, and the upstream's URI inside it: `p+<uri>`, or
/// `ui://p/<rest>` (`skill://p/<rest>`) for the kept schemes. The prefix is compared without
/// regard to case, as the scheme (and an authority) it stands in is.
pub fn split_namespace(uri: &str) -> Option<(&str, String)> {
    if let Some((scheme, rest)) = kept_rest(uri) {
        let (head, tail) = rest.split_once('/')?;
        return Some((head, format!("{scheme}{tail}")));
    }
    let (head, _) = crate::protocol::uri::scheme(uri)?.split_once('+')?;
    Some((head, uri[head.len() + 1..].to_string()))
}

/// Whether a URI holds anything that could make a string match say less than the URI reaches:
/// dot segments, encoded dots, slashes, backslashes or percent signs (a second decoding),
/// backslashes, empty path segments, `;` path parameters (`secret;x=1`, `..;`, also encoded:
/// servers that strip them read `secret`, `..`), or whitespace or control characters in the path,
/// raw or encoded (servers that trim a variable read `secret` in `secret%20`). A query may hold
/// `;` and spaces (a search template's `{?q}`). A sign after `%` in the path (`%+9`) is a trick
/// too: a lenient decoder (one that parses the two characters as a signed number) reads a control
/// character there.
pub fn has_path_tricks(uri: &str) -> bool {
    let lower = uri.to_ascii_lowercase();
    let path = lower.split_once("://").map(|(_, rest)| rest).unwrap_or(&lower);
    let before_query = path.split(['?', '#']).next().unwrap_or(path);
    path.contains("%2e")
        || path.contains("%2f")
        || path.contains("%5c")
        || path.contains("%25")
        || path.contains('\\')
        || path.contains("//")
        || path.split(['/', '?', '#']).any(|seg| seg == "." || seg == "..")
        || before_query.contains(';')
        || before_query.contains("%3b")
        || before_query.contains("%+")
        || crate::toolbox::percent_decode(before_query).chars().any(|c| c.is_whitespace() || c.is_control())
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
            "f+file:///secret;x=1/key",
            "f+file:///..;/key",
            "f+file:///secret%3Bx/key",
            "f+file:///secret%20/key",
            "f+file:///secret /key",
            "f+file:///%09secret/key",
            "f+file:///secret%C2%A0/key",
            "f+file:///secret%00/key",
            "f+file:///secret%+9/key",
        ] {
            assert!(has_path_tricks(bad), "{bad}");
        }
        for good in ["f+file:///docs/readme.md", "test://template/42/data", "f+file:///docs/a..b", "x://a/b?q=1;2%20x", "x://caf%C3%A9/b"] {
            assert!(!has_path_tricks(good), "{good}");
        }
    }

    #[test]
    fn prefixes_uris() {
        assert_eq!(to_gateway("files", "file:///x"), "files+file:///x");
        assert_eq!(to_gateway("", "file:///x"), "file:///x");
    }

    #[test]
    fn ui_uris_keep_their_scheme_and_split_back() {
        assert_eq!(to_gateway("app", "ui://get-time/mcp-app.html"), "ui://app/get-time/mcp-app.html");
        assert_eq!(to_gateway("", "ui://get-time/mcp-app.html"), "ui://get-time/mcp-app.html");
        assert_eq!(split_namespace("ui://app/get-time/mcp-app.html"), Some(("app", "ui://get-time/mcp-app.html".into())));
        assert_eq!(split_namespace("UI://App/x"), Some(("App", "ui://x".into())));
        assert_eq!(split_namespace("files+file:///x"), Some(("files", "file:///x".into())));
        assert_eq!(split_namespace("ui://lonely"), None);
        assert_eq!(to_gateway("a", "skill://code-review/SKILL.md"), "skill://a/code-review/SKILL.md");
        assert_eq!(to_gateway("a", "SKILL://x/y/SKILL.md"), "skill://a/x/y/SKILL.md");
        assert_eq!(split_namespace("skill://a/code-review/refs/F.md"), Some(("a", "skill://code-review/refs/F.md".into())));
        assert!(is_skill("Skill://a/b") && !is_skill("a+skill://b"));
        assert_eq!(split_namespace("file:///x"), None);
    }
}
