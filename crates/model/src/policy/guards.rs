//! The guard contract (`[[guard]]`, docs/guards.md): what a guard is asked and what it may answer,
//! the same for a webhook, an MCP tool used as a guard, and the built-in detectors. A guard is
//! asked at one of four points (`request`, `result`, `input`, `catalogue`) about one item, with the
//! content under check; it answers `allow`, `deny` with a reason, or `modify` with a replacement of
//! the same shape. An answer that is not the contract is an [`AnswerError`] (the guard's `on_error`
//! decides). The built-in detectors answer through the same type ([`builtin`]): a block denies, a
//! redaction modifies, a flag allows and is reported.

use super::secrets::{Detector, scrub};
use serde::Serialize;
use serde_json::Value;

/// The contract's version, in every request; a response naming another is refused.
pub const VERSION: &str = "mcpgate.guard/v1";

/// Where on the call path a guard is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Point {
    /// A request's arguments, before it is forwarded.
    Request,
    /// The final result or error, before it leaves the gateway.
    Result,
    /// A question an upstream asks the person (`input_required`, `elicitation/create`, ...).
    Input,
    /// A tool, prompt or skill definition, as it enters the catalogue.
    Catalogue,
}

impl Point {
    pub const ALL: [Point; 4] = [Point::Request, Point::Result, Point::Input, Point::Catalogue];

    pub fn as_str(self) -> &'static str {
        match self {
            Point::Request => "request",
            Point::Result => "result",
            Point::Input => "input",
            Point::Catalogue => "catalogue",
        }
    }

    pub fn parse(s: &str) -> Option<Point> {
        Point::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// The item a guard is asked about (the request's `item`).
#[derive(Debug, Clone, Serialize)]
pub struct Asked<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    pub upstream: &'a str,
}

/// What a guard is asked (the request body of a webhook, the arguments of a guard tool).
#[derive(Debug, Serialize)]
pub struct Ask<'a> {
    pub version: &'static str,
    pub guard: &'a str,
    pub point: Point,
    /// The caller's id (`-` at catalogue time: no caller).
    pub caller: &'a str,
    pub method: &'a str,
    pub item: Asked<'a>,
    pub content: &'a Value,
}

/// A guard's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Allow,
    /// Allowed, with what was found (a flagging detector's names), for the record.
    Flag(Vec<String>),
    Deny(String),
    Modify {
        content: Value,
        reason: String,
    },
}

/// Why a guard's answer is not the contract (the guard's `on_error` then decides).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerError {
    #[error("the answer is not a JSON object")]
    NotObject,
    /// Another contract version (the `version` it gave, as JSON).
    #[error("the answer is of contract version {0}, not {VERSION:?}")]
    Version(Value),
    #[error("a modify verdict without `content`")]
    NoContent,
    #[error("unknown verdict {0:?} (allow, deny or modify)")]
    UnknownVerdict(String),
    #[error("the answer has no `verdict`")]
    NoVerdict,
    #[error("the replacement is not an object")]
    ReplacementNotObject,
    #[error("a request's replacement must hold `arguments`, an object")]
    NoArguments,
    #[error("the replacement changes a result into an error or back")]
    ChangesKind,
}

/// Reads a guard's answer (JSON) for `point`, checking it is the contract and that a
/// replacement has the shape of what it replaces.
pub fn parse(answer: &Value, point: Point, asked: &Value) -> Result<Verdict, AnswerError> {
    let obj = answer.as_object().ok_or(AnswerError::NotObject)?;
    if let Some(v) = obj.get("version")
        && v.as_str() != Some(VERSION)
    {
        return Err(AnswerError::Version(v.clone()));
    }
    let reason = obj.get("reason").and_then(Value::as_str).unwrap_or_default().chars().take(500).collect::<String>();
    match obj.get("verdict").and_then(Value::as_str) {
        Some("allow") => Ok(Verdict::Allow),
        Some("deny") => Ok(Verdict::Deny(if reason.is_empty() { "no reason given".into() } else { reason })),
        Some("modify") => {
            let content = obj.get("content").cloned().ok_or(AnswerError::NoContent)?;
            same_shape(&content, asked, point)?;
            Ok(Verdict::Modify { content, reason })
        }
        Some(other) => Err(AnswerError::UnknownVerdict(other.to_string())),
        None => Err(AnswerError::NoVerdict),
    }
}

/// A replacement must be what it replaces: an object, with `arguments` an object for a request,
/// and no change of kind (a result stays a result, an error an error).
fn same_shape(content: &Value, asked: &Value, point: Point) -> Result<(), AnswerError> {
    let Some(new) = content.as_object() else { return Err(AnswerError::ReplacementNotObject) };
    if point == Point::Request && !new.get("arguments").is_some_and(Value::is_object) {
        return Err(AnswerError::NoArguments);
    }
    let is_error = |v: &Value| v.get("error").is_some();
    if is_error(content) != is_error(asked) {
        return Err(AnswerError::ChangesKind);
    }
    Ok(())
}

/// The built-in detectors' answer on `content` (changed in place when they redact).
pub fn builtin(detectors: &[Detector], content: &mut Value) -> Verdict {
    let found = scrub(content, detectors);
    if let Some(name) = found.blocked {
        return Verdict::Deny(format!("found {name}"));
    }
    if !found.redacted.is_empty() {
        return Verdict::Modify { content: content.clone(), reason: format!("redacted {}", found.redacted.join(", ")) };
    }
    if !found.flagged.is_empty() {
        return Verdict::Flag(found.flagged);
    }
    Verdict::Allow
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The published schema (docs/guard-contract.schema.json) describes what is sent and read.
    #[test]
    fn the_published_schema_is_the_contract() {
        let schema: Value = serde_json::from_str(include_str!("../../../../docs/guard-contract.schema.json")).unwrap_or_default();
        let validator = jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("the schema: {e}"));
        let content = json!({ "arguments": { "path": "/workspace/a" } });
        let ask = Ask {
            version: VERSION,
            guard: "dlp",
            point: Point::Request,
            caller: "alice",
            method: "tools/call",
            item: Asked { kind: "tool", name: "fs__write_file", upstream: "fs" },
            content: &content,
        };
        let sent = serde_json::to_value(&ask).unwrap_or_default();
        assert!(validator.is_valid(&sent), "{sent}");
        for answer in [
            json!({ "verdict": "allow" }),
            json!({ "verdict": "deny", "reason": "PII" }),
            json!({ "verdict": "modify", "content": content }),
        ] {
            assert!(validator.is_valid(&answer), "{answer}");
            assert!(parse(&answer, Point::Request, &content).is_ok(), "{answer}");
        }
        assert!(!validator.is_valid(&json!({ "verdict": "modify" })), "a modify needs content");
        assert!(!validator.is_valid(&json!({ "verdict": "maybe" })));
    }

    #[test]
    fn answers_are_read_by_the_contract() {
        let asked = json!({ "arguments": { "a": 1 } });
        assert_eq!(parse(&json!({ "verdict": "allow" }), Point::Request, &asked), Ok(Verdict::Allow));
        assert_eq!(parse(&json!({ "verdict": "deny", "reason": "PII" }), Point::Request, &asked), Ok(Verdict::Deny("PII".into())));
        let modify = json!({ "verdict": "modify", "content": { "arguments": { "a": 2 } }, "version": VERSION });
        assert!(matches!(parse(&modify, Point::Request, &asked), Ok(Verdict::Modify { .. })));
        for bad in [
            json!("allow"),
            json!({}),
            json!({ "verdict": "maybe" }),
            json!({ "verdict": "allow", "version": "mcpgate.guard/v0" }),
            json!({ "verdict": "modify" }),
            json!({ "verdict": "modify", "content": { "arguments": "x" } }),
            json!({ "verdict": "modify", "content": { "error": { "code": 1 }, "arguments": {} } }),
        ] {
            assert!(parse(&bad, Point::Request, &asked).is_err(), "{bad}");
        }
        let result = json!({ "content": [] });
        assert!(parse(&json!({ "verdict": "modify", "content": { "error": {} } }), Point::Result, &result).is_err());
        let long = "x".repeat(2000);
        let Ok(Verdict::Deny(r)) = parse(&json!({ "verdict": "deny", "reason": long }), Point::Result, &result) else { panic!() };
        assert_eq!(r.len(), 500, "a reason is bounded");
    }
}
