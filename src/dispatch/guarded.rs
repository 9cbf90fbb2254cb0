//! The guard points of the call path (`[[guard]]`, `gateway::guards`): `request` is the chain's
//! `Guard` step (a tool call's or prompt get's arguments, after the policy and the confirmation,
//! before the quota and the forward); `result` and `input` read the final outcome of every
//! forwarded request, and each question an upstream streams to a legacy client, before they
//! leave. A denied result is withheld (a tool error for a tool call, an error otherwise), a
//! denied question ends the call the same way; a replacement passes the secrets step again.
//! With no guard at a point, nothing is read and a stream is passed as it is.

use super::refusal::Refusal;
use super::{Served, envelope, request_state, secrets::Redact};
use crate::audit::Subject;
use crate::gateway::guards::{Checked, Context, GuardSet};
use mcpgate_model::policy::guards::Point;
use mcpgate_protocol::Method;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::read;
use mcpgate_protocol::reply::{Event, EventStream, Outcome, Reply};
use serde_json::{Value, json};
use std::sync::Arc;

/// The `request` point on the `arguments` of a request about `who`: `Ok(Some(new))` when a
/// guard replaced them.
pub async fn request(gw: &Served<'_>, who: &Subject, arguments: &Value) -> Result<Option<Value>, Refusal> {
    let (set, cx) = gw.guards();
    if !set.guards(Point::Request, &who.item) {
        return Ok(None);
    }
    let content = json!({ "arguments": arguments });
    match set.check(&cx, Point::Request, who, Ok(content)).await {
        Checked::Pass(None) => Ok(None),
        Checked::Pass(Some(mut new)) => Ok(Some(new["arguments"].take())),
        Checked::Denied { guard, reason, .. } => Err(Refusal::ByGuard { guard, reason, tool: who.method == Method::ToolsCall }),
    }
}

/// The `result` and `input` points on a forwarded request's reply (`who`: shared, since a
/// stream's result comes after the handler returned).
pub async fn results(gw: &Served<'_>, who: Arc<Subject>, redact: Option<Arc<Redact>>, reply: Reply) -> Reply {
    let (set, cx) = gw.guards();
    if !set.guards(Point::Result, &who.item) && !set.guards(Point::Input, &who.item) {
        return reply;
    }
    let mut s = match reply {
        Reply::Single(o) => return Reply::Single(outcome(&set, &cx, &who, redact.as_deref(), o).await),
        Reply::Stream(s) => s,
    };
    // A stream's events are relayed by a task that checks its questions and its final outcome.
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        while let Some(ev) = s.next().await {
            let ev = match ev {
                Event::Done(o) => Event::Done(outcome(&set, &cx, &who, redact.as_deref(), o).await),
                Event::Ask(bytes) => question(&set, &cx, &who, bytes).await,
                Event::Notification(bytes) => match set.notification(&cx, Point::Result, &who, bytes) {
                    Some(bytes) => Event::Notification(bytes),
                    None => continue,
                },
            };
            if tx.send(ev).await.is_err() {
                break;
            }
        }
    });
    Reply::Stream(EventStream::new(rx).with_asks())
}

/// A final outcome, checked at `input` when it asks the person something, else at `result`. A
/// guard reads it as `protocol::read` reads it (what cannot be read is withheld), without the
/// sealed `requestState` of a question (the gateway's, not the person's), and a replacement is
/// completed to the result its method answers, or withheld.
async fn outcome(set: &GuardSet, cx: &Context, who: &Subject, redact: Option<&Redact>, o: Outcome) -> Outcome {
    let point = if request_state::asks_input(&o) { Point::Input } else { Point::Result };
    if !set.guards(point, &who.item) {
        return o;
    }
    let (content, original) = match &o {
        Outcome::Result(raw) => {
            let read = read::text_value(raw.get());
            (read.clone().map(without_state), read.ok())
        }
        Outcome::UpstreamError(raw) => (read::text_value(raw.get()).map(|e| json!({ "error": e })), None),
        Outcome::Error(e) => (Ok(json!({ "error": { "code": e.code, "message": e.message, "data": e.data } })), None),
    };
    let new = match set.check(cx, point, who, content).await {
        Checked::Pass(None) => return o,
        Checked::Pass(Some(new)) => new,
        Checked::Denied { guard, reason, .. } => return withheld(who, &guard, &reason),
    };
    let replaced = match new.get("error") {
        Some(e) => Outcome::Error(RpcError {
            code: e["code"].as_i64().unwrap_or(-32603),
            message: e["message"].as_str().unwrap_or("Upstream error").to_string(),
            data: e.get("data").cloned().filter(|d| !d.is_null()),
            ..RpcError::internal("")
        }),
        None => match envelope::complete(&who.method, original.as_ref(), new).map(|new| Json::to_json(&new)) {
            Ok(Ok(raw)) => Outcome::Result(raw),
            Ok(Err(_)) => return withheld(who, "-", "the replacement could not be written"),
            Err(why) => return withheld(who, "-", &why.to_string()),
        },
    };
    // What a guard wrote passes the secrets step like what the upstream wrote.
    match redact {
        Some(r) => r.outcome(replaced),
        None => replaced,
    }
}

/// A result as a guard reads it: without the sealed `requestState` of a question.
fn without_state(mut result: Value) -> Value {
    if let Some(map) = result.as_object_mut() {
        map.remove("requestState");
    }
    result
}

/// A question an upstream streams to a legacy client, checked at `input`.
async fn question(set: &GuardSet, cx: &Context, who: &Subject, bytes: Vec<u8>) -> Event {
    if !set.guards(Point::Input, &who.item) {
        return Event::Ask(bytes);
    }
    match set.check(cx, Point::Input, who, read::value(&bytes)).await {
        Checked::Pass(None) => Event::Ask(bytes),
        Checked::Pass(Some(new)) if new.get("method").is_some_and(Value::is_string) => match serde_json::to_vec(&new) {
            Ok(b) => Event::Ask(b),
            Err(_) => Event::Done(withheld(who, "-", "the replacement could not be written")),
        },
        Checked::Pass(Some(_)) => Event::Done(withheld(who, "-", "the replacement is not a request")),
        Checked::Denied { guard, reason, .. } => Event::Done(withheld(who, &guard, &reason)),
    }
}

/// What the client gets instead of what a guard withheld.
fn withheld(who: &Subject, guard: &str, reason: &str) -> Outcome {
    let text = format!("The gateway's guard '{guard}' withheld the answer of {}: {reason}", who.item);
    match who.method {
        Method::ToolsCall => super::tool_text(&text, true),
        _ => Outcome::Error(RpcError::internal(text)),
    }
}
