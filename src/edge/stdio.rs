//! Serving one client over stdin/stdout (newline-delimited JSON-RPC), in either era: a request
//! carrying modern `_meta` is served statelessly (`subscriptions/listen` included, cancelled by
//! its id); an `initialize` opens a legacy session for this process (then `ping`,
//! `logging/setLevel`, `resources/subscribe` and the change notifications work as legacy clients
//! expect). stdout carries protocol messages only, written by one writer task; requests run
//! concurrently; `notifications/cancelled` cancels the named request (and its upstream call). At
//! EOF the in-flight requests are finished before the server returns. The local client is
//! trusted: it is served as the anonymous caller, without authentication.

use crate::auth::Principal;
use crate::dispatch::{Request, Service};
use crate::edge::era::Era;
use crate::edge::era::bridge::Waiting;
use crate::edge::era::legacy::{self, Action, Session};
use crate::edge::era::modern;
use crate::edge::render;
use crate::edge::stack::{self, Client};
use crate::hub::{Filter, UriSet};
use bytes::Bytes;
use futures_util::StreamExt;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::{Json, Rope};
use mcpgate_protocol::jsonrpc::{self, Kind as MsgKind, Message};
use mcpgate_protocol::reply::{Event, Reply};
use mcpgate_protocol::sync::lock;
use mcpgate_protocol::tasks::Background;
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

/// One `mcpgate stdio` connection: the service and caller it serves, where its messages go, the
/// requests in flight, what runs beside them, and (for a legacy client, once `initialize`
/// arrived) its session.
struct Conn {
    svc: Arc<dyn Service>,
    caller: Arc<Principal>,
    out: mpsc::Sender<Rope>,
    inflight: Inflight,
    tasks: tokio::task::JoinSet<()>,
    /// Owns what runs beside the requests: bridged legacy calls, and (its child) the relay of
    /// changes, which ends as soon as the client is gone.
    owner: Background,
    relays: Background,
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
    let (out, mut out_rx) = mpsc::channel::<Rope>(256);
    let writer = tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            let mut line = msg.one_line().into_vec();
            line.push(b'\n');
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let owner = Background::new();
    let relays = owner.child();
    let mut conn = Conn {
        svc,
        caller,
        out,
        inflight: Arc::default(),
        tasks: tokio::task::JoinSet::new(),
        owner,
        relays,
        session: None,
        level: None,
        follows: UriSet::default(),
        waiting: Arc::default(),
    };
    let mut lines = FramedRead::new(input, LinesCodec::new_with_max_length(MAX_LINE));
    while let Some(line) = lines.next().await {
        // Reap finished requests as we go, so a long session does not accumulate them.
        while conn.tasks.try_join_next().is_some() {}
        match line {
            Ok(l) if l.trim().is_empty() => {}
            Ok(l) => conn.line(l).await,
            Err(e) => conn.send(jsonrpc::error_message(None, &RpcError::invalid_request(format!("unreadable input line: {e}")))).await,
        }
    }
    conn.close().await;
    let _ = writer.await;
    Ok(())
}

impl Conn {
    async fn send(&self, msg: impl Into<Rope>) {
        let _ = self.out.send(msg.into()).await;
    }

    /// One line the client sent.
    async fn line(&mut self, line: String) {
        let msg = match Message::parse_bytes(&Bytes::from(line.into_bytes())) {
            Ok(m) => m,
            Err(e) => return self.send(jsonrpc::error_message(None, &e)).await,
        };
        let kind = match msg.kind() {
            Ok(k) => k,
            Err(e) => return self.send(jsonrpc::error_message(msg.id.as_ref().filter(|i| jsonrpc::valid_id(i).is_ok()), &e)).await,
        };
        match kind {
            MsgKind::Response => {
                if !self.waiting.deliver(STDIO_SCOPE, msg) {
                    tracing::debug!("a response to no question of the gateway's");
                }
            }
            MsgKind::Notification => {
                if msg.method.as_deref() == Some("notifications/cancelled") {
                    cancel(&self.inflight, &msg);
                }
            }
            MsgKind::Request => self.request(msg).await,
        }
    }

    /// A request: a modern one, or one of the legacy session (answered here, or converted).
    async fn request(&mut self, msg: Message) {
        let id = msg.id.clone();
        let era = crate::edge::era::classify_message(crate::edge::era::BodyFacts::of(&msg));
        let request = match (era, &self.session) {
            (Era::Modern, _) => modern::to_request(msg, None, self.caller.clone()),
            (Era::Legacy, None) if msg.method.as_deref() == Some("initialize") => return self.initialize(msg).await,
            (Era::Legacy, Some(_)) => match self.legacy(msg).await {
                Some(r) => r,
                None => return,
            },
            (Era::Legacy, None) => Err(RpcError::invalid_request(
                "send initialize first (a legacy client), or give every request the modern _meta (a 2026-07-28 client)",
            )),
        };
        match request {
            // The reply's shape follows the request's era, not the connection's.
            Ok(r) => {
                let client = match era {
                    Era::Legacy => self.legacy_client(),
                    Era::Modern => Client::Modern,
                };
                let exchange = Exchange { svc: self.svc.clone(), owner: self.owner.clone(), client, tx: self.out.clone() };
                spawn(&mut self.tasks, &self.inflight, exchange, r)
            }
            Err(e) => self.send(jsonrpc::error_message(id.as_ref(), &e)).await,
        }
    }

    fn legacy_client(&self) -> Client {
        Client::Legacy { waiting: self.waiting.clone(), scope: STDIO_SCOPE.into() }
    }

    /// A legacy client's `initialize`: the session starts, and with it the relay of changes.
    async fn initialize(&mut self, msg: Message) {
        match legacy::handshake(self.svc.as_ref(), &msg, "stdio".into(), self.caller.clone()).await {
            Ok((result, session)) => {
                self.send(jsonrpc::result_message(msg.id.as_ref().unwrap_or(&Json::NULL), &result)).await;
                self.session = Some(session);
                relay_changes(self.svc.as_ref(), self.caller.clone(), self.out.clone(), self.follows.clone(), &self.relays);
            }
            Err(e) => self.send(jsonrpc::error_message(msg.id.as_ref(), &e)).await,
        }
    }

    /// A request of the legacy session: `None` when it was answered here, else the request to
    /// serve (or why it cannot be).
    async fn legacy(&mut self, msg: Message) -> Option<Result<Request, RpcError>> {
        let session = self.session.as_ref()?;
        let id = msg.id.clone();
        match legacy::convert(session, self.level.as_deref(), msg, self.caller.clone()) {
            Ok(Action::Forward(r)) => Some(Ok(r)),
            Ok(action @ (Action::Follow(..) | Action::Unfollow(_))) => {
                let rid = id.unwrap_or(Json::NULL);
                let (svc, owner, client) = (self.svc.clone(), self.owner.clone(), self.legacy_client());
                let serve = |req| async move { stack::serve(svc, &owner, client, crate::telemetry::Transport::Pipe, req).await };
                if let Ok(reply) = legacy::follow(self.svc.as_ref(), &self.follows, action, serve).await {
                    self.send(render::outcome_message(&rid, &legacy::downgrade(reply.outcome().await)).1).await;
                }
                None
            }
            Ok(answered) => {
                if let Action::SetLevel(l) = &answered {
                    self.level = Some(l.clone());
                }
                let result = answered.answer().unwrap_or(Json::NULL);
                self.send(jsonrpc::result_message(id.as_ref().unwrap_or(&Json::NULL), &result)).await;
                None
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// The client is gone: its listen streams end (other requests are finished first).
    async fn close(mut self) {
        for (token, listen) in lock(&self.inflight).values() {
            if *listen {
                token.cancel();
            }
        }
        self.relays.stop();
        while self.tasks.join_next().await.is_some() {}
        self.owner.stop();
        if let Some(session) = &self.session {
            self.svc.session_ended(&session.sid);
        }
    }
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
        m.insert(key.clone(), (token.clone(), request.method == mcpgate_protocol::Method::SubscriptionsListen));
    }
    let map = inflight.clone();
    let task = async move {
        let id = request.id.clone();
        let work = async {
            let reply = stack::serve(svc, &owner, client, crate::telemetry::Transport::Pipe, request).await;
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
