//! The policy decision on one call, with what only the call tells: the request, the arguments
//! and the clock (`policy::Grants::decide`). Lists and lookups have already decided everything
//! the caller and the item alone decide (`catalog::view`); this step decides the rest, with the
//! same rules through the same function, for tool calls, prompt gets, resource reads and
//! completions alike. A refusal names the rule; a `confirm` rule that holds is handed to the
//! confirmation step. The arguments are read only when a rule that concerns the call reads them.

use super::refusal::Refusal;
use super::{Request, Served};
use mcpgate_model::catalog::Kind;
use mcpgate_model::policy::Item;
use mcpgate_model::policy::facts::{Facts, RequestFacts};
use mcpgate_protocol::keys;
use serde_json::Value;
use std::sync::OnceLock;

/// The environment variable that fixes the clock rules read as `now` (RFC 3339, or seconds since
/// the epoch): for tests of time rules; unset in production.
pub const CLOCK_ENV: &str = "MCPGATE_POLICY_NOW";

/// The seconds since the epoch rules see as `now`.
pub fn now() -> u64 {
    static FIXED: OnceLock<Option<u64>> = OnceLock::new();
    let fixed = FIXED.get_or_init(|| std::env::var(CLOCK_ENV).ok().and_then(|v| parse_time(&v)));
    fixed.unwrap_or_else(mcpgate_protocol::toolbox::unix_secs)
}

/// A time as RFC 3339 (`2026-12-03T10:00:00Z`) or seconds since the epoch.
pub fn parse_time(text: &str) -> Option<u64> {
    let text = text.trim();
    text.parse::<u64>().ok().or_else(|| {
        humantime::parse_rfc3339_weak(text).ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_secs())
    })
}

/// Decides on `req` for `item` (as the rules see it: its catalogue name or gateway URI, its
/// upstream, its definition): `Ok(Some(rule))` when a confirm rule holds. `args` are the
/// call's arguments as the chain read them (`dispatch::chain::Call::arguments`), given whenever a
/// rule may read them; a rule that reads arguments it was not given does not hold in the call's
/// favour (`policy::rules`).
pub fn decide(gw: &Served<'_>, req: &Request, item: &Item<'_>, args: Option<&Value>) -> Result<Option<String>, Refusal> {
    let grants = &req.caller.grants;
    if !grants.decides_calls() {
        return Ok(None);
    }
    let client = match &req.legacy {
        Some(session) => Some(&session.info),
        None => req.meta.fields.get(keys::CLIENT_INFO),
    };
    let era = match &req.legacy {
        Some(session) => session.version.as_str(),
        None => req.meta.protocol_version.as_str(),
    };
    let request = RequestFacts {
        method: req.method.as_str(),
        name: item.name,
        upstream: item.upstream,
        endpoint: req.caller.endpoint.as_deref().unwrap_or(&gw.config.server.path),
        era,
        client,
    };
    let facts = Facts { caller: grants.caller(), request: Some(&request), item: item.json, args, now: Some(now()) };
    let verdict = grants.decide(item, &facts, None);
    if let Some(rule) = verdict.denied_by {
        return Err(Refusal::ByRule { rule, allowed_by_none: false, tool: item.kind == Kind::Tool });
    }
    if !verdict.allowed {
        let rule = verdict.unmet.join(", ");
        return Err(Refusal::ByRule { rule, allowed_by_none: true, tool: item.kind == Kind::Tool });
    }
    Ok(verdict.confirm_by)
}
