//! Input requests for legacy clients (MCP 2026-07-28 `basic/patterns/mrtr`;
//! docs/input-requests.md). A 2026-07-28 server asks for user input
//! by answering `tools/call`, `prompts/get` or `resources/read` with an `input_required` result;
//! a legacy client only understands server-to-client requests. So for a legacy client the edge
//! turns every `inputRequests` entry into a real `elicitation/create`, `sampling/createMessage` or
//! `roots/list` request on the reply stream (POST SSE, or stdout for `mcpgate stdio`), waits for
//! the client's answers, and retries the original request with `inputResponses` and the
//! `requestState` it was given, untouched, for as many rounds as the server needs. The legacy
//! client sees an ordinary call that asked it a question.
//!
//! The ids of the requests sent to the client are the gateway's own (`mcpgate-input-<random>`),
//! unguessable; the client's answers come back through [`Waiting`], keyed by the client's
//! connection (its session, which only its own caller may use) and that id. At most
//! [`MAX_PER_ROUND`] questions per round and [`MAX_PER_SCOPE`] waiting per session; one deadline
//! covers a round.

use crate::dispatch::{BoxFuture, Request};
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::jsonrpc::{self, Message};
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::{Event, EventStream, Outcome, Reply};
use mcpgate_protocol::sync::lock;
use mcpgate_protocol::tasks::Background;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How many times one call may ask for input before the gateway gives up.
const MAX_ROUNDS: usize = 16;
/// Questions waiting for an answer, per replica, and per session.
const MAX_WAITING: usize = 10_000;
const MAX_PER_SCOPE: usize = 32;
/// Questions one round may ask.
const MAX_PER_ROUND: usize = 8;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A client's answer to one of the gateway's requests.
#[derive(Debug)]
pub enum Answer {
    Result(Json),
    Error(Json),
}

/// The questions sent to legacy clients that still wait for an answer.
#[derive(Default)]
pub struct Waiting {
    map: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
}

impl Waiting {
    fn await_answer(&self, key: String) -> Option<oneshot::Receiver<Answer>> {
        let mut m = lock(&self.map);
        m.retain(|_, tx| !tx.is_closed());
        let scope = key.split_once('/').map(|(s, _)| s).unwrap_or("");
        if m.len() >= MAX_WAITING || m.keys().filter(|k| k.split_once('/').is_some_and(|(s, _)| s == scope)).count() >= MAX_PER_SCOPE {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        m.insert(key, tx);
        Some(rx)
    }

    /// Hands a response the client sent to the question it answers; `false` if none waits.
    pub fn deliver(&self, scope: &str, msg: Message) -> bool {
        let Some(id) = msg.id.as_ref() else { return false };
        let Some(tx) = lock(&self.map).remove(&format!("{scope}/{}", id.get())) else { return false };
        let answer = match (msg.result, msg.error) {
            (Some(r), _) => Answer::Result(r),
            (None, Some(e)) => Answer::Error(e),
            (None, None) => return false,
        };
        tx.send(answer).is_ok()
    }
}

pub use mcpgate_protocol::may_ask_input as may_ask;

/// The questions of an `input_required` result, and the state to echo.
struct Asked {
    requests: Vec<(String, Json)>,
    state: Option<Json>,
}

fn asked(outcome: &Outcome) -> Option<Asked> {
    let Outcome::Result(raw) = outcome else { return None };
    let obj: RawObject = serde_json::from_str(raw.get()).ok()?;
    if obj.parse::<String>("resultType").and_then(Result::ok).as_deref() != Some("input_required") {
        return None;
    }
    let requests: RawObject = obj.parse("inputRequests").and_then(Result::ok).unwrap_or_default();
    Some(Asked {
        requests: requests.0.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        state: obj.get("requestState").map(|s| s.to_owned()),
    })
}

/// Runs `req`'s reply through as many input rounds as it needs; `scope` names the client's
/// connection in `waiting`. A reply that asks nothing is returned as it is.
/// Sends one retry of a bridged request down the rest of the request path.
pub type Retry = Arc<dyn Fn(Request) -> BoxFuture<'static, Reply> + Send + Sync>;

/// Where a legacy client's questions go, and how long it may take to answer a round.
pub struct Asking {
    pub waiting: Arc<Waiting>,
    /// The client's connection (its session), which keys its answers.
    pub scope: String,
    pub timeout: Duration,
    /// Owns the bridged exchange while it runs.
    pub tasks: Background,
}

/// The reply for a legacy client: a reply that asks for input becomes a stream that asks the
/// client (see the module comment), retries with its answers through `retry`, and ends with the
/// final outcome; any other reply passes.
pub fn bridge(retry: Retry, req: Request, reply: Reply, ask: Asking) -> Reply {
    if !req.method.may_ask_input() {
        return reply;
    }
    if let Reply::Single(o) = &reply
        && asked(o).is_none()
    {
        return reply;
    }
    let (tx, rx) = mpsc::channel(16);
    ask.tasks.clone().spawn(async move {
        let done = tokio::select! {
            done = rounds(retry, req, reply, &ask, &tx) => done,
            // The client went away: nobody is left to answer or to tell.
            _ = tx.closed() => return,
        };
        let _ = tx.send(Event::Done(done)).await;
    });
    Reply::Stream(EventStream::new(rx))
}

async fn rounds(retry: Retry, req: Request, mut reply: Reply, asking: &Asking, tx: &mpsc::Sender<Event>) -> Outcome {
    let (waiting, scope, timeout) = (&asking.waiting, asking.scope.as_str(), asking.timeout);
    for round in 0..=MAX_ROUNDS {
        let outcome = match reply {
            Reply::Single(o) => o,
            Reply::Stream(mut s) => loop {
                match s.next().await {
                    Some(Event::Notification(n)) => {
                        if tx.send(Event::Notification(n)).await.is_err() {
                            return Outcome::Error(RpcError::internal("the client went away"));
                        }
                    }
                    Some(Event::Done(o)) => break o,
                    Some(Event::Ask(_)) => continue,
                    None => break Outcome::Error(RpcError::internal("the reply stream ended without a response")),
                }
            },
        };
        let Some(asked) = asked(&outcome) else { return outcome };
        if round == MAX_ROUNDS {
            break;
        }
        let responses = match ask(asked.requests, waiting, scope, timeout, tx).await {
            Ok(r) => r,
            Err(e) => return Outcome::Error(e),
        };
        let mut params = req.params.clone();
        let encoded = params.set_json("inputResponses", &responses).map_err(|e| RpcError::internal(e.to_string()));
        if let Err(e) = encoded {
            return Outcome::Error(e);
        }
        match asked.state {
            Some(state) => params.set("requestState", state),
            None => {
                params.remove("requestState");
            }
        }
        let Ok(id) = Json::from_string(format!("\"mcpgate-retry-{}\"", NEXT_ID.fetch_add(1, Ordering::Relaxed))) else {
            return Outcome::Error(RpcError::internal("cannot make a request id"));
        };
        reply = retry(Request { id, params, ..req.clone() }).await;
    }
    Outcome::Error(RpcError::internal(format!("The server asked for input more than {MAX_ROUNDS} times")))
}

/// Sends each question to the client and collects the answers under their keys.
async fn ask(
    requests: Vec<(String, Json)>,
    waiting: &Waiting,
    scope: &str,
    timeout: Duration,
    tx: &mpsc::Sender<Event>,
) -> Result<RawObject, RpcError> {
    if requests.len() > MAX_PER_ROUND {
        return Err(RpcError::internal(format!(
            "The server asked for {} inputs at once; at most {MAX_PER_ROUND} are relayed",
            requests.len()
        )));
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pending = Vec::new();
    for (key, request) in requests {
        let ask: RawObject =
            serde_json::from_str(request.get()).map_err(|_| RpcError::internal(format!("input request {key} is not an object")))?;
        let method = ask.parse::<String>("method").and_then(Result::ok).unwrap_or_default();
        if !matches!(method.as_str(), "elicitation/create" | "sampling/createMessage" | "roots/list") {
            return Err(RpcError::internal(format!("The server asked for unsupported input {method:?}")));
        }
        // Unguessable, so no other client can answer it.
        let id = format!("\"mcpgate-input-{}\"", mcpgate_protocol::toolbox::random_hex(12));
        let rx = waiting.await_answer(format!("{scope}/{id}")).ok_or_else(|| RpcError::internal("Too many input requests are waiting"))?;
        let params = ask.get("params").map(|p| p.to_owned()).unwrap_or(Json::EMPTY_OBJECT);
        let message = jsonrpc::request_message(&id, &method, &params);
        tx.send(Event::Notification(message)).await.map_err(|_| RpcError::internal("the client went away"))?;
        pending.push((key, method, rx));
    }
    let mut responses = RawObject::default();
    for (key, method, rx) in pending {
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(Answer::Result(r))) => responses.set(&key, r),
            Ok(Ok(Answer::Error(e))) => {
                return Err(RpcError::internal(format!("The client refused the {method} request: {}", e.get())));
            }
            _ => return Err(RpcError::internal(format!("The client did not answer the {method} request in time"))),
        }
    }
    Ok(responses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_required_results_are_recognised() {
        let raw = Json::from_string(
            r#"{"resultType":"input_required","inputRequests":{"k":{"method":"roots/list"}},"requestState":"s1"}"#.into(),
        )
        .unwrap();
        let a = asked(&Outcome::Result(raw)).unwrap();
        assert_eq!(a.requests[0].0, "k");
        assert_eq!(a.state.unwrap().get(), r#""s1""#);
        let done = Json::from_string(r#"{"resultType":"complete","content":[]}"#.into()).unwrap();
        assert!(asked(&Outcome::Result(done)).is_none());
    }

    #[tokio::test]
    async fn answers_reach_the_question_they_answer() {
        let w = Waiting::default();
        let rx = w.await_answer(r#"s1/"mcpgate-input-1""#.into()).unwrap();
        let other = Message::parse(br#"{"jsonrpc":"2.0","id":"mcpgate-input-1","result":{}}"#).unwrap();
        assert!(!w.deliver("s2", other), "another session cannot answer it");
        let msg = Message::parse(br#"{"jsonrpc":"2.0","id":"mcpgate-input-1","result":{"action":"accept"}}"#).unwrap();
        assert!(w.deliver("s1", msg));
        assert!(matches!(rx.await, Ok(Answer::Result(r)) if r.get() == r#"{"action":"accept"}"#));
    }
}
