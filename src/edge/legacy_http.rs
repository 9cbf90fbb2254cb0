//! Legacy Streamable HTTP (2025-xx) on the same endpoint: POSTs within a session (and the
//! `initialize` that opens one), the standalone GET stream that carries the changes the caller
//! may see (list changes, updates of the resources the session follows), and DELETE to end a
//! session. Session rules and result shapes come from `legacy`; the internal requests go to the
//! same era-free service as modern ones.

use crate::auth::Principal;
use crate::dispatch::Service;
use crate::edge::era::is_legacy_version;
use crate::edge::era::legacy::{self, Action, LegacyState};
use crate::edge::render::{self, Body};
use crate::edge::stack::{self, Client};
use crate::hub::{Filter, Subscription};
use bytes::Bytes;
use http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, Method, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::jsonrpc::{self, Kind as MsgKind, Message};
use mcpgate_protocol::tasks::Background;
use std::convert::Infallible;
use std::sync::Arc;

fn accepted() -> Response<Body> {
    let mut r = Response::new(render::full(Bytes::new()));
    *r.status_mut() = StatusCode::ACCEPTED;
    r
}

pub async fn post(
    svc: &Arc<dyn Service>,
    st: &LegacyState,
    tasks: &Background,
    headers: &HeaderMap,
    msg: Message,
    kind: MsgKind,
    caller: Arc<Principal>,
) -> Response<Body> {
    if let Some(v) = headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok())
        && !is_legacy_version(v.trim())
    {
        return render::error(msg.id.as_ref(), &RpcError::invalid_request(format!("Unsupported MCP-Protocol-Version: {v}")));
    }
    if kind == MsgKind::Request && msg.method.as_deref() == Some("initialize") {
        return match st.initialize(svc.as_ref(), &msg, caller).await {
            Ok((result, session, token)) => {
                let null = Json::NULL;
                let id = msg.id.as_ref().unwrap_or(&null);
                let mut r = render::json(StatusCode::OK, jsonrpc::result_message(id, &result));
                if let Ok(v) = token.parse() {
                    r.headers_mut().insert("mcp-session-id", v);
                }
                tracing::debug!(sid = %session.sid, version = %session.v, "legacy session started");
                r
            }
            Err(e) => render::error(msg.id.as_ref(), &e),
        };
    }
    let session = match st.session_checked(headers, &caller).await {
        Ok(s) => s,
        Err(e) => return render::error(msg.id.as_ref(), &e),
    };
    match kind {
        // Notifications (initialized, cancelled, roots changes) need no answer; a response answers
        // an input request the gateway sent this session's client.
        MsgKind::Notification => accepted(),
        MsgKind::Response => {
            if !st.waiting.deliver(&session.sid, msg) {
                tracing::debug!(sid = %session.sid, "a response to no question of the gateway's");
            }
            accepted()
        }
        MsgKind::Request => {
            let id = msg.id.clone();
            match st.request(&session, msg, caller) {
                Err(e) => render::error(id.as_ref(), &e),
                Ok(action @ (Action::Forward(_) | Action::Follow(..) | Action::Unfollow(_))) => {
                    let rid = id.clone().unwrap_or(Json::NULL);
                    let client = Client::Legacy { waiting: st.waiting.clone(), scope: session.sid.clone() };
                    let serve = |req| stack::serve(svc.clone(), tasks, client.clone(), crate::telemetry::Transport::Tcp, req);
                    let reply = match legacy::follow(svc.as_ref(), &st.follows(&session.sid), action, serve).await {
                        Ok(reply) => reply,
                        Err(Action::Forward(mut req)) => {
                            mcpgate_protocol::trace::adopt(headers, &mut req.meta.fields);
                            req.request_id = headers.get("x-request-id").cloned();
                            stack::serve(svc.clone(), tasks, client.clone(), crate::telemetry::Transport::Tcp, req).await
                        }
                        Err(_) => return render::error(id.as_ref(), &RpcError::internal("unexpected session action")),
                    };
                    let mut r = render::reply(rid, reply);
                    // For a legacy client 404 means "session gone, initialize again": a JSON-RPC
                    // error such as an unknown method travels with 200.
                    if r.status() == StatusCode::NOT_FOUND {
                        *r.status_mut() = StatusCode::OK;
                    }
                    r
                }
                Ok(answered) => {
                    let result = answered.answer().unwrap_or(Json::NULL);
                    render::json(StatusCode::OK, jsonrpc::result_message(id.as_ref().unwrap_or(&Json::NULL), &result))
                }
            }
        }
    }
}

/// GET (the standalone server-to-client stream) or DELETE (end of session).
pub async fn get_or_delete(
    svc: &dyn Service,
    st: &Arc<LegacyState>,
    method: &Method,
    headers: &HeaderMap,
    caller: Arc<Principal>,
) -> Response<Body> {
    let session = match st.session_checked(headers, &caller).await {
        Ok(s) => s,
        Err(e) => return render::error(None, &e),
    };
    if method == Method::DELETE {
        st.end_everywhere(&session).await;
        svc.session_ended(&session.sid);
        tracing::debug!(sid = %session.sid, "legacy session ended");
        return render::plain(StatusCode::OK, "");
    }
    if method != Method::GET {
        return render::error(None, &RpcError::invalid_request("method not allowed").with_status(StatusCode::METHOD_NOT_ALLOWED));
    }
    let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !accept.contains("text/event-stream") && !accept.contains("*/*") {
        return render::error(
            None,
            &RpcError::invalid_request("GET needs Accept: text/event-stream").with_status(StatusCode::NOT_ACCEPTABLE),
        );
    }
    let sub = match svc.subscribe(caller, Filter::ALL, st.follows(&session.sid)) {
        Ok(s) => s,
        Err(e) => return render::error(None, &e),
    };
    let closing = svc.closing().unwrap_or_default();
    let endings = st.endings();
    stream(sub, Live { state: st.clone(), sid: session.sid, until: tokio::time::Instant::now() + st.ttl, closing, endings })
}

/// What keeps a GET stream open: its session not ended (on this replica, or on another one as
/// learnt by [`LegacyState::follow_endings`]), and within its TTL.
struct Live {
    state: Arc<LegacyState>,
    sid: String,
    until: tokio::time::Instant,
    /// Cancelled when the gateway shuts down.
    closing: tokio_util::sync::CancellationToken,
    /// Changes when any session ends: this one may be it.
    endings: tokio::sync::watch::Receiver<u64>,
}

impl Live {
    fn still(&self) -> bool {
        tokio::time::Instant::now() < self.until && !self.state.is_ended(&self.sid) && !self.closing.is_cancelled()
    }
}

fn stream(sub: Option<Subscription>, live: Live) -> Response<Body> {
    // An opening comment, so the response (and its headers) reach the client at once.
    let opening = futures_util::stream::once(async { Ok::<_, Infallible>(Frame::data(Bytes::from_static(b": stream open\n\n"))) });
    let events = futures_util::stream::unfold((sub, live), |(mut sub, mut live)| async move {
        if !live.still() {
            return None;
        }
        let next_change = async {
            match sub.as_mut() {
                Some(s) => s.next().await,
                None => std::future::pending().await,
            }
        };
        let frame = tokio::select! {
            change = next_change => match legacy::change_message(&change) {
                Some(msg) => render::sse_bytes(msg),
                None => {
                    if change == crate::hub::Change::TooSlow {
                        tracing::warn!(sid = %live.sid, "ending a GET stream whose client does not keep up");
                    }
                    return None;
                }
            },
            _ = tokio::time::sleep(render::KEEPALIVE) => Bytes::from_static(b": keepalive\n\n"),
            _ = live.closing.cancelled() => return None,
            // A session ended somewhere: if it is this one, the stream ends now.
            changed = live.endings.changed() => {
                if changed.is_err() || !live.still() {
                    return None;
                }
                Bytes::from_static(b": keepalive\n\n")
            }
        };
        Some((Ok::<_, Infallible>(Frame::data(frame)), (sub, live)))
    });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(futures_util::StreamExt::chain(opening, events))));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, http::HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    r
}
