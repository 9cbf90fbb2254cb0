//! Which extensions the gateway advertises to one caller: the rules are the table in
//! `protocol::extensions` (what the gateway relays, when, in which era); this module feeds it what
//! the upstreams of the caller's view offer (the ready upstreams the caller may use through its
//! endpoint, each with its declared extensions, its era, and whether it serves MCP Apps' UI
//! resources in that view). `server/discover` answers with the result, and the legacy `initialize`
//! (answered from discover) keeps what the table relays to legacy clients.

use super::Request;
use super::Served;
use crate::catalog::Kind;
use crate::protocol::extensions::{self, Era, Offer};
use crate::upstream::Status;
use serde_json::{Map, Value};

/// Whether upstream `index` serves a resource under `scheme` in the caller's view.
fn serves(gw: &Served<'_>, index: usize, scheme: &str) -> bool {
    gw.view.section(Kind::Resource).entries.iter().any(|e| e.upstream == index && e.original.starts_with(scheme))
}

/// The `capabilities.extensions` the gateway advertises to the caller of `req` (modern era).
pub fn advertised(gw: &Served<'_>, req: &Request) -> Map<String, Value> {
    let upstreams = gw.live_upstreams();
    let offering: Vec<_> = upstreams
        .iter()
        .filter(|up| !up.is_retired() && up.state().status == Status::Ready && super::discover::usable(gw, req, up.index))
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
