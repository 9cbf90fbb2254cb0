//! `[[rule]]`: policy as code. Each entry has a unique `name`, an `effect` (`allow`, `deny` or
//! `confirm`), an optional target (`callers`, `tools`, `prompts`, `resources`, `upstreams`,
//! `endpoints`; what is left out means any) and an optional `when`, a CEL expression over
//! `caller`, `request`, `tool`, `args` and `now`, parsed and checked here, at load and at every
//! reload: a mistake fails `mcpgate check` (and a reload keeps the running rules) with the file,
//! the line and the position in the expression. The entries become rules of the one engine in
//! `policy::rules`, alongside the `[[caller]]` globs and the scopes.

use super::{ConfigError, Locator};
use crate::catalog::Kind;
use crate::policy::expr::Condition;
use crate::policy::rules::{Effect, Rule, Source};
use serde::Deserialize;
use std::sync::Arc;
use toml::Spanned;

/// `[[rule]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSection {
    pub name: Spanned<String>,
    pub effect: Spanned<String>,
    /// Globs on the caller's id (an API key's `[[caller]]` id, a token's subject) or on the ids
    /// of the `[[caller]]` entries it matched.
    #[serde(default)]
    pub callers: Vec<String>,
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub prompts: Vec<String>,
    /// URI globs over resources, templates and skills.
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub upstreams: Vec<String>,
    /// The `[server] path` or `[[endpoint]] path`s (globs) the rule holds on.
    #[serde(default)]
    pub endpoints: Vec<String>,
    pub when: Option<Spanned<String>>,
}

const URI_KINDS: &[Kind] = &[Kind::Resource, Kind::Template, Kind::Skill];

pub(super) fn resolve(at: &Locator, sections: Vec<RuleSection>, root_path: &str) -> Result<Vec<Arc<Rule>>, ConfigError> {
    let mut rules: Vec<Arc<Rule>> = Vec::new();
    for s in sections {
        let name = s.name.get_ref().trim();
        if name.is_empty() {
            return Err(at.err(&s.name, "rule.name", "an empty name".into(), "name the rule: refusals and the audit cite it"));
        }
        if rules.iter().any(|r| r.name == name) {
            return Err(at.err(&s.name, "rule.name", format!("a second rule named {name:?}"), "give every [[rule]] its own name"));
        }
        let effect = match s.effect.get_ref().as_str() {
            "allow" => Effect::Allow,
            "deny" => Effect::Deny,
            "confirm" => Effect::Confirm,
            other => {
                return Err(at.err(
                    &s.effect,
                    "rule.effect",
                    format!("{other:?} is not an effect"),
                    "write \"allow\", \"deny\" or \"confirm\"",
                ));
            }
        };
        if effect == Effect::Confirm && !(s.prompts.is_empty() && s.resources.is_empty()) {
            return Err(at.err(
                &s.effect,
                "rule.effect",
                "only tool calls are confirmed".into(),
                "name tools (or nothing) in a confirm rule",
            ));
        }
        let empty = s
            .callers
            .iter()
            .chain(&s.tools)
            .chain(&s.prompts)
            .chain(&s.resources)
            .chain(&s.upstreams)
            .chain(&s.endpoints)
            .find(|p| p.trim().is_empty());
        if empty.is_some() {
            return Err(at.err(&s.name, "rule", "an empty pattern".into(), "remove it, or write a glob such as \"fs__*\""));
        }
        let mut rule = Rule::new(name, effect, Source::Rule)
            .on(&[Kind::Tool], &s.tools)
            .on(&[Kind::Prompt], &s.prompts)
            .on(URI_KINDS, &s.resources)
            .for_callers(&s.callers)
            .of_upstreams(&s.upstreams);
        if effect == Effect::Confirm && s.tools.is_empty() {
            rule = rule.on(&[Kind::Tool], &["*".to_string()]);
        }
        // The root endpoint is `/` to the engine, whatever `[server] path` is.
        let endpoints: Vec<String> = s.endpoints.iter().map(|e| if e == root_path { "/".to_string() } else { e.clone() }).collect();
        rule = rule.at_endpoints(&endpoints);
        if let Some(when) = &s.when {
            let condition = Condition::compile(when.get_ref()).map_err(|e| {
                let fix = e.fix.clone().unwrap_or_else(|| "see docs/policy.md for the variables and functions a rule may use".into());
                at.err(when, &format!("rule {name:?} when"), e.to_string(), &fix)
            })?;
            rule = rule.when(condition);
        }
        rules.push(Arc::new(rule));
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use crate::Config;

    /// A rule comparing a field of known type with a literal of another type would never hold: it
    /// is a configuration error naming the file, the line and the fix.
    #[test]
    fn a_condition_that_could_never_hold_is_a_config_error_with_its_line_and_fix() {
        let load = |when: &str| {
            let text = format!(
                "[[upstream]]\nid = \"fs\"\nurl = \"http://127.0.0.1:9/mcp\"\n\n[[rule]]\nname = \"night\"\neffect = \"deny\"\nwhen = '{when}'\n"
            );
            Config::parse(&text, std::path::Path::new("gateway.toml"), None, &|_| None).map_err(|e| e.0)
        };
        for (when, fix) in [(r#"now.hour == "eight""#, "compare now.hour with a number"), (r#"now.weekday == "0""#, "no quotes")] {
            let e = load(when).err().unwrap_or_else(|| panic!("{when} was accepted"));
            assert!(e.starts_with("gateway.toml:8: rule \"night\" when"), "{e}");
            assert!(e.contains("never holds") && e.contains("Fix: compare now."), "{e}");
            assert!(e.contains(fix), "{e}");
        }
        assert!(load("now.hour >= 22 || now.weekday == 0").is_ok());
    }
}
