//! The typed refusals of the call path. Every step of the chain (`dispatch/chain`) that stops
//! a request says why with one `Refusal`; this module maps each, once, to what the caller reads (a
//! JSON-RPC error or a tool error result) and to the audit outcome and metric reason it is
//! recorded under (a refusal for the caller's limits is also counted in the usage). A new refusal
//! is a new variant here, with its mapping, and nowhere else.

use super::bare;
use super::{Request, Served};
use crate::audit::Subject;
use crate::telemetry::reasons::Refused;
use mcpgate_model::catalog::Kind;
use mcpgate_model::catalog::args::Refusal as ArgRefusal;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::reply::Reply;
use serde_json::{Value, json};
use std::time::Duration;

/// Why a step stopped a request.
pub enum Refusal {
    /// The step answered itself, and recorded its answer where it made it: the way to consent, a
    /// `connect` retry, a confirmation's question or its refusal.
    Answered(Box<Reply>),
    /// A confirmation that did not let the call run (declined, impossible, unavailable):
    /// answered and recorded where it was decided, like [`Refusal::Answered`], and why.
    Unconfirmed(Box<Reply>, Refused),
    /// A bare name more than one upstream serves.
    AmbiguousBareName { kind: Kind, candidates: Vec<String> },
    /// A tool the caller may not use answers exactly like a missing one.
    UnknownOrDenied,
    /// A tool held by its pin: answered like an unknown one, audited as what it is.
    HeldByPin,
    /// An item the caller's grants allow but its token lacks the scopes for: the 403 challenge.
    InsufficientScope(RpcError),
    /// A resource out of the caller's view (its URI as the caller wrote it).
    UnknownResource(String),
    /// A prompt, skill, directory or completion reference out of the caller's view, with the
    /// error its method answers for a missing one.
    UnknownItem(RpcError),
    /// A task id not issued here, expired, another caller's, or of a tool the caller may no
    /// longer use (`why`, for the audit); the client hears `error` whatever it is.
    UnknownTask { why: &'static str, error: RpcError },
    /// A retry's `requestState` that this gateway did not issue for this caller and request, or
    /// too old: the audit says which, the client is told only to start again.
    InvalidRequestState(super::request_state::Refused),
    /// A `[[rate_limit]]` of the caller's: retry after the wait.
    RateLimited(Duration),
    /// A `[[quota]]` of the caller's is spent.
    QuotaExceeded(crate::usage::Refusal),
    /// Arguments of the wrong shape, a fixed argument sent, `Mcp-Param-*` headers that disagree
    /// with them: answered, not audited (the request never named a decision).
    Malformed(RpcError),
    /// Arguments that do not fit the tool's schema, or that were too costly to check.
    InvalidArguments(ArgRefusal),
    /// No endpoint of the upstream takes a call with these mirrored values.
    NoRoute { upstream: String, why: String },
    /// A `[[rule]]` decided against the call with what only the call tells (its arguments, the
    /// request, the clock): `rule` is the deny rule that held, or, when `allowed_by_none`, the
    /// allow rules that did not. A tool call reads a tool error naming it; a prompt get or a
    /// resource read an invalid-params error.
    ByRule { rule: String, allowed_by_none: bool, tool: bool },
    /// A `[[guard]]` denied the request (recorded with its name and latency where it was asked).
    ByGuard { guard: String, reason: String, tool: bool },
    /// What a decider had to read of the request (`what`: its arguments) cannot be read
    /// (`protocol::read`): refused, whatever the deciders would have said.
    Unreadable { what: &'static str, why: mcpgate_protocol::read::Unreadable },
}

impl Refusal {
    /// The audit outcome and metric reason, or `None` for a refusal recorded elsewhere or not at all.
    pub fn label(&self) -> Option<&'static str> {
        self.reason().map(Refused::as_str)
    }

    /// The metric's reason (see [`Refusal::label`]).
    pub fn reason(&self) -> Option<Refused> {
        Some(match self {
            Refusal::Answered(_) | Refusal::Unconfirmed(..) | Refusal::Malformed(_) => return None,
            Refusal::AmbiguousBareName { .. } => Refused::AmbiguousBareName,
            Refusal::UnknownOrDenied | Refusal::UnknownResource(_) | Refusal::UnknownItem(_) => Refused::UnknownOrDenied,
            Refusal::UnknownTask { .. } => Refused::UnknownTask,
            Refusal::InvalidRequestState(_) => Refused::InvalidRequestState,
            Refusal::HeldByPin => Refused::HeldByPin,
            Refusal::InsufficientScope(_) => Refused::InsufficientScope,
            Refusal::RateLimited(_) => Refused::RateLimited,
            Refusal::QuotaExceeded(_) => Refused::QuotaExceeded,
            Refusal::InvalidArguments(ArgRefusal::TooCostly(_)) => Refused::ArgumentsTooCostly,
            Refusal::InvalidArguments(_) => Refused::InvalidArguments,
            Refusal::NoRoute { .. } => Refused::NoRoute,
            Refusal::ByRule { allowed_by_none: false, .. } => Refused::DeniedByRule,
            Refusal::ByRule { allowed_by_none: true, .. } => Refused::NotAllowedByRule,
            Refusal::ByGuard { .. } => Refused::GuardDenied,
            Refusal::Unreadable { .. } => Refused::Unreadable,
        })
    }

    /// The audit's outcome: the metric's reason, or a finer one where the audit tells more.
    pub fn audit_reason(&self) -> Option<&'static str> {
        match self {
            Refusal::UnknownTask { why, .. } => Some(why),
            Refusal::InvalidRequestState(why) => Some(why.reason()),
            Refusal::Unconfirmed(_, why) => Some(why.as_str()),
            other => other.label(),
        }
    }

    /// A refusal for the caller's limits: counted in the usage as a call, and in the tool-call
    /// metrics.
    pub fn is_limit(&self) -> bool {
        matches!(self, Refusal::RateLimited(_) | Refusal::QuotaExceeded(_))
    }

    /// What the caller `caller` reads for its request on `name`.
    pub fn into_reply(self, name: &str, caller: &str) -> Reply {
        let error = match self {
            Refusal::Answered(reply) | Refusal::Unconfirmed(reply, _) => return *reply,
            Refusal::NoRoute { upstream, why } => {
                return Reply::Single(super::tool_text(&format!("Upstream '{upstream}' cannot take this call: {why}"), true));
            }
            Refusal::ByRule { rule, allowed_by_none, tool } => {
                let text = match (allowed_by_none, rule.is_empty()) {
                    (false, _) => format!("The gateway's policy refused this call of {name}: rule '{rule}'."),
                    (true, true) => format!("The gateway's policy allows no call of {name} like this one."),
                    (true, false) if rule.contains(", ") => {
                        format!(
                            "The gateway's policy allows no call of {name} like this one: none of the rules '{}' holds for it.",
                            rule.replace(", ", "', '")
                        )
                    }
                    (true, false) => {
                        format!("The gateway's policy allows no call of {name} like this one: rule '{rule}' does not hold for it.")
                    }
                };
                if tool {
                    return Reply::Single(super::tool_text(&text, true));
                }
                RpcError::invalid_params(text)
            }
            Refusal::ByGuard { guard, reason, tool } => {
                let text = format!("The gateway's guard '{guard}' refused this call of {name}: {reason}");
                if tool {
                    return Reply::Single(super::tool_text(&text, true));
                }
                RpcError::invalid_params(text)
            }
            Refusal::AmbiguousBareName { kind, candidates } => bare::ambiguous(kind, name, &candidates),
            Refusal::UnknownOrDenied | Refusal::HeldByPin => RpcError::unknown_tool(name),
            Refusal::InsufficientScope(e) | Refusal::Malformed(e) | Refusal::UnknownItem(e) => e,
            Refusal::UnknownTask { error, .. } => error,
            Refusal::InvalidRequestState(why) => why.to_error(),
            Refusal::UnknownResource(uri) => {
                RpcError::invalid_params(format!("Resource not found: {uri}")).with_data(json!({ "uri": uri }))
            }
            Refusal::RateLimited(wait) => super::rate_limited(&format!("{caller} on {name}"), wait),
            Refusal::QuotaExceeded(r) => super::quota_exceeded(caller, name, &r),
            Refusal::InvalidArguments(r) => invalid_arguments(name, r),
            Refusal::Unreadable { what, why } => RpcError::invalid_params(format!(
                "The gateway cannot read the {what} of this call of {name}, so it does not forward it: {why}."
            ))
            .with_data(json!({ "unreadable": why.label() })),
        };
        Reply::error(error)
    }
}

/// Records `refusal` of `req` about `subject` (audit, metrics, usage) and answers it.
pub fn answer(gw: &Served<'_>, req: &Request, subject: &Subject, refusal: Refusal) -> Reply {
    match refusal.reason() {
        // A refusal for the caller's limits, of a tool known by its catalogue name.
        Some(reason) if refusal.is_limit() && subject.kind == Some(Kind::Tool) => {
            gw.audit.limited(subject, reason.as_str());
            gw.metrics.refused(reason);
            gw.metrics.tool_call(&subject.item, req.caller.rules.first().map(String::as_str), reason.as_str());
        }
        // The guard's own record names it and its latency.
        Some(reason) if matches!(refusal, Refusal::ByGuard { .. }) => gw.metrics.refused(reason),
        Some(reason) if let Refusal::ByRule { rule, .. } = &refusal => {
            gw.audit.refused_by_rule(subject, reason.as_str(), rule);
            gw.metrics.refused(reason);
        }
        Some(reason) => {
            gw.audit.refused(subject, refusal.audit_reason().unwrap_or(reason.as_str()));
            gw.metrics.refused(reason);
        }
        None => {}
    }
    refusal.into_reply(subject.shown(), &req.caller.id)
}

/// The longest text of a refused argument an error quotes, in characters.
const MAX_QUOTED: usize = 200;
/// The most problems an error lists.
const MAX_PROBLEMS: usize = 20;

/// `text` cut to [`MAX_QUOTED`] characters, with how much was left out.
fn excerpt(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED) {
        None => text.to_string(),
        Some((at, _)) => format!("{}… ({} more characters)", &text[..at], text[at..].chars().count()),
    }
}

/// The invalid-params error for arguments that do not fit the tool's schema (MCP
/// `InvalidParamsError`), naming each failing path, so the model can correct its call.
fn invalid_arguments(name: &str, refusal: ArgRefusal) -> RpcError {
    match refusal {
        ArgRefusal::Invalid(problems) => {
            // A message quotes the value it refused: an excerpt of it, however large it was.
            let first = problems.first().map(|p| excerpt(&p.message)).unwrap_or_default();
            let errors: Vec<Value> =
                problems.iter().take(MAX_PROBLEMS).map(|p| json!({ "path": excerpt(&p.path), "message": excerpt(&p.message) })).collect();
            RpcError::invalid_params(format!("Invalid arguments for tool {name}: {first}")).with_data(json!({ "errors": errors }))
        }
        ArgRefusal::Unusable(why) => {
            RpcError::invalid_params(format!("Invalid arguments for tool {name}: its inputSchema cannot be used to check them ({why})"))
        }
        ArgRefusal::TooCostly(why) => {
            RpcError::invalid_params(format!("Arguments for tool {name} were not checked, so it was not called: {why}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgate_model::catalog::args::Problem;
    use mcpgate_protocol::errors::INVALID_PARAMS;
    use mcpgate_protocol::reply::Outcome;

    fn error(r: Refusal) -> RpcError {
        match r.into_reply("calc__add", "carol") {
            Reply::Single(Outcome::Error(e)) => e,
            _ => panic!("not a gateway error"),
        }
    }

    #[test]
    fn each_refusal_maps_to_its_wire_error_and_audit_label() {
        let quota = crate::usage::Refusal { count: 3, window: "day".into(), resets_at: 0, wait: Duration::from_secs(5) };
        let invalid = ArgRefusal::Invalid(vec![Problem { path: "/a".into(), message: "not a number".into() }]);
        let cases: Vec<(Refusal, Option<&str>, i64, &str)> = vec![
            (Refusal::Malformed(RpcError::invalid_params("bad shape")), None, INVALID_PARAMS, "bad shape"),
            (
                Refusal::AmbiguousBareName { kind: Kind::Tool, candidates: vec!["a__add".into(), "b__add".into()] },
                Some("ambiguous_bare_name"),
                INVALID_PARAMS,
                "served by more than one upstream",
            ),
            (Refusal::UnknownOrDenied, Some("unknown_or_denied"), RpcError::unknown_tool("x").code, "Unknown tool: calc__add"),
            (Refusal::HeldByPin, Some("held_by_pin"), RpcError::unknown_tool("x").code, "Unknown tool: calc__add"),
            (
                Refusal::InsufficientScope(RpcError::invalid_request("Forbidden")),
                Some("insufficient_scope"),
                RpcError::invalid_request("").code,
                "Forbidden",
            ),
            (Refusal::UnknownResource("file:///x".into()), Some("unknown_or_denied"), INVALID_PARAMS, "Resource not found: file:///x"),
            (
                Refusal::UnknownItem(RpcError::invalid_params("Unknown prompt: p")),
                Some("unknown_or_denied"),
                INVALID_PARAMS,
                "Unknown prompt: p",
            ),
            (
                Refusal::InvalidRequestState(super::super::request_state::Refused::Expired),
                Some("invalid_request_state"),
                INVALID_PARAMS,
                "Invalid requestState",
            ),
            (
                Refusal::RateLimited(Duration::from_secs(2)),
                Some("rate_limited"),
                super::super::RATE_LIMITED,
                "Rate limit exceeded for carol on calc__add",
            ),
            (Refusal::QuotaExceeded(quota), Some("quota_exceeded"), super::super::RATE_LIMITED, "calc__add"),
            (
                Refusal::InvalidArguments(invalid),
                Some("invalid_arguments"),
                INVALID_PARAMS,
                "Invalid arguments for tool calc__add: not a number",
            ),
            (Refusal::InvalidArguments(ArgRefusal::Unusable("a $ref".into())), Some("invalid_arguments"), INVALID_PARAMS, "cannot be used"),
            (
                Refusal::InvalidArguments(ArgRefusal::TooCostly("big".into())),
                Some("arguments_too_costly"),
                INVALID_PARAMS,
                "were not checked",
            ),
        ];
        for (refusal, label, code, message) in cases {
            assert_eq!(refusal.label(), label, "{message}");
            let limit = refusal.is_limit();
            let e = error(refusal);
            assert_eq!(e.code, code, "{message}: {e:?}");
            assert!(e.message.contains(message), "{message}: {e:?}");
            assert_eq!(limit, label == Some("rate_limited") || label == Some("quota_exceeded"));
        }
    }

    #[test]
    fn a_refused_argument_is_quoted_as_an_excerpt() {
        let huge = format!("\"{}\" is not of type \"number\"", "x".repeat(50_000));
        let problems = (0..100).map(|i| Problem { path: format!("/a{i}"), message: huge.clone() }).collect();
        let e = error(Refusal::InvalidArguments(ArgRefusal::Invalid(problems)));
        let text = serde_json::to_string(&json!({ "message": e.message, "data": e.data })).unwrap_or_default();
        assert!(text.len() < 10_000, "{} bytes", text.len());
        assert!(e.message.contains("more characters"), "{}", e.message);
        assert_eq!(e.data.as_ref().and_then(|d| d["errors"].as_array()).map(Vec::len), Some(20));
    }

    #[test]
    fn no_route_is_a_tool_error_and_an_answer_passes_through() {
        let no_route = Refusal::NoRoute { upstream: "calc".into(), why: "no endpoint for region=mars".into() };
        assert_eq!(no_route.label(), Some("no_route"));
        let Reply::Single(Outcome::Result(raw)) = no_route.into_reply("calc__add", "carol") else { panic!("not a tool result") };
        let v: Value = serde_json::from_str(raw.get()).unwrap_or_default();
        assert_eq!(v["isError"], true);
        assert_eq!(v["content"][0]["text"], "Upstream 'calc' cannot take this call: no endpoint for region=mars");
        let answered = Refusal::Answered(Box::new(Reply::error(RpcError::invalid_params("the question"))));
        assert_eq!(answered.label(), None);
        assert_eq!(error(answered).message, "the question");
    }
}
