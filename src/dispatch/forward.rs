//! The methods that act on one item and are forwarded to the upstream that owns it: `tools/call`
//! (mirrored headers checked, `Mcp-Param-*` rebuilt from the upstream's schema), `prompts/get`,
//! `resources/read` (URIs mapped both ways) and `completion/complete` (routed by its `ref`). The
//! item's name or URI is rewritten to the upstream's own; everything else passes through.

use super::Request;
use crate::catalog::uris;
use crate::flow::{Outcome, Reply};
use crate::gateway::Gateway;
use crate::protocol::errors::RpcError;
use crate::protocol::rawobj::RawObject;
use crate::protocol::xheader;
use crate::upstream::Call;
use serde_json::{Value, json};

fn string_param(req: &Request, key: &str) -> Result<String, RpcError> {
    match req.params.parse::<String>(key) {
        Some(Ok(n)) => Ok(n),
        _ => Err(RpcError::invalid_params(format!("{} needs params.{key} (a string)", req.method))),
    }
}

/// Sends `req` to upstream `upstream` with `key` rewritten to `original`.
async fn forward(
    gw: &Gateway,
    upstream: usize,
    req: Request,
    rewrite: Option<(&str, &str)>,
    param_headers: Vec<(String, String)>,
) -> Reply {
    let Some(up) = gw.upstreams.get(upstream).cloned() else {
        return Reply::error(RpcError::internal("catalogue points at a missing upstream"));
    };
    let mut params = req.params;
    params.remove("_meta");
    let mut name = None;
    if let Some((key, original)) = rewrite {
        if params.set_json(key, original).is_err() {
            return Reply::error(RpcError::internal("cannot rewrite the request"));
        }
        name = Some(original.to_string());
    }
    let call = Call { method: req.method, params, meta: req.meta.fields, name, param_headers };
    up.call(call).await
}

pub async fn call_tool(gw: &Gateway, req: Request) -> Reply {
    let name = match string_param(&req, "name") {
        Ok(n) => n,
        Err(e) => return Reply::error(e),
    };
    let cat = gw.catalog();
    let Some(tool) = cat.tool(&name) else {
        return Reply::error(RpcError::unknown_tool(&name));
    };
    let args: Value = match req.params.parse::<Value>("arguments") {
        None => Value::Object(Default::default()),
        Some(Ok(v @ (Value::Object(_) | Value::Null))) => v,
        Some(_) => {
            return Reply::error(RpcError::invalid_params("tools/call arguments must be an object"));
        }
    };
    if let Some(received) = &req.param_headers
        && let Err(e) = xheader::check_inbound(&tool.headers, &args, received)
    {
        return Reply::error(e);
    }
    let (upstream, original, headers) = (tool.upstream, tool.original.clone(), xheader::outbound(&tool.headers, &args));
    drop(cat);
    forward(gw, upstream, req, Some(("name", &original)), headers).await
}

pub async fn get_prompt(gw: &Gateway, req: Request) -> Reply {
    let name = match string_param(&req, "name") {
        Ok(n) => n,
        Err(e) => return Reply::error(e),
    };
    let Some((upstream, original)) = gw.catalog().prompt(&name).map(|p| (p.upstream, p.original.clone())) else {
        return Reply::error(RpcError::invalid_params(format!("Unknown prompt: {name}")));
    };
    forward(gw, upstream, req, Some(("name", &original)), Vec::new()).await
}

pub async fn read_resource(gw: &Gateway, req: Request) -> Reply {
    let uri = match string_param(&req, "uri") {
        Ok(n) => n,
        Err(e) => return Reply::error(e),
    };
    let Some((upstream, original)) = gw.catalog().route_uri(&uri) else {
        return Reply::error(RpcError::invalid_params(format!("Resource not found: {uri}")).with_data(json!({ "uri": uri })));
    };
    let prefix = gw.upstreams.get(upstream).map(|u| u.cfg.prefix.clone()).unwrap_or_default();
    let reply = forward(gw, upstream, req, Some(("uri", &original)), Vec::new()).await;
    if prefix.is_empty() {
        return reply;
    }
    reply.map_outcome(move |o| match o {
        Outcome::Result(raw) => Outcome::Result(prefix_contents(&raw, &prefix).unwrap_or(raw)),
        other => other,
    })
}

/// Gives every `contents[].uri` of a read result the upstream's gateway prefix.
fn prefix_contents(raw: &serde_json::value::RawValue, prefix: &str) -> Option<Box<serde_json::value::RawValue>> {
    let mut obj: RawObject = serde_json::from_str(raw.get()).ok()?;
    let mut contents: Vec<RawObject> = obj.parse("contents")?.ok()?;
    for c in &mut contents {
        if let Some(Ok(uri)) = c.parse::<String>("uri") {
            c.set_json("uri", &uris::to_gateway(prefix, &uri)).ok()?;
        }
    }
    obj.set_json("contents", &contents).ok()?;
    obj.to_raw().ok()
}

pub async fn complete(gw: &Gateway, mut req: Request) -> Reply {
    let Some(Ok(mut reference)) = req.params.parse::<RawObject>("ref") else {
        return Reply::error(RpcError::invalid_params("completion/complete needs params.ref"));
    };
    let cat = gw.catalog();
    let kind = reference.parse::<String>("type").and_then(Result::ok).unwrap_or_default();
    let target = match kind.as_str() {
        "ref/prompt" => reference
            .parse::<String>("name")
            .and_then(Result::ok)
            .and_then(|n| cat.prompt(&n).map(|p| ("name", p.upstream, p.original.clone()))),
        "ref/resource" => reference.parse::<String>("uri").and_then(Result::ok).and_then(|u| {
            let owned = cat.section(crate::catalog::Kind::Template).get(&u).map(|t| (t.upstream, t.original.clone()));
            owned.or_else(|| cat.route_uri(&u)).map(|(up, orig)| ("uri", up, orig))
        }),
        _ => {
            return Reply::error(RpcError::invalid_params(format!("Unknown completion reference type: {kind:?}")));
        }
    };
    drop(cat);
    let Some((key, upstream, original)) = target else {
        return Reply::error(RpcError::invalid_params("Unknown completion reference"));
    };
    if reference.set_json(key, &original).is_err() || req.params.set_json("ref", &reference).is_err() {
        return Reply::error(RpcError::internal("cannot rewrite the completion reference"));
    }
    forward(gw, upstream, req, None, Vec::new()).await
}
