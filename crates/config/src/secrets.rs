//! `[secrets]`: the detectors results pass through (the built-in ones and the operator's own
//! `[[secrets.pattern]]`), each with its action; the detectors themselves are `policy::secrets`.

use super::{ConfigError, Locator};
use serde::Deserialize;
use toml::Spanned;

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
pub(super) fn resolve(at: &Locator, s: SecretsSection) -> Result<Vec<crate::policy::secrets::Detector>, ConfigError> {
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
