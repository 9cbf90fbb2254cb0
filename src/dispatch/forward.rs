//! The methods that act on one item and are forwarded to the upstream that owns it: `tools/call`
//! (mirrored headers checked, `Mcp-Param-*` rebuilt from the upstream's schema), `prompts/get`,
//! `resources/read` (URIs mapped both ways) and `completion/complete` (routed by its `ref`).
//! Every lookup goes through the caller's view, so an item the caller may not use answers
//! exactly like a missing one; every forwarded request is audited. The item's name or URI is
//! rewritten to the upstream's own; everything else passes through.

use super::Served;
use super::bare::{self, Bare};
use super::decide::{Subject, decide};
use super::refusal::{self, Refusal};
use super::{Request, state};
use crate::audit;
use crate::catalog::args::{ArgCheck, Refusal as ArgRefusal, cost};
use crate::catalog::view;
use crate::catalog::{Kind, links, uris};
use crate::gateway::Routed;
use crate::protocol::Method;
use crate::protocol::errors::RpcError;
use crate::protocol::json::Json;
use crate::protocol::rawobj::RawObject;
use crate::reply::{Outcome, Reply};
use crate::upstream::Call;
use serde_json::Value;
use std::time::Instant;

pub(super) fn string_param(req: &Request, key: &str) -> Result<String, RpcError> {
    match req.params.parse::<String>(key) {
        Some(Ok(n)) => Ok(n),
        _ => Err(RpcError::invalid_params(format!("{} needs params.{key} (a string)", req.method))),
    }
}

/// The 403 challenge for an item the caller's grants allow but its token lacks the scopes for
/// (so that it can ask for them), or `None` when that is not why the item is out of view. An
/// item the grants deny still answers exactly like a missing one. The caller audits it
/// (`Refusal::InsufficientScope`).
pub(super) fn needs_scope(gw: &Served<'_>, req: &Request, kind: Kind, name: &str) -> Option<RpcError> {
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

/// The audit record of `req`, under the catalogue's name, whatever name the endpoint presents.
fn entry(gw: &Served<'_>, req: &Request, named: Named<'_>, upstream: &str) -> audit::Entry {
    audit::Entry {
        caller: req.caller.id.clone(),
        endpoint: req.caller.endpoint.as_deref().unwrap_or("-").to_string(),
        method: req.method.to_string(),
        item: named.policy.to_string(),
        presented: (named.shown != named.policy).then(|| named.shown.to_string()),
        upstream: upstream.to_string(),
        started: Instant::now(),
        arguments: gw.config.audit_arguments.then(|| req.params.get("arguments").map(|a| a.get().to_string())).flatten(),
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
    let entry = entry(gw, &req, named, up.id());
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
    let after = After {
        sealer: gw.sealer.clone(),
        caller: req.caller.clone(),
        upstream_id: up.id().to_string(),
        method: req.method.clone(),
        item: item.to_string(),
        policy_name: named.policy.to_string(),
        prefix: up.cfg.prefix.clone(),
        confirmed: named.confirmed.map(str::to_string),
        confirmations: gw.confirmations.clone(),
        // What a caller with narrowed grants reads must not be shared with callers policy denies.
        narrowed: !req.caller.grants.is_unrestricted(),
        metrics: gw.metrics.clone(),
        started: Instant::now(),
        max_age,
        redact,
        pending: None,
    };
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
    if let (Reply::Single(o), Some(req)) = (&reply, &again)
        && super::consent::is_needed(o)
    {
        pending.finish(&audit::outcome_label(o));
        return super::consent::needed(gw, req, &after.upstream_id, &after.item);
    }
    let after = After { pending: Some(pending), ..after };
    super::secrets::events(reply.map_outcome(move |o| after.outcome(o)), redact_events)
}

/// The result side of a forwarded request: recorded (audit, metrics), redacted, its links and
/// tasks mapped to the gateway's, and a question to the client sealed into its request state.
struct After {
    sealer: std::sync::Arc<crate::token::Sealer>,
    caller: std::sync::Arc<crate::auth::Principal>,
    upstream_id: String,
    method: Method,
    item: String,
    policy_name: String,
    prefix: String,
    confirmed: Option<String>,
    confirmations: std::sync::Arc<crate::gateway::onetime::OneTime>,
    narrowed: bool,
    metrics: std::sync::Arc<crate::telemetry::Metrics>,
    started: Instant,
    max_age: std::time::Duration,
    redact: Option<std::sync::Arc<super::secrets::Redact>>,
    pending: Option<std::sync::Arc<audit::Pending>>,
}

impl After {
    fn outcome(&self, o: Outcome) -> Outcome {
        let method = &self.method;
        // Described once, for the audit line and the metrics alike.
        let label = audit::outcome_label(&o);
        if let Some(pending) = &self.pending {
            pending.finish(&label);
        }
        let endpoint = self.caller.endpoint.as_deref().unwrap_or("-");
        self.metrics.call(method.as_str(), &self.upstream_id, endpoint, &label, self.started.elapsed());
        if *method == Method::ToolsCall {
            self.metrics.tool_call(&self.policy_name, self.caller.rules.first().map(String::as_str), &label);
        }
        // What the upstream sent passes the redaction step first, whatever it is.
        let o = match &self.redact {
            Some(step) => step.outcome(o),
            None => o,
        };
        if !state::asks_input(&o) {
            return match o {
                Outcome::Result(raw) => self.result(raw),
                other => other,
            };
        }
        if !method.may_ask_input() {
            return Outcome::Error(RpcError::internal(format!(
                "Upstream '{}' answered {method} with input_required, which only tools/call, prompts/get and \
                    resources/read may carry",
                self.upstream_id
            )));
        }
        let bind = state::Binding {
            caller: &self.caller,
            upstream: &self.upstream_id,
            method: method.as_str(),
            item: &self.item,
            confirmed: self.confirmed.as_deref(),
        };
        let sealed = state::seal(&self.sealer, o, &bind);
        if self.confirmed.is_some() {
            super::confirm::issue_round(&self.confirmations, &sealed, self.max_age);
        }
        sealed
    }

    /// A result: links to the gateway's, a narrowed caller's resource private, a task sealed.
    fn result(&self, raw: Json) -> Outcome {
        let method = &self.method;
        let raw = links::to_gateway(method.as_str(), &raw, &self.prefix).unwrap_or(raw);
        let raw = if self.narrowed && *method == Method::ResourcesRead { private_scope(&raw).unwrap_or(raw) } else { raw };
        if *method != Method::ToolsCall {
            return Outcome::Result(raw);
        }
        let created = super::tasks::Created { caller: &self.caller, upstream: &self.upstream_id, tool: &self.policy_name };
        super::tasks::seal_created(&self.sealer, Outcome::Result(raw), &created)
    }
}

pub async fn get_prompt(gw: &Served<'_>, req: Request) -> Reply {
    let name = match string_param(&req, "name") {
        Ok(n) => n,
        Err(e) => return Reply::error(e),
    };
    let id_of = |i: usize| gw.upstream_id(i);
    let Some(prompt) = view::find(&gw.view, Kind::Prompt, &name, &req.caller.grants, &id_of) else {
        if let Some(e) = needs_scope(gw, &req, Kind::Prompt, &name) {
            return refusal::answer(gw, &req, &name, None, Refusal::InsufficientScope(e));
        }
        return Reply::error(RpcError::invalid_params(format!("Unknown prompt: {name}")));
    };
    let (upstream, original) = (prompt.upstream, prompt.original.clone());
    let subject =
        Subject { kind: Kind::Prompt, name: prompt.policy_name(), upstream: gw.upstream_id(upstream), json: Some(prompt.json.get()) };
    if let Err(why) = decide(gw, &req, &subject, None) {
        return refusal::answer(gw, &req, &name, None, why);
    }
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
pub(super) async fn check_arguments(gw: &Served<'_>, check: &ArgCheck, args: &Value) -> Result<(), ArgRefusal> {
    if check.work(args)? <= cost::INLINE_WORK {
        return check.check(args);
    }
    let (check, args) = (check.clone(), args.clone());
    let late = || ArgRefusal::TooCostly(format!("checking them did not finish within {} s", CHECK_DEADLINE.as_secs()));
    let run = async {
        let _permit = gw.ranking.clone().acquire_owned().await.map_err(|_| late())?;
        tokio::task::spawn_blocking(move || check.check(&args)).await.map_err(|_| late())?
    };
    tokio::time::timeout(CHECK_DEADLINE, run).await.unwrap_or_else(|_| Err(late()))
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
                return refusal::answer(gw, &req, &uri, None, Refusal::AmbiguousBareName { kind: Kind::Resource, candidates });
            }
            Bare::Unknown => {}
        }
    }
    let Some((upstream, original)) = routed else {
        if let Some(e) = needs_scope(gw, &req, Kind::Resource, &uri) {
            return refusal::answer(gw, &req, &uri, None, Refusal::InsufficientScope(e));
        }
        return refusal::answer(gw, &req, &canonical_uri(&uri), None, Refusal::UnknownResource(uri));
    };
    let canonical = canonical_uri(&uri);
    let subject = Subject { kind: Kind::Resource, name: &canonical, upstream: gw.upstream_id(upstream), json: None };
    if let Err(why) = decide(gw, &req, &subject, None) {
        return refusal::answer(gw, &req, &canonical, None, why);
    }
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
    let item_kind = if key == "name" { Kind::Prompt } else { Kind::Resource };
    let subject = Subject { kind: item_kind, name: &item, upstream: gw.upstream_id(upstream), json: None };
    if let Err(why) = decide(gw, &req, &subject, None) {
        return refusal::answer(gw, &req, &item, None, why);
    }
    if reference.set_json(key, &original).is_err() || req.params.set_json("ref", &reference).is_err() {
        return Reply::error(RpcError::internal("cannot rewrite the completion reference"));
    }
    forward(gw, upstream, req, Named::same(&item), None, Vec::new(), None).await
}
