//! The `requestState` the gateway hands its clients (MCP 2026-07-28 `basic/patterns/mrtr`; docs/input-requests.md). When an upstream
//! answers `input_required`, the client gets, instead of the upstream's own state, a token the
//! gateway seals (`token.rs`, AES-256-GCM): who asked (the caller), which upstream, method and
//! item it is for, when it was issued, and the upstream's state inside, kept byte for byte. On the
//! retry the token is opened and checked, and only the upstream's own state goes on. A token that
//! was altered or not issued here, is too old, belongs to another caller, or is for another
//! request is refused and never forwarded, so one caller cannot replay another's state, and a
//! state cannot be moved to a different tool. The client hears one message whatever the reason
//! (so a refusal tells a prober nothing about whose state it holds); the reason goes to the audit.

use crate::auth::Principal;
use mcpgate_model::token::Sealer;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::Outcome;
use serde::{Deserialize, Serialize};
use std::time::Duration;

const PURPOSE: &str = "mcpgate/request-state/v1";

/// What a sealed state says.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Sealed {
    /// The caller's id and the `[[caller]]` rules it matched.
    c: String,
    r: Vec<String>,
    u: String,
    m: String,
    n: String,
    /// The upstream's own `requestState`, as the JSON text it sent (absent when it sent none).
    s: Option<String>,
    /// For a call a person confirmed (`[[confirm]]`): the digest of what was confirmed, so the
    /// rounds of the upstream's own questions need no second confirmation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    k: Option<String>,
    /// The endpoint path it was issued on (`None`: the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    e: Option<String>,
}

/// What a request is, for binding and checking its state.
pub struct Binding<'a> {
    pub caller: &'a Principal,
    pub upstream: &'a str,
    pub method: &'a str,
    pub item: &'a str,
    /// The digest of a confirmed call's tool and arguments (see `confirm`).
    pub confirmed: Option<&'a str>,
}

impl Binding<'_> {
    fn sealed(&self, inner: Option<String>) -> Sealed {
        Sealed {
            c: self.caller.id.clone(),
            r: self.caller.rules.clone(),
            u: self.upstream.to_string(),
            m: self.method.to_string(),
            n: self.item.to_string(),
            s: inner,
            k: self.confirmed.map(str::to_string),
            e: self.caller.endpoint.as_deref().map(str::to_string),
        }
    }
}

/// Why a `requestState` was refused (recorded in the audit, never told to the client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    NotAString,
    NotIssuedHere,
    Expired,
    AnotherCaller,
    AnotherRequest,
    NoValidState,
}

impl Refused {
    /// The audit's word for it.
    pub fn reason(self) -> &'static str {
        match self {
            Refused::NotAString => "invalid_request_state/not_a_string",
            Refused::NotIssuedHere => "invalid_request_state/not_issued_here",
            Refused::Expired => "invalid_request_state/expired",
            Refused::AnotherCaller => "invalid_request_state/another_caller",
            Refused::AnotherRequest => "invalid_request_state/another_request",
            Refused::NoValidState => "invalid_request_state/no_valid_state",
        }
    }

    /// What the client is told, the same whatever the reason.
    pub fn to_error(self) -> RpcError {
        RpcError::invalid_params("Invalid requestState: send the request again without inputResponses and requestState")
    }
}

/// Replaces the client's `requestState` in `params` with the upstream's own, after checking it.
pub fn open(sealer: &Sealer, params: &mut RawObject, bind: &Binding, max_age: Duration) -> Result<(), Refused> {
    let Some(raw) = params.get("requestState") else { return Ok(()) };
    let token: String = serde_json::from_str(raw.get()).map_err(|_| Refused::NotAString)?;
    let (sealed, age) = sealer.open_aged::<Sealed>(PURPOSE, &token).ok_or(Refused::NotIssuedHere)?;
    if age > max_age {
        return Err(Refused::Expired);
    }
    if sealed.c != bind.caller.id || sealed.r != bind.caller.rules {
        return Err(Refused::AnotherCaller);
    }
    if sealed.u != bind.upstream
        || sealed.m != bind.method
        || sealed.n != bind.item
        || sealed.e.as_deref() != bind.caller.endpoint.as_deref()
    {
        return Err(Refused::AnotherRequest);
    }
    match sealed.s {
        Some(text) => params.set("requestState", Json::from_string(text).map_err(|_| Refused::NoValidState)?),
        None => {
            params.remove("requestState");
        }
    }
    Ok(())
}

/// The confirmed digest a retry's `requestState` carries, if it is a state this gateway issued
/// to this caller for this request within `max_age` (read only: [`open`] still checks it).
pub fn confirmed(sealer: &Sealer, params: &RawObject, bind: &Binding, max_age: Duration) -> Option<String> {
    let raw = params.get("requestState")?;
    let token: String = serde_json::from_str(raw.get()).ok()?;
    let (sealed, age) = sealer.open_aged::<Sealed>(PURPOSE, &token)?;
    let same = sealed.c == bind.caller.id
        && sealed.r == bind.caller.rules
        && sealed.u == bind.upstream
        && sealed.m == bind.method
        && sealed.n == bind.item
        && sealed.e.as_deref() == bind.caller.endpoint.as_deref();
    (age <= max_age && same).then_some(sealed.k).flatten()
}

/// Seals the `requestState` of an `input_required` result for the client; other outcomes pass.
pub fn seal(sealer: &Sealer, outcome: Outcome, bind: &Binding) -> Outcome {
    let Outcome::Result(raw) = &outcome else { return outcome };
    let Ok(mut obj) = RawObject::from_json(raw) else { return outcome };
    if obj.parse::<String>("resultType").and_then(Result::ok).as_deref() != Some("input_required") {
        return outcome;
    }
    let inner = obj.get("requestState").map(|s| s.get().to_string());
    let token = match sealer.seal(PURPOSE, &bind.sealed(inner)) {
        Ok(t) => t,
        Err(e) => return Outcome::Error(RpcError::internal(format!("cannot seal the request state: {e}"))),
    };
    match obj.set_json("requestState", &token) {
        Ok(()) => Outcome::Result(obj.to_json()),
        Err(e) => Outcome::Error(RpcError::internal(format!("cannot seal the request state: {e}"))),
    }
}

/// Whether an outcome is an `input_required` result.
/// Only `resultType` is read (borrowed unless its key or value is escaped, which reads as the
/// same member): every other member is skipped unread, so a result costs no allocation here; a
/// result with a duplicate `resultType` reads as no question, as it did.
pub fn asks_input(outcome: &Outcome) -> bool {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "resultType", borrow, default)]
        result_type: Option<std::borrow::Cow<'a, str>>,
    }
    let Outcome::Result(raw) = outcome else { return false };
    serde_json::from_str::<Kind>(raw.get()).ok().and_then(|k| k.result_type).is_some_and(|t| t == "input_required")
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgate_model::policy::Grants;
    use mcpgate_model::token::KeySource;
    use std::sync::Arc;

    #[test]
    fn a_question_is_found_however_its_key_is_written() {
        let asks = |text: &str| asks_input(&Outcome::Result(Json::from_string(text.to_string()).expect("json")));
        assert!(asks(r#"{"content":[],"resultType":"input_required"}"#));
        // An escaped key is the same member to every JSON reader, the client's included.
        assert!(asks(r#"{"result\u0054ype":"input_required","inputRequests":{}}"#));
        assert!(asks(r#"{"resultType":"input\u005frequired"}"#));
        assert!(!asks(r#"{"resultType":"complete","content":[{"text":"resultType input_required"}]}"#));
        assert!(!asks(r#"{"content":[]}"#));
    }

    fn caller(id: &str) -> Arc<Principal> {
        Arc::new(Principal {
            id: id.into(),
            rules: vec![id.into()],
            grants: Grants::unrestricted(),
            scopes: vec![],
            rate: None,
            endpoint: None,
            subject_token: None,
        })
    }

    fn result(text: &str) -> Outcome {
        Outcome::Result(Json::from_string(text.into()).unwrap())
    }

    #[test]
    fn the_upstreams_state_goes_back_byte_for_byte_and_only_for_its_request() {
        let sealer = Sealer::from_material(&[3u8; 32], KeySource::Env).unwrap();
        let alice = caller("alice");
        let bind = Binding { caller: &alice, upstream: "fx", method: "tools/call", item: "fx__ask", confirmed: None };
        let inner = r#""  odd \u00e9 state ""#;
        let out = seal(&sealer, result(&format!(r#"{{"resultType":"input_required","requestState":{inner}}}"#)), &bind);
        let Outcome::Result(raw) = out else { panic!() };
        let v: serde_json::Value = serde_json::from_str(raw.get()).unwrap();
        let token = v["requestState"].as_str().unwrap().to_string();
        assert!(!token.contains("odd"), "the client sees only the sealed token");
        let retry = || -> RawObject { serde_json::from_str(&format!(r#"{{"name":"fx__ask","requestState":"{token}"}}"#)).unwrap() };
        let mut p = retry();
        open(&sealer, &mut p, &bind, Duration::from_secs(60)).unwrap();
        assert_eq!(p.get("requestState").unwrap().get(), inner, "byte for byte");
        let bob = caller("bob");
        let mut p = retry();
        let e = open(&sealer, &mut p, &Binding { caller: &bob, ..bind }, Duration::from_secs(60)).unwrap_err();
        assert_eq!(e, Refused::AnotherCaller);
        let bind = Binding { caller: &alice, upstream: "fx", method: "tools/call", item: "fx__ask", confirmed: None };
        let mut p = retry();
        let e = open(&sealer, &mut p, &Binding { item: "fx__other", ..bind }, Duration::from_secs(60)).unwrap_err();
        assert_eq!(e, Refused::AnotherRequest);
        // Issued on the root endpoint: refused on another one.
        let elsewhere = Arc::new(Principal { endpoint: Some("/mcp/ops".into()), ..(*alice).clone() });
        let mut p = retry();
        let e = open(&sealer, &mut p, &Binding { caller: &elsewhere, ..bind }, Duration::from_secs(60)).unwrap_err();
        assert_eq!(e, Refused::AnotherRequest, "a state is bound to the endpoint it was issued on");
        let mut bytes = token.clone().into_bytes();
        let mid = bytes.len() / 2;
        bytes[mid] = if bytes[mid] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(bytes).unwrap();
        let mut tampered: RawObject = serde_json::from_str(&format!(r#"{{"requestState":"{altered}"}}"#)).unwrap();
        let bind = Binding { caller: &alice, upstream: "fx", method: "tools/call", item: "fx__ask", confirmed: None };
        assert_eq!(open(&sealer, &mut tampered, &bind, Duration::from_secs(60)).unwrap_err(), Refused::NotIssuedHere);
        let mut p = retry();
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(open(&sealer, &mut p, &bind, Duration::ZERO).unwrap_err(), Refused::Expired);
        // Whatever the reason, the client hears the same words.
        let said: std::collections::BTreeSet<String> =
            [Refused::NotIssuedHere, Refused::Expired, Refused::AnotherCaller, Refused::AnotherRequest, Refused::NotAString]
                .iter()
                .map(|r| r.to_error().message)
                .collect();
        assert_eq!(said.len(), 1, "{said:?}");
        // A complete result passes untouched; an input_required without state still gets one.
        assert!(
            matches!(seal(&sealer, result(r#"{"resultType":"complete"}"#), &bind), Outcome::Result(r) if r.get() == r#"{"resultType":"complete"}"#)
        );
        let Outcome::Result(r) = seal(&sealer, result(r#"{"resultType":"input_required","inputRequests":{}}"#), &bind) else { panic!() };
        let token = serde_json::from_str::<serde_json::Value>(r.get()).unwrap()["requestState"].as_str().unwrap().to_string();
        let mut p: RawObject = serde_json::from_str(&format!(r#"{{"requestState":"{token}"}}"#)).unwrap();
        open(&sealer, &mut p, &bind, Duration::from_secs(60)).unwrap();
        assert!(p.get("requestState").is_none(), "none is added where the upstream gave none");
    }
}
