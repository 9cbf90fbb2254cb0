//! The rules and the one function that decides with them ([`evaluate`]). Every rule the gateway
//! follows is a [`Rule`]: a `[[rule]]` entry as written, a `[[caller]]` entry's `allow` and `deny`
//! globs (a rule without a condition), and each `[auth] *_scopes` entry a token lacks (a deny).
//! A rule has a target (callers, items by kind and glob, upstreams, endpoints), an optional
//! condition and an effect. The combining order: a deny that holds refuses, whatever allows;
//! otherwise the call is allowed when an allow holds (or when nothing is configured that allows,
//! see [`super::Grants`]); an allowed call a confirm rule holds for waits for a person. A
//! condition that cannot be evaluated counts against the call: a deny or confirm holds, an allow
//! does not. When listing, a condition that needs the call (`request`, `args`, `now`) is
//! [`Holds::Later`]: such an allow lists the item, such a deny does not hide it.

use super::expr::{Condition, EvalError, Reads};
use super::facts::{Facts, FactsError};
use super::fast::Scope;
use super::{Item, Pattern, Strictness, glob};
use crate::protocol::Kind;
use std::cell::OnceCell;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effect {
    Allow,
    Deny,
    Confirm,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Deny => "deny",
            Effect::Confirm => "confirm",
        }
    }
}

/// Where a rule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// A `[[rule]]` entry.
    Rule,
    /// A `[[caller]]` entry's `allow` or `deny`.
    Caller,
    /// An `[auth] *_scopes` entry the caller's token lacks scopes for.
    Scope,
}

/// Every kind of item.
pub const ALL_KINDS: &[Kind] = &[Kind::Tool, Kind::Prompt, Kind::Resource, Kind::Template, Kind::Skill];

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    pub name: String,
    pub effect: Effect,
    pub source: Source,
    /// Globs on the caller's id or the ids of the `[[caller]]` entries it matched; empty: anyone.
    callers: Vec<String>,
    /// Items by kind and glob; empty: every item.
    items: Vec<(&'static [Kind], Pattern)>,
    /// Globs on the owning upstream's id; empty: any.
    upstreams: Vec<String>,
    /// Globs on the `[[endpoint]]` path (`/` for the root); empty: any.
    endpoints: Vec<String>,
    pub when: Option<Arc<Condition>>,
    /// The condition this rule had before it was decided for one caller (see [`Rule::decided`]),
    /// for `mcpgate policy explain`.
    pub decided_from: Option<String>,
}

impl Rule {
    pub fn new(name: impl Into<String>, effect: Effect, source: Source) -> Rule {
        Rule {
            name: name.into(),
            effect,
            source,
            callers: Vec::new(),
            items: Vec::new(),
            upstreams: Vec::new(),
            endpoints: Vec::new(),
            when: None,
            decided_from: None,
        }
    }

    /// Targets the items of `kinds` matching `patterns` (globs, or `upstream:<id-glob>`).
    pub fn on(mut self, kinds: &'static [Kind], patterns: &[String]) -> Rule {
        self.items.extend(patterns.iter().map(|p| (kinds, Pattern::parse(p))));
        self
    }

    pub fn for_callers(mut self, callers: &[String]) -> Rule {
        self.callers = callers.to_vec();
        self
    }

    pub fn of_upstreams(mut self, upstreams: &[String]) -> Rule {
        self.upstreams = upstreams.to_vec();
        self
    }

    pub fn at_endpoints(mut self, endpoints: &[String]) -> Rule {
        self.endpoints = endpoints.to_vec();
        self
    }

    pub fn when(mut self, condition: Condition) -> Rule {
        self.when = Some(Arc::new(condition));
        self
    }

    /// Whether the rule is about this caller (its id, or a `[[caller]]` entry it matched).
    pub fn concerns(&self, id: &str, entries: &[String]) -> bool {
        self.callers.is_empty() || self.callers.iter().any(|g| glob::matches(g, id) || entries.iter().any(|e| glob::matches(g, e)))
    }

    /// Whether the rule is about `item` (in canonical form), reached through `endpoint`.
    pub(super) fn targets(&self, item: &Item, endpoint: Option<&str>) -> bool {
        let how = if self.effect == Effect::Allow { Strictness::Allow } else { Strictness::Deny };
        (self.items.is_empty() || self.items.iter().any(|(kinds, p)| kinds.contains(&item.kind) && p.matches(item, how)))
            && (self.upstreams.is_empty() || self.upstreams.iter().any(|g| glob::matches(g, item.upstream)))
            && (self.endpoints.is_empty() || self.endpoints.iter().any(|g| glob::matches(g, endpoint.unwrap_or("/"))))
    }

    /// The same rule with its condition decided true (the condition's text kept to be shown).
    pub fn decided(&self) -> Rule {
        Rule { when: None, decided_from: self.when.as_ref().map(|w| w.source().to_string()), ..self.clone() }
    }

    /// The condition as written, whether it is still to be decided or was decided for the caller.
    pub fn condition_text(&self) -> Option<String> {
        self.when.as_ref().map(|w| w.source().to_string()).or_else(|| self.decided_from.clone())
    }

    /// Whether the rule names items (a rule naming none is about every item).
    pub fn names_items(&self) -> bool {
        !self.items.is_empty()
    }

    /// Whether the rule only waits on the call to be decided (its condition reads the call).
    pub fn needs_call(&self) -> bool {
        self.when.as_ref().is_some_and(|w| w.reads().needs_call())
    }
}

/// What became of one rule's condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Holds {
    Yes,
    No,
    /// Decided only when the call is made.
    Later,
    /// The condition could not be evaluated (why).
    Failed(EvalError),
}

/// The decision on one item (a listing) or one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// The deny rule that refused it.
    pub denied_by: Option<String>,
    /// The confirm rule that holds for an allowed call.
    pub confirm_by: Option<String>,
    /// When refused because no allow held: the allow rules whose conditions, reading the call,
    /// said no.
    pub unmet: Vec<String>,
}

/// One rule's part in a decision (for `mcpgate policy explain`).
#[derive(Debug, Clone)]
pub struct Step {
    pub rule: String,
    pub effect: Effect,
    pub source: Source,
    pub condition: Option<String>,
    pub holds: Holds,
}

/// Decides on `item` (in canonical form) with the rules concerning the caller. `open`: whether
/// what no rule allows is allowed. `facts.request` is `None` when listing.
pub(super) fn evaluate(
    open: bool,
    rules: &[Arc<Rule>],
    item: &Item,
    endpoint: Option<&str>,
    facts: &Facts<'_>,
    mut trace: Option<&mut Vec<Step>>,
) -> Verdict {
    let listing = facts.request.is_none();
    let applying = rules.iter().map(|r| r.as_ref()).filter(|r| r.targets(item, endpoint));
    let scope = Scope::new(facts);
    // The interpreter's context, made only when a condition has no fast answer, holding what
    // every condition applying may read.
    let ctx: OnceCell<Result<cel::Context<'static, 'static>, FactsError>> = OnceCell::new();
    let interpreted = |w: &Condition| {
        let ctx = ctx.get_or_init(|| {
            let reads =
                rules.iter().filter(|r| r.targets(item, endpoint)).filter_map(|r| r.when.as_ref()).fold(Reads::default(), |a, w| {
                    let r = w.reads();
                    Reads {
                        caller: a.caller || r.caller,
                        request: a.request || r.request,
                        tool: a.tool || r.tool,
                        args: a.args || r.args,
                        now: a.now || r.now,
                    }
                });
            let reads = if listing { Reads { request: false, args: false, now: false, ..reads } } else { reads };
            Condition::context(facts, reads)
        });
        match ctx {
            Ok(ctx) => w.eval_in(ctx),
            // What one condition reads failed (arguments too large): each decides with its own.
            Err(_) => w.eval_interpreted(facts),
        }
    };
    let mut verdict = Verdict { allowed: open, ..Verdict::default() };
    let mut allowed_by_rule = false;
    for rule in applying {
        // Without a trace, a rule whose answer cannot change the verdict is not evaluated: after
        // a deny holds, nothing; after an allow holds, no other allow; after a confirm, no other.
        let moot = match rule.effect {
            _ if verdict.denied_by.is_some() => true,
            Effect::Allow => allowed_by_rule,
            Effect::Confirm => verdict.confirm_by.is_some(),
            Effect::Deny => false,
        };
        if moot && trace.is_none() {
            continue;
        }
        let holds = match &rule.when {
            None => Holds::Yes,
            Some(w) if listing && w.reads().needs_call() => Holds::Later,
            Some(w) => match w.eval_fast(&scope).map_or_else(|| interpreted(w), Ok) {
                Ok(true) => Holds::Yes,
                Ok(false) => Holds::No,
                Err(e) => Holds::Failed(e),
            },
        };
        let counts = matches!(holds, Holds::Yes | Holds::Failed(_));
        match rule.effect {
            Effect::Deny if counts && verdict.denied_by.is_none() => verdict.denied_by = Some(rule.name.clone()),
            Effect::Allow if matches!(holds, Holds::Yes | Holds::Later) => allowed_by_rule = true,
            // The allow rules the call itself could have met (not those the item never meets).
            Effect::Allow if rule.needs_call() => verdict.unmet.push(rule.name.clone()),
            Effect::Confirm if counts && verdict.confirm_by.is_none() => verdict.confirm_by = Some(rule.name.clone()),
            _ => {}
        }
        if let Some(t) = trace.as_deref_mut() {
            let condition = rule.condition_text();
            t.push(Step { rule: rule.name.clone(), effect: rule.effect, source: rule.source, condition, holds });
        }
    }
    verdict.allowed = (open || allowed_by_rule) && verdict.denied_by.is_none();
    if !verdict.allowed {
        verdict.confirm_by = None;
    }
    if verdict.allowed || verdict.denied_by.is_some() {
        verdict.unmet.clear();
    }
    verdict
}

#[cfg(test)]
mod tests;
