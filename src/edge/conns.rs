//! Connections and requests at the edge, bounded. A connection must complete its first request
//! head within `server.header_read_timeout` of being accepted (so a socket that says nothing, or
//! sends half an HTTP/2 preface, is closed), and is closed after `server.idle_timeout` without a
//! request in progress. At most `server.max_connections` are open: a new one first closes the
//! connection idle the longest, and is refused when none is idle. Requests in progress are
//! limited in total (`server.max_in_flight`, then 503) and per caller
//! (`server.max_in_flight_per_caller`, then 429), both with `Retry-After`; a request counts until
//! its response body has been sent (a streamed tool call included), but not the long-lived
//! change streams (`subscriptions/listen`, the legacy GET stream), which the connection limit bounds.
//! A response whose last frame the client has not taken for `server.write_timeout` closes its
//! connection: that covers an HTTP/2 client that never opens its flow-control window, which
//! the socket-level write deadline (`slow`) cannot see.

use bytes::Bytes;
use dashmap::DashMap;
use http::StatusCode;
use http_body::{Body, Frame, SizeHint};
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::sync::lock;
use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One open connection.
pub struct Conn {
    accepted: Instant,
    active: AtomicUsize,
    served: AtomicBool,
    idle_since: Mutex<Instant>,
    /// Responses whose last frame has not been taken by the client yet, since when.
    waiting: Mutex<HashMap<u64, Instant>>,
    next_request: AtomicU64,
    pub close: CancellationToken,
}

impl Conn {
    /// A request head arrived; the returned guard marks the request in progress until dropped.
    pub fn begin(self: &Arc<Self>) -> Active {
        self.served.store(true, Ordering::SeqCst);
        self.active.fetch_add(1, Ordering::SeqCst);
        Active { conn: self.clone(), id: self.next_request.fetch_add(1, Ordering::Relaxed), listed: false }
    }

    fn idle_for(&self) -> Option<Duration> {
        (self.active.load(Ordering::SeqCst) == 0).then(|| lock(&self.idle_since).elapsed())
    }

    /// Whether a request is in progress (so a deadline that runs out means a stalled response).
    pub fn busy(&self) -> bool {
        self.active.load(Ordering::SeqCst) > 0
    }

    /// When this connection must close unless something happens first: no first request in
    /// time, idle too long, or a response the client has stopped taking. Requests starting and
    /// ending do not signal the watcher (that was two wake-ups per request): it looks again at
    /// least every [`recheck`] interval, which is never later than a deadline set since.
    pub fn deadline(&self, first_request: Duration, idle: Duration, write: Duration) -> Option<Instant> {
        if !self.served.load(Ordering::SeqCst) {
            return Some(self.accepted + first_request);
        }
        if self.active.load(Ordering::SeqCst) == 0 {
            return Some(*lock(&self.idle_since) + idle);
        }
        lock(&self.waiting).values().min().map(|since| *since + write)
    }
}

/// How long the watcher of a connection may sleep without looking at its deadline again: the
/// shortest of the limits, so a deadline set after it last looked (at least that far ahead) is
/// never missed.
pub fn recheck(first_request: Duration, idle: Duration, write: Duration) -> Duration {
    first_request.min(idle).min(write).clamp(Duration::from_millis(10), Duration::from_secs(3600))
}

/// A request in progress on a connection.
pub struct Active {
    conn: Arc<Conn>,
    id: u64,
    /// Whether this request is in the connection's `waiting` map (so a poll that finds the
    /// response waiting on the gateway costs no lock).
    listed: bool,
}

impl Active {
    /// The response handed the client a frame: the clock runs until the client asks for more.
    fn delivered(&mut self) {
        self.listed = true;
        lock(&self.conn.waiting).insert(self.id, Instant::now());
    }

    /// The client asked for the next frame (or the response is waiting on the gateway).
    fn taken(&mut self) {
        if std::mem::take(&mut self.listed) {
            lock(&self.conn.waiting).remove(&self.id);
        }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.taken();
        *lock(&self.conn.idle_since) = Instant::now();
        self.conn.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response on a connection: the request counts as in progress until it has been sent, and
/// the time the client leaves a frame untaken is watched (see [`Conn::deadline`]). Data goes out
/// in pieces of at most [`PIECE`] bytes: HTTP/2 takes a whole frame from the body once the stream
/// has *any* window and queues what does not fit, so a large frame would be handed over (and the
/// clock stopped) while the client still withholds its window. The request's span, when it has
/// one, is entered while the body is polled (a streamed reply's log lines carry it).
pub struct Sending<B> {
    inner: B,
    active: Active,
    rest: Bytes,
    span: tracing::Span,
}

/// The largest piece of a response body handed to the connection at once.
const PIECE: usize = 16 * 1024;

impl<B> Sending<B> {
    /// The clock starts with the response head: an HTTP/2 client with no window for this
    /// stream never lets its body be polled at all.
    pub fn new(inner: B, mut active: Active, span: tracing::Span) -> Self {
        active.delivered();
        Sending { inner, active, rest: Bytes::new(), span }
    }

    fn piece(&mut self) -> Frame<Bytes> {
        let n = self.rest.len().min(PIECE);
        self.active.delivered();
        Frame::data(self.rest.split_to(n))
    }
}

impl<B: Body<Data = Bytes, Error = Infallible> + Unpin> Body for Sending<B> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if !self.rest.is_empty() {
            return Poll::Ready(Some(Ok(self.piece())));
        }
        let this = &mut *self;
        let polled = {
            let _in = this.span.enter();
            Pin::new(&mut this.inner).poll_frame(cx)
        };
        match polled {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => {
                    self.rest = data;
                    Poll::Ready(Some(Ok(self.piece())))
                }
                Err(frame) => {
                    self.active.taken();
                    Poll::Ready(Some(Ok(frame)))
                }
            },
            other => {
                self.active.taken();
                other
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.inner.size_hint();
        let extra = self.rest.len() as u64;
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(extra));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(extra));
        }
        hint
    }
}

pub struct Conns {
    map: DashMap<u64, Arc<Conn>>,
    next: AtomicU64,
    max: usize,
}

impl Conns {
    pub fn new(max: usize) -> Self {
        Conns { map: DashMap::new(), next: AtomicU64::new(1), max: max.max(1) }
    }

    /// Registers a new connection, closing the longest-idle one if the limit is reached;
    /// `None` when every open connection is busy.
    pub fn admit(&self) -> Option<(u64, Arc<Conn>)> {
        if self.map.len() >= self.max {
            let oldest = self.map.iter().filter_map(|c| c.idle_for().map(|d| (*c.key(), d))).max_by_key(|(_, d)| *d);
            let (id, _) = oldest?;
            if let Some((_, c)) = self.map.remove(&id) {
                c.close.cancel();
            }
        }
        let now = Instant::now();
        let conn = Arc::new(Conn {
            accepted: now,
            active: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            idle_since: Mutex::new(now),
            waiting: Mutex::default(),
            next_request: AtomicU64::new(0),
            close: CancellationToken::new(),
        });
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.map.insert(id, conn.clone());
        Some((id, conn))
    }

    pub fn remove(&self, id: u64) {
        self.map.remove(&id);
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Requests in progress, in total and per caller.
pub struct InFlight {
    total: Arc<AtomicUsize>,
    per_caller: Arc<DashMap<String, usize>>,
    max_total: usize,
    max_per_caller: usize,
}

/// One admitted request; dropping it releases its place.
#[derive(Debug)]
pub struct Permit {
    total: Arc<AtomicUsize>,
    per_caller: Arc<DashMap<String, usize>>,
    caller: String,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.total.fetch_sub(1, Ordering::SeqCst);
        if let Some(mut n) = self.per_caller.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
        }
        self.per_caller.remove_if(&self.caller, |_, n| *n == 0);
    }
}

impl InFlight {
    pub fn new(max_total: usize, max_per_caller: usize) -> Self {
        InFlight { total: Arc::default(), per_caller: Arc::default(), max_total: max_total.max(1), max_per_caller: max_per_caller.max(1) }
    }

    /// A place for one more request of `caller`, or the error to answer with.
    pub fn admit(&self, caller: &str) -> Result<Permit, RpcError> {
        if self.total.fetch_add(1, Ordering::SeqCst) >= self.max_total {
            self.total.fetch_sub(1, Ordering::SeqCst);
            return Err(RpcError::internal("The gateway is at its limit of requests in progress; retry shortly")
                .with_status(StatusCode::SERVICE_UNAVAILABLE)
                .with_header("retry-after", "1"));
        }
        // A caller with requests in progress is found by its borrowed id; only its first one
        // makes an entry.
        let mut n = match self.per_caller.get_mut(caller) {
            Some(n) => n,
            None => self.per_caller.entry(caller.to_string()).or_insert(0),
        };
        if *n >= self.max_per_caller {
            drop(n);
            self.total.fetch_sub(1, Ordering::SeqCst);
            return Err(crate::dispatch::rate_limited(&format!("{caller} (requests in progress)"), Duration::from_secs(1)));
        }
        *n += 1;
        Ok(Permit { total: self.total.clone(), per_caller: self.per_caller.clone(), caller: caller.to_string() })
    }

    pub fn in_progress(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }
}

/// A response body that holds something (a request's place) until it has been sent or dropped.
pub struct Holding<B, T> {
    inner: B,
    _held: T,
}

impl<B, T> Holding<B, T> {
    pub fn new(inner: B, held: T) -> Self {
        Holding { inner, _held: held }
    }
}

impl<B: Body<Data = Bytes, Error = Infallible> + Unpin, T: Unpin> Body for Holding<B, T> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_idle_connection_makes_room_and_busy_ones_do_not() {
        let conns = Conns::new(2);
        let (a, conn_a) = conns.admit().unwrap();
        let (_, conn_b) = conns.admit().unwrap();
        let _busy = conn_b.begin();
        let (_, conn_c) = conns.admit().expect("a is idle: it makes room");
        assert!(conn_a.close.is_cancelled() && conns.len() == 2);
        assert!(conns.map.get(&a).is_none());
        let _busy_c = conn_c.begin();
        assert!(conns.admit().is_none(), "every connection is busy");
    }

    #[test]
    fn requests_in_progress_are_limited_in_total_and_per_caller() {
        let f = InFlight::new(3, 2);
        let a1 = f.admit("a").unwrap();
        let _a2 = f.admit("a").unwrap();
        assert_eq!(f.admit("a").unwrap_err().status, StatusCode::TOO_MANY_REQUESTS);
        let _b1 = f.admit("b").unwrap();
        let full = f.admit("c").unwrap_err();
        assert_eq!(full.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(full.headers.iter().any(|(k, _)| *k == "retry-after"));
        drop(a1);
        assert!(f.admit("c").is_ok(), "a finished request frees its place");
    }

    #[tokio::test]
    async fn responses_go_out_in_pieces_with_their_exact_length() {
        use http_body_util::{BodyExt, Full};
        let conns = Conns::new(4);
        let (_, conn) = conns.admit().unwrap();
        let body = Bytes::from(vec![7u8; 2 * PIECE + 5]);
        let mut sending = Sending::new(Full::new(body.clone()), conn.begin(), tracing::Span::none());
        assert_eq!(sending.size_hint().exact(), Some(body.len() as u64));
        let mut sizes = Vec::new();
        let mut got = Vec::new();
        while let Some(frame) = sending.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            sizes.push(data.len());
            got.extend_from_slice(&data);
            assert_eq!(sending.size_hint().exact(), Some((body.len() - got.len()) as u64), "the length left stays exact");
        }
        assert_eq!(sizes, [PIECE, PIECE, 5]);
        assert_eq!(got, body);
        assert!(sending.is_end_stream());
    }
}
