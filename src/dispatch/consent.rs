//! Consent in the middle of a call (per-user identity; docs/auth-and-policy.md). When a request
//! goes to an upstream reached with each caller's own token and the caller has none it takes,
//! the caller is sent to the gateway's consent page, in the way its era and capabilities allow:
//! a 2026-07-28 client that declared URL elicitation gets an `input_required` result with a URL
//! elicitation and a gateway-sealed `requestState` (its retry, once consent is done, goes
//! through); a 2025-11-25 client that declared it gets `-32042 URLElicitationRequiredError` and,
//! when consent completes, `notifications/elicitation/complete`; any other client gets an error
//! (for a tool call, a tool result the model can read) carrying the link. The link names the
//! caller and the upstream, sealed and short-lived.

use super::{Request, Served, request_state};
use crate::audit::Subject;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::reply::{Outcome, Reply};
use serde_json::{Value, json};

/// The JSON-RPC error code of a 2025-11-25 URL elicitation the request needs first.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;
/// The `inputRequests` key of the gateway's own consent request.
pub const INPUT_KEY: &str = "mcpgate-consent";

/// Whether the client declared URL-mode elicitation in `capabilities`.
fn url_elicitation(capabilities: Option<&Value>) -> bool {
    capabilities.and_then(|c| c.get("elicitation")).and_then(|e| e.get("url")).is_some_and(Value::is_object)
}

/// The reply that sends the caller of `req` to consent to upstream `upstream` (`who`: who asked
/// about what; a sealed state is bound to the item as the caller named it).
pub fn needed(gw: &Served<'_>, req: &Request, who: &Subject, upstream: &str) -> Reply {
    let Some(link) = gw.personal.as_ref().and_then(|p| p.identity.consent_link(&req.caller.id, upstream)) else {
        return Reply::error(RpcError::internal(format!("Upstream '{upstream}' needs consent, and no consent link could be made")));
    };
    gw.audit.refused(who, "consent_needed");
    gw.metrics.refused(crate::telemetry::reasons::Refused::ConsentNeeded);
    let message = format!("Connect {upstream}: sign in with your own {upstream} account so that this gateway can use it for you.");
    match &req.legacy {
        Some(session) if session.version.as_str() >= "2025-11-25" && url_elicitation(Some(&session.capabilities)) => {
            let Some(id) = mcpgate_protocol::toolbox::random_token() else {
                return Reply::error(RpcError::internal("no randomness for an elicitation id"));
            };
            if let Some(p) = &gw.personal {
                p.elicited(&req.caller.id, upstream, &id);
            }
            let data = json!({ "elicitations": [{ "mode": "url", "elicitationId": id, "url": link, "message": message }] });
            return Reply::error(RpcError::new(URL_ELICITATION_REQUIRED, "This request requires more information.").with_data(data));
        }
        Some(_) => {}
        None if req.method.may_ask_input() && url_elicitation(req.meta.client_capabilities()) => {
            let result = json!({
                "resultType": "input_required",
                "inputRequests": { INPUT_KEY: { "method": "elicitation/create", "params": { "mode": "url", "message": message, "url": link } } },
            });
            let Ok(raw) = Json::to_json(&result) else { return Reply::error(RpcError::internal("cannot render the consent request")) };
            let bind =
                request_state::Binding { caller: &req.caller, upstream, method: req.method.as_str(), item: who.shown(), confirmed: None };
            return Reply::Single(request_state::seal(&gw.sealer, Outcome::Result(raw), &bind));
        }
        None => {}
    }
    let text = format!("{message} Open this link in a browser, then try again: {link}");
    if req.method == mcpgate_protocol::Method::ToolsCall {
        return Reply::Single(super::tool_text(&text, true));
    }
    Reply::error(
        RpcError::new(crate::upstream::CONSENT_NEEDED, text).with_data(json!({ "upstream": upstream, "url": link, "consentNeeded": true })),
    )
}

/// Whether an outcome says the caller has to consent (a caller's own token was refused).
pub fn is_needed(o: &Outcome) -> bool {
    matches!(o, Outcome::Error(e) if e.code == crate::upstream::CONSENT_NEEDED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_elicitation_is_an_object_under_elicitation() {
        assert!(url_elicitation(Some(&json!({ "elicitation": { "url": {} } }))));
        assert!(!url_elicitation(Some(&json!({ "elicitation": {} }))));
        assert!(!url_elicitation(Some(&json!({ "elicitation": { "url": true } }))));
        assert!(!url_elicitation(None));
    }

    #[test]
    fn only_the_gateway_answer_is_taken_out() {
        let mut p: mcpgate_protocol::rawobj::RawObject =
            serde_json::from_str(r#"{"name":"t","inputResponses":{"mcpgate-consent":{"action":"accept"},"k":{"action":"accept"}}}"#)
                .expect("json");
        crate::dispatch::strip_input_response(&mut p, INPUT_KEY);
        assert_eq!(p.get("inputResponses").map(|r| r.get().to_string()).as_deref(), Some(r#"{"k":{"action":"accept"}}"#));
        let mut p: mcpgate_protocol::rawobj::RawObject =
            serde_json::from_str(r#"{"name":"t","inputResponses":{"mcpgate-consent":{"action":"accept"}}}"#).expect("json");
        crate::dispatch::strip_input_response(&mut p, INPUT_KEY);
        assert!(p.get("inputResponses").is_none());
    }
}
