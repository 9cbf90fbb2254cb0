//! `[pins]`: tool definitions pinned when approved (the default mode, `upstream.pin` per
//! upstream, and the file the approved definitions are kept in); what a pin does is the
//! gateway's (`gateway::pins`).

use super::{ConfigError, Locator};
use serde::Deserialize;
use toml::Spanned;

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

pub(super) fn resolve(at: &Locator, s: PinsSection, base: &std::path::Path) -> Result<PinsConfig, ConfigError> {
    let mode = match &s.mode {
        Some(m) => pin_mode(at, m, "pins.mode")?,
        None => Default::default(),
    };
    let file = super::relative(base, s.file.as_deref().unwrap_or("mcpgate-pins.json"));
    Ok(PinsConfig { mode, file })
}
