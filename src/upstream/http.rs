//! The Streamable HTTP upstream transport. It only moves messages: a POST carries one JSON-RPC
//! message and is answered by JSON or by an SSE stream relayed event by event; a GET opens a
//! standalone SSE stream. It knows nothing of protocol eras: the era adapters give it the
//! [`Envelope`] (version, session, modern headers), and every request is built and sent by
//! [`Outbound`] (a call through the outbound exchange, which answers a DPoP nonce challenge and a
//! refused token).
//! Messages the upstream sends unasked go to [`Inbound`], and answers to its requests are posted
//! back on the same envelope. Requests go out on the calling thread's client of `net`'s
//! [`HttpClients`] (HTTP/1.1 and h2, rustls): the worker serving a call also drives its upstream
//! connection.

use super::error::UpstreamError;
use super::inbound::Inbound;
use super::outbound::{Envelope, Outbound};
use super::sse::SseDecoder;
use crate::identity::exchange::Retries;
use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, StatusCode};
use http_body_util::{BodyExt, Limited};
use mcpgate_net::http::HttpClients;
use mcpgate_protocol::jsonrpc::{Kind, Message};
use mcpgate_protocol::reply::{Event, EventStream, Outcome, Reply};
use mcpgate_protocol::tasks::Background;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

/// One endpoint of an HTTP upstream (cheap to clone).
#[derive(Clone)]
pub struct HttpTransport(Arc<Inner>);

struct Inner {
    id: String,
    out: Outbound,
    client: HttpClients,
    max_bytes: usize,
    timeout: Duration,
    inbound: Arc<Inbound>,
    tasks: Background,
    /// Calls in flight whose callers can answer the upstream's input requests. A request the
    /// upstream sends on a session's standalone GET stream (not on a call's own stream) goes to
    /// the one call of that session that can answer it; with none, or more than one, nobody can
    /// tell whose it is, and it is refused.
    askers: std::sync::Mutex<Vec<Asker>>,
}

/// A call in flight that can answer input requests.
struct Asker {
    /// Its request id.
    id: String,
    /// The upstream requests its caller answers.
    accepts: Vec<String>,
    /// The legacy session it runs in.
    session: Option<HeaderValue>,
    /// Its reply stream.
    tx: mpsc::Sender<Event>,
}

/// Takes a call out of [`Inner::askers`] when its relay ends.
struct Asking {
    inner: Arc<Inner>,
    id: String,
}

impl Drop for Asking {
    fn drop(&mut self) {
        mcpgate_protocol::sync::lock(&self.inner.askers).retain(|a| a.id != self.id);
    }
}

/// How to relay a POST's SSE answer: the response to wait for, the caller's progress token (put
/// back into the upstream's progress notifications, which carry the gateway's token for
/// `want_id`), and the upstream requests to hand to the reader instead of refusing them.
pub struct Relay {
    pub want_id: u64,
    pub progress: Option<serde_json::Value>,
    pub accepts: Vec<String>,
}

/// The answer to a POST: the reply, and the `Mcp-Session-Id` the upstream sent with it.
pub struct Posted {
    pub reply: Reply,
    pub session: Option<HeaderValue>,
}

impl HttpTransport {
    pub fn new(
        id: &str,
        out: Outbound,
        client: HttpClients,
        max_bytes: usize,
        timeout: Duration,
        inbound: Arc<Inbound>,
        tasks: Background,
    ) -> Self {
        HttpTransport(Arc::new(Inner { id: id.to_string(), out, client, max_bytes, timeout, inbound, tasks, askers: Default::default() }))
    }

    pub fn url(&self) -> String {
        self.0.out.url.to_string()
    }

    /// Sends a request whose id is `want_id` and waits for the answer's head (through the outbound
    /// exchange: a DPoP nonce challenge and a refused token are each answered once). A 404 to a
    /// request that carried a session is [`UpstreamError::SessionExpired`].
    pub async fn post(&self, body: Vec<u8>, relay: Relay, env: &Envelope, deadline: Instant) -> Result<Posted, UpstreamError> {
        let me = &self.0;
        // Shared, not copied, by a retry.
        let body = bytes::Bytes::from(body);
        // The reply's channel exists before the POST goes out when the call can be asked
        // something, so an input request the upstream sends on its GET stream at once already
        // finds the call that can answer it; otherwise it is made only for a streamed answer.
        let early = (!relay.accepts.is_empty()).then(|| mpsc::channel(32));
        let asking = early.as_ref().and_then(|(tx, _)| self.asking(&relay, tx, env.session.clone()));
        let post = || me.out.post(body.clone(), env, deadline);
        let resp = me.out.exchange(&mut Retries::default(), &me.client, deadline, post).await?;
        let status = resp.status();
        let session = resp.headers().get("mcp-session-id").cloned();
        let ctype = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
        if status.is_success() && ctype.starts_with("text/event-stream") {
            let channel = early.unwrap_or_else(|| mpsc::channel(32));
            return Ok(Posted { reply: Reply::Stream(self.relay(resp.into_body(), relay, env, channel, asking)), session });
        }
        let bytes = match timeout_at(deadline, Limited::new(resp.into_body(), me.max_bytes).collect()).await {
            Err(_) => return Err(UpstreamError::Timeout { after: me.timeout }),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return Err(UpstreamError::TooLarge { limit: me.max_bytes }),
            Ok(Err(e)) => return Err(UpstreamError::Unreachable(format!("reading the response failed: {e}"))),
            Ok(Ok(c)) => c.to_bytes(),
        };
        if status == StatusCode::NOT_FOUND && env.session.is_some() {
            return Err(UpstreamError::SessionExpired);
        }
        match Message::parse_bytes(&bytes) {
            Ok(m) if m.result.is_some() || m.error.is_some() => Ok(Posted { reply: Reply::Single(final_outcome(m)), session }),
            _ => {
                log_body(status, &bytes);
                Err(UpstreamError::Status { status: status.as_u16() })
            }
        }
    }

    /// Posts a notification; any 2xx is success.
    pub async fn notify(&self, body: Vec<u8>, env: &Envelope) -> Result<(), UpstreamError> {
        let me = &self.0;
        let deadline = Instant::now() + me.timeout;
        let req = me.out.post(bytes::Bytes::from(body), env, deadline).await?;
        let resp = me.out.send(&me.client, req, deadline).await?;
        if resp.status().is_success() { Ok(()) } else { Err(UpstreamError::Status { status: resp.status().as_u16() }) }
    }

    /// Ends a legacy session (`DELETE`); a 405 (the upstream does not let clients end sessions)
    /// or a 404 (it already forgot it) is as good as success.
    pub async fn delete(&self, env: &Envelope) -> Result<(), UpstreamError> {
        let me = &self.0;
        let deadline = Instant::now() + me.timeout;
        let req = me.out.delete(env, deadline).await?;
        let resp = me.out.send(&me.client, req, deadline).await?;
        match resp.status() {
            s if s.is_success() || s == StatusCode::METHOD_NOT_ALLOWED || s == StatusCode::NOT_FOUND => Ok(()),
            s => Err(UpstreamError::Status { status: s.as_u16() }),
        }
    }

    /// Opens the standalone GET stream and hands every message on it to [`Inbound`] (answering
    /// the upstream's requests) until it ends. A refusal is [`UpstreamError::Status`]. `opened` is
    /// told once the upstream accepted the stream (dropped unsaid when it did not).
    pub async fn pump_get(&self, env: &Envelope, opened: Option<tokio::sync::oneshot::Sender<()>>) -> Result<(), UpstreamError> {
        let me = &self.0;
        let req = me.out.get(env, Instant::now() + me.timeout).await?;
        let resp = me.out.send(&me.client, req, Instant::now() + me.timeout).await?;
        // A nonce the upstream sends is kept for the next proof (the stream is opened again).
        me.out.dpop_nonce(resp.headers());
        if !resp.status().is_success() {
            return Err(UpstreamError::Status { status: resp.status().as_u16() });
        }
        if let Some(tx) = opened {
            let _ = tx.send(());
        }
        let mut body = resp.into_body();
        let mut decoder = SseDecoder::new(me.max_bytes);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| UpstreamError::Unreachable(format!("the stream failed: {e}")))?;
            let Ok(chunk) = frame.into_data() else { continue };
            for data in decoder.push(&chunk).map_err(|e| UpstreamError::TooLarge { limit: e.0 })? {
                let Ok(msg) = Message::parse(&data) else { continue };
                match msg.kind() {
                    Ok(Kind::Notification) => me.inbound.notification(&msg),
                    Ok(Kind::Request) if self.hand_to_asker(&msg, &data, env.session.as_ref()) => {}
                    Ok(Kind::Request) => self.answer(&msg, env),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Hands an input request from a session's GET stream to the one call in flight in that
    /// session that can answer it.
    fn hand_to_asker(&self, msg: &Message, data: &[u8], session: Option<&HeaderValue>) -> bool {
        let Some(method) = msg.method.as_deref() else { return false };
        let askers = mcpgate_protocol::sync::lock(&self.0.askers);
        let mut able = askers.iter().filter(|a| a.session.as_ref() == session && a.accepts.iter().any(|m| m == method));
        match (able.next(), able.next()) {
            (Some(a), None) => a.tx.try_send(Event::Ask(data.to_vec())).is_ok(),
            _ => false,
        }
    }

    /// Answers a request the upstream sent, by a POST on the same envelope (in the background).
    fn answer(&self, msg: &Message, env: &Envelope) {
        let Some(reply) = self.0.inbound.answer(msg) else { return };
        let me = self.clone();
        let env = Envelope { mcp: None, ..env.clone() };
        self.0.tasks.spawn(async move {
            if let Err(e) = me.notify(reply, &env).await {
                tracing::debug!(upstream = %me.0.id, error = %e, "answering the upstream's request failed");
            }
        });
    }

    /// Registers a call whose caller can answer input requests (see [`Inner::askers`]), for as
    /// long as the returned guard lives.
    fn asking(&self, relay: &Relay, tx: &mpsc::Sender<Event>, session: Option<HeaderValue>) -> Option<Asking> {
        (!relay.accepts.is_empty()).then(|| {
            let id = relay.want_id.to_string();
            let asker = Asker { id: id.clone(), accepts: relay.accepts.clone(), session, tx: tx.clone() };
            mcpgate_protocol::sync::lock(&self.0.askers).push(asker);
            Asking { inner: self.0.clone(), id }
        })
    }

    /// Relays an SSE response: notifications as they come, then the response to `want_id`. A
    /// stream that ends (or breaks) before the response, after events with ids, is resumed as the
    /// transport says (SEP-1699): a GET with `Last-Event-ID`, after the stream's `retry` delay.
    fn relay(
        &self,
        body: hyper::body::Incoming,
        relay: Relay,
        env: &Envelope,
        (tx, rx): (mpsc::Sender<Event>, mpsc::Receiver<Event>),
        asking: Option<Asking>,
    ) -> EventStream {
        let me = self.clone();
        let env = env.clone();
        self.0.tasks.spawn(async move {
            let _asking = asking;
            let upstream = me.0.id.clone();
            let fail = |e: UpstreamError| Event::Done(Outcome::Error(e.into_rpc(&upstream)));
            let mut decoder = SseDecoder::new(me.0.max_bytes);
            let (mut body, mut resumed) = (body, 0);
            loop {
                let ended = match me.pump(&mut body, &mut decoder, &relay, &env, &tx).await {
                    Pumped::Done => return,
                    Pumped::Ended(why) => why,
                };
                let Some(last) = decoder.last_id().map(str::to_string) else {
                    let _ = tx.send(fail(ended)).await;
                    return;
                };
                // A stream that delivered events since the last resumption made progress: only
                // resumptions in a row that bring nothing count against the limit (servers may close
                // streams on purpose and expect the client to poll, SEP-1699).
                // (Each resumed stream gets a fresh decoder, so its count starts at 0.)
                if decoder.dispatched() > 0 {
                    resumed = 0;
                }
                if resumed == MAX_RESUMES {
                    let _ = tx.send(fail(ended)).await;
                    return;
                }
                resumed += 1;
                let wait = Duration::from_millis(decoder.retry().unwrap_or(DEFAULT_RETRY_MS).min(MAX_RETRY_MS));
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = tx.closed() => return,
                }
                tracing::debug!(%upstream, last_event_id = %last, "resuming a response stream");
                match me.resume(&env, &last).await {
                    Ok(next) => {
                        body = next;
                        decoder = SseDecoder::resumed(&decoder);
                    }
                    Err(e) => {
                        tracing::debug!(%upstream, error = %e, "resuming a response stream failed");
                        let _ = tx.send(fail(ended)).await;
                        return;
                    }
                }
            }
        });
        EventStream::new(rx)
    }

    /// Resumes a response stream: a GET with `Last-Event-ID` on the same session.
    async fn resume(&self, env: &Envelope, last: &str) -> Result<hyper::body::Incoming, UpstreamError> {
        let me = &self.0;
        let deadline = Instant::now() + me.timeout;
        let env = Envelope { mcp: None, ..env.clone() };
        let mut req = me.out.get(&env, deadline).await?;
        let id = HeaderValue::from_str(last).map_err(|_| UpstreamError::Protocol("the stream's event id cannot be sent back".into()))?;
        req.headers_mut().insert("last-event-id", id);
        let resp = me.out.send(&me.client, req, deadline).await?;
        me.out.dpop_nonce(resp.headers());
        let ctype = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
        if !resp.status().is_success() || !ctype.starts_with("text/event-stream") {
            return Err(UpstreamError::Protocol(format!("the response stream ended early and resuming it got HTTP {}", resp.status())));
        }
        Ok(resp.into_body())
    }

    /// Relays the events of one response stream until the response (`Done`, sent) or the
    /// stream's end, and why it ended.
    async fn pump(
        &self,
        body: &mut hyper::body::Incoming,
        decoder: &mut SseDecoder,
        relay: &Relay,
        env: &Envelope,
        tx: &mpsc::Sender<Event>,
    ) -> Pumped {
        let upstream = &self.0.id;
        let want_id = relay.want_id.to_string();
        loop {
            let frame = tokio::select! {
                f = body.frame() => f,
                _ = tx.closed() => return Pumped::Done,
            };
            let chunk = match frame {
                None => return Pumped::Ended(UpstreamError::Protocol("the response stream ended before the response".into())),
                Some(Err(e)) => return Pumped::Ended(UpstreamError::Unreachable(format!("the response stream failed: {e}"))),
                Some(Ok(f)) => match f.into_data() {
                    Ok(d) => d,
                    Err(_) => continue,
                },
            };
            let events = match decoder.push(&chunk) {
                Ok(ev) => ev,
                Err(e) => {
                    let _ = tx.send(Event::Done(Outcome::Error(UpstreamError::TooLarge { limit: e.0 }.into_rpc(upstream)))).await;
                    return Pumped::Done;
                }
            };
            for data in events {
                if data.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                // The event's own buffer: a final result is relayed from it without a copy.
                let event = Bytes::from(data);
                let Ok(msg) = Message::parse_bytes(&event) else {
                    tracing::warn!(upstream = %upstream, "ignoring an SSE event that is not a JSON-RPC message");
                    continue;
                };
                match msg.kind() {
                    Ok(Kind::Response) if msg.id.as_ref().is_some_and(|i| i.get() == want_id) => {
                        let _ = tx.send(Event::Done(final_outcome(msg))).await;
                        return Pumped::Done;
                    }
                    // Change notifications concern every caller, not this call: they go where the
                    // gateway's own change tracking hears them, never raw to the caller (upstream
                    // URIs, items it may not see).
                    Ok(Kind::Notification)
                        if msg
                            .method
                            .as_deref()
                            .is_some_and(|m| m.ends_with("/list_changed") || m == "notifications/resources/updated") =>
                    {
                        self.0.inbound.notification(&msg);
                    }
                    Ok(Kind::Notification) => {
                        let data = match (&relay.progress, msg.method.as_deref()) {
                            (Some(client), Some("notifications/progress")) if super::progress::request_of(&msg) == Some(relay.want_id) => {
                                super::progress::restore(&msg, client).unwrap_or_else(|| event.to_vec())
                            }
                            _ => event.to_vec(),
                        };
                        if tx.send(Event::Notification(data)).await.is_err() {
                            return Pumped::Done;
                        }
                    }
                    Ok(Kind::Request) if msg.method.as_ref().is_some_and(|m| relay.accepts.contains(m)) => {
                        if tx.send(Event::Ask(event.to_vec())).await.is_err() {
                            return Pumped::Done;
                        }
                    }
                    Ok(Kind::Request) => self.answer(&msg, env),
                    _ => tracing::warn!(upstream = %upstream, method = ?msg.method, "ignoring an unexpected message on a response stream"),
                }
            }
        }
    }
}

/// How one response stream ended.
enum Pumped {
    /// The response was relayed (or the caller left): nothing more to do.
    Done,
    /// It ended before the response, for this reason.
    Ended(UpstreamError),
}

/// Resumptions in a row of one response stream that bring no event, at most.
const MAX_RESUMES: u32 = 5;
/// The delay before resuming when the stream set none, and the longest one honoured.
const DEFAULT_RETRY_MS: u64 = 1_000;
const MAX_RETRY_MS: u64 = 30_000;

pub fn final_outcome(m: Message) -> Outcome {
    match (m.result, m.error) {
        (Some(r), _) => Outcome::Result(r),
        (None, Some(e)) => Outcome::UpstreamError(e),
        (None, None) => Outcome::Error(mcpgate_protocol::errors::RpcError::internal("response without result or error")),
    }
}

/// An upstream's non-JSON-RPC answer goes to the gateway's log only: it may hold details a
/// caller should not see.
fn log_body(status: StatusCode, body: &[u8]) {
    let text: String = String::from_utf8_lossy(body).chars().take(200).collect();
    tracing::debug!(%status, body = %text.trim(), "upstream answered without a JSON-RPC response");
}
