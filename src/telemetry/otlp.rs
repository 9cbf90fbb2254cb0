//! Trace export over OTLP/HTTP (protobuf), and audit records as OTLP logs (`[audit] otlp = true`,
//! to `/v1/logs` of the same collector), built only with `--features otlp` and switched on by
//! the standard environment variables (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or
//! `OTEL_EXPORTER_OTLP_ENDPOINT` plus `/v1/traces`; `OTEL_SERVICE_NAME`, default `mcpgate`; the
//! SDK's `OTEL_BSP_*` batching settings). It owns the exporter's HTTP client (the gateway's own
//! hyper + rustls client, run on the gateway's runtime: the SDK exports from its own thread, so
//! each export is spawned onto the runtime and awaited), the request span's remote parent (the
//! client's `traceparent` header), and the hop: every JSON-RPC request runs in an `mcp` span
//! whose context replaces the `traceparent` that goes upstream, so the upstream's spans hang
//! under the gateway's instead of beside them.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider};
use opentelemetry_http::{HeaderExtractor, HttpError};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Whether spans are exported (decided once, at start).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// A collector's answer larger than this is cut off (it carries only a partial-success note).
const MAX_ANSWER: usize = 64 * 1024;
/// One export attempt, connection included.
const EXPORT_DEADLINE: Duration = Duration::from_secs(10);

/// The running exporter; [`Export::shutdown`] flushes what is still batched.
pub struct Export {
    provider: SdkTracerProvider,
    endpoint: String,
}

impl Export {
    /// Where spans go (without credentials).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Flushes the spans still batched and stops the exporter (call before the runtime goes).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            eprintln!("warning: OTLP trace export did not finish cleanly: {e}");
        }
    }
}

/// The collector's traces URL from the environment, if export is asked for.
pub fn endpoint_from_env() -> Option<String> {
    let var = |k: &str| std::env::var(k).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT").map(|base| format!("{}/v1/traces", base.trim_end_matches('/'))))
}

/// Why an OTLP export cannot start (`what` names the signal: "" for traces, " logs"/" log").
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("the OTLP{what} endpoint is not a URL: {error}")]
    NotAUrl { what: &'static str, error: http::uri::InvalidUri },
    #[error("the OTLP{what} endpoint must be an http:// or https:// URL")]
    NotHttp { what: &'static str },
    #[error("cannot set up OTLP{what} export to {to}: {error}")]
    Setup { what: &'static str, to: String, error: opentelemetry_otlp::ExporterBuildError },
}

/// Starts the exporter when the environment asks for one; the tracer goes into the
/// `tracing-opentelemetry` layer.
pub fn start(runtime: tokio::runtime::Handle) -> Result<Option<(Export, Tracer)>, ExportError> {
    let Some(endpoint) = endpoint_from_env() else { return Ok(None) };
    // The URL may carry credentials: errors and logs never show it whole.
    let uri: http::Uri = endpoint.parse().map_err(|e| ExportError::NotAUrl { what: "", error: e })?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(ExportError::NotHttp { what: "" });
    }
    let host = uri.host().unwrap_or("");
    let port = uri.port().map(|p| format!(":{p}")).unwrap_or_default();
    let shown = format!("{}://{host}{port}{}", uri.scheme_str().unwrap_or("http"), uri.path());
    let client = {
        let _entered = runtime.enter();
        Collector { client: mcpgate_net::http::new_http_client(), runtime: runtime.clone() }
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(endpoint.clone())
        .with_timeout(EXPORT_DEADLINE)
        .with_http_client(client)
        .build()
        .map_err(|error| ExportError::Setup { what: "", to: shown.clone(), error })?;
    let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource()).build();
    let tracer = provider.tracer("mcpgate");
    ACTIVE.store(true, Ordering::Relaxed);
    Ok(Some((Export { provider, endpoint: shown }, tracer)))
}

/// Who exports: `OTEL_SERVICE_NAME` (default `mcpgate`) and the version.
fn resource() -> opentelemetry_sdk::Resource {
    let service = std::env::var("OTEL_SERVICE_NAME").ok().filter(|s| !s.trim().is_empty()).unwrap_or_else(|| "mcpgate".into());
    opentelemetry_sdk::Resource::builder_empty()
        .with_service_name(service)
        .with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The collector's logs URL from the environment (`OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`, or
/// `OTEL_EXPORTER_OTLP_ENDPOINT` plus `/v1/logs`).
pub fn logs_endpoint_from_env() -> Option<String> {
    let var = |k: &str| std::env::var(k).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    var("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
        .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT").map(|base| format!("{}/v1/logs", base.trim_end_matches('/'))))
}

/// Emits one audit record as an OTLP log record: its fields (name, value) and its duration.
pub type LogEmitter = std::sync::Arc<dyn Fn(&[(&'static str, &str)], u64) + Send + Sync>;

/// The running audit log exporter; [`LogsExport::shutdown`] flushes what is still batched.
pub struct LogsExport {
    provider: opentelemetry_sdk::logs::SdkLoggerProvider,
}

impl LogsExport {
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            eprintln!("warning: OTLP audit log export did not finish cleanly: {e}");
        }
    }
}

/// Starts exporting audit records as OTLP log records (`[audit] otlp = true`): event name
/// `mcpgate.audit`, the record's fields as attributes. `None` without an endpoint.
pub fn start_logs(runtime: tokio::runtime::Handle) -> Result<Option<(LogsExport, LogEmitter)>, ExportError> {
    use opentelemetry::logs::{AnyValue, LogRecord, Logger, LoggerProvider, Severity};
    let Some(endpoint) = logs_endpoint_from_env() else { return Ok(None) };
    let uri: http::Uri = endpoint.parse().map_err(|e| ExportError::NotAUrl { what: " logs", error: e })?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(ExportError::NotHttp { what: " logs" });
    }
    let client = {
        let _entered = runtime.enter();
        Collector { client: mcpgate_net::http::new_http_client(), runtime: runtime.clone() }
    };
    let exporter = opentelemetry_otlp::LogExporter::builder()
        .with_http()
        .with_endpoint(endpoint)
        .with_timeout(EXPORT_DEADLINE)
        .with_http_client(client)
        .build()
        .map_err(|error| ExportError::Setup {
            what: " log",
            to: format!("{}://{}{}", uri.scheme_str().unwrap_or("http"), uri.host().unwrap_or(""), uri.path()),
            error,
        })?;
    let provider = opentelemetry_sdk::logs::SdkLoggerProvider::builder().with_batch_exporter(exporter).with_resource(resource()).build();
    let logger = provider.logger("mcpgate.audit");
    let sink: LogEmitter = std::sync::Arc::new(move |fields: &[(&'static str, &str)], duration_ms: u64| {
        let mut rec = logger.create_log_record();
        rec.set_event_name("mcpgate.audit");
        rec.set_severity_number(Severity::Info);
        rec.set_severity_text("INFO");
        rec.set_body(AnyValue::from("audit"));
        for (k, v) in fields {
            rec.add_attribute(*k, AnyValue::from(v.to_string()));
        }
        rec.add_attribute("duration_ms", AnyValue::from(i64::try_from(duration_ms).unwrap_or(i64::MAX)));
        logger.emit(rec);
    });
    Ok(Some((LogsExport { provider }, sink)))
}

/// The exporter's HTTP client: the gateway's hyper client, each export run on the gateway's runtime.
#[derive(Debug, Clone)]
struct Collector {
    client: mcpgate_net::http::HttpClient,
    runtime: tokio::runtime::Handle,
}

type Exchange<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<http::Response<Bytes>, HttpError>> + Send + 'a>>;

impl opentelemetry_http::HttpClient for Collector {
    // The trait is declared with `async_trait`; this is its expanded form.
    fn send_bytes<'life0, 'async_trait>(&'life0 self, request: http::Request<Bytes>) -> Exchange<'async_trait>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let client = self.client.clone();
        let task = self.runtime.spawn(async move {
            let exchange = async {
                let response = client.request(request.map(Full::new)).await?;
                let (parts, body) = response.into_parts();
                let body = Limited::new(body, MAX_ANSWER).collect().await?.to_bytes();
                Ok::<_, HttpError>(http::Response::from_parts(parts, body))
            };
            match tokio::time::timeout(EXPORT_DEADLINE, exchange).await {
                Ok(r) => r,
                Err(_) => Err("the OTLP collector did not answer in time".into()),
            }
        });
        Box::pin(async move { task.await.map_err(|e| HttpError::from(format!("OTLP export task failed: {e}")))? })
    }
}

/// Whether traces are exported (an OTLP endpoint is set and the exporter started).
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Makes the request span a child of the client's trace when it sent a `traceparent` header.
pub fn adopt_remote_parent(span: &tracing::Span, headers: &http::HeaderMap) {
    if !ACTIVE.load(Ordering::Relaxed) || !headers.contains_key("traceparent") {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// The span one JSON-RPC request is handled in, and the hop: the `traceparent` in `_meta` (where
/// it goes upstream from) becomes this span's own context. Its parent is the request span, or the
/// trace context in `_meta` when that names another trace than the header did.
pub fn hop(meta: &mut serde_json::Map<String, serde_json::Value>, method: &str, r: &super::Received<'_>) -> tracing::Span {
    if !ACTIVE.load(Ordering::Relaxed) {
        return tracing::Span::none();
    }
    // Named and described as the OpenTelemetry MCP semantic conventions say (`{mcp.method.name}
    // {target}`, `mcp.*` and `gen_ai.*` attributes; the target and the item are recorded when
    // the request is routed, see `telemetry::routed`). The earlier attributes (`rpc.method`,
    // `item`, `upstream`) are kept beside them for one release; `MCPGATE_TELEMETRY_NAMES=legacy`
    // keeps the earlier span name `mcp` too.
    let empty = || tracing::field::Empty;
    let name = if super::semconv::legacy_names() { "mcp".to_string() } else { method.to_string() };
    let span = tracing::info_span!(
        "mcp",
        otel.name = %name,
        otel.kind = "server",
        mcp.method.name = %method,
        mcp.protocol.version = %r.version,
        mcp.session.id = empty(),
        jsonrpc.request.id = empty(),
        network.transport = r.transport.as_str(),
        network.protocol.name = empty(),
        gen_ai.operation.name = empty(),
        gen_ai.tool.name = empty(),
        gen_ai.prompt.name = empty(),
        mcp.resource.uri = empty(),
        error.type = empty(),
        rpc.response.status_code = empty(),
        rpc.method = %method,
        item = empty(),
        upstream = empty(),
    );
    if let Some(id) = request_id(r.id) {
        span.record("jsonrpc.request.id", id.as_ref());
    }
    if let Some(sid) = r.session {
        span.record("mcp.session.id", sid);
    }
    if r.transport == super::Transport::Tcp {
        span.record("network.protocol.name", "http");
    }
    if method == "tools/call" {
        span.record("gen_ai.operation.name", "execute_tool");
    }
    let text = |k: &str| meta.get(k).and_then(|v| v.as_str()).map(str::to_string);
    if let Some(tp) = text("traceparent").filter(|tp| mcpgate_protocol::trace::valid_traceparent(tp)) {
        let mut carrier = HashMap::from([("traceparent".to_string(), tp)]);
        if let Some(ts) = text("tracestate") {
            carrier.insert("tracestate".into(), ts);
        }
        let remote = TraceContextPropagator::new().extract(&carrier);
        let here = tracing::Span::current().context();
        if remote.span().span_context().trace_id() != here.span().span_context().trace_id() {
            let _ = span.set_parent(remote);
        }
    }
    let own = span.context();
    let sc = own.span().span_context().clone();
    if sc.is_valid() {
        let traceparent = format!("00-{:032x}-{:016x}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8());
        meta.insert("traceparent".into(), traceparent.into());
    }
    span
}

/// `jsonrpc.request.id`: a string id without its quotes, a number as written; none for `null`.
fn request_id(raw: &str) -> Option<std::borrow::Cow<'_, str>> {
    match raw.trim() {
        "" | "null" => None,
        text if text.starts_with('"') => serde_json::from_str::<String>(text).ok().map(Into::into),
        text => Some(text.into()),
    }
}

/// How the request ended, on its span (which has started already, so through the OpenTelemetry
/// span rather than `tracing` fields for the status).
pub fn ended(span: &tracing::Span, error_type: Option<&str>, code: Option<i64>, message: Option<&str>) {
    if span.is_none() {
        return;
    }
    let Some(kind) = error_type else { return };
    span.record("error.type", kind);
    if let Some(code) = code {
        span.record("rpc.response.status_code", code.to_string().as_str());
    }
    span.set_status(opentelemetry::trace::Status::error(message.unwrap_or(kind).to_string()));
}

/// Renames an exported span that has started already (its context was taken for the upstream's
/// `traceparent`, so a later `otel.name` would not reach it).
pub fn rename(span: &tracing::Span, name: String) {
    use opentelemetry::trace::TraceContextExt;
    span.context().span().update_name(name);
}
