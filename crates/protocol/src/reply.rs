//! The reply model shared by everything that answers a request: a [`Reply`] is either one final
//! [`Outcome`] or an [`EventStream`] of notifications ending in one. Streams carry their deadline
//! and an optional guard whose drop cancels the work (a client hanging up cancels the upstream).

use crate::errors::RpcError;
use crate::json::Json;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How a request ended.
#[derive(Debug)]
pub enum Outcome {
    /// A `result` object, passed through verbatim.
    Result(Json),
    /// An `error` object from an upstream, passed through verbatim.
    UpstreamError(Json),
    /// An error the gateway itself reports.
    Error(RpcError),
}

/// One item of a streamed reply.
#[derive(Debug)]
pub enum Event {
    /// A complete JSON-RPC notification message, ready to relay.
    Notification(Vec<u8>),
    /// A request the upstream sent the client during the call (a legacy server asking for
    /// input), as the upstream wrote it. Only a stream made [`EventStream::with_asks`] yields it.
    Ask(Vec<u8>),
    Done(Outcome),
}

/// Anything whose drop cancels the work behind a stream.
pub trait Guard: Send + Sync {}
impl<T: Send + Sync> Guard for T {}

type OutcomeMap = Box<dyn Fn(Outcome) -> Outcome + Send + Sync>;
type EventFilter = Box<dyn Fn(Event) -> Option<Event> + Send + Sync>;

pub struct EventStream {
    rx: Source,
    map: Option<OutcomeMap>,
    /// Applied to each notification and request before it is yielded (see
    /// [`Reply::filter_events`]).
    filter: Option<EventFilter>,
    deadline: Option<Instant>,
    timeout_error: Option<RpcError>,
    _guards: Vec<Box<dyn Guard>>,
    finished: bool,
    /// An event already taken off the channel, yielded first.
    first: Option<Event>,
    /// Whether [`Event::Ask`] is yielded (else it is dropped: nobody would answer it).
    asks: bool,
}

/// Where a stream's events come from: a channel fed by a task, or events produced as the stream
/// is read (no task and no channel: what a long-lived, mostly idle stream should cost).
enum Source {
    Channel(mpsc::Receiver<Event>),
    Produced(std::pin::Pin<Box<dyn futures_util::Stream<Item = Event> + Send + Sync>>),
}

impl Source {
    async fn recv(&mut self) -> Option<Event> {
        match self {
            Source::Channel(rx) => rx.recv().await,
            Source::Produced(s) => s.next().await,
        }
    }
}

impl EventStream {
    pub fn new(rx: mpsc::Receiver<Event>) -> Self {
        Self::of(Source::Channel(rx))
    }

    /// A stream whose events `events` produces as the reader asks for them.
    pub fn produced(events: impl futures_util::Stream<Item = Event> + Send + Sync + 'static) -> Self {
        Self::of(Source::Produced(Box::pin(events)))
    }

    fn of(rx: Source) -> Self {
        EventStream {
            rx,
            map: None,
            filter: None,
            deadline: None,
            timeout_error: None,
            _guards: Vec::new(),
            finished: false,
            first: None,
            asks: false,
        }
    }

    /// Ends the stream with `error` if it has not finished by `deadline`.
    pub fn with_deadline(mut self, deadline: Instant, error: RpcError) -> Self {
        self.deadline = Some(deadline);
        self.timeout_error = Some(error);
        self
    }

    /// Yields the upstream's requests ([`Event::Ask`]) to the reader, who answers them.
    pub fn with_asks(mut self) -> Self {
        self.asks = true;
        self
    }

    /// Adds a guard, dropped with the stream (guards added earlier are kept).
    pub fn with_guard(mut self, guard: impl Guard + 'static) -> Self {
        self._guards.push(Box::new(guard));
        self
    }

    /// The next event; after `Done` (or a deadline or a dropped producer) it returns `None`.
    pub async fn next(&mut self) -> Option<Event> {
        if self.finished {
            return None;
        }
        if let Some(ev) = self.first.take() {
            self.finished = matches!(ev, Event::Done(_));
            return Some(ev);
        }
        loop {
            let ev = match self.next_raw().await {
                Some(Event::Ask(_)) if !self.asks => {
                    tracing::warn!("dropping a request from an upstream that nobody can answer");
                    continue;
                }
                Some(ev @ (Event::Notification(_) | Event::Ask(_))) => ev,
                other => return other,
            };
            let Some(filter) = &self.filter else { return Some(ev) };
            match filter(ev) {
                // Left out: the next one.
                None => continue,
                // The filter ended the stream: its outcome is mapped like any other.
                Some(Event::Done(o)) => {
                    self.finished = true;
                    return Some(Event::Done(self.mapped(o)));
                }
                Some(ev) => return Some(ev),
            }
        }
    }

    fn mapped(&self, o: Outcome) -> Outcome {
        match &self.map {
            Some(f) => f(o),
            None => o,
        }
    }

    async fn next_raw(&mut self) -> Option<Event> {
        let got = match self.deadline {
            Some(d) => match tokio::time::timeout_at(d, self.rx.recv()).await {
                Ok(v) => v,
                Err(_) => {
                    self.finished = true;
                    let err = self.timeout_error.take().unwrap_or_else(|| RpcError::internal("request timed out"));
                    return Some(Event::Done(self.mapped(Outcome::Error(err))));
                }
            },
            None => self.rx.recv().await,
        };
        match got {
            Some(Event::Done(o)) => {
                self.finished = true;
                Some(Event::Done(self.mapped(o)))
            }
            Some(ev) => Some(ev),
            None => {
                self.finished = true;
                Some(Event::Done(self.mapped(Outcome::Error(RpcError::internal("the reply stream ended without a response")))))
            }
        }
    }

    /// Waits for the final outcome, dropping notifications.
    pub async fn outcome(mut self) -> Outcome {
        loop {
            match self.next().await {
                Some(Event::Done(o)) => return o,
                Some(_) => continue,
                None => {
                    return Outcome::Error(RpcError::internal("the reply stream ended without a response"));
                }
            }
        }
    }
}

/// A reply: one outcome (sent as JSON) or a stream (sent as SSE).
pub enum Reply {
    Single(Outcome),
    Stream(EventStream),
}

impl Reply {
    pub fn error(e: RpcError) -> Reply {
        Reply::Single(Outcome::Error(e))
    }

    /// Collapses a stream whose first event is already final into a single reply, so that the
    /// client gets JSON exactly when the producer answered without notifications.
    pub async fn settle(self) -> Reply {
        match self {
            Reply::Stream(mut s) => match s.next().await {
                Some(Event::Done(o)) => Reply::Single(o),
                Some(ev) => Reply::Stream(s.prepend(ev)),
                None => Reply::error(RpcError::internal("empty reply stream")),
            },
            single => single,
        }
    }

    /// Applies `f` to the final outcome, however it arrives.
    pub fn map_outcome(self, f: impl Fn(Outcome) -> Outcome + Send + Sync + 'static) -> Reply {
        match self {
            Reply::Single(o) => Reply::Single(f(o)),
            Reply::Stream(mut s) => {
                let prev = s.map.take();
                s.map = Some(Box::new(move |o| {
                    f(match &prev {
                        Some(p) => p(o),
                        None => o,
                    })
                }));
                Reply::Stream(s)
            }
        }
    }

    /// Passes each notification and request of a stream through `f`, which may rewrite it, leave
    /// it out (`None`) or end the stream with an outcome (`Some(Event::Done(_))`, mapped like the
    /// stream's own). A single reply has none.
    pub fn filter_events(self, f: impl Fn(Event) -> Option<Event> + Send + Sync + 'static) -> Reply {
        match self {
            Reply::Single(o) => Reply::Single(o),
            Reply::Stream(mut s) => {
                let prev = s.filter.take();
                s.filter = Some(Box::new(move |ev| {
                    let ev = match &prev {
                        Some(p) => p(ev)?,
                        None => ev,
                    };
                    match ev {
                        done @ Event::Done(_) => Some(done),
                        ev => f(ev),
                    }
                }));
                // An event already taken off the stream (by `settle`) passes the filter too.
                if let Some(first) = s.first.take() {
                    s.first = s.filter.as_ref().and_then(|filter| filter(first)).map(|ev| match ev {
                        Event::Done(o) => Event::Done(s.mapped(o)),
                        ev => ev,
                    });
                }
                Reply::Stream(s)
            }
        }
    }

    pub async fn outcome(self) -> Outcome {
        match self {
            Reply::Single(o) => o,
            Reply::Stream(s) => s.outcome().await,
        }
    }
}

impl EventStream {
    /// Puts an already received event back in front of the stream.
    fn prepend(mut self, first: Event) -> EventStream {
        self.first = Some(first);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn settles_to_single_when_first_event_is_final() {
        let (tx, rx) = mpsc::channel(4);
        tx.send(Event::Done(Outcome::Error(RpcError::internal("x")))).await.unwrap();
        assert!(matches!(Reply::Stream(EventStream::new(rx)).settle().await, Reply::Single(_)));
    }

    #[tokio::test]
    async fn keeps_streaming_after_a_notification_and_enforces_the_deadline() {
        let (tx, rx) = mpsc::channel(4);
        tx.send(Event::Notification(b"n".to_vec())).await.unwrap();
        let s = EventStream::new(rx).with_deadline(Instant::now() + Duration::from_millis(50), RpcError::internal("late"));
        let Reply::Stream(mut s) = Reply::Stream(s).settle().await else { panic!("expected a stream") };
        assert!(matches!(s.next().await, Some(Event::Notification(n)) if n == b"n"));
        match s.next().await {
            Some(Event::Done(Outcome::Error(e))) => assert_eq!(e.message, "late"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(s.next().await.is_none());
        drop(tx);
    }

    #[tokio::test]
    async fn a_deadline_or_a_dropped_producer_passes_through_the_outcome_map() {
        for late in [true, false] {
            let (tx, rx) = mpsc::channel::<Event>(1);
            let s = EventStream::new(rx);
            let s = if late { s.with_deadline(Instant::now() + Duration::from_millis(20), RpcError::internal("late")) } else { s };
            let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let count = seen.clone();
            let reply = Reply::Stream(s).map_outcome(move |o| {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                o
            });
            if !late {
                drop(tx);
                assert!(matches!(reply.outcome().await, Outcome::Error(_)));
            } else {
                assert!(matches!(reply.outcome().await, Outcome::Error(e) if e.message == "late"));
                drop(tx);
            }
            assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1, "the map saw the outcome (late: {late})");
        }
    }

    #[tokio::test]
    async fn filters_see_every_event_even_one_already_settled_and_may_end_the_stream() {
        let (tx, rx) = mpsc::channel(8);
        for n in [&b"keep"[..], b"drop", b"stop", b"never"] {
            tx.send(Event::Notification(n.to_vec())).await.unwrap();
        }
        // `settle` has taken the first event off the stream before the filter is added.
        let reply = Reply::Stream(EventStream::new(rx)).settle().await;
        let reply = reply.map_outcome(|o| match o {
            Outcome::Error(e) => Outcome::Error(RpcError::internal(format!("mapped {}", e.message))),
            o => o,
        });
        let reply = reply.filter_events(|ev| match ev {
            Event::Notification(n) if n == b"keep" => Some(Event::Notification(b"kept".to_vec())),
            Event::Notification(n) if n == b"drop" => None,
            Event::Notification(_) => Some(Event::Done(Outcome::Error(RpcError::internal("withheld")))),
            ev => Some(ev),
        });
        let Reply::Stream(mut s) = reply else { panic!("expected a stream") };
        assert!(matches!(s.next().await, Some(Event::Notification(n)) if n == b"kept"));
        match s.next().await {
            Some(Event::Done(Outcome::Error(e))) => assert_eq!(e.message, "mapped withheld", "the filter's outcome is mapped"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(s.next().await.is_none(), "the stream ended there");
    }
}
