//! The steps of `tools/call` that only a tool call has: its rate limits, its arguments (shape,
//! fixed arguments, `Mcp-Param-*` headers, schema), a person's confirmation, its quota and its
//! route to one of the upstream's endpoints; and how a tool is found in the caller's view (bare
//! names, a `connect` retry, consent, scopes, pins).

use super::{Call, Target};
use crate::dispatch::Served;
use crate::dispatch::bare::{self, Bare};
use crate::dispatch::forward::{check_arguments, needs_scope, string_param};
use crate::dispatch::readers::Reader;
use crate::dispatch::refusal::Refusal;
use mcpgate_model::catalog::{Kind, view};
use mcpgate_model::policy;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::reply::Reply;
use mcpgate_protocol::xheader;
use serde_json::Value;

pub(super) fn resolve<'g>(gw: &'g Served<'_>, call: &mut Call<'g>) -> Result<(), Refusal> {
    call.subject.item = string_param(&call.req, "name").map_err(Refusal::Malformed)?;
    let (cat, id_of) = (&gw.view, call.id_of);
    let grants = &call.req.caller.grants;
    if let Some(tool) = view::find(cat, Kind::Tool, &call.subject.item, grants, id_of) {
        call.resolved(target(tool), Some(tool.policy_name()));
        return Ok(());
    }
    let bare = if gw.config.catalog.bare_names { bare::resolve(cat, Kind::Tool, &call.subject.item, grants, id_of) } else { Bare::Unknown };
    match bare {
        Bare::One(gateway_name) => {
            let found = view::find(cat, Kind::Tool, &gateway_name, grants, id_of);
            call.subject.item = gateway_name;
            match found {
                Some(tool) => {
                    call.resolved(target(tool), Some(tool.policy_name()));
                    Ok(())
                }
                // Out of view after all: answered like an unknown tool, unaudited as before.
                None => Err(Refusal::Malformed(RpcError::unknown_tool(&call.subject.item))),
            }
        }
        Bare::Ambiguous(candidates) => Err(Refusal::AmbiguousBareName { kind: Kind::Tool, candidates }),
        Bare::Unknown => Err(not_found(gw, call)),
    }
}

/// Why a name is not in the caller's view.
fn not_found(gw: &Served<'_>, call: &Call<'_>) -> Refusal {
    let (req, name) = (&call.req, call.subject.item.as_str());
    // The `connect` tool of an upstream the caller has meanwhile consented to (the retry of the
    // call that sent it to consent).
    if let Some(index) = gw.connect_tool_of(&req.caller, name) {
        let text = format!("Connected to {}: its tools are listed now.", gw.upstream_id(index));
        return Refusal::Answered(Box::new(Reply::Single(crate::dispatch::tool_text(&text, false))));
    }
    // A tool of an upstream the caller has not connected (yet, or any more).
    if let Some(index) = gw.unconnected_upstream_of(&req.caller, &gw.view, name) {
        return Refusal::Answered(Box::new(crate::dispatch::consent::needed(gw, req, &call.subject, gw.upstream_id(index))));
    }
    if let Some(e) = needs_scope(gw, req, Kind::Tool, name) {
        return Refusal::InsufficientScope(e);
    }
    if gw.held_tool(name) { Refusal::HeldByPin } else { Refusal::UnknownOrDenied }
}

/// A tool as the chain's target.
fn target(tool: &mcpgate_model::catalog::merge::Entry) -> Target<'_> {
    Target { kind: Kind::Tool, upstream: tool.upstream, rewrite: Some(("name", tool.original.clone())), entry: Some(tool) }
}

/// Rate limits are configured on catalogue names, whatever name an endpoint presents.
pub(super) async fn admit(gw: &Served<'_>, call: &mut Call<'_>) -> Result<(), Refusal> {
    let canonical = call.tool()?.policy_name();
    for (index, limit) in gw.config.rate_limits.iter().enumerate().filter(|(_, l)| policy::glob::matches(&l.tools, canonical)) {
        gw.limiter.check(&format!("tool:{}:{}", call.req.caller.id, index), limit.rate).await.map_err(Refusal::RateLimited)?;
    }
    Ok(())
}

/// The arguments are read only when something depends on their values: mirrored headers (and
/// the routing they drive), `Mcp-Param-*` headers to check, or fixed arguments. Otherwise they
/// pass through unread, once their shape is known to be an object.
pub(super) fn arguments(call: &mut Call<'_>) -> Result<(), Refusal> {
    let tool = call.tool()?;
    let not_object = || Refusal::Malformed(RpcError::invalid_params("tools/call arguments must be an object"));
    let r = call.readers;
    let needs_values = r.reads(Reader::Headers) || r.reads(Reader::Fixed) || r.reads(Reader::ParamHeaders);
    if !needs_values {
        return match call.req.params.get("arguments") {
            Some(raw) if !(raw.get().starts_with('{') || raw.get() == "null") => Err(not_object()),
            _ => Ok(()),
        };
    }
    call.arguments()?;
    let Some(Value::Object(args)) = &call.args else { return Err(not_object()) };
    if let Some(fixed) = tool.fixed.keys().find(|k| args.contains_key(k.as_str())) {
        let name = call.subject.shown();
        return Err(Refusal::Malformed(RpcError::invalid_params(format!(
            "Argument '{fixed}' of {name} is fixed on this endpoint: leave it out"
        ))));
    }
    if let (Some(received), Some(args)) = (&call.req.param_headers, &call.args) {
        xheader::check_inbound(&tool.headers, args, received).map_err(Refusal::Malformed)?;
    }
    // A virtual server's fixed arguments go in, with the values it set.
    if !tool.fixed.is_empty()
        && let Some(Value::Object(map)) = &mut call.args
    {
        map.extend(tool.fixed.clone());
        if call.req.params.set_json("arguments", map).is_err() {
            return Err(Refusal::Malformed(RpcError::internal("cannot add the fixed arguments")));
        }
    }
    Ok(())
}

/// The arguments fit the upstream's own schema, or the call goes nowhere. They are checked as
/// they would be forwarded, as every decider reads them.
pub(super) async fn validate(gw: &Served<'_>, call: &mut Call<'_>) -> Result<(), Refusal> {
    let tool = call.tool()?;
    if !call.readers.reads(Reader::Validation) {
        return Ok(());
    }
    let args = call.arguments()?;
    check_arguments(gw, &tool.args, args).await.map_err(Refusal::InvalidArguments)
}

/// A call a rule names waits for a person's confirmation.
pub(super) async fn confirm(gw: &Served<'_>, call: &mut Call<'_>) -> Result<(), Refusal> {
    let tool = call.tool()?;
    // What a person is shown and confirms is what every decider reads.
    if call.confirm_rule.is_some() || call.readers.reads(Reader::Confirm) {
        call.arguments()?;
    }
    match crate::dispatch::confirm::check(gw, &mut call.req, tool, &call.subject, call.confirm_rule.as_deref()).await {
        crate::dispatch::confirm::Verdict::Free => Ok(()),
        crate::dispatch::confirm::Verdict::Confirmed(digest) => {
            call.confirmed = Some(digest);
            Ok(())
        }
        crate::dispatch::confirm::Verdict::Answer(reply) => Err(Refusal::Answered(reply)),
        crate::dispatch::confirm::Verdict::Refused(reply, why) => Err(Refusal::Unconfirmed(reply, why)),
    }
}

/// Quotas are configured on catalogue names, and spent only by a call every other step let go.
pub(super) async fn quota(gw: &Served<'_>, call: &mut Call<'_>) -> Result<(), Refusal> {
    if gw.config.quotas.is_empty() {
        return Ok(());
    }
    let canonical = call.tool()?.policy_name();
    let fail = gw.config.cluster.as_ref().map_or(mcpgate_config::cluster::FailMode::Open, |c| c.on_redis_error);
    let req = &call.req;
    gw.usage.take_quota(&gw.config.quotas, &req.caller.id, &req.caller.rules, canonical, fail).await.map_err(Refusal::QuotaExceeded)
}

/// The upstream's endpoint that takes the call, by its mirrored values.
pub(super) fn route(gw: &Served<'_>, call: &mut Call<'_>) -> Result<(), Refusal> {
    let tool = call.tool()?;
    let values = xheader::mirrored_values(&tool.headers, call.args.as_ref().unwrap_or(&Value::Null));
    call.endpoint = match gw.upstream(tool.upstream).map(|u| u.route(&values)) {
        Some(Ok(e)) => e,
        Some(Err(why)) => return Err(Refusal::NoRoute { upstream: gw.upstream_id(tool.upstream).to_string(), why: why.to_string() }),
        None => None,
    };
    Ok(())
}
