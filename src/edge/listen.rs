//! The listeners: serving on one runtime (`serve`) or on worker threads (`workers`), accepting
//! (over TLS when configured), the hyper builder (HTTP/1.1 and h2 on one port, header limits, h2
//! keep-alive pings), the tower layers every connection goes through, and watching each
//! connection (counted in `edge::conns`: first request in time, idle timeout, shed when the
//! connection limit needs room; `slow` cuts off a client that stops reading), then draining at
//! shutdown.

pub mod slow;
pub mod workers;

use crate::edge::conns::{Conn, Sending};
use crate::edge::http::handle;
use crate::edge::render::{self, Body};
use crate::edge::shared::{Mount, Shared};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use mcpgate_config::ServerConfig;
use mcpgate_protocol::errors::RpcError;
use slow::WriteDeadline;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

/// Serves on the current runtime until `shutdown` completes, then lets requests in progress finish
/// (for up to `server.drain_timeout`). With `server.tls`, every connection is HTTPS. The gateway's
/// own listener serves on worker threads instead ([`workers`]); this is the one-runtime
/// form (the demo server, tests, embedding).
pub async fn serve(listener: TcpListener, mount: Mount, cfg: ServerConfig, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
    let state = Shared::new(listener.local_addr()?, mount, cfg)?;
    let stop = tokio_util::sync::CancellationToken::new();
    let accepting = accept_until(listener, state.clone(), stop.clone());
    tokio::pin!(accepting);
    tokio::select! {
        _ = &mut accepting => {}
        _ = shutdown => {
            stop.cancel();
            accepting.await;
        }
    }
    state.tasks.stop();
    Ok(())
}

/// Accepts connections on `listener` and serves them on the current runtime until `stop`, then
/// drains them.
pub(crate) async fn accept_until(listener: TcpListener, state: Arc<Shared>, stop: tokio_util::sync::CancellationToken) {
    let edge = Edge::new(state.clone());
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        edge.accept(stream, peer);
    }
    drop(listener);
    edge.drain(state.cfg.drain_timeout).await;
}

pub(crate) struct Edge {
    state: Arc<Shared>,
    builders: Arc<Builders>,
    graceful: GracefulShutdown,
    request_ids: RequestIds,
}

impl Edge {
    pub(super) fn new(state: Arc<Shared>) -> Self {
        let header_list = state.cfg.max_header_bytes.min(u32::MAX as usize) as u32;
        let mut either = auto::Builder::new(TokioExecutor::new());
        either
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(state.cfg.header_read_timeout)
            .max_buf_size(state.cfg.max_header_bytes.max(8192));
        either
            .http2()
            .timer(TokioTimer::new())
            .max_header_list_size(header_list)
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(20));
        let mut h1 = hyper::server::conn::http1::Builder::new();
        h1.timer(TokioTimer::new()).header_read_timeout(state.cfg.header_read_timeout).max_buf_size(state.cfg.max_header_bytes.max(8192));
        let mut h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        h2.timer(TokioTimer::new())
            .max_header_list_size(header_list)
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(20));
        let builders = Arc::new(Builders { h1, h2, either });
        Edge { state, builders, graceful: GracefulShutdown::new(), request_ids: RequestIds::default() }
    }

    /// Takes an accepted connection: admitted (or refused when every connection is busy), then
    /// served, after the TLS handshake when the listener is HTTPS.
    pub(super) fn accept(&self, stream: TcpStream, peer: SocketAddr) {
        let Some((conn_id, tracked)) = self.state.conns.admit() else {
            tracing::warn!(%peer, max = self.state.cfg.max_connections, "refusing a connection: every open connection is busy");
            return;
        };
        let _ = stream.set_nodelay(true);
        let (state, builders, watcher, ids) =
            (self.state.clone(), self.builders.clone(), self.graceful.watcher(), self.request_ids.clone());
        match &self.state.tls {
            None => {
                tokio::spawn(async move {
                    // The version is read from the first bytes without taking them (see `Builders`).
                    let first = tokio::select! {
                        v = tokio::time::timeout(state.cfg.header_read_timeout, sniff(&stream)) => v,
                        _ = tracked.close.cancelled() => Ok(Ok(Sniffed::Closed)),
                    };
                    let version = match first {
                        Ok(Ok(Sniffed::Version(v))) => Some(Some(v)),
                        Ok(Ok(Sniffed::Unsure)) => Some(None),
                        _ => None,
                    };
                    if let Some(version) = version {
                        let io = WriteDeadline::new(stream, state.cfg.write_timeout);
                        serve_connection(TokioIo::new(io), version, &state, &builders, watcher, ids, &tracked, peer).await;
                    }
                    state.conns.remove(conn_id);
                });
            }
            Some(tls) => {
                let acceptor = tls.acceptor();
                tokio::spawn(async move {
                    // The handshake counts against the time to the first request head.
                    let handshake = tokio::select! {
                        h = tokio::time::timeout(state.cfg.header_read_timeout, acceptor.accept(stream)) => h,
                        // Shed to make room for another connection while still handshaking.
                        _ = tracked.close.cancelled() => {
                            state.conns.remove(conn_id);
                            return;
                        }
                    };
                    match handshake {
                        Ok(Ok(tls)) => {
                            let version = match tls.get_ref().1.alpn_protocol() {
                                Some(b"h2") => Some(Version::H2),
                                Some(b"http/1.1") => Some(Version::H1),
                                _ => None,
                            };
                            let io = WriteDeadline::new(tls, state.cfg.write_timeout);
                            serve_connection(TokioIo::new(io), version, &state, &builders, watcher, ids, &tracked, peer).await
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                    state.conns.remove(conn_id);
                });
            }
        }
    }

    /// Waits for the connections to finish their requests, at most `limit`.
    pub(super) async fn drain(self, limit: Duration) {
        tokio::select! {
            _ = self.graceful.shutdown() => {}
            _ = tokio::time::sleep(limit) => {
                tracing::warn!(after = ?limit, "requests still in progress at the end of the drain time; closing them")
            }
        }
    }
}

/// HTTP/1.1 or HTTP/2, when the connection has said which.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Version {
    H1,
    H2,
}

/// The hyper builders, one per way a connection's version is known. A cleartext connection's
/// version is read by peeking at its first bytes, a TLS one's from ALPN, and the connection is
/// served by hyper's own HTTP/1.1 or HTTP/2 connection. hyper-util's detection (`either`, for
/// TLS clients that offer no ALPN and first packets that hold a piece of `PRI `) reads the first
/// bytes out of the socket and hands them back through a rewind, which makes hyper's first read a short one and grows its read buffer to
/// twice its size for the connection's whole life; and its connection type holds room for
/// HTTP/2's state in every HTTP/1.1 connection. Either was paid by every idle listen stream.
struct Builders {
    h1: hyper::server::conn::http1::Builder,
    h2: hyper::server::conn::http2::Builder<TokioExecutor>,
    either: auto::Builder<TokioExecutor>,
}

/// What the first bytes of a cleartext connection said.
enum Sniffed {
    /// The client closed (or was shed) before sending anything.
    Closed,
    Version(Version),
    /// Only a piece of `PRI ` so far: hyper-util's detection reads the rest as it arrives.
    Unsure,
}

/// HTTP/2 with prior knowledge starts with its connection preface, `PRI * HTTP/2.0…`; `PRI` is
/// a method no HTTP/1 client sends (RFC 9113 §3.4 reserves it for exactly this), so four bytes
/// decide, and HTTP/2's own handshake checks the rest. Peeking again at a socket that holds a
/// piece of the prefix would return at once with the same bytes, so such a connection (rare, and
/// never polled for) is left to hyper-util's detection, which waits for the rest.
async fn sniff(stream: &TcpStream) -> std::io::Result<Sniffed> {
    const PREFACE: &[u8] = b"PRI ";
    let mut first = [0u8; 4];
    let n = stream.peek(&mut first).await?;
    Ok(if n == 0 {
        Sniffed::Closed
    } else if !PREFACE.starts_with(&first[..n]) {
        Sniffed::Version(Version::H1)
    } else if n == PREFACE.len() {
        Sniffed::Version(Version::H2)
    } else {
        Sniffed::Unsure
    })
}

/// Serves one connection through the tower stack until it ends (see [`watch_connection`]), as
/// HTTP/1.1 or HTTP/2 when `version` says which, else as whichever the client speaks.
#[allow(clippy::too_many_arguments)]
async fn serve_connection<I>(
    io: TokioIo<I>,
    version: Option<Version>,
    state: &Arc<Shared>,
    builders: &Builders,
    watcher: hyper_util::server::graceful::Watcher,
    ids: RequestIds,
    tracked: &Arc<Conn>,
    peer: SocketAddr,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let st = state.clone();
    let this = tracked.clone();
    let inner = tower::service_fn(move |mut req: Request<hyper::body::Incoming>| {
        let active = this.begin();
        let st = st.clone();
        // Every request has an id: the client's `x-request-id`, or one made here and set on the
        // request (the dispatcher reads it from there, for the audit line); the response
        // carries it back.
        let id = ids.of(&mut req);
        let span = request_span(&req, &id);
        async move {
            // Boxed: hyper keeps room for the service's future for as long as the connection
            // lives (an idle listen stream included), so the future it holds is kept small.
            let handled = tracing::Instrument::instrument(Box::pin(handle(st, req, peer)), span.clone());
            let resp = answered(handled, id).await;
            // The connection counts as busy until the response has been sent (and the span,
            // when there is one, lasts as long).
            Ok::<_, Infallible>(resp.map(|b| BodyExt::boxed(Sending::new(b, active, span))))
        }
    });
    // The edge's policy at a glance, outermost first: every request gets an id (kept from the
    // client's `x-request-id` when it sent one, and returned), runs in a span that carries it
    // (and, as they become known, the caller, method, item and upstream) when traces are
    // exported or the log is at `debug`, and a panic becomes a 500 JSON-RPC error instead of a
    // dropped connection. Limits on connections and requests in progress are enforced around
    // and inside (see `conns`).
    let svc = TowerToHyperService::new(inner);
    let cfg = &state.cfg;
    // HTTP/1.1 inline; the rarer two boxed, so an HTTP/1.1 connection's task holds no room for them.
    match version {
        Some(Version::H1) => watch_connection(watcher.watch(builders.h1.serve_connection(io, svc)), tracked, cfg, peer).await,
        Some(Version::H2) => Box::pin(watch_connection(watcher.watch(builders.h2.serve_connection(io, svc)), tracked, cfg, peer)).await,
        None => {
            let conn = builders.either.serve_connection(io, svc).into_owned();
            Box::pin(watch_connection(watcher.watch(conn), tracked, cfg, peer)).await
        }
    }
}

const X_REQUEST_ID: http::HeaderName = http::HeaderName::from_static("x-request-id");

/// Request ids: a per-process random prefix and a counter (cheap, unique, not guessable across runs).
#[derive(Clone)]
struct RequestIds {
    prefix: Arc<str>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

impl Default for RequestIds {
    fn default() -> Self {
        RequestIds { prefix: mcpgate_protocol::toolbox::random_hex(4).into(), next: Arc::default() }
    }
}

impl RequestIds {
    /// The request's id: the client's own `x-request-id` (the first, when it sent several), or
    /// a new one, then set on the request.
    fn of<B>(&self, req: &mut Request<B>) -> http::HeaderValue {
        if let Some(own) = req.headers().get(X_REQUEST_ID) {
            return own.clone();
        }
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let text = format!("{}-{n}", self.prefix);
        let made = http::HeaderValue::from_maybe_shared(bytes::Bytes::from(text)).unwrap_or(http::HeaderValue::from_static("-"));
        req.headers_mut().insert(X_REQUEST_ID, made.clone());
        made
    }
}

/// The span of one request, when something reads it (traces are exported, or the log is at
/// `debug`): the caller, method, item and upstream are recorded as they are known. Otherwise
/// none: the request's audit line carries its id itself.
fn request_span<B>(req: &Request<B>, id: &http::HeaderValue) -> tracing::Span {
    if !crate::telemetry::request_spans() {
        return tracing::Span::none();
    }
    let id = id.to_str().unwrap_or("-");
    let span = tracing::info_span!(
        "request",
        id,
        caller = tracing::field::Empty,
        method = tracing::field::Empty,
        item = tracing::field::Empty,
        upstream = tracing::field::Empty
    );
    crate::telemetry::adopt_remote_parent(&span, req.headers());
    span
}

/// The handler's response, or the 500 of one that panicked (see [`panic_response`]); either
/// carries the request's id.
async fn answered(handled: impl Future<Output = Result<Response<Body>, Infallible>>, id: http::HeaderValue) -> Response<Body> {
    use futures_util::FutureExt;
    let mut resp = match std::panic::AssertUnwindSafe(handled).catch_unwind().await {
        Ok(Ok(resp)) => resp,
        Ok(Err(never)) => match never {},
        Err(panic) => panic_response(panic),
    };
    resp.headers_mut().insert(X_REQUEST_ID, id);
    resp
}

/// A handler that panicked: the client gets a JSON-RPC internal error, the log the panic.
fn panic_response(err: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    let what = err.downcast_ref::<String>().map(String::as_str).or_else(|| err.downcast_ref::<&str>().copied()).unwrap_or("(no message)");
    tracing::error!(panic = %what, "a request handler panicked");
    let mut r = render::error(None, &RpcError::internal("Internal error"));
    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    r
}

/// Drives a connection until it ends, or until it has been silent, idle or shed for too long.
async fn watch_connection<F, E>(conn: F, tracked: &Conn, cfg: &ServerConfig, peer: SocketAddr)
where
    F: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    tokio::pin!(conn);
    let recheck = crate::edge::conns::recheck(cfg.header_read_timeout, cfg.idle_timeout, cfg.write_timeout);
    let sleep = tokio::time::sleep(recheck);
    tokio::pin!(sleep);
    loop {
        let deadline = tracked.deadline(cfg.header_read_timeout, cfg.idle_timeout, cfg.write_timeout);
        let horizon = tokio::time::Instant::now() + recheck;
        sleep.as_mut().reset(deadline.map_or(horizon, |d| d.min(horizon)));
        tokio::select! {
            r = &mut conn => {
                if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            _ = tracked.close.cancelled() => {
                tracing::debug!(%peer, "closing the longest-idle connection to make room");
                return;
            }
            _ = &mut sleep => {
                let deadline = tracked.deadline(cfg.header_read_timeout, cfg.idle_timeout, cfg.write_timeout);
                if deadline.is_some_and(|d| d <= tokio::time::Instant::now()) {
                    if tracked.busy() {
                        tracing::debug!(%peer, "closing a connection whose client stopped reading (a response waited for it)");
                    } else {
                        tracing::debug!(%peer, "closing a connection that sent no request in time, or sat idle");
                    }
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_with_the_request_id() {
        let id = http::HeaderValue::from_static("req-7");
        let ok = answered(async { Ok(render::plain(StatusCode::OK, "fine\n")) }, id.clone()).await;
        assert_eq!((ok.status(), ok.headers().get(X_REQUEST_ID)), (StatusCode::OK, Some(&id)));
        let panicked = answered(
            async {
                if id.len() < 100 {
                    panic!("a bug");
                }
                Ok(render::plain(StatusCode::OK, "unreachable\n"))
            },
            id.clone(),
        )
        .await;
        assert_eq!((panicked.status(), panicked.headers().get(X_REQUEST_ID)), (StatusCode::INTERNAL_SERVER_ERROR, Some(&id)));
    }
}
