//! The tasks extension (`io.modelcontextprotocol/tasks`, the `modelcontextprotocol/ext-tasks` specification) through the gateway. An
//! upstream that answers `tools/call` with a task (`resultType: "task"`) gets its `taskId`
//! replaced by the gateway's: a token sealed with the token key that names the upstream, the
//! upstream's task id, the caller, the endpoint it came through, the tool (by its catalogue name)
//! and how long the id lives, so any replica can route `tasks/get`, `tasks/update` and
//! `tasks/cancel` back (with `Mcp-Name` = the upstream's task id). An id is honoured only for the
//! caller it was issued to, on the endpoint it was issued on, while it is young enough (the
//! task's own `ttlMs`, at most [`MAX_AGE`]), and while the caller may still use the tool that
//! created it (policy and the endpoint's selection are decided again, so a reload that denies
//! the upstream ends access to its tasks); anything else answers like an unknown id. A client
//! that did not declare the extension gets -32021 for the tasks methods, and upstreams that do
//! not declare it are not told the client did (the table in `protocol::extensions`, applied by
//! `upstream::modern`), so they never answer with a task; nor are legacy clients offered it.

use super::Request;
use super::Served;
use super::refusal::Refusal;
use crate::auth::Principal;
use mcpgate_model::catalog::Kind;
use mcpgate_model::catalog::links;
use mcpgate_model::policy::{Item, allows};
use mcpgate_model::token::Sealer;
use mcpgate_protocol::errors::{MISSING_CAPABILITY, RpcError};
use mcpgate_protocol::json::Json;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::{Outcome, Reply};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Duration;

pub use mcpgate_protocol::TASKS_EXTENSION as EXTENSION;

const PURPOSE: &str = "mcpgate/task/v1";

/// How long a gateway task id lives at most (a task that announces a shorter `ttlMs` ends sooner).
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// What a gateway task id holds.
#[derive(Serialize, Deserialize)]
struct Sealed {
    /// The upstream's id.
    u: String,
    /// The upstream's own task id.
    t: String,
    /// The caller it was created for, and the `[[caller]]` rules that matched then.
    c: String,
    r: Vec<String>,
    /// The endpoint path it was created on (`None`: the root).
    #[serde(default)]
    e: Option<String>,
    /// The tool that created it, by its catalogue name.
    #[serde(default)]
    n: String,
    /// How long it lives, in seconds.
    #[serde(default)]
    x: u64,
}

/// Who created a task, where, and with which tool.
pub struct Created<'a> {
    pub caller: &'a Principal,
    pub upstream: &'a str,
    /// The tool's catalogue name (what policy decides on).
    pub tool: &'a str,
}

/// Whether the request's client declared the extension.
pub fn declared(req: &Request) -> bool {
    req.meta.client_capabilities().and_then(|c| c.get("extensions")).and_then(|e| e.get(EXTENSION)).is_some_and(|v| !v.is_null())
}

fn missing() -> RpcError {
    RpcError::new(MISSING_CAPABILITY, format!("The tasks methods need the client capability extensions[\"{EXTENSION}\"]"))
        .with_data(json!({ "requiredCapabilities": { "extensions": { EXTENSION: {} } } }))
}

fn unknown(task_id: &str) -> RpcError {
    RpcError::invalid_params("Unknown taskId").with_data(json!({ "taskId": task_id }))
}

/// A task-creating result (`resultType: "task"`) with the upstream's task id replaced by the
/// gateway's; any other outcome passes.
pub fn seal_created(sealer: &Sealer, outcome: Outcome, created: &Created) -> Outcome {
    let Outcome::Result(raw) = &outcome else { return outcome };
    if !raw.get().contains("\"task\"") {
        return outcome;
    }
    let Ok(mut obj) = RawObject::from_json(raw) else { return outcome };
    if obj.parse::<String>("resultType").and_then(Result::ok).as_deref() != Some("task") {
        return outcome;
    }
    let upstream = created.upstream;
    let Some(Ok(task_id)) = obj.parse::<String>("taskId") else {
        return Outcome::Error(RpcError::internal(format!("Upstream '{upstream}' created a task without a string taskId")));
    };
    let ttl = obj.parse::<u64>("ttlMs").and_then(Result::ok).map(Duration::from_millis);
    let lives = ttl.map_or(MAX_AGE, |t| t.min(MAX_AGE));
    let sealed = Sealed {
        u: upstream.to_string(),
        t: task_id,
        c: created.caller.id.clone(),
        r: created.caller.rules.clone(),
        e: created.caller.endpoint.as_deref().map(str::to_string),
        n: created.tool.to_string(),
        // Whole seconds, rounded up, so a task is never cut short.
        x: lives.as_millis().div_ceil(1000) as u64,
    };
    match sealer.seal(PURPOSE, &sealed).map_err(|e| e.to_string()).and_then(|id| obj.set_json("taskId", &id).map_err(|e| e.to_string())) {
        Ok(()) => Outcome::Result(obj.to_json()),
        Err(e) => Outcome::Error(RpcError::internal(format!("cannot issue a task id: {e}"))),
    }
}

/// Whether an id of age `age` still lives.
fn alive(sealed: &Sealed, age: Duration) -> bool {
    age <= Duration::from_secs(sealed.x)
}

/// Why a task id is not honoured (for the audit; the client hears "Unknown taskId" whatever it is).
fn refusal(gw: &Served<'_>, req: &Request, sealed: &Sealed, age: Duration) -> Option<&'static str> {
    if !alive(sealed, age) {
        return Some("unknown_task/expired");
    }
    if sealed.c != req.caller.id || sealed.r != req.caller.rules {
        return Some("unknown_task/another_caller");
    }
    if sealed.e.as_deref() != req.caller.endpoint.as_deref() {
        return Some("unknown_task/another_endpoint");
    }
    let item = Item { kind: Kind::Tool, name: &sealed.n, upstream: &sealed.u, json: None };
    let view = &gw.view;
    if !allows(&req.caller.grants, &item) || view.selection.as_ref().is_some_and(|s| !allows(s, &item)) {
        return Some("unknown_task/tool_denied");
    }
    None
}

/// A task the caller may reach: the upstream that created it, its own id for it, and the
/// gateway's.
pub struct Task {
    pub upstream: usize,
    pub own: String,
    pub id: String,
    pub prefix: String,
}

/// The task `tasks/get`, `tasks/update` and `tasks/cancel` name, routed back to the upstream that
/// created it (the chain's `Resolve` step for them; answered with the gateway's id by
/// [`with_gateway_ids`]).
pub fn resolve(gw: &Served<'_>, req: &Request) -> Result<Task, Refusal> {
    if !declared(req) {
        return Err(Refusal::Malformed(missing()));
    }
    let task_id = match req.params.parse::<String>("taskId") {
        Some(Ok(t)) => t,
        _ => return Err(Refusal::Malformed(RpcError::invalid_params(format!("{} needs params.taskId (a string)", req.method)))),
    };
    let refuse = |why: &'static str| Refusal::UnknownTask { why, error: unknown(&task_id) };
    let Some((sealed, age)) = gw.sealer.open_aged::<Sealed>(PURPOSE, &task_id) else {
        return Err(refuse("unknown_task/not_issued_here"));
    };
    if let Some(why) = refusal(gw, req, &sealed, age) {
        return Err(refuse(why));
    }
    let Some(up) = gw.upstreams().iter().find(|u| u.id() == sealed.u && !u.is_retired()).cloned() else {
        return Err(refuse("unknown_task/upstream_removed"));
    };
    Ok(Task { upstream: up.index, own: sealed.t, id: task_id, prefix: up.cfg.prefix.clone() })
}

/// A tasks method's reply with the gateway's task id in place of the upstream's.
pub fn with_gateway_ids(reply: Reply, task_id: String, prefix: String) -> Reply {
    reply.map_outcome(move |o| match o {
        Outcome::Result(raw) => Outcome::Result(with_gateway_id(&raw, &task_id, &prefix).unwrap_or(raw)),
        other => other,
    })
}

/// A tasks method's result with the gateway's task id, and the resource links of a finished
/// task's tool result in the gateway's URI space.
fn with_gateway_id(raw: &Json, task_id: &str, prefix: &str) -> Option<Json> {
    let mut obj = RawObject::from_json(raw).ok()?;
    if obj.get("taskId").is_some() {
        obj.set_json("taskId", task_id).ok()?;
    }
    if let Some(result) = obj.get("result").and_then(|r| links::to_gateway("tools/call", r, prefix)) {
        obj.set("result", result);
    }
    Some(obj.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn caller(id: &str) -> Arc<Principal> {
        let mut p = (*Principal::anonymous()).clone();
        p.id = id.into();
        Arc::new(p)
    }

    #[test]
    fn task_ids_are_sealed_for_their_caller_and_upstream() {
        let sealer = Sealer::random().unwrap();
        let created = Outcome::Result(Json::from_string(r#"{"resultType":"task","taskId":"abc","status":"working"}"#.into()).unwrap());
        let alice = caller("alice");
        let made = Created { caller: &alice, upstream: "jobs", tool: "jobs__run" };
        let Outcome::Result(out) = seal_created(&sealer, created, &made) else { panic!() };
        let obj = RawObject::from_json(&out).unwrap();
        let id: String = obj.parse("taskId").unwrap().unwrap();
        assert_ne!(id, "abc");
        let sealed: Sealed = sealer.open_aged(PURPOSE, &id).unwrap().0;
        assert_eq!((sealed.u.as_str(), sealed.t.as_str(), sealed.c.as_str(), sealed.n.as_str()), ("jobs", "abc", "alice", "jobs__run"));
        assert_eq!((sealed.e, sealed.x), (None, MAX_AGE.as_secs()), "no ttlMs: the longest life");
        assert_eq!(obj.get("status").unwrap().get(), r#""working""#, "the rest is kept");
        let plain = Outcome::Result(Json::from_string(r#"{"resultType":"complete","content":[]}"#.into()).unwrap());
        assert!(matches!(seal_created(&sealer, plain, &made), Outcome::Result(r) if r.get().contains("complete")));
        let short = Outcome::Result(Json::from_string(r#"{"resultType":"task","taskId":"t2","ttlMs":1500}"#.into()).unwrap());
        let at_dev = alice.clone().at(Some("/mcp/dev"));
        let made = Created { caller: &at_dev, upstream: "jobs", tool: "jobs__run" };
        let Outcome::Result(out) = seal_created(&sealer, short, &made) else { panic!() };
        let id: String = RawObject::from_json(&out).unwrap().parse("taskId").unwrap().unwrap();
        let sealed: Sealed = sealer.open_aged(PURPOSE, &id).unwrap().0;
        assert_eq!((sealed.e.as_deref(), sealed.x), (Some("/mcp/dev"), 2), "bound to its endpoint, living as long as the task");
        assert!(alive(&sealed, Duration::from_secs(2)) && !alive(&sealed, Duration::from_millis(2001)));
        let old: Sealed = serde_json::from_str(r#"{"u":"jobs","t":"abc","c":"alice","r":[]}"#).unwrap();
        assert!(!alive(&old, Duration::from_secs(1)), "an id issued before ids expired names no lifetime: it is not honoured");
    }
}
