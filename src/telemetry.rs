//! The gateway's metrics, in the Prometheus/OpenMetrics text format (`prometheus-client`, one
//! registry per gateway): forwarded calls by method, upstream and outcome with their latency,
//! requests refused before any upstream (by reason), and, read when scraped, upstream health,
//! catalogue size, open change streams, requests in progress and open connections. Labels carry
//! only methods, upstream ids, endpoints and fixed reasons, except in two families each behind a
//! `[metrics]` switch: tool calls by catalogue tool name (bounded by the catalogue) and by
//! configured caller id (bounded by the `[[caller]]` entries; any other caller counts as `other`).
//! The `cluster_*` series exist only with `[cluster]`.

pub mod init;
pub mod logfmt;
pub mod logwriter;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod reasons;
pub mod semconv;

pub use semconv::Transport;

/// What a request's span and the server-side histogram say about it besides its method.
pub struct Received<'a> {
    /// The JSON-RPC id as sent (raw JSON).
    pub id: &'a str,
    /// The legacy session it came in, if any (`mcp.session.id`).
    pub session: Option<&'a str>,
    /// The protocol version the client speaks.
    pub version: &'a str,
    pub transport: Transport,
}

/// Whether an HTTP request gets a span of its own (`request{id, caller, method, item,
/// upstream}`): when traces are exported, or when the log shows `debug` lines, where every line
/// of a request carries it. Otherwise nothing reads it, and it is not made: the request's audit
/// line names its id (`request_id`).
pub fn request_spans() -> bool {
    #[cfg(feature = "otlp")]
    if otlp::active() {
        return true;
    }
    tracing::enabled!(target: "mcpgate::edge", tracing::Level::DEBUG)
}

/// The span a JSON-RPC request is handled in when traces are exported (`--features otlp`), which
/// also makes the `traceparent` going upstream point at it; otherwise no span of its own and the
/// caller's trace context passes through unchanged.
pub fn hop(meta: &mut serde_json::Map<String, serde_json::Value>, method: &str, r: &Received<'_>) -> tracing::Span {
    #[cfg(feature = "otlp")]
    return otlp::hop(meta, method, r);
    #[cfg(not(feature = "otlp"))]
    {
        let _ = (meta, method, r);
        tracing::Span::none()
    }
}

/// Records how a request ended on its span: `error.type`, `rpc.response.status_code` and the
/// span's status (an error with the JSON-RPC message), as the conventions say.
pub fn ended(span: &tracing::Span, error_type: Option<&str>, code: Option<i64>, message: Option<&str>) {
    #[cfg(feature = "otlp")]
    otlp::ended(span, error_type, code, message);
    #[cfg(not(feature = "otlp"))]
    let _ = (span, error_type, code, message);
}

/// Records where a request went on its span: the item and upstream, and, as the OpenTelemetry
/// MCP conventions name them, the tool or prompt (`gen_ai.tool.name`, `gen_ai.prompt.name`, which
/// also complete the span's name, `tools/call calc__add`) or the resource URI (`mcp.resource.uri`,
/// never in the name: too many of them).
pub fn routed(span: &tracing::Span, method: &str, item: &str, upstream: &str) {
    span.record("item", item);
    span.record("upstream", upstream);
    match method {
        "tools/call" => span.record("gen_ai.tool.name", item),
        "prompts/get" => span.record("gen_ai.prompt.name", item),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => span.record("mcp.resource.uri", item),
        _ => span,
    };
    #[cfg(feature = "otlp")]
    if matches!(method, "tools/call" | "prompts/get") && !semconv::legacy_names() && !span.is_none() {
        otlp::rename(span, format!("{method} {item}"));
    }
}

/// Keeps a request's span open until its streamed reply ends (an SSE tool call, a change
/// stream), so the exported span lasts as long as the work it names.
pub fn keep_span(reply: mcpgate_protocol::reply::Reply, span: tracing::Span) -> mcpgate_protocol::reply::Reply {
    match reply {
        mcpgate_protocol::reply::Reply::Stream(s) if !span.is_none() => mcpgate_protocol::reply::Reply::Stream(s.with_guard(span)),
        other => other,
    }
}

/// Parents the request span on the client's `traceparent` header when traces are exported.
pub fn adopt_remote_parent(span: &tracing::Span, headers: &http::HeaderMap) {
    #[cfg(feature = "otlp")]
    otlp::adopt_remote_parent(span, headers);
    #[cfg(not(feature = "otlp"))]
    let _ = (span, headers);
}

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::borrow::Cow;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Call {
    method: Cow<'static, str>,
    upstream: &'static str,
    /// The virtual server's path, `-` for the root endpoint.
    endpoint: &'static str,
    outcome: Cow<'static, str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Route {
    method: String,
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConfirmationLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GuardLabel {
    guard: String,
    point: String,
    verdict: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamId {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallerLabel {
    caller: String,
    outcome: String,
}

type Histograms = Family<Route, Histogram, fn() -> Histogram>;

/// What the edge knows at scrape time.
#[derive(Debug, Default, Clone, Copy)]
pub struct EdgeStats {
    pub connections: usize,
    pub in_flight: usize,
}

/// What the gateway knows at scrape time.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Each upstream's id and whether it is ready (`None`: removed by a reload).
    pub upstreams: Vec<(String, Option<bool>)>,
    /// Items served per kind label.
    pub catalog: Vec<(&'static str, usize)>,
    pub streams: usize,
    /// Shared state on Redis, when `[cluster]` is configured.
    pub cluster: Option<mcpgate_net::cluster::ClusterStats>,
    /// Audit records the audit file could not take.
    pub audit_dropped: u64,
}

pub struct Metrics {
    registry: Registry,
    calls: Family<Call, Counter>,
    /// `mcpgate_call_duration_seconds`, only with the legacy names (see `semconv`).
    latency: Option<Histograms>,
    operations: semconv::Operations,
    refused: Family<Reason, Counter>,
    confirmations: Family<ConfirmationLabel, Counter>,
    guard_verdicts: Family<GuardLabel, Counter>,
    up: Family<UpstreamId, Gauge>,
    items: Family<KindLabel, Gauge>,
    stale: Family<UpstreamId, Counter>,
    log_dropped: Counter,
    audit_dropped: Counter,
    by_tool: Option<Family<ToolLabel, Counter>>,
    by_caller: Option<Family<CallerLabel, Counter>>,
    streams: Gauge,
    in_flight: Gauge,
    connections: Gauge,
    redis_up: Gauge,
    redis_errors: Counter,
    redis_fallbacks: Family<FailLabel, Counter>,
    /// Tools held by their pins, and tools served although they differ from their pins.
    tools_held: Gauge,
    tools_drifted: Gauge,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailLabel {
    mode: String,
}

fn latency_histogram() -> Histogram {
    // 1 ms to about 65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(mcpgate_config::usage::MetricsConfig::default(), false)
    }
}

impl Metrics {
    /// The registry with the optional families `switches` turn on, and the cluster's series when
    /// `cluster` (so a gateway without `[cluster]` exports no Redis gauge to alarm on).
    pub fn new(switches: mcpgate_config::usage::MetricsConfig, cluster: bool) -> Self {
        Metrics::named(switches, cluster, semconv::legacy_names())
    }

    /// [`Metrics::new`], with the earlier names kept beside the conventions' when `legacy`.
    fn named(switches: mcpgate_config::usage::MetricsConfig, cluster: bool, legacy: bool) -> Self {
        // The conventions' names at the root; the gateway's own under `mcpgate_`.
        let mut root = Registry::default();
        let operations = semconv::Operations::register(&mut root, switches.per_tool);
        let registry = root.sub_registry_with_prefix("mcpgate");
        let calls = Family::<Call, Counter>::default();
        let latency = legacy.then(|| Histograms::new_with_constructor(latency_histogram));
        let refused = Family::<Reason, Counter>::default();
        let up = Family::<UpstreamId, Gauge>::default();
        let items = Family::<KindLabel, Gauge>::default();
        let stale = Family::<UpstreamId, Counter>::default();
        let log_dropped = Counter::default();
        let (streams, in_flight, connections) = (Gauge::default(), Gauge::default(), Gauge::default());
        registry.register("calls", "Requests forwarded to an upstream, by method, upstream and outcome", calls.clone());
        if let Some(latency) = &latency {
            registry.register(
                "call_duration_seconds",
                "Time to the final answer of forwarded requests (deprecated: mcp_client_operation_duration_seconds)",
                latency.clone(),
            );
        }
        registry.register("refused", "Requests refused before reaching an upstream, by reason", refused.clone());
        let confirmations = Family::<ConfirmationLabel, Counter>::default();
        registry.register("confirmations", "Confirmation questions ([[confirm]]) and what became of them", confirmations.clone());
        let guard_verdicts = Family::<GuardLabel, Counter>::default();
        registry.register("guard_verdicts", "Verdicts of [[guard]]s, by guard, point and verdict", guard_verdicts.clone());
        registry.register("upstream_up", "1 when the upstream answered its last probe", up.clone());
        registry.register("catalog_items", "Items served, by kind", items.clone());
        registry.register("log_lines_dropped", "Log lines dropped because the log writer could not keep up", log_dropped.clone());
        let audit_dropped = Counter::default();
        registry.register("audit_records_dropped", "Audit records the audit file could not take ([audit] file)", audit_dropped.clone());
        let by_tool = switches.per_tool.then(Family::<ToolLabel, Counter>::default);
        if let Some(f) = &by_tool {
            registry.register("tool_calls", "Tool calls by catalogue tool name and outcome ([metrics] per_tool)", f.clone());
        }
        let by_caller = switches.per_caller.then(Family::<CallerLabel, Counter>::default);
        if let Some(f) = &by_caller {
            registry.register("caller_calls", "Tool calls by [[caller]] id and outcome ([metrics] per_caller)", f.clone());
        }
        registry.register("stale_lists", "Lists an upstream could not re-read, served from its previous answer", stale.clone());
        registry.register("change_streams", "Open change streams (listen and legacy GET streams)", streams.clone());
        let (tools_held, tools_drifted) = (Gauge::default(), Gauge::default());
        registry.register("tools_held", "Tools held out of the catalogue until approved ([pins] enforce)", tools_held.clone());
        registry.register(
            "tools_drifted",
            "Tools served although their definition differs from its pin ([pins] record)",
            tools_drifted.clone(),
        );
        registry.register("requests_in_flight", "Requests in progress at the edge", in_flight.clone());
        registry.register("connections", "Open client connections", connections.clone());
        let (redis_up, redis_errors, redis_fallbacks) = (Gauge::default(), Counter::default(), Family::<FailLabel, Counter>::default());
        if cluster {
            registry.register(
                "cluster_redis_up",
                "1 when the last command to the cluster's Redis succeeded ([cluster] only)",
                redis_up.clone(),
            );
            registry.register("cluster_redis_errors", "Redis commands that failed or timed out ([cluster] only)", redis_errors.clone());
            registry.register(
                "cluster_fallbacks",
                "Requests decided without Redis: mode=open used this replica's own bucket, mode=closed refused",
                redis_fallbacks.clone(),
            );
        }
        Metrics {
            registry: root,
            calls,
            latency,
            operations,
            refused,
            confirmations,
            guard_verdicts,
            up,
            items,
            stale,
            log_dropped,
            audit_dropped,
            by_tool,
            by_caller,
            streams,
            in_flight,
            connections,
            redis_up,
            redis_errors,
            redis_fallbacks,
            tools_held,
            tools_drifted,
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A tool call ended with `outcome`, counted by tool (its catalogue name) and by `caller` (a
    /// configured `[[caller]]` id, `None` for any other) when those families are switched on.
    pub fn tool_call(&self, tool: &str, caller: Option<&str>, outcome: &str) {
        let outcome = outcome.split(' ').next().unwrap_or(outcome);
        if let Some(f) = &self.by_tool {
            f.get_or_create(&ToolLabel { tool: tool.to_string(), outcome: outcome.to_string() }).inc();
        }
        if let Some(f) = &self.by_caller {
            f.get_or_create(&CallerLabel { caller: caller.unwrap_or("other").to_string(), outcome: outcome.to_string() }).inc();
        }
    }

    /// A forwarded request ended with `outcome` (an audit outcome label) after `took`; `endpoint`
    /// is the virtual server's path (`-` for the root endpoint).
    pub fn call(&self, f: &semconv::Forwarded<'_>, endpoint: &str, outcome: &str) {
        // Looked up without copying the usual values (see `semconv::interned`).
        let method = match mcpgate_protocol::Method::parse_known(f.method) {
            Some(m) => Cow::Borrowed(m),
            None => Cow::Owned(f.method.to_string()),
        };
        let outcome_label = match ["ok", "tool_error", "error -32602", "error -32603", "error -32001"].iter().find(|o| **o == outcome) {
            Some(o) => Cow::Borrowed(*o),
            // An upstream's own error code outside JSON-RPC's range is not a series of its own.
            None if outcome.rsplit(' ').next().is_some_and(|c| !semconv::labelled_code(c)) && outcome.starts_with("upstream_error") => {
                Cow::Borrowed("upstream_error other")
            }
            None => Cow::Owned(outcome.to_string()),
        };
        let labels =
            Call { method, upstream: semconv::interned(f.upstream), endpoint: semconv::interned(endpoint), outcome: outcome_label };
        self.calls.get_or_create(&labels).inc();
        self.operations.forwarded(&semconv::Forwarded { error_type: semconv::error_type_of_label(outcome), ..*f });
        if let Some(latency) = &self.latency {
            latency
                .get_or_create(&Route { method: labels.method.to_string(), upstream: labels.upstream.to_string() })
                .observe(f.took.as_secs_f64());
        }
    }

    /// A client's request was answered (`mcp.server.operation.duration`).
    pub fn served(&self, s: &semconv::Served<'_>) {
        self.operations.served(s);
    }

    /// A guard's verdict (`allow`, `flag`, `modify`, `deny`, `error`) at `point`.
    pub fn guard_verdict(&self, guard: &str, point: &str, verdict: &str) {
        self.guard_verdicts
            .get_or_create(&GuardLabel { guard: guard.to_string(), point: point.to_string(), verdict: verdict.to_string() })
            .inc();
    }

    /// A request refused before any upstream (rate limit, policy, scope, no route, bad state).
    pub fn refused(&self, reason: reasons::Refused) {
        self.refused.get_or_create(&Reason { reason: reason.as_str() }).inc();
    }

    /// A confirmation question asked or answered; one that kept its call from running is also a
    /// refusal.
    pub fn confirmation(&self, what: reasons::Confirmation) {
        self.confirmations.get_or_create(&ConfirmationLabel { outcome: what.as_str() }).inc();
        if let Some(reason) = what.refusal() {
            self.refused(reason);
        }
    }

    /// The tools held by their pins, and those served although they differ, as of the last rebuild.
    pub fn set_pins(&self, held: usize, drifted: usize) {
        self.tools_held.set(i64::try_from(held).unwrap_or(i64::MAX));
        self.tools_drifted.set(i64::try_from(drifted).unwrap_or(i64::MAX));
    }

    /// A refresh of `upstream` kept `lists` previous lists because re-reading them failed.
    pub fn stale_lists(&self, upstream: &str, lists: u32) {
        self.stale.get_or_create(&UpstreamId { upstream: upstream.to_string() }).inc_by(u64::from(lists));
    }

    /// The text exposition, with the gauges set from `now` and `edge`.
    pub fn render(&self, now: &Snapshot, edge: EdgeStats) -> String {
        for (id, ready) in &now.upstreams {
            let labels = UpstreamId { upstream: id.clone() };
            match ready {
                Some(r) => {
                    self.up.get_or_create(&labels).set(i64::from(*r));
                }
                None => {
                    self.up.remove(&labels);
                }
            }
        }
        for (kind, n) in &now.catalog {
            self.items.get_or_create(&KindLabel { kind: kind.to_string() }).set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        catch_up(&self.log_dropped, logwriter::dropped());
        catch_up(&self.audit_dropped, now.audit_dropped);
        if let Some(c) = now.cluster {
            self.redis_up.set(i64::from(c.up));
            catch_up(&self.redis_errors, c.errors);
            catch_up(&self.redis_fallbacks.get_or_create(&FailLabel { mode: "open".into() }), c.failed_open);
            catch_up(&self.redis_fallbacks.get_or_create(&FailLabel { mode: "closed".into() }), c.failed_closed);
        }
        let gauge = |g: &Gauge, n: usize| g.set(i64::try_from(n).unwrap_or(i64::MAX));
        gauge(&self.streams, now.streams);
        gauge(&self.in_flight, edge.in_flight);
        gauge(&self.connections, edge.connections);
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Brings a counter mirrored from elsewhere up to `total`.
fn catch_up(counter: &Counter, total: u64) {
    let seen = counter.get();
    if total > seen {
        counter.inc_by(total - seen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A `tools/call` forwarded to `calc` that took `ms`.
    fn calc_call(transport: Transport, tool: Option<&'static str>, ms: u64) -> semconv::Forwarded<'static> {
        semconv::Forwarded { method: "tools/call", upstream: "calc", transport, tool, error_type: None, took: Duration::from_millis(ms) }
    }

    #[test]
    fn renders_the_series() {
        let m = Metrics::default();
        let call = calc_call(Transport::Pipe, Some("calc__add"), 3);
        m.call(&call, "-", "ok");
        m.call(&call, "-", "error -32602");
        m.served(&semconv::Served {
            method: &mcpgate_protocol::Method::parse("made/up"),
            version: "2025-06-18",
            transport: Transport::Tcp,
            error_type: Some("-32601"),
            took: Duration::from_millis(1),
        });
        m.refused(reasons::Refused::RateLimited);
        m.stale_lists("calc", 2);
        let text = m.render(
            &Snapshot {
                upstreams: vec![("calc".into(), Some(true)), ("gone".into(), None)],
                catalog: vec![("tools", 4)],
                streams: 2,
                cluster: None,
                audit_dropped: 0,
            },
            EdgeStats::default(),
        );
        assert!(text.contains(r#"mcpgate_calls_total{method="tools/call",upstream="calc",endpoint="-",outcome="ok"} 1"#), "{text}");
        // The conventions' histograms, under their own names; the tool only with `per_tool`.
        assert!(
            text.contains(
                r#"mcp_client_operation_duration_seconds_count{mcp_method_name="tools/call",upstream="calc",network_transport="pipe",error_type="",gen_ai_tool_name=""} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"mcp_client_operation_duration_seconds_bucket{le="0.01",mcp_method_name="tools/call",upstream="calc",network_transport="pipe",error_type="-32602",gen_ai_tool_name=""} 1"#), "{text}");
        assert!(
            text.contains(
                r#"mcp_server_operation_duration_seconds_count{mcp_method_name="_OTHER",mcp_protocol_version="2025-06-18",network_transport="tcp",error_type="-32601"} 1"#
            ),
            "{text}"
        );
        assert!(!text.contains("mcpgate_call_duration_seconds"), "the earlier histogram only with the legacy names: {text}");
        assert!(text.contains(r#"mcpgate_upstream_up{upstream="calc"} 1"#), "{text}");
        assert!(text.contains("mcpgate_change_streams 2"), "{text}");
        assert!(!text.contains("gone"), "a removed upstream has no series: {text}");
        assert!(text.contains(r#"mcpgate_refused_total{reason="rate_limited"} 1"#), "{text}");
        assert!(text.contains(r#"mcpgate_stale_lists_total{upstream="calc"} 2"#), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(!text.contains("cluster_"), "no cluster series without [cluster]: {text}");
        assert!(!text.contains("tool_calls") && !text.contains("caller_calls"), "per-tool and per-caller series are off: {text}");
    }

    #[test]
    fn an_upstreams_own_error_codes_share_one_series() {
        let m = Metrics::default();
        let call = calc_call(Transport::Tcp, None, 1);
        for code in [1, 2, 3, 424242] {
            m.call(&call, "-", &format!("upstream_error {code}"));
        }
        m.call(&call, "-", "upstream_error -32050");
        let text = m.render(&Snapshot::default(), EdgeStats::default());
        assert!(text.contains(r#"outcome="upstream_error other"} 4"#), "{text}");
        assert!(text.contains(r#"outcome="upstream_error -32050"} 1"#), "{text}");
        assert!(text.contains(r#"error_type="_OTHER",gen_ai_tool_name=""} 4"#), "{text}");
        assert!(!text.contains("424242"), "{text}");
    }

    #[test]
    fn the_legacy_names_keep_the_earlier_histogram() {
        let m = Metrics::named(mcpgate_config::usage::MetricsConfig { per_tool: true, per_caller: false }, false, true);
        let call = calc_call(Transport::Tcp, Some("calc__add"), 3);
        m.call(&call, "-", "tool_error");
        let text = m.render(&Snapshot::default(), EdgeStats::default());
        assert!(text.contains(r#"mcpgate_call_duration_seconds_count{method="tools/call",upstream="calc"} 1"#), "{text}");
        assert!(
            text.contains(r#"error_type="tool_error",gen_ai_tool_name="calc__add"} 1"#),
            "per_tool names the tool on the conventions' histogram: {text}"
        );
    }

    #[test]
    fn per_tool_and_per_caller_series_are_switched_on_and_bounded() {
        let m = Metrics::new(mcpgate_config::usage::MetricsConfig { per_tool: true, per_caller: true }, true);
        m.tool_call("calc__add", Some("alice"), "ok");
        m.tool_call("calc__add", None, "error -32602");
        let text = m.render(&Snapshot { cluster: Some(Default::default()), ..Snapshot::default() }, EdgeStats::default());
        assert!(text.contains(r#"mcpgate_tool_calls_total{tool="calc__add",outcome="ok"} 1"#), "{text}");
        assert!(text.contains(r#"mcpgate_tool_calls_total{tool="calc__add",outcome="error"} 1"#), "{text}");
        assert!(text.contains(r#"mcpgate_caller_calls_total{caller="other",outcome="error"} 1"#), "{text}");
        assert!(text.contains("mcpgate_cluster_redis_up 0"), "{text}");
    }
}
