//! Who may see and call what. [`Policy::allows`] is the one function that decides, used for
//! lists and for every call, get, read and completion alike (through `view`), so what a caller
//! sees and what it may use can never disagree. Rules come from `[[caller]]` entries; a caller's
//! grants are the union of every entry that matches it. Patterns are globs on the gateway name
//! (tools, prompts) or URI (resources, templates), or `upstream:<id-glob>` for everything one
//! upstream serves. Deny wins over allow; once any caller is configured, what no rule allows is
//! denied. Scopes join the same decision: an item whose `[auth] *_scopes` the caller's token
//! lacks is out of its view too (lists included), whatever its grants.

pub mod glob;
pub mod view;

use crate::catalog::Kind;
use crate::config::auth::CallerConfig;

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
    Name(String),
    Upstream(String),
}

impl Pattern {
    fn parse(text: &str) -> Pattern {
        match text.strip_prefix("upstream:") {
            Some(id) => Pattern::Upstream(id.to_string()),
            None => Pattern::Name(text.to_string()),
        }
    }

    fn matches(&self, item: &Item) -> bool {
        match self {
            Pattern::Name(g) => glob::matches(g, item.name),
            Pattern::Upstream(g) => glob::matches(g, item.upstream),
        }
    }
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

    /// The grants of the callers `rules`.
    pub fn from_rules<'a>(rules: impl IntoIterator<Item = &'a CallerConfig>) -> Grants {
        let mut g = Grants::default();
        for r in rules {
            g.allow.extend(r.allow.iter().map(|p| Pattern::parse(p)));
            g.deny.extend(r.deny.iter().map(|p| Pattern::parse(p)));
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

/// The decision.
pub fn allows(grants: &Grants, item: &Item) -> bool {
    if grants.lacking.iter().any(|(kinds, p)| kinds.contains(&item.kind) && p.matches(item)) {
        return false;
    }
    if grants.unrestricted {
        return true;
    }
    grants.allow.iter().any(|p| p.matches(item)) && !grants.deny.iter().any(|p| p.matches(item))
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
}
