//! `subscriptions/listen` for modern clients (MCP 2026-07-28 `basic/patterns/subscriptions`), and following a resource for legacy
//! sessions (`resources/subscribe`). A listen request becomes one streamed reply: the
//! acknowledgement with the subset of the filter the gateway honours comes first, then every
//! change the caller may see (from the [`hub`](crate::hub)), each tagged with the
//! subscription id (the listen request's id), and, when the gateway shuts down, the final result.
//! The client ends it by closing the stream (HTTP) or cancelling the listen id (stdio). A
//! resource URI is honoured only when the caller may read it and its upstream can report
//! updates; the others are left out of the acknowledgement, exactly as for a URI that does not
//! exist.

use super::Request;
use super::Served;
use crate::hub::{Change, Filter, MAX_FOLLOWED, Subscription};
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::jsonrpc;
use mcpgate_protocol::keys;
use mcpgate_protocol::reply::{Event, EventStream, Outcome, Reply};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Whether the caller may follow `uri` and its upstream can report updates of it.
pub fn followable(gw: &Served<'_>, req: &Request, uri: &str) -> bool {
    match gw.route_uri_in(&gw.view, &req.caller, &req.caller.grants, uri) {
        Some((upstream, _)) => gw.upstream(upstream).is_some_and(|u| {
            let st = u.state();
            st.declares("resources", "subscribe")
        }),
        None => false,
    }
}

/// The legacy `resources/subscribe`: `{}` when the URI can be followed, else "Resource not found".
pub fn follow(gw: &Served<'_>, req: &Request) -> Reply {
    let uri = req.params.parse::<String>("uri").and_then(Result::ok).unwrap_or_default();
    if !followable(gw, req, &uri) {
        return Reply::error(RpcError::invalid_params(format!("Resource not found: {uri}")).with_data(json!({ "uri": uri })));
    }
    match Json::to_json(&json!({})) {
        Ok(r) => Reply::Single(Outcome::Result(r)),
        Err(e) => Reply::error(RpcError::internal(e.to_string())),
    }
}

pub fn listen(gw: &Served<'_>, req: Request) -> Reply {
    let asked: Map<String, Value> = match req.params.parse::<Map<String, Value>>("notifications") {
        Some(Ok(m)) => m,
        _ => return Reply::error(RpcError::invalid_params("subscriptions/listen needs params.notifications (an object)")),
    };
    let wants = |field: &str| asked.get(field).and_then(Value::as_bool) == Some(true);
    let filter = Filter {
        tools: wants("toolsListChanged"),
        prompts: wants("promptsListChanged") && super::discover::offered_to(gw, &req, "prompts"),
        resources: wants("resourcesListChanged") && super::discover::offered_to(gw, &req, "resources"),
    };
    let uris: BTreeSet<String> = match asked.get("resourceSubscriptions") {
        None | Some(Value::Null) => BTreeSet::new(),
        Some(Value::Array(list)) if list.len() > MAX_FOLLOWED => {
            return Reply::error(RpcError::invalid_params(format!("at most {MAX_FOLLOWED} resourceSubscriptions per subscription")));
        }
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).filter(|u| followable(gw, &req, u)).map(str::to_string).collect(),
        Some(_) => return Reply::error(RpcError::invalid_params("notifications.resourceSubscriptions must be an array of URIs")),
    };
    let mut honoured = Map::new();
    for (on, field) in
        [(filter.tools, "toolsListChanged"), (filter.prompts, "promptsListChanged"), (filter.resources, "resourcesListChanged")]
    {
        if on {
            honoured.insert(field.into(), Value::Bool(true));
        }
    }
    if !uris.is_empty() {
        honoured.insert("resourceSubscriptions".into(), json!(uris));
    }
    let ack = json!({ "_meta": { keys::SUBSCRIPTION_ID: id_value(&req.id) }, "notifications": honoured });
    let Some(sub) = gw.hub.subscribe(req.caller.clone(), filter, Arc::new(Mutex::new(uris))) else {
        return Reply::error(super::rate_limited(&format!("{} (change streams)", req.caller.id), Duration::from_secs(5)));
    };
    let Ok(ack) = Json::to_json(&ack) else { return Reply::error(RpcError::internal("cannot write the acknowledgement")) };
    let ack = Event::Notification(jsonrpc::notification_message("notifications/subscriptions/acknowledged", &ack));
    // No task and no channel per stream: the changes are read as the connection asks for the next
    // event, and a client that stops reading is closed by the connection's write deadline. At
    // shutdown the stream ends with its final result (the connection drains it).
    // The id is copied out of the request: a slice of it would keep the connection's whole read
    // buffer alive for as long as the stream lasts (hyper then reads into a second one).
    let relay = Relay { sub, id: req.id.detached(), closing: gw.closing.clone(), ack: Some(ack), over: false };
    Reply::Stream(EventStream::produced(futures_util::stream::unfold(relay, Relay::next)))
}

fn id_value(id: &Json) -> Value {
    serde_json::from_str(id.get()).unwrap_or(Value::Null)
}

/// One notification of a subscription.
fn message(method: &str, sub_id: &Json, extra: Option<(&str, &str)>) -> Vec<u8> {
    let mut params = json!({ "_meta": { keys::SUBSCRIPTION_ID: id_value(sub_id) } });
    if let Some((k, v)) = extra {
        params[k] = Value::String(v.to_string());
    }
    match Json::to_json(&params) {
        Ok(raw) => jsonrpc::notification_message(method, &raw),
        Err(_) => jsonrpc::bare_notification(method),
    }
}

/// A listen stream's state: the acknowledgement still to send, then the subscription's changes.
struct Relay {
    sub: Subscription,
    id: Json,
    closing: CancellationToken,
    ack: Option<Event>,
    over: bool,
}

impl Relay {
    async fn next(mut self) -> Option<(Event, Relay)> {
        if let Some(ack) = self.ack.take() {
            return Some((ack, self));
        }
        if self.over {
            return None;
        }
        loop {
            let change = tokio::select! {
                c = self.sub.next() => c,
                _ = self.closing.cancelled() => Change::Ended,
            };
            let msg = match change {
                Change::List(kind) => message(kind.list_changed_method(), &self.id, None),
                Change::Updated(uri) => message("notifications/resources/updated", &self.id, Some(("uri", &uri))),
                // A modern client retries with its request state; nothing to tell it.
                Change::Completed(_) => continue,
                Change::Ended => {
                    // Graceful end: the final result, after which the client may listen again.
                    self.over = true;
                    let done = json!({ "resultType": "complete", "_meta": { keys::SUBSCRIPTION_ID: id_value(&self.id) } });
                    let ev = match Json::to_json(&done) {
                        Ok(raw) => Event::Done(Outcome::Result(raw)),
                        Err(e) => Event::Done(Outcome::Error(RpcError::internal(e.to_string()))),
                    };
                    return Some((ev, self));
                }
                Change::TooSlow => {
                    tracing::warn!(subscription = %self.id.get(), "ending a listen stream whose client does not keep up");
                    self.over = true;
                    let err = RpcError::internal("The subscription ended: the client did not keep up");
                    return Some((Event::Done(Outcome::Error(err)), self));
                }
            };
            return Some((Event::Notification(msg), self));
        }
    }
}
