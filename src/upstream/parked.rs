//! A legacy upstream that asks its client for input during a call (`elicitation/create`,
//! `sampling/createMessage`, `roots/list` on the call's stream), when the caller speaks the
//! modern protocol, which has no server-to-client requests (docs/input-requests.md; the spec defines no bridging). The call is kept open
//! and parked here; the caller gets an `input_required` result whose `requestState` names the
//! parked call (the dispatcher seals it for that caller); the retry brings the answer, which goes
//! to the upstream as the response to its request, and the call continues: to its result, or to
//! the next question. A parked call lives in this replica only (a retry that reaches another
//! replica gets a clear error) and for `server.input_timeout`; then it is dropped, which cancels
//! the upstream request.

use super::{Transport, Upstream, UpstreamError};
use mcpgate_protocol::json::Json;
use mcpgate_protocol::jsonrpc::Message;
use mcpgate_protocol::keys;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::{Event, EventStream, Outcome, Reply};
use mcpgate_protocol::sync::lock;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::mpsc;
use tokio::time::Instant;

const MARK: &str = "mcpgate-parked:";
/// The key of the one input request an `input_required` result of a parked call carries.
const KEY: &str = "input";

/// What a parked call needs to go on.
pub(super) struct Entry {
    stream: EventStream,
    /// The id of the upstream's request, to answer it.
    ask_id: Json,
    pub(super) endpoint: Option<usize>,
    /// The legacy session the call runs in, and its version.
    session: Option<http::HeaderValue>,
    version: String,
}

#[derive(Default)]
pub(super) struct Parked {
    map: Mutex<HashMap<String, Entry>>,
}

impl Parked {
    pub(super) fn take(&self, id: &str) -> Option<Entry> {
        lock(&self.map).remove(id)
    }

    /// Drops every parked call (the upstream was removed), which cancels them upstream.
    pub(super) fn clear(&self) {
        lock(&self.map).clear();
    }
}

/// Calls one upstream may keep parked at once.
const MAX_PARKED: usize = 1024;

/// The upstream requests a caller can answer, from the capabilities in its `_meta`.
pub(super) fn answerable(meta: &Map<String, Value>) -> Vec<String> {
    let caps = meta.get(keys::CLIENT_CAPABILITIES);
    let has = |c: &str| caps.and_then(|v| v.get(c)).is_some_and(|v| !v.is_null());
    [("elicitation", "elicitation/create"), ("sampling", "sampling/createMessage"), ("roots", "roots/list")]
        .into_iter()
        .filter(|(c, _)| has(c))
        .map(|(_, m)| m.to_string())
        .collect()
}

/// The parked call a retry's `requestState` names.
pub(super) fn parked_id(params: &RawObject) -> Option<String> {
    params.parse::<String>("requestState").and_then(Result::ok)?.strip_prefix(MARK).map(str::to_string)
}

impl Upstream {
    /// Watches a legacy call's reply: the first request the upstream sends parks the call and
    /// ends the reply with an `input_required` result.
    pub(super) fn watch(&self, reply: Reply, endpoint: Option<usize>, session: Option<http::HeaderValue>, version: String) -> Reply {
        let Reply::Stream(inner) = reply else { return reply };
        let mut inner = inner.with_asks();
        let (tx, rx) = mpsc::channel(16);
        let parked = self.parked.clone();
        let (tasks, ttl, id) = (self.tasks.clone(), self.input_timeout, self.id().to_string());
        self.tasks.spawn(async move {
            loop {
                let ev = tokio::select! {
                    ev = inner.next() => ev,
                    _ = tx.closed() => return,
                };
                let ask = match ev {
                    Some(Event::Ask(bytes)) => bytes,
                    Some(other) => {
                        let done = matches!(other, Event::Done(_));
                        if tx.send(other).await.is_err() || done {
                            return;
                        }
                        continue;
                    }
                    None => return,
                };
                let Ok(msg) = Message::parse(&ask) else { continue };
                let (Some(ask_id), Some(method)) = (msg.id.clone(), msg.method.clone()) else { continue };
                let params: Value = msg.params.as_ref().and_then(|p| serde_json::from_str(p.get()).ok()).unwrap_or(json!({}));
                let key = mcpgate_protocol::toolbox::random_hex(16);
                let result = json!({
                    "resultType": "input_required",
                    "inputRequests": { KEY: { "method": method, "params": params } },
                    "requestState": format!("{MARK}{key}"),
                });
                let Ok(raw) = Json::to_json(&result) else { return };
                let full = {
                    let mut map = lock(&parked.map);
                    let full = map.len() >= MAX_PARKED;
                    if !full {
                        map.insert(key.clone(), Entry { stream: inner, ask_id, endpoint, session, version });
                    }
                    full
                };
                if full {
                    let busy = mcpgate_protocol::errors::RpcError::internal("Too many calls are waiting for their callers' input");
                    let _ = tx.send(Event::Done(Outcome::Error(busy))).await;
                    return;
                }
                tracing::debug!(upstream = %id, %method, "parked a call that asks its caller for input");
                let parked = parked.clone();
                tasks.spawn(async move {
                    tokio::time::sleep(ttl).await;
                    if parked.take(&key).is_some() {
                        tracing::info!(upstream = %id, "dropped a parked call whose caller did not answer in time");
                    }
                });
                let _ = tx.send(Event::Done(Outcome::Result(raw))).await;
                return;
            }
        });
        Reply::Stream(EventStream::new(rx))
    }

    /// Goes on with a parked call: its answer goes to the upstream, and the call is watched again.
    pub(super) async fn resume(&self, id: &str, params: &RawObject, on_behalf_of: &[String]) -> Result<Reply, UpstreamError> {
        // A malformed retry leaves the parked call waiting for a good one.
        let responses: RawObject = params.parse("inputResponses").and_then(Result::ok).unwrap_or_default();
        let answer = responses.get(KEY).ok_or_else(|| UpstreamError::Protocol(format!("the retry carries no inputResponses.{KEY}")))?;
        let entry = self.parked.take(id).ok_or(UpstreamError::NotParked)?;
        let body = format!(r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#, entry.ask_id.get(), answer.get()).into_bytes();
        match &self.transport {
            Transport::Http(p) => {
                let env = super::outbound::Envelope {
                    version: super::outbound::version_header(&entry.version),
                    session: entry.session.clone(),
                    mcp: None,
                    on_behalf_of: on_behalf_of.to_vec(),
                    traceparent: None,
                };
                p.at(entry.endpoint).notify(body, &env).await?
            }
            Transport::Stdio(t) => t.write(body).await?,
            Transport::Rest(_) => return Err(UpstreamError::NotParked),
        }
        let late = UpstreamError::Timeout { after: self.cfg.timeout }.into_rpc(self.id());
        let stream = entry.stream.with_deadline(Instant::now() + self.cfg.timeout, late);
        Ok(self.watch(Reply::Stream(stream), entry.endpoint, entry.session, entry.version).settle().await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_answer_what_they_declared() {
        let mut meta = Map::new();
        meta.insert(keys::CLIENT_CAPABILITIES.into(), json!({ "elicitation": {}, "roots": { "listChanged": true } }));
        assert_eq!(answerable(&meta), vec!["elicitation/create".to_string(), "roots/list".to_string()]);
        assert!(answerable(&Map::new()).is_empty());
        let p: RawObject = serde_json::from_str(r#"{"requestState":"mcpgate-parked:ab12"}"#).unwrap();
        assert_eq!(parked_id(&p).as_deref(), Some("ab12"));
        let p: RawObject = serde_json::from_str(r#"{"requestState":"upstream-state"}"#).unwrap();
        assert_eq!(parked_id(&p), None);
    }
}
