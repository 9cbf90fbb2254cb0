//! `[[confirm]]`: calls a person must confirm before the gateway forwards them (docs/security.md).
//! A rule names tools by catalogue-name globs, or by what their annotations say (`when =
//! "destructive"`: not read-only and not declared non-destructive, the MCP defaults), or both (then
//! a tool must match both). Annotations come from upstreams and are untrusted, so they can only add
//! a confirmation: no rule removes one.

use super::{ConfigError, Locator};
use serde::Deserialize;
use toml::Spanned;

/// `[[confirm]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmSection {
    #[serde(default)]
    pub tools: Vec<String>,
    pub when: Option<Spanned<String>>,
    /// Shown to the person with the call.
    pub message: Option<String>,
}

/// One confirmation rule.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmRule {
    /// Catalogue-name globs; empty: any tool (with `destructive`).
    pub tools: Vec<String>,
    /// Only tools whose annotations do not rule out destruction.
    pub destructive: bool,
    pub message: Option<String>,
    /// How the rule is named in a refusal (`[[confirm]] #N`).
    pub label: String,
}

pub(super) fn resolve(at: &Locator, sections: Vec<ConfirmSection>) -> Result<Vec<ConfirmRule>, ConfigError> {
    let mut rules = Vec::new();
    for (i, s) in sections.into_iter().enumerate() {
        let destructive = match &s.when {
            None => false,
            Some(w) if w.get_ref() == "destructive" => true,
            Some(w) => {
                return Err(at.err(
                    w,
                    "confirm.when",
                    format!("{:?} is not a condition the gateway knows", w.get_ref()),
                    "use when = \"destructive\"",
                ));
            }
        };
        if s.tools.is_empty() && !destructive {
            return Err(ConfigError(format!(
                "{}: [[confirm]] #{} names no tool. Fix: add tools = [\"<catalogue name or glob>\"] or when = \"destructive\".",
                at.file,
                i + 1
            )));
        }
        if let Some(bad) = s.tools.iter().find(|t| t.trim().is_empty()) {
            return Err(ConfigError(format!("{}: [[confirm]] #{}: the tool pattern {bad:?} is empty.", at.file, i + 1)));
        }
        let label = match s.tools.is_empty() {
            true => format!("[[confirm]] #{} (when = \"destructive\")", i + 1),
            false => format!("[[confirm]] #{} (tools = {:?})", i + 1, s.tools),
        };
        rules.push(ConfirmRule { tools: s.tools, destructive, message: s.message, label });
    }
    Ok(rules)
}
