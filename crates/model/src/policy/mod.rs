//! Who may see and call what. [`Policy::allows`] is the one function that decides, used for
//! lists and for every call, get, read and completion alike (through `view`), so what a caller
//! sees and what it may use can never disagree. Rules come from `[[caller]]` entries; a caller's
//! grants are the union of every entry that matches it. Patterns are globs on the gateway name
//! (tools, prompts) or URI (resources, templates), or `upstream:<id-glob>` for everything one
//! upstream serves. Deny wins over allow; once any caller is configured, what no rule allows is
//! denied. Scopes join the same decision: an item whose `[auth] *_scopes` the caller's token
//! lacks is out of its view too (lists included), whatever its grants.

pub mod glob;
pub mod secrets;

use crate::protocol::{Kind, uri as uris};

/// One item as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    pub kind: Kind,
    /// Gateway name (tools, prompts) or gateway URI (resources, templates).
    pub name: &'a str,
    /// The owning upstream's id.
    pub upstream: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Pattern {
    /// A glob on names and URIs: as written (for tools and prompts), and in canonical URI form
    /// (for resources and templates; the same text when it is no URI).
    Name {
        text: String,
        uri: String,
    },
    Upstream(String),
}

/// How a pattern is applied: an allow must match exactly; a deny (or a scope an item needs, or an
/// endpoint's exclude) also matches a URI spelled in another case, because many servers read
/// URIs case-insensitively, so a restriction must not depend on how a caller spells one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strictness {
    Allow,
    Deny,
}

impl Pattern {
    fn parse(text: &str) -> Pattern {
        match text.strip_prefix("upstream:") {
            Some(id) => Pattern::Upstream(id.to_string()),
            None => {
                let uri = uris::canonical(text).map_or_else(|_| text.to_string(), |c| c.into_owned());
                Pattern::Name { text: text.to_string(), uri }
            }
        }
    }

    fn matches(&self, item: &Item, how: Strictness) -> bool {
        match self {
            Pattern::Name { text, uri } if item.kind.is_uri() => match how {
                Strictness::Allow => glob::matches(uri, item.name),
                Strictness::Deny => glob::matches_ignoring_case(uri, item.name),
            },
            Pattern::Name { text, .. } => glob::matches(text, item.name),
            Pattern::Upstream(g) => glob::matches(g, item.upstream),
        }
    }
}

/// Whether the rule `pattern` (a glob, or `upstream:<id-glob>`) restricts `item`: the test for
/// patterns that take items away (`deny`, `[auth] *_scopes`), with URIs compared in canonical form.
pub fn restricts(pattern: &str, item: &Item) -> bool {
    match uri_form(item) {
        Ok(name) => Pattern::parse(pattern).matches(&Item { name: &name, ..*item }, Strictness::Deny),
        // A URI without a canonical form is restricted by every rule on its kind.
        Err(_) => true,
    }
}

/// The name the policy compares: a URI in canonical form; tool and prompt names as they are.
fn uri_form<'a>(item: &Item<'a>) -> Result<std::borrow::Cow<'a, str>, uris::NotCanonical> {
    if item.kind.is_uri() { uris::canonical(item.name) } else { Ok(std::borrow::Cow::Borrowed(item.name)) }
}

/// What one authenticated caller may use: the merged rules of every `[[caller]]` it matches.
/// `unrestricted` is for deployments without any `[[caller]]` (no policy configured).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Grants {
    unrestricted: bool,
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
    /// Items the caller's token lacks the scopes for: (the kinds a pattern applies to, pattern).
    lacking: Vec<(&'static [Kind], Pattern)>,
}

impl Grants {
    pub fn unrestricted() -> Grants {
        Grants { unrestricted: true, ..Default::default() }
    }

    /// Whether the caller sees everything (no policy, no scope it lacks).
    pub fn is_unrestricted(&self) -> bool {
        self.unrestricted && self.lacking.is_empty()
    }

    /// Takes the items of `kinds` matching `pattern` out of the view: the token lacks the
    /// scopes they need.
    pub fn lack_scopes_for(&mut self, kinds: &'static [Kind], pattern: &str) {
        self.lacking.push((kinds, Pattern::parse(pattern)));
    }

    /// The same grants as if the token had every scope (to tell "needs a scope" from "denied").
    pub fn ignoring_scopes(&self) -> Grants {
        Grants { lacking: Vec::new(), ..self.clone() }
    }

    /// The grants of a set of rules, each its `allow` and `deny` patterns (the merged
    /// `[[caller]]` entries a caller matches).
    pub fn from_rules<'a>(rules: impl IntoIterator<Item = (&'a [String], &'a [String])>) -> Grants {
        let mut g = Grants::default();
        for (allow, deny) in rules {
            g.allow.extend(allow.iter().map(|p| Pattern::parse(p)));
            g.deny.extend(deny.iter().map(|p| Pattern::parse(p)));
        }
        g
    }

    /// Builds grants from raw patterns (tests, tools).
    pub fn from_patterns(allow: &[&str], deny: &[&str]) -> Grants {
        Grants {
            unrestricted: false,
            allow: allow.iter().map(|p| Pattern::parse(p)).collect(),
            deny: deny.iter().map(|p| Pattern::parse(p)).collect(),
            lacking: Vec::new(),
        }
    }
}

/// The decision. A resource or template is decided on its canonical URI ([`uris::canonical`]);
/// one that has no canonical form is allowed only to callers without restrictions.
pub fn allows(grants: &Grants, item: &Item) -> bool {
    let Ok(name) = uri_form(item) else {
        return grants.is_unrestricted();
    };
    let item = &Item { name: &name, ..*item };
    if grants.lacking.iter().any(|(kinds, p)| kinds.contains(&item.kind) && p.matches(item, Strictness::Deny)) {
        return false;
    }
    if grants.unrestricted {
        return true;
    }
    grants.allow.iter().any(|p| p.matches(item, Strictness::Allow)) && !grants.deny.iter().any(|p| p.matches(item, Strictness::Deny))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool<'a>(name: &'a str, upstream: &'a str) -> Item<'a> {
        Item { kind: Kind::Tool, name, upstream }
    }

    #[test]
    fn allow_then_deny() {
        let g = Grants::from_patterns(&["calc__*"], &["calc__delete_*"]);
        assert!(allows(&g, &tool("calc__add", "calc")));
        assert!(!allows(&g, &tool("calc__delete_all", "calc")));
        assert!(!allows(&g, &tool("text__echo", "text")));
        let g = Grants::from_patterns(&["upstream:calc", "text__echo"], &["*__delete_*"]);
        assert!(allows(&g, &tool("calc__mul", "calc")));
        assert!(allows(&g, &tool("text__echo", "text")));
        assert!(!allows(&g, &tool("calc__delete_x", "calc")));
        assert!(!allows(&Grants::default(), &tool("calc__add", "calc")), "default deny");
        assert!(allows(&Grants::unrestricted(), &tool("anything", "x")));
    }

    #[test]
    fn lacking_scopes_hide_items_of_their_kinds_even_without_a_policy() {
        let mut g = Grants::unrestricted();
        g.lack_scopes_for(&[Kind::Tool], "admin__*");
        assert!(!allows(&g, &tool("admin__drop", "admin")));
        assert!(allows(&g, &Item { kind: Kind::Prompt, name: "admin__drop", upstream: "admin" }), "other kinds are not affected");
        assert!(allows(&g, &tool("calc__add", "calc")));
        assert!(!g.is_unrestricted(), "a filtered view is not everyone's view");
        assert!(allows(&g.ignoring_scopes(), &tool("admin__drop", "admin")));
    }

    fn resource<'a>(uri: &'a str) -> Item<'a> {
        Item { kind: Kind::Resource, name: uri, upstream: "vault" }
    }

    #[test]
    fn uris_are_decided_on_their_canonical_form() {
        let g = Grants::from_patterns(&["upstream:vault"], &["vault+mem://secret/*"]);
        for spelled in [
            "vault+mem://secret/key",
            "vault+mem://%73ecret/key",
            "vault+mem://%73%65%63%72%65%74/key",
            "VAULT+MEM://secret/key",
            "vault+mem://SECRET/key",
            "vault+mem://%53ecret/key",
            "vault+mem://secret/%zz",
        ] {
            assert!(!allows(&g, &resource(spelled)), "{spelled}");
        }
        assert!(allows(&g, &resource("vault+mem://public/readme")));
        assert!(allows(&g, &resource("vault+mem://%70ublic/readme")));
        // An allow matches exactly: another case is not what was allowed.
        let narrow = Grants::from_patterns(&["vault+mem://public/*"], &[]);
        assert!(allows(&narrow, &resource("vault+mem://%70ublic/readme")));
        assert!(!allows(&narrow, &resource("vault+mem://PUBLIC/readme")));
        // Patterns are canonical too.
        let encoded = Grants::from_patterns(&["*"], &["vault+mem://%73ecret/*"]);
        assert!(!allows(&encoded, &resource("vault+mem://secret/key")));
        // Scopes a URI needs hold whatever its spelling.
        let mut scoped = Grants::unrestricted();
        scoped.lack_scopes_for(&[Kind::Resource], "vault+mem://secret/*");
        assert!(!allows(&scoped, &resource("vault+mem://%73ecret/key")));
        assert!(restricts("vault+mem://secret/*", &resource("vault+MEM://%73ecret/key")));
        assert!(!restricts("vault+mem://secret/*", &resource("vault+mem://public/x")));
        // Tool names are names, not URIs.
        assert!(!allows(&Grants::from_patterns(&["calc__*"], &[]), &tool("CALC__add", "calc")));
        assert!(allows(&Grants::unrestricted(), &resource("not a uri")), "no policy, no decision");
    }
}
