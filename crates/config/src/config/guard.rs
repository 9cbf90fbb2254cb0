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

/// `[pins]` as written: pinned tool definitions.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinsSection {
    /// `off` (default), `record` or `enforce`: the default of every upstream.
    pub mode: Option<Spanned<String>>,
    /// The lock file (default `mcpgate-pins.json` beside the configuration).
    pub file: Option<String>,
}

/// Pinned tool definitions: the default mode, and where the approved definitions are kept.
#[derive(Debug, Clone, PartialEq)]
pub struct PinsConfig {
    pub mode: crate::catalog::pins::PinMode,
    pub file: std::path::PathBuf,
}

impl PinsConfig {
    /// The mode for an upstream: its own, else the default.
    pub fn mode_for(&self, upstream: &super::UpstreamConfig) -> crate::catalog::pins::PinMode {
        upstream.pin.unwrap_or(self.mode)
    }
}

/// A pin mode as written.
pub(super) fn pin_mode(at: &Locator, v: &Spanned<String>, key: &str) -> Result<crate::catalog::pins::PinMode, ConfigError> {
    use crate::catalog::pins::PinMode;
    match v.get_ref().as_str() {
        "off" => Ok(PinMode::Off),
        "record" => Ok(PinMode::Record),
        "enforce" => Ok(PinMode::Enforce),
        other => Err(at.err(v, key, format!("{other:?} is not a pin mode"), "use \"off\", \"record\" or \"enforce\"")),
    }
}

pub(super) fn resolve_pins(at: &Locator, s: PinsSection, base: &std::path::Path) -> Result<PinsConfig, ConfigError> {
    let mode = match &s.mode {
        Some(m) => pin_mode(at, m, "pins.mode")?,
        None => Default::default(),
    };
    let file = s.file.as_deref().unwrap_or("mcpgate-pins.json");
    let file = if std::path::Path::new(file).is_absolute() { std::path::PathBuf::from(file) } else { base.join(file) };
    Ok(PinsConfig { mode, file })
}

/// `[secrets]` as written: detectors over results.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsSection {
    /// The built-in detectors: `off` (default), `redact` or `block`.
    pub builtin: Option<Spanned<String>>,
    #[serde(default)]
    pub pattern: Vec<PatternSection>,
}

/// `[[secrets.pattern]]`: an operator's own detector.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternSection {
    pub name: String,
    pub regex: Spanned<String>,
    pub action: Option<Spanned<String>>,
}

fn action(at: &Locator, v: &Spanned<String>, key: &str) -> Result<Option<crate::policy::secrets::Action>, ConfigError> {
    use crate::policy::secrets::Action;
    match v.get_ref().as_str() {
        "off" => Ok(None),
        "redact" => Ok(Some(Action::Redact)),
        "block" => Ok(Some(Action::Block)),
        other => Err(at.err(v, key, format!("{other:?} is not an action"), "use \"redact\" or \"block\" (or \"off\")")),
    }
}

/// The detectors results pass through (empty: results are not inspected).
pub(super) fn resolve_secrets(at: &Locator, s: SecretsSection) -> Result<Vec<crate::policy::secrets::Detector>, ConfigError> {
    use crate::policy::secrets::{Action, Detector, built_in};
    let mut detectors = match &s.builtin {
        Some(b) => action(at, b, "secrets.builtin")?.map(built_in).unwrap_or_default(),
        None => Vec::new(),
    };
    for p in s.pattern {
        if p.name.trim().is_empty() || !p.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(ConfigError(format!(
                "{}: [[secrets.pattern]] name {:?}: use letters, digits, '-' and '_' (it is what redactions and logs show).",
                at.file, p.name
            )));
        }
        let pattern = regex::Regex::new(p.regex.get_ref())
            .map_err(|e| at.err(&p.regex, "secrets.pattern.regex", format!("not a regular expression: {e}"), "fix the pattern"))?;
        let act = match &p.action {
            Some(a) => action(at, a, "secrets.pattern.action")?.unwrap_or(Action::Redact),
            None => Action::Redact,
        };
        detectors.push(Detector::new(p.name, pattern, act));
    }
    Ok(detectors)
}
