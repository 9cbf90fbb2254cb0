//! The call path as declared chains of named steps: every request that acts on one item
//! (`tools/call`, `prompts/get`, `resources/read`, `completion/complete`, `skills/get`,
//! `resources/directory/read`, and the tasks methods) goes through the chain of its method
//! ([`chain_of`]), and every decision on it is a step there. Each step is one function with one
//! job that either lets the request go on (leaving what it produced in the [`Call`] it works on)
//! or stops it with one typed [`Refusal`], which `dispatch/refusal.rs` maps, once, to the wire
//! and the audit. Adding a step is one line in a chain (and its function). After the last step
//! the request is forwarded (`forward::forward`), where the result side (redaction, recording)
//! runs. The tool steps live in `tool.rs`, how each method finds its item in `items.rs`.

mod items;
mod tool;

use super::forward::{Named, forward};
use super::guarded;
use super::readers::{Facts, Reader, Readers};
use super::refusal::{self, Refusal};
use super::{Request, Served, request_state, skills};
use crate::audit::Subject;
use mcpgate_model::catalog::Kind;
use mcpgate_model::catalog::merge::Entry;
use mcpgate_model::policy::Item;
use mcpgate_protocol::Method;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::reply::Reply;
use mcpgate_protocol::{read, xheader};
use serde_json::Value;

/// The named steps of the call path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The item in the caller's view: catalogue, bare names, consent, pins, scopes (a task: its
    /// id, and whether the caller may still use the tool that made it).
    Resolve,
    /// The caller's `[[rate_limit]]`s.
    Admit,
    /// The arguments' shape, a virtual endpoint's fixed arguments, `Mcp-Param-*` headers.
    Arguments,
    /// The policy's rules over what only the call tells: its arguments, the request, the clock.
    Decide,
    /// The arguments against the upstream's `inputSchema`.
    Validate,
    /// A person's confirmation, when a `[[confirm]]` or `confirm` rule names the call.
    Confirm,
    /// The `requestState` of a retry: issued here, to this caller, for this request, in time.
    State,
    /// The `[[guard]]`s of the `request` point, on the arguments (`dispatch/guarded.rs`).
    Guard,
    /// The caller's `[[quota]]`s: taken only by a call that is about to be forwarded.
    Quota,
    /// The upstream's endpoint for the call's mirrored values.
    Route,
}

use Step::*;

/// The chain of `tools/call`, in order. Then `forward`.
pub const TOOLS_CALL: &[Step] = &[Resolve, Admit, Arguments, Decide, Validate, Confirm, State, Guard, Quota, Route];
/// `prompts/get` (its arguments pass the request guards too).
pub const PROMPTS_GET: &[Step] = &[Resolve, Decide, State, Guard];
/// `resources/read` (a URI the policy decided on; its contents pass the result guards).
pub const RESOURCES_READ: &[Step] = &[Resolve, Decide, State];
/// `completion/complete`, `skills/get` and `resources/directory/read`.
pub const LOOKUP: &[Step] = &[Resolve, Decide, State];
/// `tasks/get`, `tasks/update`, `tasks/cancel`: the task was decided when its tool was called;
/// resolving it decides again whether the caller may still use that tool.
pub const TASKS: &[Step] = &[Resolve, State];

/// The chain of a method, if it acts on one item.
pub fn chain_of(method: &Method) -> Option<&'static [Step]> {
    Some(match method {
        Method::ToolsCall => TOOLS_CALL,
        Method::PromptsGet => PROMPTS_GET,
        Method::ResourcesRead => RESOURCES_READ,
        Method::CompletionComplete | Method::SkillsGet | Method::ResourcesDirectoryRead => LOOKUP,
        Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => TASKS,
        _ => return None,
    })
}

/// The item a request acts on, once resolved (its names are the [`Call`]'s subject's).
pub(super) struct Target<'g> {
    pub kind: Kind,
    pub upstream: usize,
    /// The member of `params` set to the upstream's own name, and that name.
    pub rewrite: Option<(&'static str, String)>,
    /// The catalogue entry (its definition, the tool's argument check and headers).
    pub entry: Option<&'g Entry>,
}

/// What is done with the reply once forwarded.
pub(super) enum Then {
    Relay,
    /// A skill file's read is checked against its listing.
    SkillFile(skills::Check),
    /// A task's id is the gateway's again.
    TaskId {
        id: String,
        prefix: String,
    },
}

/// One request on its way through its chain: the request, and what the steps produced.
pub(super) struct Call<'g> {
    pub req: Request,
    /// An upstream's id by its index, as catalogue lookups take it.
    pub id_of: &'g (dyn Fn(usize) -> &'g str + Sync),
    /// Who asked about what, built once for the whole call: the caller, the endpoint, the method,
    /// and the item: as the caller named it until `Resolve` finds it (a tool's gateway name once
    /// a bare name is resolved; a URI in canonical form), then under the catalogue's name, with
    /// the name the endpoint presents and the upstream. The audit, the guards, the secrets and
    /// skills checks read it; request states are bound to [`Subject::shown`].
    pub subject: Subject,
    pub target: Option<Target<'g>>,
    /// The arguments as every decider reads them ([`Call::arguments`]): `None` while nothing
    /// has read them (they pass through unread when nothing does).
    pub args: Option<Value>,
    /// The digest of what a person confirmed.
    pub confirmed: Option<String>,
    /// The `[[rule]]` asking a person to confirm the call.
    pub confirm_rule: Option<String>,
    pub endpoint: Option<usize>,
    pub then: Then,
    /// Who reads the call ([`Readers`]): every decider until the item is resolved, then those
    /// configured for it. Every step that could read the arguments or the result asks it.
    pub readers: Readers,
}

impl<'g> Call<'g> {
    /// The item found: `target`, under its catalogue name `catalogue` when that is not the name
    /// as asked.
    pub fn resolved(&mut self, target: Target<'g>, catalogue: Option<&str>) {
        self.subject.resolve(target.kind, (self.id_of)(target.upstream), catalogue);
        self.target = Some(target);
    }

    fn target(&self) -> Result<&Target<'g>, Refusal> {
        self.target
            .as_ref()
            .ok_or_else(|| Refusal::Malformed(RpcError::internal("a step of the call path ran before the item was resolved")))
    }

    /// The tool a `tools/call` resolved to.
    pub fn tool(&self) -> Result<&'g Entry, Refusal> {
        self.target()?.entry.ok_or_else(|| Refusal::Malformed(RpcError::internal("a tool step ran on no tool")))
    }

    /// The arguments as every decider reads them (rules, validation, the request guards, mirrored
    /// headers): read once, strictly (`protocol::read`), from `params.arguments` (absent or
    /// `null`: `{}`); what cannot be read refuses the call.
    pub fn arguments(&mut self) -> Result<&Value, Refusal> {
        if self.args.is_none() {
            let read = match self.req.params.get("arguments") {
                Some(raw) if raw.get() != "null" => {
                    read::text_value(raw.get()).map_err(|why| Refusal::Unreadable { what: "arguments", why })?
                }
                _ => Value::Object(Default::default()),
            };
            self.args = Some(read);
        }
        Ok(self.args.get_or_insert(Value::Null))
    }
}

/// Serves a request that acts on one item through its method's chain, then forwards it.
pub async fn serve(gw: &Served<'_>, req: Request) -> Reply {
    serve_as(gw, req, None).await.0
}

/// [`serve`], for the inner call of code mode's program `program` when given (every record of
/// the call names it); with the audit's label of the refusal that stopped the call, if one did.
pub async fn serve_as(gw: &Served<'_>, req: Request, program: Option<std::sync::Arc<str>>) -> (Reply, Option<&'static str>) {
    let Some(chain) = chain_of(&req.method) else {
        return (Reply::error(RpcError::method_not_found(req.method.as_str())), None);
    };
    let id_of = |i: usize| gw.upstream_id(i);
    let mut subject = Subject::asked(&req.caller, req.method.clone(), String::new());
    subject.program = program;
    subject.request = req.request_id.clone();
    let mut call = Call {
        req,
        id_of: &id_of,
        subject,
        target: None,
        args: None,
        confirmed: None,
        confirm_rule: None,
        endpoint: None,
        then: Then::Relay,
        readers: Readers::all(),
    };
    for step in chain {
        if let Err(why) = run(*step, gw, &mut call).await {
            let label = why.audit_reason();
            return (refusal::answer(gw, &call.req, &call.subject, why), label);
        }
        if *step == Resolve {
            call.readers = readers_of(gw, &call);
        }
    }
    // The arguments were read only if a decider needed them (a call nothing reads passes as the
    // client wrote it).
    debug_assert!(call.args.is_none() || call.readers.arguments(), "arguments read with no reader: {:?}", call.readers);
    let Some(target) = call.target else { return (Reply::error(RpcError::internal("the call path resolved no item")), None) };
    let headers = match target.entry {
        Some(tool) if target.kind == Kind::Tool => xheader::outbound(&tool.headers, call.args.as_ref().unwrap_or(&Value::Null)),
        _ => Vec::new(),
    };
    // The upstream's own name moves into the request (not copied).
    let rewrite = target.rewrite;
    // From here on the subject is shared: the audit record, the redaction step and the result
    // guards check the result after the handler returned.
    let subject = std::sync::Arc::new(call.subject);
    let redact = if call.readers.reads(Reader::Secrets) { super::secrets::Redact::new(gw, &subject) } else { None };
    let named = Named { subject: &subject, redact: redact.clone(), confirmed: call.confirmed.as_deref() };
    let reply = forward(gw, target.upstream, call.req, named, rewrite, headers, call.endpoint).await;
    let reply = match call.then {
        Then::Relay => reply,
        Then::SkillFile(check) => check.apply(gw, &subject, reply),
        Then::TaskId { id, prefix } => super::tasks::with_gateway_ids(reply, id, prefix),
    };
    // The result guards, when there are any (a replacement passes the redaction step too).
    if !call.readers.reads(Reader::ResultGuards) {
        return (reply, None);
    }
    (guarded::results(gw, subject, redact, reply).await, None)
}

/// The request guards on the arguments as they will be forwarded; a replacement is forwarded
/// instead.
async fn guard(gw: &Served<'_>, call: &mut Call<'_>) -> Result<(), Refusal> {
    if !call.readers.reads(Reader::RequestGuards) {
        return Ok(());
    }
    call.target()?;
    call.arguments()?;
    let args = call.args.as_ref().unwrap_or(&Value::Null);
    if let Some(new) = guarded::request(gw, &call.subject, args).await? {
        if call.req.params.set_json("arguments", &new).is_err() {
            return Err(Refusal::Malformed(RpcError::internal("cannot set the arguments a guard wrote")));
        }
        call.args = Some(new);
    }
    Ok(())
}

async fn run<'g>(step: Step, gw: &'g Served<'_>, call: &mut Call<'g>) -> Result<(), Refusal> {
    match step {
        Resolve => items::resolve(gw, call),
        Admit => tool::admit(gw, call).await,
        Arguments => tool::arguments(call),
        Decide => decide(gw, call),
        Validate => tool::validate(gw, call).await,
        Confirm => tool::confirm(gw, call).await,
        State => open_state(gw, call),
        Guard => guard(gw, call).await,
        Quota => tool::quota(gw, call).await,
        Route => tool::route(gw, call),
    }
}

/// The rules that need the call decide it (a tool's arguments as they will be forwarded).
fn decide(gw: &Served<'_>, call: &mut Call<'_>) -> Result<(), Refusal> {
    if call.readers.reads(Reader::Rules) {
        call.arguments()?;
    }
    let target = call.target()?;
    let json = target.entry.filter(|_| matches!(target.kind, Kind::Tool | Kind::Prompt | Kind::Skill)).map(|e| e.json.get());
    let item = Item { kind: target.kind, name: &call.subject.item, upstream: call.subject.upstream(), json };
    call.confirm_rule = super::decide::decide(gw, &call.req, &item, call.args.as_ref())?;
    Ok(())
}

/// Who reads a call whose item is resolved: the deciders configured for it (see `readers`).
fn readers_of(gw: &Served<'_>, call: &Call<'_>) -> Readers {
    let grants = &call.req.caller.grants;
    let tool = call.target.as_ref().filter(|t| t.kind == Kind::Tool).and_then(|t| t.entry);
    let guards = !gw.config.guards.is_empty();
    Readers::of(&Facts {
        rules_read_arguments: grants.decides_calls() && grants.reads_arguments(),
        validates: tool.is_some_and(|t| gw.upstream(t.upstream).is_some_and(|u| u.cfg.validate_arguments)),
        confirms: !gw.config.confirms.is_empty() || grants.may_confirm(),
        request_guards: guards,
        headers: tool.is_some_and(|t| !t.headers.is_empty()),
        fixed: tool.is_some_and(|t| !t.fixed.is_empty()),
        param_headers: call.req.param_headers.as_ref().is_some_and(|h| !h.is_empty()),
        secrets: !gw.config.secrets.is_empty(),
        result_guards: guards,
    })
}

/// A retry's `requestState` is opened: the upstream's own state goes on, or the request stops.
fn open_state(gw: &Served<'_>, call: &mut Call<'_>) -> Result<(), Refusal> {
    let upstream = gw.upstream_id(call.target()?.upstream);
    let req = &mut call.req;
    let bind =
        request_state::Binding { caller: &req.caller, upstream, method: req.method.as_str(), item: call.subject.shown(), confirmed: None };
    request_state::open(&gw.sealer, &mut req.params, &bind, gw.config.server.input_timeout).map_err(Refusal::InvalidRequestState)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(chain: &[Step], step: Step) -> usize {
        chain.iter().position(|s| *s == step).unwrap_or(usize::MAX)
    }

    #[test]
    fn every_step_runs_once_in_the_declared_order() {
        let t = |s| at(TOOLS_CALL, s);
        assert_eq!(TOOLS_CALL, &[Resolve, Admit, Arguments, Decide, Validate, Confirm, State, Guard, Quota, Route]);
        // The item is known before anything is decided on it, in every chain.
        for chain in [TOOLS_CALL, PROMPTS_GET, RESOURCES_READ, LOOKUP, TASKS] {
            assert_eq!(at(chain, Resolve), 0);
            let mut seen = chain.to_vec();
            seen.dedup();
            assert_eq!(seen.len(), chain.len(), "a step runs once");
        }
        // A call refused for its arguments, its state, or one a person has not confirmed, spends
        // no quota.
        assert!(t(Arguments) < t(Quota) && t(Validate) < t(Quota) && t(Confirm) < t(Quota) && t(State) < t(Quota));
        // Guards see what a person confirmed and the policy allowed, and a call they deny spends
        // no quota; the quota is last but the route.
        assert!(t(Decide) < t(Guard) && t(Confirm) < t(Guard) && t(Guard) < t(Quota));
        // The rules see the arguments as they will be forwarded, and a refused call asks no one.
        assert!(t(Arguments) < t(Decide) && t(Decide) < t(Confirm) && t(Decide) < t(Quota));
        // A rate limit is checked before the arguments are read; the route is the last step.
        assert!(t(Admit) < t(Arguments));
        assert_eq!(t(Route), TOOLS_CALL.len() - 1);
        // Every method that names an item is decided by the rules.
        for method in [Method::ToolsCall, Method::PromptsGet, Method::ResourcesRead, Method::CompletionComplete, Method::SkillsGet] {
            assert!(chain_of(&method).is_some_and(|c| c.contains(&Decide)), "{method}");
        }
        assert!(chain_of(&Method::ToolsList).is_none());
    }
}
