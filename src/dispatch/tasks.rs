//! The tasks extension (`io.modelcontextprotocol/tasks`, brief §7.10) through the gateway. An
//! upstream that answers `tools/call` with a task (`resultType: "task"`) gets its `taskId`
//! replaced by the gateway's: a token sealed with the token key that names the upstream, the
//! upstream's task id and the caller, so any replica can route `tasks/get`, `tasks/update` and
//! `tasks/cancel` back (with `Mcp-Name` = the upstream's task id), and no other caller can use
//! it (another caller's or a forged id answers like an unknown one). A client that did not
//! declare the extension gets -32021 for the tasks methods, and upstreams that do not declare it
//! are not told the client did (`upstream::modern`), so they never answer with a task.

use super::Request;
use crate::auth::Principal;
use crate::catalog::links;
use crate::gateway::Gateway;
use crate::protocol::errors::{MISSING_CAPABILITY, RpcError};
use crate::protocol::json::Json;
use crate::protocol::keys;
use crate::protocol::rawobj::RawObject;
use crate::reply::{Outcome, Reply};
use crate::token::Sealer;
use serde::{Deserialize, Serialize};
use serde_json::json;

pub use crate::protocol::TASKS_EXTENSION as EXTENSION;

const PURPOSE: &str = "mcpgate/task/v1";

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
pub fn seal_created(sealer: &Sealer, outcome: Outcome, caller: &Principal, upstream: &str) -> Outcome {
    let Outcome::Result(raw) = &outcome else { return outcome };
    if !raw.get().contains("\"task\"") {
        return outcome;
    }
    let Ok(mut obj) = RawObject::from_json(raw) else { return outcome };
    if obj.parse::<String>("resultType").and_then(Result::ok).as_deref() != Some("task") {
        return outcome;
    }
    let Some(Ok(task_id)) = obj.parse::<String>("taskId") else {
        return Outcome::Error(RpcError::internal(format!("Upstream '{upstream}' created a task without a string taskId")));
    };
    let sealed = Sealed { u: upstream.to_string(), t: task_id, c: caller.id.clone(), r: caller.rules.clone() };
    match sealer.seal(PURPOSE, &sealed).map_err(|e| e.to_string()).and_then(|id| obj.set_json("taskId", &id).map_err(|e| e.to_string())) {
        Ok(()) => Outcome::Result(obj.to_json()),
        Err(e) => Outcome::Error(RpcError::internal(format!("cannot issue a task id: {e}"))),
    }
}

/// `tasks/get`, `tasks/update` and `tasks/cancel`: routed to the upstream that created the task,
/// with its own task id, and answered with the gateway's.
pub async fn forward(gw: &Gateway, req: Request) -> Reply {
    if !declared(&req) {
        return Reply::error(missing());
    }
    let task_id = match req.params.parse::<String>("taskId") {
        Some(Ok(t)) => t,
        _ => return Reply::error(RpcError::invalid_params(format!("{} needs params.taskId (a string)", req.method))),
    };
    let Some((sealed, _)) = gw.sealer.open_aged::<Sealed>(PURPOSE, &task_id) else {
        return Reply::error(unknown(&task_id));
    };
    if sealed.c != req.caller.id || sealed.r != req.caller.rules {
        return Reply::error(unknown(&task_id));
    }
    let Some(up) = gw.upstreams().iter().find(|u| u.id() == sealed.u && !u.is_retired()).cloned() else {
        return Reply::error(unknown(&task_id));
    };
    let prefix = up.cfg.prefix.clone();
    let reply = super::forward::forward(gw, up.index, req, &task_id, Some(("taskId", &sealed.t)), Vec::new(), None).await;
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

/// The client's capabilities for an upstream: without the extension when the upstream does not
/// declare it.
pub fn strip_undeclared(meta: &mut serde_json::Map<String, serde_json::Value>, upstream_declares: bool) {
    if upstream_declares {
        return;
    }
    if let Some(ext) = meta.get_mut(keys::CLIENT_CAPABILITIES).and_then(|c| c.get_mut("extensions")).and_then(|e| e.as_object_mut()) {
        ext.remove(EXTENSION);
    }
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
        let Outcome::Result(out) = seal_created(&sealer, created, &caller("alice"), "jobs") else { panic!() };
        let obj = RawObject::from_json(&out).unwrap();
        let id: String = obj.parse("taskId").unwrap().unwrap();
        assert_ne!(id, "abc");
        let sealed: Sealed = sealer.open_aged(PURPOSE, &id).unwrap().0;
        assert_eq!((sealed.u.as_str(), sealed.t.as_str(), sealed.c.as_str()), ("jobs", "abc", "alice"));
        assert_eq!(obj.get("status").unwrap().get(), r#""working""#, "the rest is kept");
        let plain = Outcome::Result(Json::from_string(r#"{"resultType":"complete","content":[]}"#.into()).unwrap());
        assert!(matches!(seal_created(&sealer, plain, &caller("alice"), "jobs"), Outcome::Result(r) if r.get().contains("complete")));
    }

    #[test]
    fn upstreams_without_the_extension_are_not_told_about_it() {
        let mut meta = serde_json::Map::new();
        meta.insert(keys::CLIENT_CAPABILITIES.into(), json!({ "extensions": { EXTENSION: {}, "other": {} } }));
        strip_undeclared(&mut meta, true);
        assert!(meta[keys::CLIENT_CAPABILITIES]["extensions"].get(EXTENSION).is_some());
        strip_undeclared(&mut meta, false);
        assert!(meta[keys::CLIENT_CAPABILITIES]["extensions"].get(EXTENSION).is_none());
        assert!(meta[keys::CLIENT_CAPABILITIES]["extensions"].get("other").is_some());
    }
}
