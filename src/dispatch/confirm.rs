//! Confirmation for dangerous calls (`[[confirm]]`, docs/security.md). Before a call a rule names
//! is forwarded, the gateway asks the caller's own client to have a person confirm it: a form
//! elicitation showing the tool, the upstream and the exact arguments (numbers as the client wrote
//! them), as an `input_required` result whose `requestState` the gateway seals, bound to the
//! caller, the endpoint and a digest of the tool and the exact text of its arguments (a legacy
//! client gets the same question as a real `elicitation/create`: the legacy bridge turns the one
//! into the other). Each question is a one-time entry (`gateway::onetime`): the retry goes through
//! only with an accepting answer to an unspent question of this caller on this endpoint, and runs
//! once; a replay, changed arguments or another endpoint bring a fresh question; a declined or
//! cancelled one refuses the call; a client that cannot be asked gets a refusal naming the rule.
//! A confirmed call whose upstream then asks its own questions carries the confirmed digest in the
//! gateway's request state, so its rounds are not confirmed again.

use super::{Request, Served};
use crate::audit::Subject;
use crate::telemetry::reasons::{Confirmation, Refused};
use mcpgate_config::confirm::ConfirmRule;
use mcpgate_model::catalog::Entry;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::exact;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::{Outcome, Reply};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const PURPOSE: &str = "mcpgate/confirm/v2";
/// The `inputRequests` key of the gateway's confirmation question.
pub const INPUT_KEY: &str = "mcpgate-confirm";

/// What a confirmation state says: who asked, on which endpoint, and the digest of the call.
#[derive(Serialize, Deserialize)]
struct Asked {
    c: String,
    r: Vec<String>,
    /// The endpoint path it was asked on (`None`: the root).
    e: Option<String>,
    d: String,
}

/// What becomes of a call the rules may name.
pub enum Verdict {
    /// No rule names it: forward as it is.
    Free,
    /// Confirmed (the digest of what was confirmed): forward, with the confirmation taken out.
    Confirmed(String),
    /// Answer this instead: the question (or an error in the request).
    Answer(Box<Reply>),
    /// Refused, recorded already: the answer, and why (declined, impossible, unavailable).
    Refused(Box<Reply>, Refused),
}

/// Whether a tool's annotations leave destruction possible (MCP defaults: a tool is read-only
/// only when it says so, and destructive unless it says it is not).
fn destructive(tool: &Entry) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(tool.json.get()) else { return true };
    let a = &v["annotations"];
    a["readOnlyHint"] != Value::Bool(true) && a["destructiveHint"] != Value::Bool(false)
}

fn rule_for<'a>(rules: &'a [ConfirmRule], tool: &Entry) -> Option<&'a ConfirmRule> {
    rules.iter().find(|r| {
        let named = r.tools.is_empty() || r.tools.iter().any(|g| mcpgate_model::policy::glob::matches(g, tool.policy_name()));
        named && (!r.destructive || destructive(tool))
    })
}

fn hex_sha256(text: &str) -> String {
    mcpgate_protocol::toolbox::sha256_hex(text.as_bytes())
}

/// The digest of a call: the tool and the canonical text of its arguments (sorted keys, no
/// spacing, every number exactly as the client wrote it: see `protocol::exact`).
fn digest(tool: &str, canonical_args: &str) -> String {
    hex_sha256(&format!("{tool}\n{canonical_args}"))
}

/// The one-time entry of a confirmation state.
fn once_key(state: &str) -> String {
    format!("confirm:{}", hex_sha256(state))
}

/// The arguments of a call as they will be forwarded (an absent or `null` member is `{}`).
fn arguments_text(params: &RawObject) -> &str {
    match params.get("arguments") {
        Some(a) if a.get().trim() != "null" => a.get(),
        _ => "{}",
    }
}

/// Decides on a call of `tool` (its arguments are read from `req` as they would be forwarded),
/// `who` asked about as the chain resolved it (its upstream; what a refusal is audited under);
/// `by_rule`: a `[[rule]]` with `effect = "confirm"` that holds for the call.
pub async fn check(gw: &Served<'_>, req: &mut Request, tool: &Entry, who: &Subject, by_rule: Option<&str>) -> Verdict {
    let upstream = who.upstream();
    let named;
    let rule = match (rule_for(&gw.config.confirms, tool), by_rule) {
        (Some(rule), _) => rule,
        (None, Some(name)) => {
            let message = Some(format!("The gateway's rule '{name}' asks a person to confirm this call."));
            named = ConfirmRule { tools: Vec::new(), destructive: false, message, label: format!("[[rule]] {name:?}") };
            &named
        }
        (None, None) => return Verdict::Free,
    };
    let args = arguments_text(&req.params);
    let (Ok(canonical), Ok(shown)) = (exact::canonical(args), exact::pretty(args)) else {
        return Verdict::Answer(Box::new(Reply::error(RpcError::invalid_params("tools/call arguments must be an object"))));
    };
    let want = digest(tool.policy_name(), &canonical);
    let max_age = gw.config.server.input_timeout;
    let token = req.params.parse::<String>("requestState").and_then(Result::ok);
    // A round of the upstream's own questions in a call that was confirmed already: each round's
    // state is a one-time entry too, so a replayed round does not run the call again.
    let bind =
        super::request_state::Binding { caller: &req.caller, upstream, method: req.method.as_str(), item: &tool.name, confirmed: None };
    if let Some(token) = &token
        && super::request_state::confirmed(&gw.sealer, &req.params, &bind, max_age).as_deref() == Some(want.as_str())
    {
        match gw.confirmations.redeem(&once_key(token)).await {
            Ok(true) => return Verdict::Confirmed(want),
            Ok(false) => {
                refuse(gw, who, Confirmation::Spent);
            }
            Err(e) => return unavailable(gw, who, tool, &e),
        }
    }
    // The answer to the gateway's question: issued to this caller, on this endpoint, for exactly
    // this call, young enough, and not answered before.
    let endpoint = req.caller.endpoint.as_deref().map(str::to_string);
    let ours = token
        .as_deref()
        .and_then(|t| gw.sealer.open_aged::<Asked>(PURPOSE, t))
        .is_some_and(|(a, age)| age <= max_age && a.c == req.caller.id && a.r == req.caller.rules && a.e == endpoint && a.d == want);
    if let (true, Some(token)) = (ours, token) {
        match gw.confirmations.redeem(&once_key(&token)).await {
            Ok(true) => return answered(gw, req, who, tool, want),
            // Answered before (or asked on another replica without a shared store): ask again.
            Ok(false) => {
                refuse(gw, who, Confirmation::Spent);
            }
            Err(e) => return unavailable(gw, who, tool, &e),
        }
    }
    // Ask, if the client can be asked.
    let can_ask = match &req.legacy {
        Some(session) => session.capabilities.get("elicitation").is_some_and(Value::is_object),
        None => req.meta.client_capabilities().and_then(|c| c.get("elicitation")).is_some_and(Value::is_object),
    };
    if !can_ask {
        let why = refuse(gw, who, Confirmation::Impossible);
        return Verdict::Refused(
            Box::new(tool_error(&format!(
                "{} needs a person's confirmation ({}), and this client cannot ask for one (it declared no elicitation).",
                tool.name, rule.label
            ))),
            why,
        );
    }
    let asked = Asked { c: req.caller.id.clone(), r: req.caller.rules.clone(), e: endpoint, d: want };
    let Ok(state) = gw.sealer.seal(PURPOSE, &asked) else {
        return Verdict::Answer(Box::new(Reply::error(RpcError::internal("cannot seal the confirmation"))));
    };
    if let Err(e) = gw.confirmations.issue(&once_key(&state), max_age).await {
        let why = refuse(gw, who, Confirmation::Unavailable);
        return Verdict::Refused(
            Box::new(tool_error(&format!("{} was not run: a confirmation cannot be asked now ({e}).", tool.name))),
            why,
        );
    }
    let message = format!(
        "{}Allow this call?\n\nTool: {}\nUpstream: {upstream}\nArguments:\n{shown}",
        rule.message.as_deref().map(|m| format!("{m}\n\n")).unwrap_or_default(),
        tool.name
    );
    let question = json!({
        "resultType": "input_required",
        "inputRequests": { INPUT_KEY: { "method": "elicitation/create", "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": { "type": "object", "properties": {
                "confirm": { "type": "boolean", "title": "Allow this call", "description": "Run the call with exactly these arguments", "default": false }
            }, "required": ["confirm"] },
        } } },
        "requestState": state,
    });
    gw.metrics.confirmation(Confirmation::Asked);
    Verdict::Answer(Box::new(match Json::to_json(&question) {
        Ok(raw) => Reply::Single(Outcome::Result(raw)),
        Err(e) => Reply::error(RpcError::internal(e.to_string())),
    }))
}

/// The refusal of a call whose confirmation cannot be checked now (fails closed).
fn unavailable(gw: &Served<'_>, who: &Subject, tool: &Entry, e: &crate::gateway::onetime::OneTimeError) -> Verdict {
    let why = refuse(gw, who, Confirmation::Unavailable);
    Verdict::Refused(Box::new(tool_error(&format!("{} was not run: its confirmation cannot be checked now ({e}).", tool.name))), why)
}

/// Records the `requestState` of an `input_required` round of a confirmed call as a one-time
/// entry, so that the round's answer continues the call once.
pub fn issue_round(once: &crate::gateway::onetime::OneTime, outcome: &Outcome, ttl: std::time::Duration) {
    let Outcome::Result(raw) = outcome else { return };
    let Some(Ok(token)) = RawObject::from_json(raw).ok().and_then(|o| o.parse::<String>("requestState")) else { return };
    once.issue_detached(once_key(&token), ttl);
}

/// The verdict of a redeemed answer: the call runs if the person accepted.
fn answered(gw: &Served<'_>, req: &mut Request, who: &Subject, tool: &Entry, want: String) -> Verdict {
    let answer =
        req.params.parse::<RawObject>("inputResponses").and_then(Result::ok).and_then(|r| r.get(INPUT_KEY).map(|a| a.get().to_string()));
    let answer: Value = answer.and_then(|a| serde_json::from_str(&a).ok()).unwrap_or(Value::Null);
    strip(&mut req.params);
    if answer["action"] == "accept" && answer["content"]["confirm"] == true {
        gw.metrics.confirmation(Confirmation::Confirmed);
        return Verdict::Confirmed(want);
    }
    let why = refuse(gw, who, Confirmation::Declined);
    Verdict::Refused(Box::new(tool_error(&format!("{} was not run: the call was not confirmed.", tool.name))), why)
}

/// Takes the gateway's confirmation state and answer out of a retry (they are not the upstream's).
fn strip(params: &mut RawObject) {
    params.remove("requestState");
    super::strip_input_response(params, INPUT_KEY);
}

/// Records a confirmation that did not let its call run; the refusal it counts as.
fn refuse(gw: &Served<'_>, who: &Subject, why: Confirmation) -> Refused {
    let refused = why.refusal().unwrap_or(Refused::ConfirmationUnavailable);
    gw.audit.refused(who, refused.as_str());
    gw.metrics.confirmation(why);
    refused
}

fn tool_error(text: &str) -> Reply {
    Reply::Single(super::tool_text(text, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, annotations: Value) -> Entry {
        let json = Json::to_json(&json!({ "name": name, "inputSchema": { "type": "object" }, "annotations": annotations })).expect("json");
        Entry {
            name: name.into(),
            upstream: 0,
            original: name.into(),
            headers: Default::default(),
            args: mcpgate_model::catalog::args::ArgCheck::new(json.clone()),
            json,
            canonical: None,
            fixed: Default::default(),
            ui: None,
        }
    }

    fn rule(tools: &[&str], destructive: bool) -> ConfirmRule {
        ConfirmRule { tools: tools.iter().map(|t| t.to_string()).collect(), destructive, message: None, label: "r".into() }
    }

    #[test]
    fn rules_name_tools_by_glob_and_by_what_annotations_leave_possible() {
        let by_name = [rule(&["github__delete_*"], false)];
        assert!(
            rule_for(&by_name, &entry("github__delete_repo", json!({ "readOnlyHint": true }))).is_some(),
            "a name rule ignores annotations"
        );
        assert!(rule_for(&by_name, &entry("github__get_repo", json!({}))).is_none());
        let destructive_only = [rule(&[], true)];
        assert!(rule_for(&destructive_only, &entry("a", json!({}))).is_some(), "unannotated tools may destroy (the MCP defaults)");
        assert!(rule_for(&destructive_only, &entry("a", json!({ "readOnlyHint": true }))).is_none());
        assert!(rule_for(&destructive_only, &entry("a", json!({ "destructiveHint": false }))).is_none());
        assert!(rule_for(&destructive_only, &entry("a", json!({ "destructiveHint": true }))).is_some());
        let both = [rule(&["fs__*"], true)];
        assert!(rule_for(&both, &entry("fs__write", json!({}))).is_some());
        assert!(rule_for(&both, &entry("fs__read", json!({ "readOnlyHint": true }))).is_none());
        assert!(rule_for(&both, &entry("db__drop", json!({}))).is_none());
    }

    #[test]
    fn the_digest_binds_the_tool_and_every_argument() {
        let d = |tool: &str, args: &str| digest(tool, &exact::canonical(args).expect("json"));
        let a = d("t", r#"{"x": 1, "y": [1, 2]}"#);
        assert_eq!(a, d("t", r#"{"y":[1,2],"x":1}"#), "key order and spacing do not matter");
        assert_ne!(a, d("t", r#"{"x": 2, "y": [1, 2]}"#));
        assert_ne!(a, d("u", r#"{"x": 1, "y": [1, 2]}"#));
        assert_ne!(
            d("t", r#"{"n": 18446744073709551617}"#),
            d("t", r#"{"n": 18446744073709551616}"#),
            "numbers that round to the same f64 are two calls"
        );
    }
}
