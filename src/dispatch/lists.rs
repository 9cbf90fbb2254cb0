//! The four list methods, served from the catalogue snapshot (never by calling upstreams per
//! request) and paged with the gateway's own cursor.

use super::Request;
use super::Served;
use mcpgate_model::catalog::view;
use mcpgate_model::catalog::{Kind, cursor};
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::json::json_string;
use mcpgate_protocol::keys;
use mcpgate_protocol::reply::{Outcome, Reply};

pub fn list(gw: &Served<'_>, req: &Request, kind: Kind) -> Reply {
    let cat = &gw.view;
    let id_of = |i: usize| gw.upstream_id(i);
    let entries = view::visible(cat, kind, &req.caller.grants, &id_of);
    // A list filtered for this caller must not be shared with other callers.
    let private = cat.is_private(kind) || !req.caller.grants.is_unrestricted();
    let offset = match req.params.parse::<Option<String>>("cursor") {
        None | Some(Ok(None)) => 0,
        Some(Ok(Some(c))) => match cursor::decode(&gw.sealer, kind, &c, cat.fingerprints[kind as usize]) {
            Ok(o) if o <= entries.len() => o,
            refused => {
                let why = refused.err().unwrap_or("invalid_cursor/past_the_end");
                gw.audit.refused(&crate::audit::Subject::asked(&req.caller, req.method.clone(), "-"), why);
                gw.metrics.refused(crate::telemetry::reasons::Refused::InvalidCursor);
                return Reply::error(cursor::invalid());
            }
        },
        Some(Err(_)) => return Reply::error(RpcError::invalid_params("cursor must be a string")),
    };
    let end = (offset + gw.config.catalog.page_size).min(entries.len());
    let page = &entries[offset..end];
    let mut body = String::with_capacity(256 + page.iter().map(|t| t.json.get().len() + 1).sum::<usize>());
    body.push_str("{\"resultType\":\"complete\",\"");
    body.push_str(kind.list_key());
    body.push_str("\":[");
    for (i, t) in page.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        // A caller who may not read an app's UI resource does not see the tool point at it.
        let hidden_ui = t.ui.as_ref().is_some_and(|uri| gw.route_uri_in(cat, &req.caller, &req.caller.grants, uri).is_none());
        match hidden_ui.then(|| mcpgate_model::catalog::links::without_ui(&t.json)).flatten() {
            Some(stripped) => body.push_str(stripped.get()),
            None => body.push_str(t.json.get()),
        }
    }
    body.push(']');
    if end < entries.len() {
        body.push_str(",\"nextCursor\":");
        match cursor::encode(&gw.sealer, kind, end, cat.fingerprints[kind as usize]) {
            Ok(c) => body.push_str(&json_string(&c)),
            Err(e) => return Reply::error(RpcError::internal(format!("cannot issue a cursor: {e}"))),
        }
    }
    body.push_str(&format!(
        ",\"ttlMs\":{},\"cacheScope\":\"{}\",\"_meta\":{{\"{}\":{}}}}}",
        cat.ttl_ms(kind, std::time::Instant::now()),
        if private { "private" } else { "public" },
        keys::SERVER_INFO,
        super::discover::server_info(gw, req)
    ));
    // invariant: built from the entries' JSON and JSON the gateway writes, so only UTF-8 is checked.
    match Json::from_utf8(body.into_bytes()).ok_or("not UTF-8") {
        Ok(raw) => Reply::Single(Outcome::Result(raw)),
        Err(e) => Reply::error(RpcError::internal(format!("cannot render {}: {e}", kind.list_key()))),
    }
}
