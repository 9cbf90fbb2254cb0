//! Typed upstream failures. Transports and era adapters return [`UpstreamError`] and decide on its
//! variants (a session that expired is renewed, silence on stdio means a legacy server); the one
//! conversion into the client-visible [`RpcError`] is [`UpstreamError::into_rpc`], which always
//! names the upstream and never carries an upstream's response body. An upstream's own
//! header-mismatch or version error is the gateway's to answer (`hop_error`), never relayed.

use mcpgate_protocol::errors::{HEADER_MISMATCH, RpcError, UNSUPPORTED_VERSION, modernise_rc_code};
use mcpgate_protocol::reply::Outcome;
use serde_json::{Value, json};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UpstreamError {
    /// No complete answer within the upstream's deadline.
    #[error("did not answer within {}", humantime::format_duration(*after))]
    Timeout { after: Duration },
    /// The connection could not be made, broke, or the process is not running.
    #[error("{0}")]
    Unreachable(String),
    /// An HTTP answer without a JSON-RPC response (the body stays in the gateway's log).
    #[error("HTTP {status} without a JSON-RPC response")]
    Status { status: u16 },
    /// The upstream no longer knows the session the request carried (HTTP 404).
    #[error("session not found")]
    SessionExpired,
    /// A message or SSE event over the configured size limit.
    #[error("a message exceeded {limit} bytes")]
    TooLarge { limit: usize },
    /// The upstream broke the protocol (a reply that is not JSON-RPC, a stream that ended early).
    #[error("{0}")]
    Protocol(String),
    /// The upstream's own access token could not be obtained.
    #[error("cannot get an access token: {0}")]
    Credentials(String),
    /// The legacy handshake failed, for the reason inside.
    #[error("initializing a session failed: {0}")]
    Handshake(Box<UpstreamError>),
    /// A retry names a parked call (a legacy upstream asking for input) that is not here: it
    /// expired, or the retry reached another replica.
    #[error(
        "the call that asked for input is not waiting on this gateway replica (it expired, or the retry reached another \
            replica); send the request again without inputResponses and requestState"
    )]
    NotParked,
    /// The upstream refused a request the gateway built (a header mismatch or version error):
    /// about the gateway's request, never the client's.
    #[error("refused the gateway's request: {message}")]
    Refused { code: Value, message: String },
    /// A reload took the upstream out of the configuration.
    #[error("removed from the configuration")]
    Removed,
    /// The upstream is reached with each caller's own token, and this caller has none it takes:
    /// the caller has to consent (per-user identity).
    #[error("needs your consent before it can be used")]
    ConsentNeeded,
    /// A failure with advice on its likely cause (a package runner kept off the network, or a
    /// first download slower than the deadline: `runner`).
    #[error("{error}. {hint}")]
    Hinted { error: Box<UpstreamError>, hint: String },
}

/// The application error code of a request the caller has to consent to first (outside the
/// JSON-RPC reserved range; the request path turns it into a consent request where it can).
pub const CONSENT_NEEDED: i64 = -31042;

impl UpstreamError {
    /// Whether the failure is a caller's own token the upstream did not take (per-user identity),
    /// directly or during a handshake.
    pub fn needs_consent(&self) -> bool {
        match self {
            UpstreamError::ConsentNeeded => true,
            UpstreamError::Handshake(inner) | UpstreamError::Hinted { error: inner, .. } => inner.needs_consent(),
            _ => false,
        }
    }

    /// The error a client sees, naming the upstream `id`.
    pub fn into_rpc(self, id: &str) -> RpcError {
        match self {
            UpstreamError::Timeout { .. } | UpstreamError::Hinted { .. } => {
                RpcError::internal(format!("Upstream '{id}' {self}")).with_data(json!({ "upstream": id }))
            }
            UpstreamError::Status { status } => RpcError::internal(format!("Upstream '{id}' refused the request: {self}"))
                .with_data(json!({ "upstream": id, "status": status })),
            UpstreamError::SessionExpired => RpcError::internal(format!("Upstream '{id}' refused the request: {self}"))
                .with_data(json!({ "upstream": id, "status": 404 })),
            UpstreamError::Refused { ref code, ref message } => {
                let data = json!({ "upstream": id, "upstreamError": { "code": code, "message": message } });
                RpcError::internal(format!("Upstream '{id}' {self}")).with_data(data)
            }
            UpstreamError::ConsentNeeded => {
                RpcError::new(CONSENT_NEEDED, format!("Upstream '{id}' {self}")).with_data(json!({ "upstream": id, "consentNeeded": true }))
            }
            UpstreamError::NotParked => RpcError::invalid_params(format!("Upstream '{id}': {self}")).with_data(json!({ "upstream": id })),
            other => RpcError::internal(format!("Upstream '{id}' is unavailable: {other}")).with_data(json!({ "upstream": id })),
        }
    }
}

/// An upstream's header-mismatch or version error is about the gateway's request, not the
/// client's: relayed as is, it would send the client re-listing or downgrading for nothing.
pub(super) fn hop_error(id: &str, o: Outcome) -> Outcome {
    let Outcome::UpstreamError(raw) = &o else { return o };
    let Ok(v) = serde_json::from_str::<Value>(raw.get()) else { return o };
    let code = modernise_rc_code(v["code"].as_i64().unwrap_or(0));
    if code != HEADER_MISMATCH && code != UNSUPPORTED_VERSION {
        return o;
    }
    let message = v["message"].as_str().unwrap_or("").to_string();
    Outcome::Error(UpstreamError::Refused { code: v["code"].clone(), message }.into_rpc(id))
}

/// A short account of what an upstream answered, for errors and logs (an error's code and
/// message, at most 200 characters of what could not be read).
pub(super) fn describe(o: &Outcome) -> String {
    match o {
        Outcome::Result(_) => "ok".into(),
        Outcome::Error(e) => e.message.clone(),
        Outcome::UpstreamError(raw) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(v) => format!("error {} {}", v["code"], v["message"].as_str().unwrap_or("")),
            Err(_) => raw.get().chars().take(200).collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_name_the_upstream_and_keep_their_data() {
        let e = UpstreamError::Timeout { after: Duration::from_secs(2) }.into_rpc("slow");
        assert_eq!(e.message, "Upstream 'slow' did not answer within 2s");
        assert_eq!(e.data, Some(json!({ "upstream": "slow" })));
        let e = UpstreamError::Status { status: 502 }.into_rpc("a");
        assert_eq!(e.data, Some(json!({ "upstream": "a", "status": 502 })));
        let e = UpstreamError::Handshake(Box::new(UpstreamError::Unreachable("connection refused".into()))).into_rpc("b");
        assert_eq!(e.message, "Upstream 'b' is unavailable: initializing a session failed: connection refused");
        let e = UpstreamError::Refused { code: json!(-32020), message: "Header mismatch".into() }.into_rpc("c");
        assert_eq!(e.data.as_ref().map(|d| d["upstreamError"]["code"].clone()), Some(json!(-32020)));
        let e =
            UpstreamError::Hinted { error: Box::new(UpstreamError::Timeout { after: Duration::from_secs(30) }), hint: "npx …".into() }
                .into_rpc("mem");
        assert_eq!(e.message, "Upstream 'mem' did not answer within 30s. npx …");
    }
}
