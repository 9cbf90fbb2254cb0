//! The methods that act on one item and are forwarded to the upstream that owns it: `tools/call`
//! (mirrored headers checked, `Mcp-Param-*` rebuilt from the upstream's schema), `prompts/get`,
//! `resources/read` (URIs mapped both ways) and `completion/complete` (routed by its `ref`).
//! Every lookup goes through the caller's view, so an item the caller may not use answers
//! exactly like a missing one; every forwarded request is audited. The item's name or URI is
//! rewritten to the upstream's own; everything else passes through.

use super::Served;
use super::bare::{self, Bare};
use super::{Request, rate_limited, state};
use crate::audit;
use crate::catalog::args::{ArgCheck, Refusal, cost};
use crate::catalog::view;
use crate::catalog::{Kind, links, uris};
use crate::gateway::Routed;
use crate::policy;
use crate::protocol::Method;
use crate::protocol::errors::RpcError;
use crate::protocol::json::Json;
use crate::protocol::rawobj::RawObject;
use crate::protocol::xheader;
use crate::reply::{Outcome, Reply};
use crate::upstream::Call;
use serde_json::{Value, json};
use std::time::Instant;

/// Audits and counts a request refused before it reached an upstream.
fn refuse(gw: &Served<'_>, req: &Request, item: &str, reason: &str) {
    gw.audit.refused(&req.caller.id, req.caller.endpoint.as_deref().unwrap_or("-"), req.method.as_str(), item, reason);
    gw.metrics.refused(reason);
}

/// Audits, counts in the usage and in the metrics a tool call its caller's limits refused.
fn limited(gw: &Served<'_>, req: &Request, shown: &str, canonical: &str, upstream: usize, reason: &str) {
    let entry = audit::Entry {
        caller: req.caller.id.clone(),
        endpoint: req.caller.endpoint.as_deref().unwrap_or("-").to_string(),
        method: req.method.to_string(),
        item: canonical.to_string(),
        presented: (shown != canonical).then(|| shown.to_string()),
        upstream: gw.upstream_id(upstream).to_string(),
        started: Instant::now(),
        arguments: None,
    };
    gw.audit.limited(&entry, reason);
    gw.metrics.refused(reason);
    gw.metrics.tool_call(canonical, req.caller.rules.first().map(String::as_str), reason);
}

fn string_param(req: &Request, key: &str) -> Result<String, RpcError> {
    match req.params.parse::<String>(key) {
        Some(Ok(n)) => Ok(n),
        _ => Err(RpcError::invalid_params(format!("{} needs params.{key} (a string)", req.method))),
    }
}

/// The 403 challenge for an item the caller's grants allow but its token lacks the scopes for
/// (so that it can ask for them), or `None` when that is not why the item is out of view. An
/// item the grants deny still answers exactly like a missing one.
fn needs_scope(gw: &Served<'_>, req: &Request, kind: Kind, name: &str) -> Option<RpcError> {
    let id_of = |i: usize| gw.upstream_id(i);
    // Scopes are configured on catalogue names, whatever name an endpoint presents.
    let canonical = match kind {
        Kind::Resource => gw.route_uri_in(&gw.view, &req.caller, &req.caller.grants.ignoring_scopes(), name).map(|_| canonical_uri(name)),
        _ => view::find(&gw.view, kind, name, &req.caller.grants.ignoring_scopes(), &id_of).map(|e| e.policy_name().to_string()),
    }?;
    let auth = &gw.auth;
    let needed = auth.scopes_for(kind, &canonical);
    if needed.is_empty() || req.caller.has_scopes(&needed) {
        return None;
    }
    refuse(gw, req, name, "insufficient_scope");
    let config = &gw.config;
    let at = req.caller.endpoint.as_deref().unwrap_or(&config.server.path);
    let metadata = auth
        .config()
        .resource
        .as_ref()
        .map(|_| crate::auth::prm::metadata_url(&crate::auth::prm::resource_at(auth.config(), None, &config.server.path, at, false)));
    let (status, challenge) = auth.challenge(&crate::auth::AuthError::InsufficientScope(needed.clone()), metadata.as_deref());
    Some(
        RpcError::invalid_request(format!("Forbidden: {} {name} needs scope {}", kind.label(), needed.join(" ")))
            .with_status(status)
            .with_header("www-authenticate", challenge),
    )
}

/// The item a request acts on: as the caller named it, and as policy names it (the catalogue's
/// name, whatever an endpoint presents).
#[derive(Clone, Copy)]
pub(super) struct Named<'a> {
    pub shown: &'a str,
    pub policy: &'a str,
    /// A call a person confirmed: the digest of what they confirmed.
    pub confirmed: Option<&'a str>,
}

impl<'a> Named<'a> {
    pub fn same(name: &'a str) -> Self {
        Named { shown: name, policy: name, confirmed: None }
    }
}

/// Sends `req` to upstream `upstream` with member `key` rewritten to `original`, and audits it.
pub(super) async fn forward(
    gw: &Served<'_>,
    upstream: usize,
    req: Request,
    named: Named<'_>,
    rewrite: Option<(&str, &str)>,
    param_headers: Vec<(String, String)>,
    endpoint: Option<usize>,
) -> Reply {
    let item = named.shown;
    let up = match gw.upstream_for(&req.caller, upstream).await {
        Some(Routed::Up(up)) => up,
        Some(Routed::Consent) => return super::consent::needed(gw, &req, gw.upstream_id(upstream), item),
        Some(Routed::Failed(e)) => return Reply::error(e.into_rpc(gw.upstream_id(upstream))),
        None => return Reply::error(RpcError::internal("catalogue points at a missing upstream")),
    };
    let span = tracing::Span::current();
    span.record("item", item);
    span.record("upstream", up.id());
    let entry = audit::Entry {
        caller: req.caller.id.clone(),
        endpoint: req.caller.endpoint.as_deref().unwrap_or("-").to_string(),
        method: req.method.to_string(),
        // Under the catalogue's name, whatever name the endpoint presents.
        item: named.policy.to_string(),
        presented: (named.shown != named.policy).then(|| named.shown.to_string()),
        upstream: up.id().to_string(),
        started: Instant::now(),
        arguments: gw.config.audit_arguments.then(|| req.params.get("arguments").map(|a| a.get().to_string())).flatten(),
    };
    // A request to a caller's own upstream is kept, to send the caller to consent if its token
    // is refused.
    let again = gw.is_personal(upstream).then(|| req.clone());
    let redact = super::secrets::Redact::new(gw, &req, item);
    let redact_events = redact.clone();
    let mut params = req.params;
    params.remove("_meta");
    super::strip_input_response(&mut params, super::consent::INPUT_KEY);
    let max_age = gw.config.server.input_timeout;
    let bind = state::Binding { caller: &req.caller, upstream: up.id(), method: req.method.as_str(), item, confirmed: None };
    if let Err(why) = state::open(&gw.sealer, &mut params, &bind, max_age) {
        gw.audit.refused(&req.caller.id, req.caller.endpoint.as_deref().unwrap_or("-"), req.method.as_str(), item, why.reason());
        gw.metrics.refused("invalid_request_state");
        return Reply::error(why.to_error());
    }
    let (sealer, caller, upstream_id, method, item_name, policy_name) =
        (gw.sealer.clone(), req.caller.clone(), up.id().to_string(), req.method.clone(), item.to_string(), named.policy.to_string());
    let prefix = up.cfg.prefix.clone();
    let confirmed = named.confirmed.map(str::to_string);
    let confirmations = gw.confirmations.clone();
    let endpoint_label = req.caller.endpoint.clone();
    // What a caller with narrowed grants reads must not be shared with callers policy denies.
    let narrowed = !req.caller.grants.is_unrestricted();
    let (metrics, started) = (gw.metrics.clone(), Instant::now());
    let mut name = None;
    if let Some((key, original)) = rewrite {
        if params.set_json(key, original).is_err() {
            return Reply::error(RpcError::internal("cannot rewrite the request"));
        }
        name = Some(original.to_string());
    }
    let call = Call {
        method: req.method.to_string(),
        params,
        meta: req.meta.fields,
        name,
        param_headers,
        on_behalf_of: req.caller.rules.clone(),
        endpoint,
        accepts_input: Vec::new(),
        client: req.legacy.clone(),
        logs: false,
    };
    let pending = audit::Pending::new(gw.audit.clone(), entry);
    let reply = up.call(call).await;
    // The caller's own token was refused and no renewal helped: consent again.
    let reply = match reply {
        Reply::Single(o) if super::consent::is_needed(&o) && again.is_some() => {
            pending.finish(&audit::outcome_label(&o));
            match &again {
                Some(req) => return super::consent::needed(gw, req, &upstream_id, &item_name),
                None => Reply::Single(o),
            }
        }
        other => other,
    };
    let reply = reply.map_outcome(move |o| {
        // Described once, for the audit line and the metrics alike.
        let label = audit::outcome_label(&o);
        pending.finish(&label);
        metrics.call(method.as_str(), &upstream_id, endpoint_label.as_deref().unwrap_or("-"), &label, started.elapsed());
        if method == Method::ToolsCall {
            metrics.tool_call(&policy_name, caller.rules.first().map(String::as_str), &label);
        }
        let bind = state::Binding {
            caller: &caller,
            upstream: &upstream_id,
            method: method.as_str(),
            item: &item_name,
            confirmed: confirmed.as_deref(),
        };
        // What the upstream sent passes the redaction step first, whatever it is.
        let o = match &redact {
            Some(step) => step.outcome(o),
            None => o,
        };
        if !state::asks_input(&o) {
            match o {
                Outcome::Result(raw) => {
                    let raw = links::to_gateway(method.as_str(), &raw, &prefix).unwrap_or(raw);
                    let raw = if narrowed && method == Method::ResourcesRead { private_scope(&raw).unwrap_or(raw) } else { raw };
                    if method == Method::ToolsCall {
                        let created = super::tasks::Created { caller: &caller, upstream: &upstream_id, tool: &policy_name };
                        super::tasks::seal_created(&sealer, Outcome::Result(raw), &created)
                    } else {
                        Outcome::Result(raw)
                    }
                }
                other => other,
            }
        } else if method.may_ask_input() {
            let sealed = state::seal(&sealer, o, &bind);
            if confirmed.is_some() {
                super::confirm::issue_round(&confirmations, &sealed, max_age);
            }
            sealed
        } else {
            Outcome::Error(RpcError::internal(format!(
                "Upstream '{upstream_id}' answered {method} with input_required, which only tools/call, prompts/get and \
                    resources/read may carry"
            )))
        }
    });
    super::secrets::events(reply, redact_events)
}

pub async fn call_tool(gw: &Served<'_>, req: Request) -> Reply {
    let name = match string_param(&req, "name") {
        Ok(n) => n,
        Err(e) => return Reply::error(e),
    };
    let cat = &gw.view;
    let id_of = |i: usize| gw.upstream_id(i);
    let mut name = name;
    let found = match view::find(cat, Kind::Tool, &name, &req.caller.grants, &id_of) {
        Some(tool) => Some(tool),
        None => match bare_name(gw, cat, Kind::Tool, &name, &req) {
            Bare::One(gateway_name) => {
                name = gateway_name;
                view::find(cat, Kind::Tool, &name, &req.caller.grants, &id_of)
            }
            Bare::Ambiguous(candidates) => {
                refuse(gw, &req, &name, "ambiguous_bare_name");
                return Reply::error(bare::ambiguous(Kind::Tool, &name, &candidates));
            }
            Bare::Unknown => {
                // The `connect` tool of an upstream the caller has meanwhile consented to (the
                // retry of the call that sent it to consent).
                if let Some(index) = gw.connect_tool_of(&req.caller, &name) {
                    return tool_result(&format!("Connected to {}: its tools are listed now.", gw.upstream_id(index)), false);
                }
                // A tool of an upstream the caller has not connected (yet, or any more).
                if let Some(index) = gw.unconnected_upstream_of(&req.caller, cat, &name) {
                    return super::consent::needed(gw, &req, gw.upstream_id(index), &name);
                }
                if let Some(e) = needs_scope(gw, &req, Kind::Tool, &name) {
                    return Reply::error(e);
                }
                // Held by its pin: answered like an unknown tool, audited as what it is.
                let why = if gw.held_tool(&name) { "held_by_pin" } else { "unknown_or_denied" };
                refuse(gw, &req, &name, why);
                return Reply::error(RpcError::unknown_tool(&name));
            }
        },
    };
    let Some(tool) = found else {
        return Reply::error(RpcError::unknown_tool(&name));
    };
    // Rate limits are configured on catalogue names, whatever name an endpoint presents.
    let canonical = tool.policy_name();
    for (index, limit) in gw.config.rate_limits.iter().enumerate().filter(|(_, l)| policy::glob::matches(&l.tools, canonical)) {
        if let Err(wait) = gw.limiter.check(&format!("tool:{}:{}", req.caller.id, index), limit.rate).await {
            limited(gw, &req, &name, canonical, tool.upstream, "rate_limited");
            return Reply::error(rate_limited(&format!("{} on {name}", req.caller.id), wait));
        }
    }
    if !gw.config.quotas.is_empty() {
        let fail = gw.config.cluster.as_ref().map_or(crate::config::cluster::FailMode::Open, |c| c.on_redis_error);
        if let Err(r) = gw.usage.take_quota(&gw.config.quotas, &req.caller.id, &req.caller.rules, canonical, fail).await {
            limited(gw, &req, &name, canonical, tool.upstream, "quota_exceeded");
            return Reply::error(super::quota_exceeded(&req.caller.id, &name, &r));
        }
    }
    // The arguments are read only when something depends on their values: mirrored headers
    // (and the routing they drive), `Mcp-Param-*` headers to check, or fixed arguments.
    // Otherwise they pass through unread, once their shape is known to be an object.
    let needs_values = !tool.headers.is_empty() || !tool.fixed.is_empty() || req.param_headers.as_ref().is_some_and(|h| !h.is_empty());
    let args: Value = match req.params.get("arguments") {
        None => Value::Object(Default::default()),
        Some(raw) if !needs_values && (raw.get().starts_with('{') || raw.get() == "null") => Value::Null,
        Some(raw) => match raw.parse::<Value>() {
            Ok(v @ (Value::Object(_) | Value::Null)) => v,
            _ => return Reply::error(RpcError::invalid_params("tools/call arguments must be an object")),
        },
    };
    if let Some(fixed) = tool.fixed.keys().find(|k| args.get(k.as_str()).is_some()) {
        return Reply::error(RpcError::invalid_params(format!("Argument '{fixed}' of {name} is fixed on this endpoint: leave it out")));
    }
    if let Some(received) = &req.param_headers
        && let Err(e) = xheader::check_inbound(&tool.headers, &args, received)
    {
        return Reply::error(e);
    }
    // A virtual server's fixed arguments go in, with the values it set.
    let mut args = args;
    let mut req = req;
    if !tool.fixed.is_empty() {
        if args.is_null() {
            args = Value::Object(Default::default());
        }
        let Value::Object(map) = &mut args else {
            return Reply::error(RpcError::invalid_params("tools/call arguments must be an object"));
        };
        map.extend(tool.fixed.clone());
        if req.params.set_json("arguments", &args).is_err() {
            return Reply::error(RpcError::internal("cannot add the fixed arguments"));
        }
    }
    // The arguments as they would be forwarded, read when the schema check needs them (a
    // confirmation reads their exact text itself).
    let validate = gw.upstream(tool.upstream).is_some_and(|u| u.cfg.validate_arguments);
    let read;
    let final_args = match req.params.get("arguments") {
        _ if !validate => &args,
        // Passed through unread so far: read now.
        Some(raw) if args.is_null() && raw.get() != "null" => {
            read = raw.parse::<Value>().unwrap_or(Value::Null);
            &read
        }
        _ if args.is_null() => {
            read = Value::Object(Default::default());
            &read
        }
        _ => &args,
    };
    // The arguments fit the upstream's own schema, or the call goes nowhere.
    if validate && let Err(refusal) = check_arguments(gw, &tool.args, final_args).await {
        let why = if matches!(refusal, Refusal::TooCostly(_)) { "arguments_too_costly" } else { "invalid_arguments" };
        refuse(gw, &req, &name, why);
        return Reply::error(invalid_arguments(&name, refusal));
    }
    // A call a rule names waits for a person's confirmation.
    let confirmed = match super::confirm::check(gw, &mut req, tool, gw.upstream_id(tool.upstream)).await {
        super::confirm::Verdict::Free => None,
        super::confirm::Verdict::Confirmed(digest) => Some(digest),
        super::confirm::Verdict::Answer(reply) => return *reply,
    };
    let (upstream, original, headers) = (tool.upstream, tool.original.clone(), xheader::outbound(&tool.headers, &args));
    let policy_name = tool.policy_name().to_string();
    let values = xheader::mirrored_values(&tool.headers, &args);
    let endpoint = match gw.upstream(upstream).map(|u| u.route(&values)) {
        Some(Ok(e)) => e,
        Some(Err(why)) => {
            refuse(gw, &req, &name, "no_route");
            return tool_error(&format!("Upstream '{}' cannot take this call: {why}", gw.upstream_id(upstream)));
        }
        None => None,
    };
    let named = Named { shown: &name, policy: &policy_name, confirmed: confirmed.as_deref() };
    forward(gw, upstream, req, named, Some(("name", &original)), headers, endpoint).await
}

pub async fn get_prompt(gw: &Served<'_>, req: Request) -> Reply {
    let name = match string_param(&req, "name") {
        Ok(n) => n,
        Err(e) => return Reply::error(e),
    };
    let id_of = |i: usize| gw.upstream_id(i);
    let Some((upstream, original)) =
        view::find(&gw.view, Kind::Prompt, &name, &req.caller.grants, &id_of).map(|p| (p.upstream, p.original.clone()))
    else {
        if let Some(e) = needs_scope(gw, &req, Kind::Prompt, &name) {
            return Reply::error(e);
        }
        return Reply::error(RpcError::invalid_params(format!("Unknown prompt: {name}")));
    };
    forward(gw, upstream, req, Named::same(&name), Some(("name", &original)), Vec::new(), None).await
}

/// The result with `cacheScope: "private"`, or `None` when it already says so (or is no object).
fn private_scope(raw: &Json) -> Option<Json> {
    let mut obj = RawObject::from_json(raw).ok()?;
    if obj.parse::<String>("cacheScope").and_then(Result::ok).as_deref() == Some("private") {
        return None;
    }
    obj.set_json("cacheScope", "private").ok()?;
    Some(obj.to_json())
}

/// How long a costly argument check may take on the blocking pool before the call is refused.
const CHECK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// Checks a call's arguments against its tool's schema. The work is counted first (and refused
/// past its budget); a check that may take more than a moment runs on the blocking pool, with the
/// CPU-heavy work of tool searches (at most half the cores at once), under a deadline, so it
/// never holds a thread that serves other requests.
async fn check_arguments(gw: &Served<'_>, check: &ArgCheck, args: &Value) -> Result<(), Refusal> {
    if check.work(args)? <= cost::INLINE_WORK {
        return check.check(args);
    }
    let (check, args) = (check.clone(), args.clone());
    let late = || Refusal::TooCostly(format!("checking them did not finish within {} s", CHECK_DEADLINE.as_secs()));
    let run = async {
        let _permit = gw.ranking.clone().acquire_owned().await.map_err(|_| late())?;
        tokio::task::spawn_blocking(move || check.check(&args)).await.map_err(|_| late())?
    };
    tokio::time::timeout(CHECK_DEADLINE, run).await.unwrap_or_else(|_| Err(late()))
}

/// The invalid-params error for arguments that do not fit the tool's schema (MCP
/// `InvalidParamsError`), naming each failing path, so the model can correct its call.
fn invalid_arguments(name: &str, refusal: Refusal) -> RpcError {
    match refusal {
        Refusal::Invalid(problems) => {
            let first = problems.first().map(|p| p.message.clone()).unwrap_or_default();
            let errors: Vec<Value> = problems.iter().map(|p| json!({ "path": p.path, "message": p.message })).collect();
            RpcError::invalid_params(format!("Invalid arguments for tool {name}: {first}")).with_data(json!({ "errors": errors }))
        }
        Refusal::Unusable(why) => {
            RpcError::invalid_params(format!("Invalid arguments for tool {name}: its inputSchema cannot be used to check them ({why})"))
        }
        Refusal::TooCostly(why) => {
            RpcError::invalid_params(format!("Arguments for tool {name} were not checked, so it was not called: {why}"))
        }
    }
}

/// A `CallToolResult` with `isError: true`: a failure the model can read and act on.
fn tool_error(text: &str) -> Reply {
    tool_result(text, true)
}

/// A `CallToolResult` the gateway answers itself.
fn tool_result(text: &str, is_error: bool) -> Reply {
    Reply::Single(super::tool_text(text, is_error))
}

/// An item named by its upstream's own name (see `bare`), when `[catalog] bare_names` is on.
fn bare_name(gw: &Served<'_>, cat: &crate::catalog::Catalog, kind: Kind, name: &str, req: &Request) -> Bare {
    if !gw.config.catalog.bare_names {
        return Bare::Unknown;
    }
    let id_of = |i: usize| gw.upstream_id(i);
    bare::resolve(cat, kind, name, &req.caller.grants, &id_of)
}

/// A URI in canonical form, for the decisions that name it (scopes, audit).
fn canonical_uri(uri: &str) -> String {
    uris::canonical(uri).map_or_else(|_| uri.to_string(), |c| c.into_owned())
}

pub async fn read_resource(gw: &Served<'_>, req: Request) -> Reply {
    let uri = match string_param(&req, "uri") {
        Ok(n) => n,
        Err(e) => return Reply::error(e),
    };
    let mut uri = uri;
    let mut routed = gw.route_uri_in(&gw.view, &req.caller, &req.caller.grants, &uri);
    if routed.is_none() {
        match bare_name(gw, &gw.view, Kind::Resource, &uri, &req) {
            Bare::One(gateway_uri) => {
                uri = gateway_uri;
                routed = gw.route_uri_in(&gw.view, &req.caller, &req.caller.grants, &uri);
            }
            Bare::Ambiguous(candidates) => {
                refuse(gw, &req, &uri, "ambiguous_bare_name");
                return Reply::error(bare::ambiguous(Kind::Resource, &uri, &candidates));
            }
            Bare::Unknown => {}
        }
    }
    let Some((upstream, original)) = routed else {
        if let Some(e) = needs_scope(gw, &req, Kind::Resource, &uri) {
            return Reply::error(e);
        }
        refuse(gw, &req, &canonical_uri(&uri), "unknown_or_denied");
        return Reply::error(RpcError::invalid_params(format!("Resource not found: {uri}")).with_data(json!({ "uri": uri })));
    };
    // A skill's file is checked against what the skill's listing promised.
    let check = super::skills::promise(gw, &req, upstream, &uri).map(|p| super::skills::Check::new(&req, p));
    // Audited (and bound to any request state) under the URI that was decided on.
    let reply = forward(gw, upstream, req, Named::same(&canonical_uri(&uri)), Some(("uri", &original)), Vec::new(), None).await;
    match check {
        Some(check) => check.apply(gw, reply),
        None => reply,
    }
}

pub async fn complete(gw: &Served<'_>, mut req: Request) -> Reply {
    let Some(Ok(mut reference)) = req.params.parse::<RawObject>("ref") else {
        return Reply::error(RpcError::invalid_params("completion/complete needs params.ref"));
    };
    let kind = reference.parse::<String>("type").and_then(Result::ok).unwrap_or_default();
    let id_of = |i: usize| gw.upstream_id(i);
    let (key, target) = match kind.as_str() {
        "ref/prompt" => {
            let name = reference.parse::<String>("name").and_then(Result::ok).unwrap_or_default();
            ("name", view::find(&gw.view, Kind::Prompt, &name, &req.caller.grants, &id_of).map(|p| (p.upstream, p.original.clone(), name)))
        }
        "ref/resource" => {
            let uri = reference.parse::<String>("uri").and_then(Result::ok).unwrap_or_default();
            let template = view::find(&gw.view, Kind::Template, &uri, &req.caller.grants, &id_of).map(|t| (t.upstream, t.original.clone()));
            ("uri", template.or_else(|| gw.route_uri_in(&gw.view, &req.caller, &req.caller.grants, &uri)).map(|(up, orig)| (up, orig, uri)))
        }
        _ => return Reply::error(RpcError::invalid_params(format!("Unknown completion reference type: {kind:?}"))),
    };
    let Some((upstream, original, item)) = target else {
        return Reply::error(RpcError::invalid_params("Unknown completion reference"));
    };
    if reference.set_json(key, &original).is_err() || req.params.set_json("ref", &reference).is_err() {
        return Reply::error(RpcError::internal("cannot rewrite the completion reference"));
    }
    forward(gw, upstream, req, Named::same(&item), None, Vec::new(), None).await
}
