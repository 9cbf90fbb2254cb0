//! The one request path every edge uses. Each edge (modern HTTP, legacy HTTP sessions, stdio)
//! only translates its wire into an era-free [`Request`] and a [`Client`] (which era the client
//! speaks, and for a legacy client where its input requests go), and renders the [`Reply`]; the
//! steps in between are tower layers composed once, in [`serve`]:
//!
//! 1. [`TraceLayer`]: the request's span (a child of the client's `traceparent`, exported with
//!    `--features otlp`), kept open for as long as a streamed reply lasts;
//! 2. [`LegacyClientLayer`]: for a legacy client, an `input_required` answer becomes real
//!    server-to-client requests and a retry (see `bridge`), and the result is shaped for its era;
//!    nothing for a modern client;
//! 3. [`AdmitLayer`]: the service's admission (the gateway waits for its first catalogue and
//!    applies the caller's rate limit), for every request and every retry of a bridged one;
//! 4. the service itself (the gateway's dispatch table, or the demo server).
//!
//! Adding a step is one `.layer(…)` line in [`serve`]. The layers are plain `tower::Layer`s over
//! `tower::Service<Request, Response = Reply, Error = Infallible>`, so each can be tested alone.

use crate::dispatch::{BoxFuture, Request, Service};
use crate::edge::era::bridge::{self, Waiting};
use crate::telemetry::Transport;
use mcpgate_protocol::reply::Reply;
use mcpgate_protocol::tasks::Background;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::{Layer, ServiceBuilder, ServiceExt};

/// Who the client is, as far as the request path cares.
#[derive(Clone)]
pub enum Client {
    /// A 2026-07-28 client: it reads `input_required` results itself.
    Modern,
    /// A legacy client: its input requests go out on its reply stream and come back through
    /// `waiting`, under `scope` (its session).
    Legacy { waiting: Arc<Waiting>, scope: String },
}

/// Serves one request through the stack; `tasks` owns what a reply needs to run on its own (a
/// bridged legacy call).
/// `transport` is how the client reached the gateway (HTTP, or a stdio connection).
pub async fn serve(svc: Arc<dyn Service>, tasks: &Background, client: Client, transport: Transport, req: Request) -> Reply {
    let timeout = svc.input_timeout();
    let trace = TraceLayer { metrics: svc.operation_metrics(), transport };
    let stack = ServiceBuilder::new()
        .layer(trace)
        .layer(LegacyClientLayer { client, tasks: tasks.clone(), timeout })
        .layer(AdmitLayer)
        .service(Core(svc));
    match stack.oneshot(req).await {
        Ok(reply) => reply,
        Err(never) => match never {},
    }
}

/// What every step of the stack shares: it is always ready, answers with a [`Reply`] and never
/// fails (a refusal is a reply).
macro_rules! always_ready {
    () => {
        type Response = Reply;
        type Error = Infallible;
        type Future = BoxFuture<'static, Result<Reply, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
    };
}

/// A request service of the stack.
pub trait Step:
    tower::Service<Request, Response = Reply, Error = Infallible, Future = BoxFuture<'static, Result<Reply, Infallible>>>
{
}
impl<T> Step for T where
    T: tower::Service<Request, Response = Reply, Error = Infallible, Future = BoxFuture<'static, Result<Reply, Infallible>>>
{
}

/// The service at the bottom of the stack.
#[derive(Clone)]
pub struct Core(pub Arc<dyn Service>);

impl tower::Service<Request> for Core {
    always_ready!();

    fn call(&mut self, req: Request) -> Self::Future {
        let svc = self.0.clone();
        Box::pin(async move { Ok(svc.handle(req).await) })
    }
}

/// Admission: the service decides whether the request may go on (see [`Service::admit`]).
#[derive(Clone, Copy)]
pub struct AdmitLayer;

impl Layer<Core> for AdmitLayer {
    type Service = Admit;

    fn layer(&self, inner: Core) -> Admit {
        Admit(inner)
    }
}

#[derive(Clone)]
pub struct Admit(Core);

impl tower::Service<Request> for Admit {
    always_ready!();

    fn call(&mut self, req: Request) -> Self::Future {
        // Nothing to wait for or check: the request goes straight on, without a box around it.
        if self.0.0.admits_at_once(&req) {
            return self.0.call(req);
        }
        let mut inner = self.0.clone();
        Box::pin(async move {
            if let Err(e) = inner.0.admit(&req).await {
                return Ok(Reply::error(e));
            }
            inner.call(req).await
        })
    }
}

/// The bridge to a legacy client's era (see the module comment).
#[derive(Clone)]
pub struct LegacyClientLayer {
    client: Client,
    tasks: Background,
    timeout: Duration,
}

impl<S> Layer<S> for LegacyClientLayer {
    type Service = LegacyClient<S>;

    fn layer(&self, inner: S) -> LegacyClient<S> {
        LegacyClient { inner, layer: self.clone() }
    }
}

#[derive(Clone)]
pub struct LegacyClient<S> {
    inner: S,
    layer: LegacyClientLayer,
}

impl<S: Step + Clone + Send + Sync + 'static> tower::Service<Request> for LegacyClient<S> {
    always_ready!();

    fn call(&mut self, req: Request) -> Self::Future {
        // A modern client's request goes straight on: its future is the inner one, not another
        // box around it.
        if matches!(self.layer.client, Client::Modern) {
            return self.inner.call(req);
        }
        let mut inner = self.inner.clone();
        let layer = self.layer.clone();
        Box::pin(async move {
            let Client::Legacy { waiting, scope } = layer.client else {
                return inner.call(req).await;
            };
            let first = match inner.call(req.clone()).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            let retry = move |again: Request| {
                let mut inner = inner.clone();
                Box::pin(async move {
                    match inner.call(again).await {
                        Ok(r) => r,
                        Err(never) => match never {},
                    }
                }) as BoxFuture<'static, Reply>
            };
            let ask = bridge::Asking { waiting, scope, timeout: layer.timeout, tasks: layer.tasks };
            Ok(crate::edge::era::legacy::downgrade_reply(bridge::bridge(Arc::new(retry), req, first, ask)))
        })
    }
}

/// The request's span and its duration (see the module comment), recorded in the
/// `mcp.server.operation.duration` histogram when the service keeps metrics.
#[derive(Clone)]
pub struct TraceLayer {
    pub metrics: Option<Arc<crate::telemetry::Metrics>>,
    pub transport: Transport,
}

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;

    fn layer(&self, inner: S) -> Trace<S> {
        Trace { inner, layer: self.clone() }
    }
}

#[derive(Clone)]
pub struct Trace<S> {
    inner: S,
    layer: TraceLayer,
}

impl<S: Step + Clone + Send + 'static> tower::Service<Request> for Trace<S> {
    always_ready!();

    fn call(&mut self, mut req: Request) -> Self::Future {
        let mut inner = self.inner.clone();
        let started = std::time::Instant::now();
        let version = match &req.legacy {
            Some(session) => crate::telemetry::semconv::protocol_version(&session.version),
            None => crate::telemetry::semconv::protocol_version(&req.meta.protocol_version),
        };
        let received = crate::telemetry::Received {
            id: req.id.get(),
            session: req.legacy.as_ref().map(|l| l.sid.as_str()),
            version,
            transport: self.layer.transport,
        };
        let span = crate::telemetry::hop(&mut req.meta.fields, req.method.as_str(), &received);
        let (method, layer) = (req.method.clone(), self.layer.clone());
        Box::pin(async move {
            let reply = tracing::Instrument::instrument(inner.call(req), span.clone()).await;
            reply.map(|r| {
                let watched = span.clone();
                let r = r.map_outcome(move |o| {
                    let (error_type, code) = crate::telemetry::semconv::outcome_error(&method, &o);
                    let message = match &o {
                        mcpgate_protocol::reply::Outcome::Error(e) => Some(e.message.as_str()),
                        _ => None,
                    };
                    crate::telemetry::ended(&watched, error_type.as_deref(), code, message);
                    if let Some(metrics) = &layer.metrics {
                        metrics.served(&crate::telemetry::semconv::Served {
                            method: &method,
                            version,
                            transport: layer.transport,
                            error_type: error_type.as_deref(),
                            took: started.elapsed(),
                        });
                    }
                    o
                });
                crate::telemetry::keep_span(r, span)
            })
        })
    }
}
