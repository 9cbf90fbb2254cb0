//! Agent Skills (SEP-2640, extension `io.modelcontextprotocol/skills`) across upstreams. The
//! gateway offers the extension to a caller when an upstream it may use declares it, with
//! `directoryRead: true` only when every such upstream declares that too (a client that sees the
//! flag may call `resources/directory/read` on any skill it lists). `skills/list` is served from
//! the catalogue like every list (merged, filtered by the caller's view, paged with the gateway's
//! cursor); `skills/get` and `resources/directory/read` are routed to the skill's owner with the
//! URI mapped back, and its answer mapped forward (`catalog::links`), digests and sizes untouched.
//! A skill the caller may not see answers exactly like one that does not exist (-32602).

use super::forward::{Named, forward};
use super::{Request, Served, discover};
use crate::catalog::{Kind, uris, view};
use crate::protocol::SKILLS_EXTENSION;
use crate::protocol::errors::RpcError;
use crate::reply::Reply;
use crate::upstream::Status;
use serde_json::{Value, json};

/// The skills extension's settings to advertise to this caller, if any upstream it may use
/// declares the extension.
pub fn advertised(gw: &Served<'_>, req: &Request) -> Option<Value> {
    let mut offered = false;
    let mut directory_read = true;
    for up in gw.live_upstreams() {
        let st = up.state();
        let declared = st.capabilities.as_ref().and_then(|c| c.get("extensions")).and_then(|e| e.get(SKILLS_EXTENSION));
        let Some(settings) = declared.filter(|v| !v.is_null()) else { continue };
        if st.status != Status::Ready || !discover::usable(gw, req, up.index) {
            continue;
        }
        offered = true;
        directory_read &= settings.get("directoryRead").and_then(Value::as_bool) == Some(true);
    }
    offered.then(|| if directory_read { json!({ "directoryRead": true }) } else { json!({}) })
}

/// Whether the caller is offered the extension (the methods answer -32601 otherwise).
pub fn offered(gw: &Served<'_>, req: &Request) -> bool {
    advertised(gw, req).is_some()
}

fn uri_param(req: &Request) -> Result<String, RpcError> {
    match req.params.parse::<String>("uri") {
        Some(Ok(u)) => Ok(u),
        _ => Err(RpcError::invalid_params(format!("{} needs params.uri (a string)", req.method))),
    }
}

fn refuse(gw: &Served<'_>, req: &Request, item: &str) {
    gw.audit.refused(&req.caller.id, req.caller.endpoint.as_deref().unwrap_or("-"), req.method.as_str(), item, "unknown_or_denied");
    gw.metrics.refused("unknown_or_denied");
}

/// `skills/get`: the entry of one skill, from its owner.
pub async fn get(gw: &Served<'_>, req: Request) -> Reply {
    let uri = match uri_param(&req) {
        Ok(u) => u,
        Err(e) => return Reply::error(e),
    };
    let id_of = |i: usize| gw.upstream_id(i);
    let canonical = uris::canonical(&uri).map_or_else(|_| uri.clone(), |c| c.into_owned());
    let found = view::find(&gw.view, Kind::Skill, &uri, &req.caller.grants, &id_of)
        .or_else(|| view::find(&gw.view, Kind::Skill, &canonical, &req.caller.grants, &id_of))
        .map(|s| (s.upstream, s.original.clone(), s.name.clone()));
    let Some((upstream, original, name)) = found else {
        refuse(gw, &req, &canonical);
        return Reply::error(RpcError::invalid_params(format!("Unknown skill URI: {uri}")).with_data(json!({ "uri": uri })));
    };
    forward(gw, upstream, req, Named::same(&name), Some(("uri", &original)), Vec::new(), None).await
}

/// `resources/directory/read`: the children of a directory inside a skill the caller may see,
/// from the skill's owner (which answers -32602 for a URI that is no directory, and -32601 if
/// it does not implement the method).
pub async fn directory_read(gw: &Served<'_>, req: Request) -> Reply {
    let uri = match uri_param(&req) {
        Ok(u) => u,
        Err(e) => return Reply::error(e),
    };
    let canonical = uris::canonical(&uri).map_or_else(|_| uri.clone(), |c| c.into_owned());
    let Some((upstream, original)) = gw.route_uri_in(&gw.view, &req.caller, &req.caller.grants, &uri) else {
        refuse(gw, &req, &canonical);
        return Reply::error(RpcError::invalid_params(format!("Not a directory: {uri}")).with_data(json!({ "uri": uri })));
    };
    forward(gw, upstream, req, Named::same(&canonical), Some(("uri", &original)), Vec::new(), None).await
}
