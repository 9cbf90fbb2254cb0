//! The last step of the call path (`dispatch/chain`): a request every step let go is sent to the
//! upstream that owns its item (through the caller's own connection where it has one, or to
//! consent), with the item's name or URI rewritten to the upstream's own and everything else
//! passed through; and the result side: recorded (audit, metrics), redacted, its links and tasks
//! mapped to the gateway's, a question to the client sealed into its request state. Also the
//! helpers the steps share: a request's string parameter, the scope challenge, the argument
//! check on the blocking pool.

use super::Served;
use super::{Request, request_state};
use crate::audit::{self, Subject};
use crate::gateway::Routed;
use crate::upstream::Call;
use mcpgate_model::catalog::args::{ArgCheck, Refusal as ArgRefusal, cost};
use mcpgate_model::catalog::view;
use mcpgate_model::catalog::{Kind, links, uris};
use mcpgate_protocol::Method;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::{Outcome, Reply};
use serde_json::Value;
use std::sync::Arc;
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

/// Who asked about what, as the call path resolved it, and what goes with it to the upstream.
pub(super) struct Named<'a> {
    /// The item as the caller named it, and as policy names it (the catalogue's name, whatever
    /// an endpoint presents), with the upstream that owns it.
    pub subject: &'a Arc<Subject>,
    /// The redaction step of the request, when detectors are configured.
    pub redact: Option<Arc<super::secrets::Redact>>,
    /// A call a person confirmed: the digest of what they confirmed.
    pub confirmed: Option<&'a str>,
}

/// The audit record of `req` about `subject` (under the catalogue's name, with the name the
/// endpoint presents).
fn entry(gw: &Served<'_>, req: &Request, subject: &Arc<Subject>, started: Instant) -> audit::Entry {
    audit::Entry {
        subject: subject.clone(),
        started,
        arguments: gw.config.audit_arguments.then(|| req.params.get("arguments").map(|a| a.get().to_string())).flatten(),
    }
}

/// Sends `req` to upstream `upstream` with member `key` rewritten to `original` (`rewrite`), and audits it.
pub(super) async fn forward(
    gw: &Served<'_>,
    upstream: usize,
    req: Request,
    named: Named<'_>,
    rewrite: Option<(&str, String)>,
    param_headers: Vec<(String, String)>,
    endpoint: Option<usize>,
) -> Reply {
    let subject = named.subject;
    let item = subject.shown();
    let up = match gw.upstream_for(&req.caller, upstream).await {
        Some(Routed::Up(up)) => up,
        Some(Routed::Consent) => return super::consent::needed(gw, &req, subject, gw.upstream_id(upstream)),
        Some(Routed::Failed(e)) => return Reply::error(e.into_rpc(gw.upstream_id(upstream))),
        None => return Reply::error(RpcError::internal("catalogue points at a missing upstream")),
    };
    crate::telemetry::routed(&tracing::Span::current(), req.method.as_str(), item, up.id());
    // The clock is read once: the audit's duration and the metrics' are the same.
    let started = Instant::now();
    let entry = entry(gw, &req, subject, started);
    // A request to a caller's own upstream is kept, to send the caller to consent if its token
    // is refused.
    let again = gw.is_personal(upstream).then(|| req.clone());
    let redact = named.redact;
    let redact_events = redact.clone();
    let mut params = req.params;
    params.remove("_meta");
    super::strip_input_response(&mut params, super::consent::INPUT_KEY);
    let max_age = gw.config.server.input_timeout;
    let after = After {
        sealer: gw.sealer.clone(),
        caller: req.caller.clone(),
        subject: subject.clone(),
        transport: match up.cfg.transport {
            mcpgate_config::TransportConfig::Stdio { .. } => crate::telemetry::Transport::Pipe,
            mcpgate_config::TransportConfig::Http { .. } | mcpgate_config::TransportConfig::OpenApi(_) => crate::telemetry::Transport::Tcp,
        },
        up: Arc::clone(&up),
        confirmed: named.confirmed.map(str::to_string),
        confirmations: gw.confirmations.clone(),
        // What a caller with narrowed grants reads must not be shared with callers policy denies.
        narrowed: !req.caller.grants.is_unrestricted(),
        metrics: gw.metrics.clone(),
        started,
        max_age,
        redact,
        pending: None,
    };
    let mut name = None;
    if let Some((key, original)) = rewrite {
        if params.set_json(key, &original).is_err() {
            return Reply::error(RpcError::internal("cannot rewrite the request"));
        }
        name = Some(original);
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
        return super::consent::needed(gw, req, &after.subject, after.subject.upstream());
    }
    let after = After { pending: Some(pending), ..after };
    super::secrets::events(reply.map_outcome(move |o| after.outcome(o)), redact_events)
}

/// The result side of a forwarded request: recorded (audit, metrics), redacted, its links and
/// tasks mapped to the gateway's, and a question to the client sealed into its request state.
struct After {
    sealer: Arc<mcpgate_model::token::Sealer>,
    caller: Arc<crate::auth::Principal>,
    /// Who asked about what (its method, the item by both names, the upstream's id).
    subject: Arc<Subject>,
    transport: crate::telemetry::Transport,
    /// The upstream (its prefix maps the result's links).
    up: Arc<crate::upstream::Upstream>,
    confirmed: Option<String>,
    confirmations: Arc<crate::gateway::onetime::OneTime>,
    narrowed: bool,
    metrics: Arc<crate::telemetry::Metrics>,
    started: Instant,
    max_age: std::time::Duration,
    redact: Option<Arc<super::secrets::Redact>>,
    pending: Option<Arc<audit::Pending>>,
}

impl After {
    fn outcome(&self, o: Outcome) -> Outcome {
        let method = &self.subject.method;
        // Described once, for the audit line and the metrics alike.
        let label = audit::outcome_label(&o);
        if let Some(pending) = &self.pending {
            pending.finish(&label);
        }
        let endpoint = self.caller.endpoint.as_deref().unwrap_or("-");
        let forwarded = crate::telemetry::semconv::Forwarded {
            method: method.as_str(),
            upstream: self.subject.upstream(),
            transport: self.transport,
            tool: (*method == Method::ToolsCall).then_some(self.subject.item.as_str()),
            error_type: None,
            took: self.started.elapsed(),
        };
        self.metrics.call(&forwarded, endpoint, &label);
        if *method == Method::ToolsCall {
            self.metrics.tool_call(&self.subject.item, self.caller.rules.first().map(String::as_str), &label);
        }
        // What the upstream sent passes the redaction step first, whatever it is.
        let o = match &self.redact {
            Some(step) => step.outcome(o),
            None => o,
        };
        if !request_state::asks_input(&o) {
            return match o {
                Outcome::Result(raw) => self.result(raw),
                other => other,
            };
        }
        if !method.may_ask_input() {
            return Outcome::Error(RpcError::internal(format!(
                "Upstream '{}' answered {method} with input_required, which only tools/call, prompts/get and \
                    resources/read may carry",
                self.subject.upstream()
            )));
        }
        let bind = request_state::Binding {
            caller: &self.caller,
            upstream: self.subject.upstream(),
            method: method.as_str(),
            item: self.subject.shown(),
            confirmed: self.confirmed.as_deref(),
        };
        let sealed = request_state::seal(&self.sealer, o, &bind);
        if self.confirmed.is_some() {
            super::confirm::issue_round(&self.confirmations, &sealed, self.max_age);
        }
        sealed
    }

    /// A result: links to the gateway's, a narrowed caller's resource private, a task sealed.
    fn result(&self, raw: Json) -> Outcome {
        let method = &self.subject.method;
        let raw = links::to_gateway(method.as_str(), &raw, &self.up.cfg.prefix).unwrap_or(raw);
        let raw = if self.narrowed && *method == Method::ResourcesRead { private_scope(&raw).unwrap_or(raw) } else { raw };
        if *method != Method::ToolsCall {
            return Outcome::Result(raw);
        }
        let created = super::tasks::Created { caller: &self.caller, upstream: self.subject.upstream(), tool: &self.subject.item };
        super::tasks::seal_created(&self.sealer, Outcome::Result(raw), &created)
    }
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
        return check.check_counted(args);
    }
    let (check, args) = (check.clone(), args.clone());
    let late = || ArgRefusal::TooCostly(format!("checking them did not finish within {} s", CHECK_DEADLINE.as_secs()));
    let run = async {
        let _permit = gw.ranking.clone().acquire_owned().await.map_err(|_| late())?;
        tokio::task::spawn_blocking(move || check.check(&args)).await.map_err(|_| late())?
    };
    tokio::time::timeout(CHECK_DEADLINE, run).await.unwrap_or_else(|_| Err(late()))
}

/// A URI in canonical form, for the decisions that name it (scopes, audit).
pub(super) fn canonical_uri(uri: &str) -> String {
    uris::canonical(uri).map_or_else(|_| uri.to_string(), |c| c.into_owned())
}
