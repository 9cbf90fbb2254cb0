//! Results passed through the secret detectors of `[secrets]` (docs/security.md) before they reach
//! the client: `tools/call`, `prompts/get` and `resources/read` results are read only when a
//! detector is configured; a redaction rewrites the result, a block withholds it (a tool result
//! the model can read for a call, an error otherwise). What matched is never logged or audited,
//! only the detector's name.

use crate::policy::secrets::{Detector, scrub as scrub_value};
use crate::protocol::Method;
use crate::protocol::errors::RpcError;
use crate::protocol::json::Json;
use crate::reply::Outcome;
use serde_json::Value;

/// A result withheld: what the client gets, and the audit's reason.
pub struct Withheld {
    pub outcome: Outcome,
    pub reason: String,
}

/// The result of `method` after the detectors: as it was or redacted (with the detectors that
/// redacted), or withheld.
pub fn scrub(detectors: &[Detector], method: &Method, raw: Json) -> Result<(Json, Vec<String>), Withheld> {
    if detectors.is_empty() || !matches!(method, Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead) {
        return Ok((raw, Vec::new()));
    }
    let Ok(mut v) = serde_json::from_str::<Value>(raw.get()) else { return Ok((raw, Vec::new())) };
    let found = scrub_value(&mut v, detectors);
    if let Some(name) = found.blocked {
        tracing::warn!(detector = %name, method = %method.as_str(), "a result was withheld: it carried a secret");
        let text = format!("The result was withheld by the gateway: it contained what looks like a secret ({name}).");
        let outcome = match method {
            Method::ToolsCall => super::tool_text(&text, true),
            _ => Outcome::Error(RpcError::internal(text)),
        };
        return Err(Withheld { outcome, reason: format!("secret_blocked:{name}") });
    }
    if found.redacted.is_empty() {
        return Ok((raw, Vec::new()));
    }
    tracing::info!(detectors = ?found.redacted, method = %method.as_str(), "secrets redacted from a result");
    Ok((Json::to_json(&v).unwrap_or(raw), found.redacted))
}
