//! The OpenTelemetry semantic conventions for MCP (`gen-ai/mcp.md` of the GenAI conventions), as
//! far as the gateway speaks them: the values its spans and metrics carry (`mcp.method.name` held to
//! the well-known methods, `mcp.protocol.version` to the versions served, `error.type` and
//! `rpc.response.status_code` from an outcome, `network.transport`), and the two operation-duration
//! histograms: `mcp.server.operation.duration` for what a client asked the gateway and
//! `mcp.client.operation.duration` for what the gateway asked an upstream, exported in the
//! Prometheus text as `mcp_server_operation_duration_seconds` and
//! `mcp_client_operation_duration_seconds` with the conventions' buckets. Every label value is
//! bounded: an unknown method or version counts as `_OTHER`, so a client cannot mint series. The
//! earlier names (the span name `mcp`, `mcpgate_call_duration_seconds`) stay behind
//! `MCPGATE_TELEMETRY_NAMES=legacy` for one release.

use mcpgate_protocol::reply::Outcome;
use mcpgate_protocol::{LEGACY_VERSIONS, Method, SUPPORTED_VERSIONS};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::borrow::Cow;
use std::time::Duration;

/// The buckets the conventions give for both operation durations, in seconds.
const BUCKETS: [f64; 14] = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

/// The conventions' fallback value for anything outside the well-known set.
pub const OTHER: &str = "_OTHER";

/// Whether the earlier telemetry names are kept (`MCPGATE_TELEMETRY_NAMES=legacy`): the span name
/// `mcp` instead of `{mcp.method.name} {target}`, and `mcpgate_call_duration_seconds` beside the
/// conventions' histograms. Read once; for one release.
pub fn legacy_names() -> bool {
    static LEGACY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LEGACY.get_or_init(|| std::env::var("MCPGATE_TELEMETRY_NAMES").is_ok_and(|v| v.trim().eq_ignore_ascii_case("legacy")))
}

/// How a client or an upstream is reached, as `network.transport` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// HTTP over TCP.
    Tcp,
    /// A child's stdin and stdout.
    Pipe,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Pipe => "pipe",
        }
    }
}

/// `mcp.method.name` as a label: a method the gateway knows, else `_OTHER` (a client names it).
pub fn method_name(method: &Method) -> &'static str {
    method.known().unwrap_or(OTHER)
}

/// `mcp.protocol.version` as a label: a version the gateway serves, else `_OTHER`.
pub fn protocol_version(version: &str) -> &'static str {
    SUPPORTED_VERSIONS.iter().chain(LEGACY_VERSIONS).find(|v| **v == version).copied().unwrap_or(OTHER)
}

/// What an outcome is called by the conventions: `error.type` (the JSON-RPC error code, or
/// `tool_error` for a tool result with `isError: true`) and `rpc.response.status_code` (the code,
/// when there is one); both `None` for a success.
pub fn outcome_error(method: &Method, o: &Outcome) -> (Option<Cow<'static, str>>, Option<i64>) {
    match o {
        Outcome::Error(e) => (Some(e.code.to_string().into()), Some(e.code)),
        Outcome::UpstreamError(raw) => match error_code(raw.get()) {
            Some(code) => (Some(code.to_string().into()), Some(code)),
            None => (Some(OTHER.into()), None),
        },
        // Only a tool result says it failed inside a success.
        Outcome::Result(raw) if *method == Method::ToolsCall && is_error_result(raw.get()) => (Some("tool_error".into()), None),
        Outcome::Result(_) => (None, None),
    }
}

/// Whether a `CallToolResult` carries `isError: true` (most results do not name it: those are
/// not parsed again).
pub fn is_error_result(raw: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Flags {
        #[serde(rename = "isError", default)]
        is_error: Option<bool>,
    }
    raw.contains("\"isError\"") && serde_json::from_str::<Flags>(raw).ok().and_then(|f| f.is_error).unwrap_or(false)
}

/// The `code` of a JSON-RPC error object, if it has a whole number there.
pub fn error_code(raw: &str) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Code {
        #[serde(default)]
        code: Option<i64>,
    }
    serde_json::from_str::<Code>(raw).ok().and_then(|c| c.code)
}

/// `error.type` from an audit outcome label (`ok`, `tool_error`, `error <code>`,
/// `upstream_error <code>`), so a forwarded call's result is not parsed twice.
pub fn error_type_of_label(label: &str) -> Option<&str> {
    match label {
        "ok" => None,
        "tool_error" => Some("tool_error"),
        other => Some(other.rsplit(' ').next().filter(|code| !code.is_empty()).unwrap_or(OTHER)),
    }
}

// Label values are borrowed where they can be (method names, versions, the usual outcomes), so a
// call that finds its series already there allocates nothing for the lookup.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerOp {
    mcp_method_name: &'static str,
    mcp_protocol_version: &'static str,
    network_transport: &'static str,
    /// Empty (absent, to Prometheus) for a success.
    error_type: Cow<'static, str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientOp {
    mcp_method_name: Cow<'static, str>,
    /// The upstream's id (bounded by the configuration); the conventions' `server.address` would
    /// name a host several upstreams may share, or none (stdio).
    upstream: Cow<'static, str>,
    network_transport: &'static str,
    error_type: Cow<'static, str>,
    /// The catalogue tool name, only with `[metrics] per_tool` (bounded by the catalogue).
    gen_ai_tool_name: Cow<'static, str>,
}

/// A label value the configuration bounds (an upstream id, an endpoint path, a catalogue tool name),
/// kept for the program's life so that looking its series up copies nothing. At most
/// [`MAX_INTERNED`] values are kept; past that a value reads as `_OTHER`.
pub fn interned(s: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{OnceLock, RwLock};
    static SEEN: OnceLock<RwLock<HashSet<&'static str>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(v) = seen.read().ok().and_then(|set| set.get(s).copied()) {
        return v;
    }
    let Ok(mut set) = seen.write() else { return OTHER };
    if let Some(v) = set.get(s) {
        return v;
    }
    if set.len() >= MAX_INTERNED {
        return OTHER;
    }
    let kept: &'static str = Box::leak(s.to_owned().into_boxed_str());
    set.insert(kept);
    kept
}

/// How many label values [`interned`] keeps.
pub const MAX_INTERNED: usize = 4096;

/// Whether a JSON-RPC error code may be a label value as it is: only the range JSON-RPC reserves
/// (-32768 to -32000). Any other code comes from an upstream's own choice, and a series per code
/// would let an upstream grow the registry without bound.
pub fn labelled_code(code: &str) -> bool {
    code.parse::<i64>().is_ok_and(|c| (-32768..=-32000).contains(&c))
}

/// An error type as a label: the usual ones borrowed, a code outside JSON-RPC's range `_OTHER`.
fn error_label(e: Option<&str>) -> Cow<'static, str> {
    const USUAL: [&str; 9] = ["", "tool_error", "-32602", "-32600", "-32601", "-32603", "-32001", "-32002", OTHER];
    let e = e.unwrap_or("");
    match USUAL.iter().find(|u| **u == e) {
        Some(u) => Cow::Borrowed(u),
        None if labelled_code(e) => Cow::Owned(e.to_string()),
        None => Cow::Borrowed(OTHER),
    }
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// A request a client sent the gateway, as the server-side histogram records it.
pub struct Served<'a> {
    pub method: &'a Method,
    /// The protocol version the client speaks (its session's for a legacy client).
    pub version: &'a str,
    pub transport: Transport,
    pub error_type: Option<&'a str>,
    pub took: Duration,
}

/// A request the gateway sent an upstream, as the client-side histogram records it.
#[derive(Clone, Copy)]
pub struct Forwarded<'a> {
    pub method: &'a str,
    pub upstream: &'a str,
    pub transport: Transport,
    /// The catalogue name of the tool called, if any.
    pub tool: Option<&'a str>,
    pub error_type: Option<&'a str>,
    pub took: Duration,
}

/// The two operation-duration histograms.
pub struct Operations {
    server: Histograms<ServerOp>,
    client: Histograms<ClientOp>,
    per_tool: bool,
}

impl Operations {
    /// Registers both histograms in `root` (under their own names, without the gateway's prefix).
    /// `per_tool`: the client-side one carries the tool's name.
    pub fn register(root: &mut Registry, per_tool: bool) -> Operations {
        let server = Histograms::<ServerOp>::new_with_constructor(histogram);
        let client = Histograms::<ClientOp>::new_with_constructor(histogram);
        root.register_with_unit(
            "mcp_server_operation_duration",
            "MCP request duration as observed by the gateway from the time a client's request was received until its result was sent",
            Unit::Seconds,
            server.clone(),
        );
        root.register_with_unit(
            "mcp_client_operation_duration",
            "MCP request duration as observed by the gateway from the time it sent a request upstream until the result was received",
            Unit::Seconds,
            client.clone(),
        );
        Operations { server, client, per_tool }
    }

    pub fn served(&self, s: &Served<'_>) {
        let labels = ServerOp {
            mcp_method_name: method_name(s.method),
            mcp_protocol_version: protocol_version(s.version),
            network_transport: s.transport.as_str(),
            error_type: error_label(s.error_type),
        };
        self.server.get_or_create(&labels).observe(s.took.as_secs_f64());
    }

    pub fn forwarded(&self, f: &Forwarded<'_>) {
        let labels = ClientOp {
            mcp_method_name: Cow::Borrowed(Method::parse_known(f.method).unwrap_or(OTHER)),
            upstream: Cow::Borrowed(interned(f.upstream)),
            network_transport: f.transport.as_str(),
            error_type: error_label(f.error_type),
            gen_ai_tool_name: Cow::Borrowed(if self.per_tool { f.tool.map(interned).unwrap_or("") } else { "" }),
        };
        self.client.get_or_create(&labels).observe(f.took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgate_protocol::errors::RpcError;

    fn raw(s: &str) -> mcpgate_protocol::json::Json {
        mcpgate_protocol::json::Json::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn outcomes_are_named_as_the_conventions_say() {
        let call = Method::ToolsCall;
        assert_eq!(outcome_error(&call, &Outcome::Result(raw(r#"{"content":[]}"#))), (None, None));
        assert_eq!(outcome_error(&call, &Outcome::Result(raw(r#"{"content":[],"isError":true}"#))).0.as_deref(), Some("tool_error"));
        // Only a tool result fails inside a success.
        assert_eq!(outcome_error(&Method::PromptsGet, &Outcome::Result(raw(r#"{"isError":true}"#))), (None, None));
        let (kind, code) = outcome_error(&call, &Outcome::Error(RpcError::invalid_params("bad")));
        assert_eq!((kind.as_deref(), code), (Some("-32602"), Some(-32602)));
        let (kind, code) = outcome_error(&call, &Outcome::UpstreamError(raw(r#"{"code":-32001,"message":"x"}"#)));
        assert_eq!((kind.as_deref(), code), (Some("-32001"), Some(-32001)));
        assert_eq!(outcome_error(&call, &Outcome::UpstreamError(raw(r#"{"message":"x"}"#))).0.as_deref(), Some(OTHER));
    }

    #[test]
    fn audit_labels_map_to_error_types() {
        assert_eq!(error_type_of_label("ok"), None);
        assert_eq!(error_type_of_label("tool_error"), Some("tool_error"));
        assert_eq!(error_type_of_label("error -32602"), Some("-32602"));
        assert_eq!(error_type_of_label("upstream_error -32603"), Some("-32603"));
    }

    #[test]
    fn upstream_chosen_codes_cannot_mint_series() {
        assert_eq!(error_label(Some("-32050")), "-32050");
        assert_eq!(error_label(Some("123456")), OTHER);
        assert_eq!(error_label(Some("-1")), OTHER);
        assert_eq!(error_label(Some("tool_error")), "tool_error");
        assert_eq!(error_label(None), "");
    }

    #[test]
    fn client_chosen_values_cannot_mint_series() {
        assert_eq!(method_name(&Method::parse("tools/call")), "tools/call");
        assert_eq!(method_name(&Method::parse("x/{random}")), OTHER);
        assert_eq!(protocol_version("2025-06-18"), "2025-06-18");
        assert_eq!(protocol_version(mcpgate_protocol::MODERN_VERSION), mcpgate_protocol::MODERN_VERSION);
        assert_eq!(protocol_version("1999-01-01"), OTHER);
    }
}
