//! Who may see and call what. [`allows`] decides for lists and lookups, and [`Grants::decide`]
//! for each call (with its arguments, the request and the clock); both run the same rules
//! through the same function (`rules::evaluate`), so what a caller sees and what it may use can
//! never disagree beyond what only the call can tell. Every rule is a [`rules::Rule`]: a
//! `[[rule]]` entry (target, CEL condition, effect), a `[[caller]]` entry's `allow`/`deny` globs,
//! or an `[auth] *_scopes` entry the token lacks. Patterns are globs on the gateway name (tools,
//! prompts) or URI (resources, templates), or `upstream:<id-glob>` for everything one upstream
//! serves. Deny wins over allow; once anything is configured that allows, what no rule allows is
//! denied.

pub mod expr;
pub mod facts;
mod fast;
pub mod glob;
pub mod guards;
mod reads;
pub mod rules;
pub mod secrets;
pub mod shapes;
pub mod unhide;

use crate::protocol::{Kind, uri as uris};
use facts::{CallerFacts, Facts};
use rules::{ALL_KINDS, Effect, Rule, Source, Verdict};
use std::sync::Arc;

/// One item as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    pub kind: Kind,
    /// Gateway name (tools, prompts) or gateway URI (resources, templates).
    pub name: &'a str,
    /// The owning upstream's id.
    pub upstream: &'a str,
    /// The item's own JSON (a tool's definition), for conditions that read `tool`.
    pub json: Option<&'a str>,
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

/// What one authenticated caller may use: the rules that concern it ([`rules::Rule`]: its
/// `[[caller]]` entries' globs, the `[[rule]]`s naming it or everyone, the scopes its token
/// lacks), with the conditions that read only the caller already decided. `open`: what no rule
/// allows is allowed (a deployment where nothing is configured that allows).
#[derive(Debug, Clone, Default)]
pub struct Grants {
    open: bool,
    rules: Vec<Arc<Rule>>,
    caller: Arc<CallerFacts>,
    /// The `[[endpoint]]` path the caller came through (`None`: the root).
    endpoint: Option<Arc<str>>,
    /// The rules left out because a condition reading only the caller did not hold for it (or
    /// could not be evaluated), and why: they decide nothing, but `mcpgate policy explain` shows
    /// them. Not part of what the grants are (equality, hashing).
    passed_over: Vec<(Arc<Rule>, rules::Holds)>,
    /// What the rules read, found once when the grants are made (not per call: a policy of
    /// fifty rules is not scanned twice on every call).
    reads: RulesRead,
}

/// What a caller's rules read, as [`Grants::decides_calls`], [`Grants::reads_arguments`] and
/// the caller facts say.
#[derive(Debug, Clone, Copy, Default)]
struct RulesRead {
    calls: bool,
    arguments: bool,
    caller: bool,
    confirm: bool,
}

impl RulesRead {
    fn of(rules: &[Arc<Rule>]) -> RulesRead {
        RulesRead {
            calls: rules.iter().any(|r| r.needs_call() || r.effect == Effect::Confirm),
            arguments: rules.iter().any(|r| r.when.as_ref().is_some_and(|w| w.reads().args)),
            caller: rules.iter().any(|r| r.when.as_ref().is_some_and(|w| w.reads().caller)),
            confirm: rules.iter().any(|r| r.effect == Effect::Confirm),
        }
    }
}

impl PartialEq for Grants {
    fn eq(&self, other: &Grants) -> bool {
        self.open == other.open
            && self.rules == other.rules
            && self.endpoint == other.endpoint
            && (!self.reads_caller() || self.caller == other.caller)
    }
}

impl Eq for Grants {}

impl std::hash::Hash for Grants {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.open, &self.rules, &self.endpoint).hash(state);
        if self.reads_caller() {
            self.caller.hash(state);
        }
    }
}

impl Grants {
    pub fn unrestricted() -> Grants {
        Grants { open: true, ..Default::default() }
    }

    /// The grants of a caller: `rules` are those concerning it. A condition reading only the
    /// caller is decided here, once: a rule it holds for keeps no condition, one it does not hold
    /// for is left out (a failing condition counts against the caller, as everywhere).
    pub fn new(open: bool, rules: impl IntoIterator<Item = Arc<Rule>>, caller: Arc<CallerFacts>) -> Grants {
        let facts = Facts::listing(&caller, None);
        let mut passed_over = Vec::new();
        let rules: Vec<Arc<Rule>> = rules
            .into_iter()
            .filter_map(|r| {
                let Some(w) = &r.when else { return Some(r) };
                let reads = w.reads();
                if reads.request || reads.args || reads.now || reads.tool {
                    return Some(r);
                }
                let (holds, why) = match w.eval(&facts) {
                    Ok(b) => (b, rules::Holds::No),
                    Err(e) => (r.effect != Effect::Allow, rules::Holds::Failed(e)),
                };
                if !holds {
                    passed_over.push((r.clone(), why));
                }
                holds.then(|| Arc::new(r.decided()))
            })
            .collect();
        let reads = RulesRead::of(&rules);
        Grants { open, rules, caller, endpoint: None, passed_over, reads }
    }

    /// The same grants, for calls through the endpoint at `path` (`None`: the root).
    pub fn at(&self, path: Option<&str>) -> Grants {
        Grants { endpoint: path.map(Arc::from), ..self.clone() }
    }

    /// Whether the caller sees everything (nothing restricts it; confirmations hide nothing).
    pub fn is_unrestricted(&self) -> bool {
        self.open && self.rules.iter().all(|r| r.effect == Effect::Confirm)
    }

    /// Whether some rule waits for the call to be decided (a condition reading `request`,
    /// `args` or `now`) or asks for a confirmation: then each call is decided again with its facts.
    pub fn decides_calls(&self) -> bool {
        self.reads.calls
    }

    /// Whether some rule asks for a person's confirmation of a call.
    pub fn may_confirm(&self) -> bool {
        self.reads.confirm
    }

    /// Whether any condition reads the call's arguments.
    pub fn reads_arguments(&self) -> bool {
        self.reads.arguments
    }

    /// Whether any condition reads the caller (then its facts are part of what the grants are).
    fn reads_caller(&self) -> bool {
        self.reads.caller
    }

    pub fn caller(&self) -> &CallerFacts {
        &self.caller
    }

    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    /// Takes the items of `kinds` matching `pattern` out of the view: the token lacks the
    /// scopes they need.
    pub fn lack_scopes_for(&mut self, kinds: &'static [Kind], pattern: &str) {
        let rule = Rule::new(format!("scopes of {pattern}"), Effect::Deny, Source::Scope).on(kinds, &[pattern.to_string()]);
        self.rules.push(Arc::new(rule));
        self.reads = RulesRead::of(&self.rules);
    }

    /// The same grants as if the token had every scope (to tell "needs a scope" from "denied").
    pub fn ignoring_scopes(&self) -> Grants {
        Grants { rules: self.rules.iter().filter(|r| r.source != Source::Scope).cloned().collect(), ..self.clone() }
    }

    /// Builds grants from raw patterns (tests, tools).
    pub fn from_patterns(allow: &[&str], deny: &[&str]) -> Grants {
        let strings = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let rules = [
            Rule::new("allow", Effect::Allow, Source::Caller).on(ALL_KINDS, &strings(allow)),
            Rule::new("deny", Effect::Deny, Source::Caller).on(ALL_KINDS, &strings(deny)),
        ];
        Grants { rules: rules.into_iter().filter(Rule::names_items).map(Arc::new).collect(), ..Default::default() }
    }

    /// The decision on one call of `item` with its facts (`facts.request` set), or, with
    /// `trace`, each rule's part in it too.
    pub fn decide(&self, item: &Item, facts: &Facts<'_>, mut trace: Option<&mut Vec<rules::Step>>) -> Verdict {
        let Ok(name) = uri_form(item) else { return Verdict { allowed: self.is_unrestricted(), ..Verdict::default() } };
        let item = Item { name: &name, ..*item };
        let verdict = rules::evaluate(self.open, &self.rules, &item, self.endpoint(), facts, trace.as_deref_mut());
        if let Some(t) = trace {
            // The rules a condition on the caller alone left out, said so.
            for (r, holds) in self.passed_over.iter().filter(|(r, _)| r.targets(&item, self.endpoint())) {
                t.push(rules::Step {
                    rule: r.name.clone(),
                    effect: r.effect,
                    source: r.source,
                    condition: r.condition_text(),
                    holds: holds.clone(),
                });
            }
        }
        verdict
    }
}

/// The decision when listing and looking up: what rules decide without the call. A resource or
/// template is decided on its canonical URI ([`uris::canonical`]); one that has no canonical form
/// is allowed only to callers without restrictions.
pub fn allows(grants: &Grants, item: &Item) -> bool {
    if grants.is_unrestricted() {
        return true;
    }
    grants.decide(item, &Facts::listing(&grants.caller, item.json), None).allowed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool<'a>(name: &'a str, upstream: &'a str) -> Item<'a> {
        Item { kind: Kind::Tool, name, upstream, json: None }
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
        assert!(
            allows(&g, &Item { kind: Kind::Prompt, name: "admin__drop", upstream: "admin", json: None }),
            "other kinds are not affected"
        );
        assert!(allows(&g, &tool("calc__add", "calc")));
        assert!(!g.is_unrestricted(), "a filtered view is not everyone's view");
        assert!(allows(&g.ignoring_scopes(), &tool("admin__drop", "admin")));
    }

    fn resource<'a>(uri: &'a str) -> Item<'a> {
        Item { kind: Kind::Resource, name: uri, upstream: "vault", json: None }
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
