//! Bare names. An MCP App calls its own server's tools, and reads its resources, by the names the
//! server gave them (`get-time`, `ui://get-time/app.html`), not by the gateway's
//! (`app__get-time`). A name that is not in the caller's view but is the upstream's own name of
//! exactly one item the caller may use goes to that item, decided and audited under its
//! catalogue name; a name several upstreams share is refused with the candidates, so the caller
//! can pick; `[catalog] bare_names = false` turns this off.

use mcpgate_model::catalog::{Catalog, Entry, Kind, view};
use mcpgate_model::policy::Grants;
use mcpgate_protocol::errors::RpcError;
use serde_json::json;

/// What a bare name resolves to.
pub enum Bare {
    /// The gateway name of the one item with that upstream name.
    One(String),
    /// The gateway names of every item with that upstream name.
    Ambiguous(Vec<String>),
    Unknown,
}

/// The item of `kind` in `cat` whose upstream name is `name`, among those `grants` allow.
pub fn resolve<'a>(cat: &'a Catalog, kind: Kind, name: &str, grants: &Grants, upstream_id: &'a dyn Fn(usize) -> &'a str) -> Bare {
    let found: Vec<&Entry> = view::visible(cat, kind, grants, upstream_id).into_iter().filter(|e| e.original == name).collect();
    match found.as_slice() {
        [] => Bare::Unknown,
        [one] => Bare::One(one.name.clone()),
        many => Bare::Ambiguous(many.iter().map(|e| e.name.clone()).collect()),
    }
}

/// The answer to a bare name several upstreams serve.
pub fn ambiguous(kind: Kind, name: &str, candidates: &[String]) -> RpcError {
    RpcError::invalid_params(format!("{} {name} is served by more than one upstream: use one of {}", kind.label(), candidates.join(", ")))
        .with_data(json!({ "name": name, "candidates": candidates }))
}
