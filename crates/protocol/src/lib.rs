//! mcpgate, layer 1: the pure MCP wire model, and the runtime helpers every layer uses. The wire
//! model does no I/O and is unit-tested on plain data: JSON-RPC envelopes with raw pass-through
//! payloads (`jsonrpc`, `json`, `rawobj`), the one strict reading (`read`, `exact`), the request
//! `_meta` (`meta`, `keys`, `trace`), the `Mcp-*` header value codec (`headers`), `x-mcp-header`
//! tool annotations (`xheader`), the JSON-RPC error model (`errors`), `Method`, `Kind`, the
//! extensions table (`extensions`), the protocol revisions, methods and extension keys (here),
//! and the canonical form of a URI (`uri`); with them, the reply model (`reply`). The helpers:
//! `sync` (poison-tolerant locks), `tasks` (the owner of background work), `text` (counted nouns
//! in what people read), `toolbox` (the clock, hex digests and random tokens). It depends on no
//! other part of mcpgate; see docs/architecture.md for the layers.

pub mod errors;
pub mod exact;
pub mod extensions;
pub mod headers;
pub mod json;
pub mod jsonrpc;
pub mod kind;
pub mod meta;
pub mod method;
pub mod rawobj;
pub mod read;
pub mod reply;
pub mod sync;
pub mod tasks;
pub mod text;
pub mod toolbox;
pub mod trace;
pub mod uri;
pub mod xheader;

pub use kind::Kind;
pub use method::Method;

/// The modern protocol revision this gateway speaks on both sides.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Versions the gateway accepts from modern clients.
pub const SUPPORTED_VERSIONS: &[&str] = &[MODERN_VERSION];

/// Legacy revisions the gateway speaks (to clients and to upstreams), newest first.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
/// Older legacy revisions a peer may still announce (answered with a supported one).
const OLDER_VERSIONS: &[&str] = &["2024-11-05", "2024-10-07"];

pub fn is_legacy_version(v: &str) -> bool {
    LEGACY_VERSIONS.contains(&v) || OLDER_VERSIONS.contains(&v)
}

/// Reserved `_meta` keys.
pub mod keys {
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    pub const PROGRESS_TOKEN: &str = "progressToken";
}

/// Methods the modern protocol defines for clients to send.
/// Whether `method`'s result may ask for input with `input_required` (MCP 2026-07-28 `basic/patterns/mrtr`).
pub fn may_ask_input(method: &str) -> bool {
    matches!(method, "tools/call" | "prompts/get" | "resources/read")
}

pub const MODERN_METHODS: &[&str] = &[
    "server/discover",
    "completion/complete",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "subscriptions/listen",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
    "resources/directory/read",
];

/// The tasks extension's capability key (the `modelcontextprotocol/ext-tasks` specification).
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// MCP Apps' extension key (SEP-1865, `modelcontextprotocol/ext-apps`).
pub const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// Agent Skills' extension key (SEP-2640): `skills/list`, `skills/get`, and with
/// `directoryRead: true`, `resources/directory/read`.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";

/// The skills extension's settings the gateway advertises, from those of every contributing
/// upstream (never empty in use): `directoryRead: true` only when every one of them declares it
/// (a client that sees the flag may call `resources/directory/read` on any skill it lists), else
/// `{}`. Other settings are not passed on: the gateway offers only what it relays.
pub fn skills_settings(settings: &[serde_json::Value]) -> serde_json::Value {
    let all = !settings.is_empty() && settings.iter().all(|s| s.get("directoryRead").and_then(serde_json::Value::as_bool) == Some(true));
    if all { serde_json::json!({ "directoryRead": true }) } else { serde_json::json!({}) }
}

/// The UI extension's client capability: the gateway passes MCP Apps' HTML through (it renders
/// nothing itself, its clients do).
pub fn ui_client_capability() -> serde_json::Value {
    serde_json::json!({ "mimeTypes": ["text/html;profile=mcp-app"] })
}

/// The method whose `Mcp-Name` header mirrors `params.name` or `params.uri`, if any.
pub fn name_param_of(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

#[cfg(test)]
mod skills_tests {
    use super::skills_settings;
    use serde_json::json;

    #[test]
    fn directory_read_is_advertised_only_when_every_skill_upstream_declares_it() {
        let (yes, no) = (json!({ "directoryRead": true, "other": 1 }), json!({}));
        assert_eq!(skills_settings(&[yes.clone(), yes.clone()]), json!({ "directoryRead": true }), "other settings are not passed on");
        assert_eq!(skills_settings(&[yes.clone(), no]), json!({}));
        assert_eq!(skills_settings(&[json!({ "directoryRead": "true" })]), json!({}), "only a boolean true counts");
        assert_eq!(skills_settings(&[]), json!({}));
    }
}
