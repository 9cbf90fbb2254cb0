//! The call path of `tools/call` as one declared chain of named steps: every decision is a step.
//! [`TOOLS_CALL`] lists them in order; each step is one function with one job that either lets
//! the call go on (leaving what it produced in the [`ToolCall`] it works on) or stops it with one
//! typed [`Refusal`], which `dispatch/refusal.rs` maps, once, to the wire and the audit. Adding a
//! step is one line in [`TOOLS_CALL`] (and its function here). After the last step the call is
//! forwarded (`forward::forward`), where the result side (redaction, recording) runs.

use super::bare::{self, Bare};
use super::decide::Subject;
use super::forward::{Named, check_arguments, forward, needs_scope, string_param};
use super::refusal::{self, Refusal, Resolved};
use super::{Request, Served};
use crate::catalog::merge::Entry;
use crate::catalog::{Kind, view};
use crate::policy;
use crate::protocol::errors::RpcError;
use crate::protocol::xheader;
use crate::reply::Reply;
use serde_json::Value;

/// The named steps of the call path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The tool in the caller's view: catalogue, bare names, consent, pins, scopes.
    Resolve,
    /// The caller's `[[rate_limit]]`s.
    Admit,
    /// The arguments' shape, a virtual endpoint's fixed arguments, `Mcp-Param-*` headers.
    Arguments,
    /// The policy's rules over what only the call tells: its arguments, the request, the clock.
    Decide,
    /// The arguments against the upstream's `inputSchema`.
    Validate,
    /// A person's confirmation, when a `[[confirm]]` rule names the call.
    Confirm,
    /// The caller's `[[quota]]`s: taken only by a call that is about to be forwarded.
    Quota,
    /// The upstream's endpoint for the call's mirrored values.
    Route,
}

/// The chain of `tools/call`, in order. Then `forward`.
pub const TOOLS_CALL: &[Step] =
    &[Step::Resolve, Step::Admit, Step::Arguments, Step::Decide, Step::Validate, Step::Confirm, Step::Quota, Step::Route];

/// One `tools/call` on its way through the chain: the request, and what the steps produced.
pub struct ToolCall<'g> {
    req: Request,
    /// An upstream's id by its index, as catalogue lookups take it.
    id_of: &'g (dyn Fn(usize) -> &'g str + Sync),
    /// The tool as the caller named it (its gateway name, once a bare name is resolved).
    name: String,
    tool: Option<&'g Entry>,
    /// The arguments, when something depends on their values (`Null`: passed through unread).
    args: Value,
    /// The digest of what a person confirmed.
    confirmed: Option<String>,
    /// The `[[rule]]` asking a person to confirm the call.
    confirm_rule: Option<String>,
    endpoint: Option<usize>,
}

impl<'g> ToolCall<'g> {
    fn tool(&self) -> Result<&'g Entry, Refusal> {
        self.tool.ok_or_else(|| Refusal::Malformed(RpcError::internal("a step of the call path ran before the tool was resolved")))
    }
}

pub async fn call_tool(gw: &Served<'_>, req: Request) -> Reply {
    let name = match string_param(&req, "name") {
        Ok(n) => n,
        Err(e) => return Reply::error(e),
    };
    let id_of = |i: usize| gw.upstream_id(i);
    let mut call =
        ToolCall { req, id_of: &id_of, name, tool: None, args: Value::Null, confirmed: None, confirm_rule: None, endpoint: None };
    for step in TOOLS_CALL {
        if let Err(why) = run(*step, gw, &mut call).await {
            let tool = call.tool.map(|t| Resolved { canonical: t.policy_name(), upstream: t.upstream });
            return refusal::answer(gw, &call.req, &call.name, tool, why);
        }
    }
    let Some(tool) = call.tool else { return Reply::error(RpcError::unknown_tool(&call.name)) };
    let headers = xheader::outbound(&tool.headers, &call.args);
    let named = Named { shown: &call.name, policy: tool.policy_name(), confirmed: call.confirmed.as_deref() };
    forward(gw, tool.upstream, call.req, named, Some(("name", &tool.original)), headers, call.endpoint).await
}

async fn run<'g>(step: Step, gw: &'g Served<'_>, call: &mut ToolCall<'g>) -> Result<(), Refusal> {
    match step {
        Step::Resolve => resolve(gw, call),
        Step::Admit => admit(gw, call).await,
        Step::Arguments => arguments(call),
        Step::Decide => decide(gw, call),
        Step::Validate => validate(gw, call).await,
        Step::Confirm => confirm(gw, call).await,
        Step::Quota => quota(gw, call).await,
        Step::Route => route(gw, call),
    }
}

fn resolve<'g>(gw: &'g Served<'_>, call: &mut ToolCall<'g>) -> Result<(), Refusal> {
    let (cat, grants, id_of) = (&gw.view, &call.req.caller.grants, call.id_of);
    if let Some(tool) = view::find(cat, Kind::Tool, &call.name, grants, id_of) {
        call.tool = Some(tool);
        return Ok(());
    }
    let bare = if gw.config.catalog.bare_names { bare::resolve(cat, Kind::Tool, &call.name, grants, id_of) } else { Bare::Unknown };
    match bare {
        Bare::One(gateway_name) => {
            call.tool = view::find(cat, Kind::Tool, &gateway_name, grants, id_of);
            call.name = gateway_name;
            // Out of view after all: answered like an unknown tool, unaudited as before.
            call.tool.map(|_| ()).ok_or_else(|| Refusal::Malformed(RpcError::unknown_tool(&call.name)))
        }
        Bare::Ambiguous(candidates) => Err(Refusal::AmbiguousBareName { kind: Kind::Tool, candidates }),
        Bare::Unknown => Err(not_found(gw, call)),
    }
}

/// Why a name is not in the caller's view.
fn not_found(gw: &Served<'_>, call: &ToolCall<'_>) -> Refusal {
    let (req, name) = (&call.req, call.name.as_str());
    // The `connect` tool of an upstream the caller has meanwhile consented to (the retry of the
    // call that sent it to consent).
    if let Some(index) = gw.connect_tool_of(&req.caller, name) {
        let text = format!("Connected to {}: its tools are listed now.", gw.upstream_id(index));
        return Refusal::Answered(Box::new(Reply::Single(super::tool_text(&text, false))));
    }
    // A tool of an upstream the caller has not connected (yet, or any more).
    if let Some(index) = gw.unconnected_upstream_of(&req.caller, &gw.view, name) {
        return Refusal::Answered(Box::new(super::consent::needed(gw, req, gw.upstream_id(index), name)));
    }
    if let Some(e) = needs_scope(gw, req, Kind::Tool, name) {
        return Refusal::InsufficientScope(e);
    }
    if gw.held_tool(name) { Refusal::HeldByPin } else { Refusal::UnknownOrDenied }
}

/// Rate limits are configured on catalogue names, whatever name an endpoint presents.
async fn admit(gw: &Served<'_>, call: &mut ToolCall<'_>) -> Result<(), Refusal> {
    let canonical = call.tool()?.policy_name();
    for (index, limit) in gw.config.rate_limits.iter().enumerate().filter(|(_, l)| policy::glob::matches(&l.tools, canonical)) {
        gw.limiter.check(&format!("tool:{}:{}", call.req.caller.id, index), limit.rate).await.map_err(Refusal::RateLimited)?;
    }
    Ok(())
}

/// The arguments are read only when something depends on their values: mirrored headers (and
/// the routing they drive), `Mcp-Param-*` headers to check, or fixed arguments. Otherwise they
/// pass through unread, once their shape is known to be an object.
fn arguments(call: &mut ToolCall<'_>) -> Result<(), Refusal> {
    let tool = call.tool()?;
    let req = &mut call.req;
    let not_object = || Refusal::Malformed(RpcError::invalid_params("tools/call arguments must be an object"));
    let needs_values = !tool.headers.is_empty() || !tool.fixed.is_empty() || req.param_headers.as_ref().is_some_and(|h| !h.is_empty());
    let mut args: Value = match req.params.get("arguments") {
        None => Value::Object(Default::default()),
        Some(raw) if !needs_values && (raw.get().starts_with('{') || raw.get() == "null") => Value::Null,
        Some(raw) => match raw.parse::<Value>() {
            Ok(v @ (Value::Object(_) | Value::Null)) => v,
            _ => return Err(not_object()),
        },
    };
    if let Some(fixed) = tool.fixed.keys().find(|k| args.get(k.as_str()).is_some()) {
        let name = &call.name;
        return Err(Refusal::Malformed(RpcError::invalid_params(format!(
            "Argument '{fixed}' of {name} is fixed on this endpoint: leave it out"
        ))));
    }
    if let Some(received) = &req.param_headers {
        xheader::check_inbound(&tool.headers, &args, received).map_err(Refusal::Malformed)?;
    }
    // A virtual server's fixed arguments go in, with the values it set.
    if !tool.fixed.is_empty() {
        if args.is_null() {
            args = Value::Object(Default::default());
        }
        let Value::Object(map) = &mut args else { return Err(not_object()) };
        map.extend(tool.fixed.clone());
        if req.params.set_json("arguments", &args).is_err() {
            return Err(Refusal::Malformed(RpcError::internal("cannot add the fixed arguments")));
        }
    }
    call.args = args;
    Ok(())
}

/// The rules that need the call decide it (the arguments as they will be forwarded).
fn decide(gw: &Served<'_>, call: &mut ToolCall<'_>) -> Result<(), Refusal> {
    let tool = call.tool()?;
    let subject =
        Subject { kind: Kind::Tool, name: tool.policy_name(), upstream: gw.upstream_id(tool.upstream), json: Some(tool.json.get()) };
    let args = (!call.args.is_null()).then_some(&call.args);
    call.confirm_rule = super::decide::decide(gw, &call.req, &subject, args)?;
    Ok(())
}

/// The arguments fit the upstream's own schema, or the call goes nowhere. They are checked as
/// they would be forwarded (read now if they passed through unread so far).
async fn validate(gw: &Served<'_>, call: &mut ToolCall<'_>) -> Result<(), Refusal> {
    let tool = call.tool()?;
    if !gw.upstream(tool.upstream).is_some_and(|u| u.cfg.validate_arguments) {
        return Ok(());
    }
    let read;
    let args = match call.req.params.get("arguments") {
        Some(raw) if call.args.is_null() && raw.get() != "null" => {
            read = raw.parse::<Value>().unwrap_or(Value::Null);
            &read
        }
        _ if call.args.is_null() => {
            read = Value::Object(Default::default());
            &read
        }
        _ => &call.args,
    };
    check_arguments(gw, &tool.args, args).await.map_err(Refusal::InvalidArguments)
}

/// A call a rule names waits for a person's confirmation.
async fn confirm(gw: &Served<'_>, call: &mut ToolCall<'_>) -> Result<(), Refusal> {
    let tool = call.tool()?;
    match super::confirm::check(gw, &mut call.req, tool, gw.upstream_id(tool.upstream), call.confirm_rule.as_deref()).await {
        super::confirm::Verdict::Free => Ok(()),
        super::confirm::Verdict::Confirmed(digest) => {
            call.confirmed = Some(digest);
            Ok(())
        }
        super::confirm::Verdict::Answer(reply) => Err(Refusal::Answered(reply)),
    }
}

/// Quotas are configured on catalogue names, and spent only by a call every other step let go.
async fn quota(gw: &Served<'_>, call: &mut ToolCall<'_>) -> Result<(), Refusal> {
    if gw.config.quotas.is_empty() {
        return Ok(());
    }
    let canonical = call.tool()?.policy_name();
    let fail = gw.config.cluster.as_ref().map_or(crate::config::cluster::FailMode::Open, |c| c.on_redis_error);
    let req = &call.req;
    gw.usage.take_quota(&gw.config.quotas, &req.caller.id, &req.caller.rules, canonical, fail).await.map_err(Refusal::QuotaExceeded)
}

/// The upstream's endpoint that takes the call, by its mirrored values.
fn route(gw: &Served<'_>, call: &mut ToolCall<'_>) -> Result<(), Refusal> {
    let tool = call.tool()?;
    let values = xheader::mirrored_values(&tool.headers, &call.args);
    call.endpoint = match gw.upstream(tool.upstream).map(|u| u.route(&values)) {
        Some(Ok(e)) => e,
        Some(Err(why)) => return Err(Refusal::NoRoute { upstream: gw.upstream_id(tool.upstream).to_string(), why: why.to_string() }),
        None => None,
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Step, TOOLS_CALL};

    fn at(step: Step) -> usize {
        TOOLS_CALL.iter().position(|s| *s == step).unwrap_or(usize::MAX)
    }

    #[test]
    fn every_step_runs_once_in_the_declared_order() {
        use Step::*;
        assert_eq!(TOOLS_CALL, &[Resolve, Admit, Arguments, Decide, Validate, Confirm, Quota, Route]);
        // The tool is known before anything is decided on it.
        assert_eq!(at(Resolve), 0);
        // A call refused for its arguments, or one a person has not confirmed, spends no quota.
        assert!(at(Arguments) < at(Quota) && at(Validate) < at(Quota) && at(Confirm) < at(Quota));
        // The rules see the arguments as they will be forwarded, and a refused call asks no one.
        assert!(at(Arguments) < at(Decide) && at(Decide) < at(Confirm) && at(Decide) < at(Quota));
        // A rate limit is checked before the arguments are read; the route is the last step.
        assert!(at(Admit) < at(Arguments));
        assert_eq!(at(Route), TOOLS_CALL.len() - 1);
    }
}
