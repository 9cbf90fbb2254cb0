//! `server/discover` for the gateway itself: the versions it speaks, the union of what the
//! upstreams the caller may use offer (limited to what the gateway serves), and their
//! instructions merged into one labelled section per upstream. Every list it serves declares
//! `listChanged` (the gateway announces changes of its own catalogue, whatever its upstreams do),
//! and `resources.subscribe` is declared when an upstream the caller may use can report updates.
//! The extensions: the rules are the table in `protocol::extensions` (what the gateway relays,
//! when, in which era); this module feeds it what the upstreams of the caller's view offer (the
//! ready upstreams the caller may use through its endpoint, each with its declared extensions, its
//! era, and whether it serves MCP Apps' UI resources in that view). The legacy `initialize`
//! (answered from discover) keeps what the table relays to legacy clients.

use super::Request;
use super::Served;
use crate::upstream::Status;
use mcpgate_model::catalog::Kind;
use mcpgate_model::catalog::view;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::extensions::{self, Era, Offer};
use mcpgate_protocol::json::Json;
use mcpgate_protocol::reply::{Outcome, Reply};
use mcpgate_protocol::{SUPPORTED_VERSIONS, keys};
use serde_json::{Map, Value, json};

/// How long clients may cache the discover result.
const DISCOVER_TTL_MS: u64 = 30_000;

/// The `serverInfo` of the endpoint `req` came in by: the one its Server Card agrees with
/// (`discovery::card::server_info`).
pub fn server_info(gw: &Served<'_>, req: &Request) -> Value {
    crate::discovery::card::server_info(&gw.config, req.caller.endpoint.as_deref().unwrap_or(&gw.config.server.path))
}

/// Whether the caller may use anything upstream `index` serves (all of them, when unrestricted).
pub(super) fn usable(gw: &Served<'_>, req: &Request, index: usize) -> bool {
    if req.caller.grants.is_unrestricted() && req.caller.endpoint.is_none() {
        return true;
    }
    let cat = &gw.view;
    let id_of = |i: usize| gw.upstream_id(i);
    Kind::ALL.iter().any(|&kind| view::visible(cat, kind, &req.caller.grants, &id_of).iter().any(|e| e.upstream == index))
}

/// Whether an upstream that is up and that the caller may use declares capability `cap` (what
/// the caller may be told the gateway offers).
pub fn offered_to(gw: &Served<'_>, req: &Request, cap: &str) -> bool {
    gw.upstreams().iter().any(|up| {
        let st = up.state();
        st.status == Status::Ready && !up.is_retired() && st.offers(cap) && usable(gw, req, up.index)
    })
}

pub fn discover(gw: &Served<'_>, req: &Request) -> Reply {
    let restricted = !req.caller.grants.is_unrestricted();
    let mut capabilities = Map::new();
    capabilities.insert("tools".into(), json!({ "listChanged": true }));
    let mut sections = Vec::new();
    let config = gw.config.clone();
    // A virtual server speaks for itself: its title (in `server_info`), and its instructions
    // before the upstreams'.
    let endpoint = req.caller.endpoint.as_deref().and_then(|path| config.endpoints.iter().find(|e| e.path == path));
    let own = match endpoint {
        Some(ep) => ep.instructions.as_ref(),
        None => config.server.instructions.as_ref(),
    };
    if let Some(own) = own {
        sections.push(own.trim().to_string());
    }
    for up in gw.live_upstreams().iter() {
        let st = up.state();
        // Only the upstreams this caller may use contribute: instructions and capabilities can
        // tell what an upstream is, which a caller without grants on it must not learn.
        if st.status != Status::Ready || !usable(gw, req, up.index) {
            continue;
        }
        for cap in ["logging", "completions"] {
            if st.offers(cap) {
                capabilities.insert(cap.into(), json!({}));
            }
        }
        if st.offers("prompts") {
            capabilities.insert("prompts".into(), json!({ "listChanged": true }));
        }
        if st.offers("resources") {
            let subscribe = st.declares("resources", "subscribe")
                || capabilities.get("resources").and_then(|r| r.get("subscribe")).and_then(Value::as_bool) == Some(true);
            capabilities.insert("resources".into(), json!({ "listChanged": true, "subscribe": subscribe }));
        }
        if let Some(text) = st.instructions.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            let label = if up.cfg.prefix.is_empty() {
                format!("## {} (tools without prefix)", up.id())
            } else {
                format!("## {} (tools named {}{}*)", up.id(), up.cfg.prefix, gw.config.catalog.names.separator)
            };
            sections.push(section(&label, text));
        }
    }
    // The extensions: only those the gateway relays, by the one table.
    let relayed = advertised(gw, req);
    if !relayed.is_empty() {
        capabilities.insert("extensions".into(), Value::Object(relayed));
    }
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": capabilities,
        "ttlMs": DISCOVER_TTL_MS,
        "cacheScope": if restricted { "private" } else { "public" },
        "_meta": { keys::SERVER_INFO: server_info(gw, req) },
    });
    if !sections.is_empty() {
        result["instructions"] = Value::String(sections.join("\n\n"));
    }
    match Json::to_json(&result) {
        Ok(raw) => Reply::Single(Outcome::Result(raw)),
        Err(e) => Reply::error(RpcError::internal(e.to_string())),
    }
}

/// Whether upstream `index` serves a resource under `scheme` in the caller's view.
fn serves(gw: &Served<'_>, index: usize, scheme: &str) -> bool {
    gw.view.section(Kind::Resource).entries.iter().any(|e| e.upstream == index && e.original.starts_with(scheme))
}

/// The `capabilities.extensions` the gateway advertises to the caller of `req` (modern era).
pub fn advertised(gw: &Served<'_>, req: &Request) -> Map<String, Value> {
    let upstreams = gw.live_upstreams();
    let offering: Vec<_> = upstreams
        .iter()
        .filter(|up| !up.is_retired() && up.state().status == Status::Ready && usable(gw, req, up.index))
        .map(|up| (up.state(), extensions::schemes().filter(|s| serves(gw, up.index, s)).collect::<Vec<_>>()))
        .collect();
    let offers: Vec<Offer<'_>> = offering
        .iter()
        .map(|(st, served)| Offer {
            declared: st.capabilities.as_ref().and_then(|c| c.get("extensions")).and_then(Value::as_object),
            modern: st.is_modern(),
            serves: served,
        })
        .collect();
    extensions::advertised(&offers, Era::Modern)
}

/// The most of one upstream's instructions passed on: one upstream cannot crowd out the others,
/// nor flood a model's context.
const MAX_INSTRUCTIONS: usize = 4096;

/// One upstream's labelled section of the merged instructions, cut (at a character boundary,
/// and said so) past [`MAX_INSTRUCTIONS`] bytes.
fn section(label: &str, text: &str) -> String {
    if text.len() <= MAX_INSTRUCTIONS {
        return format!("{label}\n{text}");
    }
    let mut cut = MAX_INSTRUCTIONS;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{label}\n{}\n[instructions cut at {MAX_INSTRUCTIONS} bytes]", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_labelled_and_bounded() {
        assert_eq!(section("## a", "be nice"), "## a\nbe nice");
        let long = section("## b", &"é".repeat(5000));
        assert!(long.len() < MAX_INSTRUCTIONS + 100 && long.ends_with("[instructions cut at 4096 bytes]"), "{}", long.len());
    }
}
