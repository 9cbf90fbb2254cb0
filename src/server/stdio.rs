//! Serving one client over stdin/stdout (newline-delimited JSON-RPC), in either era: a request
//! carrying modern `_meta` is served statelessly (`subscriptions/listen` included, cancelled by
//! its id); an `initialize` opens a legacy session for this process (then `ping`,
//! `logging/setLevel`, `resources/subscribe` and the change notifications work as legacy clients
//! expect). stdout carries protocol messages only, written by one writer task; requests run
//! concurrently; `notifications/cancelled` cancels the named request (and its upstream call). At
//! EOF the in-flight requests are finished before the server returns. The local client is
//! trusted: it is served as the anonymous caller, without authentication.

use super::bridge::Waiting;
use super::era::Era;
use super::legacy::{self, Action, Session};
use super::stack::{self, Client};
use super::{modern, render};
use crate::auth::Principal;
use crate::dispatch::{Request, Service};
use crate::hub::{Filter, UriSet};
use crate::protocol::errors::RpcError;
use crate::protocol::json::{Json, Rope};
use crate::protocol::jsonrpc::{self, Kind as MsgKind, Message};
use crate::reply::{Event, Reply};
use crate::sync::lock;
use crate::tasks::Background;
use bytes::Bytes;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::sync::CancellationToken;

const MAX_LINE: usize = 64 * 1024 * 1024;

/// The one connection of `mcpgate stdio`, as input requests name it.
const STDIO_SCOPE: &str = "stdio";

/// Requests in flight by id: their cancellation token, and whether they are listen streams
/// (which only end when cancelled).
type Inflight = Arc<Mutex<HashMap<String, (CancellationToken, bool)>>>;

/// The legacy session of this stdio connection, once `initialize` arrived.
#[derive(Default)]
struct Conn {
    session: Option<Session>,
    level: Option<String>,
    follows: UriSet,
    /// Input requests sent to the (legacy) client that wait for its answers.
    waiting: Arc<Waiting>,
}

pub async fn serve(
    svc: Arc<dyn Service>,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> std::io::Result<()> {
    serve_as(svc, Principal::anonymous(), input, output).await
}

/// [`serve`] for `caller` (the local user, through the root or a virtual server).
pub async fn serve_as(
    svc: Arc<dyn Service>,
    caller: Arc<Principal>,
    input: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin + Send + 'static,
) -> std::io::Result<()> {
    let (out_tx, mut out_rx) = mpsc::channel::<Rope>(256);
    let writer = tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            let mut line = msg.one_line().into_vec();
            line.push(b'\n');
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let inflight: Inflight = Arc::default();
    // Owns what runs beside the requests: bridged legacy calls, and (its child) the relay of
    // changes, which ends as soon as the client is gone.
    let owner = Background::new();
    let relays = owner.child();
    let mut tasks = tokio::task::JoinSet::new();
    let mut conn = Conn::default();
    let mut lines = FramedRead::new(input, LinesCodec::new_with_max_length(MAX_LINE));
    while let Some(line) = lines.next().await {
        // Reap finished requests as we go, so a long session does not accumulate them.
        while tasks.try_join_next().is_some() {}
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                let _ = out_tx
                    .send(jsonrpc::error_message(None, &RpcError::invalid_request(format!("unreadable input line: {e}"))).into())
                    .await;
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let msg = match Message::parse_bytes(&Bytes::from(line.into_bytes())) {
            Ok(m) => m,
            Err(e) => {
                let _ = out_tx.send(jsonrpc::error_message(None, &e).into()).await;
                continue;
            }
        };
        let kind = match msg.kind() {
            Ok(k) => k,
            Err(e) => {
                let _ = out_tx.send(jsonrpc::error_message(msg.id.as_ref().filter(|i| jsonrpc::valid_id(i).is_ok()), &e).into()).await;
                continue;
            }
        };
        match kind {
            MsgKind::Response => {
                if !conn.waiting.deliver(STDIO_SCOPE, msg) {
                    tracing::debug!("a response to no question of the gateway's");
                }
            }
            MsgKind::Notification => {
                if msg.method.as_deref() == Some("notifications/cancelled") {
                    cancel(&inflight, &msg);
                }
            }
            MsgKind::Request => {
                let id = msg.id.clone();
                let era = super::era::classify_message(super::era::BodyFacts::of(&msg));
                let request = match (era, &conn.session) {
                    (Era::Modern, _) => modern::to_request(msg, None, caller.clone()),
                    (Era::Legacy, None) if msg.method.as_deref() == Some("initialize") => {
                        match legacy::handshake(svc.as_ref(), &msg, "stdio".into(), caller.clone()).await {
                            Ok((result, session)) => {
                                let _ = out_tx.send(jsonrpc::result_message(msg.id.as_ref().unwrap_or(&Json::NULL), &result)).await;
                                conn.session = Some(session);
                                relay_changes(svc.as_ref(), caller.clone(), out_tx.clone(), conn.follows.clone(), &relays);
                            }
                            Err(e) => {
                                let _ = out_tx.send(jsonrpc::error_message(id.as_ref(), &e).into()).await;
                            }
                        }
                        continue;
                    }
                    (Era::Legacy, Some(session)) => match legacy::convert(session, conn.level.as_deref(), msg, caller.clone()) {
                        Ok(Action::Forward(r)) => Ok(r),
                        Ok(action @ (Action::Follow(..) | Action::Unfollow(_))) => {
                            let rid = id.clone().unwrap_or(Json::NULL);
                            let client = Client::Legacy { waiting: conn.waiting.clone(), scope: STDIO_SCOPE.into() };
                            let serve = |req| stack::serve(svc.clone(), &owner, client, req);
                            if let Ok(reply) = legacy::follow(svc.as_ref(), &conn.follows, action, serve).await {
                                let _ = out_tx.send(render::outcome_message(&rid, &legacy::downgrade(reply.outcome().await)).1).await;
                            }
                            continue;
                        }
                        Ok(answered) => {
                            if let Action::SetLevel(l) = &answered {
                                conn.level = Some(l.clone());
                            }
                            let result = answered.answer().unwrap_or(Json::NULL);
                            let _ = out_tx.send(jsonrpc::result_message(id.as_ref().unwrap_or(&Json::NULL), &result)).await;
                            continue;
                        }
                        Err(e) => Err(e),
                    },
                    (Era::Legacy, None) => Err(RpcError::invalid_request(
                        "send initialize first (a legacy client), or give every request the modern _meta (a 2026-07-28 client)",
                    )),
                };
                match request {
                    // The reply's shape follows the request's era, not the connection's.
                    Ok(r) => {
                        let client = match era {
                            Era::Legacy => Client::Legacy { waiting: conn.waiting.clone(), scope: STDIO_SCOPE.into() },
                            Era::Modern => Client::Modern,
                        };
                        let exchange = Exchange { svc: svc.clone(), owner: owner.clone(), client, tx: out_tx.clone() };
                        spawn(&mut tasks, &inflight, exchange, r)
                    }
                    Err(e) => {
                        let _ = out_tx.send(jsonrpc::error_message(id.as_ref(), &e).into()).await;
                    }
                }
            }
        }
    }
    // The client is gone: its listen streams end (other requests are finished first).
    for (token, listen) in lock(&inflight).values() {
        if *listen {
            token.cancel();
        }
    }
    relays.stop();
    while tasks.join_next().await.is_some() {}
    owner.stop();
    drop(out_tx);
    let _ = writer.await;
    Ok(())
}

fn cancel(inflight: &Inflight, msg: &Message) {
    let target =
        msg.params.as_ref().and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok()).map(|v| v["requestId"].to_string());
    if let Some((token, _)) = target.and_then(|t| lock(inflight).remove(&t)) {
        token.cancel();
    }
}

/// What one request of the connection needs: the service, the owner of what its reply runs on
/// its own, who the client is, and where its messages go.
struct Exchange {
    svc: Arc<dyn Service>,
    owner: Background,
    client: Client,
    tx: mpsc::Sender<Rope>,
}

/// Runs one request; its cancellation token is registered before it starts, so a cancel can
/// never miss it and a finished request never lingers in the map.
fn spawn(tasks: &mut tokio::task::JoinSet<()>, inflight: &Inflight, exchange: Exchange, request: Request) {
    let Exchange { svc, owner, client, tx } = exchange;
    let key = request.id.get().to_string();
    let token = CancellationToken::new();
    {
        let mut m = lock(inflight);
        if m.contains_key(&key) {
            // Ids must be unique among requests in flight: a duplicate would make cancellation
            // hit the wrong request.
            let e = RpcError::invalid_request(format!("request id {key} is already in flight"));
            let _ = tx.try_send(jsonrpc::error_message(Some(&request.id), &e).into());
            return;
        }
        m.insert(key.clone(), (token.clone(), request.method == crate::protocol::Method::SubscriptionsListen));
    }
    let map = inflight.clone();
    let task = async move {
        let id = request.id.clone();
        let work = async {
            let reply = stack::serve(svc, &owner, client, request).await;
            match reply {
                Reply::Single(o) => {
                    let _ = tx.send(render::outcome_message(&id, &o).1).await;
                }
                Reply::Stream(mut s) => {
                    while let Some(ev) = s.next().await {
                        let msg = match ev {
                            Event::Notification(n) => n.into(),
                            Event::Done(o) => render::outcome_message(&id, &o).1,
                            Event::Ask(_) => continue,
                        };
                        let _ = tx.send(msg).await;
                    }
                }
            }
        };
        tokio::select! {
            _ = work => {}
            // Cancelled: nothing more is sent for this request, and dropping the work cancels upstream.
            _ = token.cancelled() => {}
        }
        {
            let mut m = lock(&map);
            m.remove(&key);
        }
    };
    tasks.spawn(task);
}

/// Sends the changes the client may see to a legacy client until the connection ends.
fn relay_changes(svc: &dyn Service, caller: Arc<Principal>, tx: mpsc::Sender<Rope>, follows: UriSet, owner: &Background) {
    let Ok(Some(mut sub)) = svc.subscribe(caller, Filter::ALL, follows) else { return };
    owner.spawn(async move {
        loop {
            let change = sub.next().await;
            let Some(msg) = legacy::change_message(&change) else { return };
            if tx.send(msg.into()).await.is_err() {
                return;
            }
        }
    });
}
