//! `tools/list` (served from the catalogue snapshot, paged with the gateway's cursor) and
//! `tools/call` (looked up, mirrored headers checked, forwarded to the owning upstream with the
//! prefix stripped and the upstream's own `Mcp-Name`/`Mcp-Param-*`).

use super::Request;
use crate::catalog::cursor;
use crate::flow::{Outcome, Reply};
use crate::gateway::Gateway;
use crate::protocol::errors::RpcError;
use crate::protocol::jsonrpc::json_string;
use crate::protocol::keys;
use crate::protocol::xheader;
use crate::upstream::Call;
use serde_json::Value;
use serde_json::value::RawValue;

pub fn list(gw: &Gateway, req: &Request) -> Reply {
    let cat = gw.catalog();
    let offset = match req.params.parse::<Option<String>>("cursor") {
        None | Some(Ok(None)) => 0,
        Some(Ok(Some(c))) => match cursor::decode(&c) {
            Ok(o) if o <= cat.tools.len() => o,
            Ok(_) => {
                return Reply::error(RpcError::invalid_params(
                    "Invalid cursor: it points past the end of the list",
                ));
            }
            Err(e) => return Reply::error(e),
        },
        Some(Err(_)) => return Reply::error(RpcError::invalid_params("cursor must be a string")),
    };
    let end = (offset + gw.config.catalog.page_size).min(cat.tools.len());
    let mut body = String::with_capacity(
        256 + cat.tools[offset..end]
            .iter()
            .map(|t| t.json.get().len() + 1)
            .sum::<usize>(),
    );
    body.push_str("{\"resultType\":\"complete\",\"tools\":[");
    for (i, t) in cat.tools[offset..end].iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(t.json.get());
    }
    body.push(']');
    if end < cat.tools.len() {
        body.push_str(",\"nextCursor\":");
        body.push_str(&json_string(&cursor::encode(end)));
    }
    body.push_str(&format!(
        ",\"ttlMs\":{},\"cacheScope\":\"{}\",\"_meta\":{{\"{}\":{}}}}}",
        cat.ttl_ms,
        if cat.private { "private" } else { "public" },
        keys::SERVER_INFO,
        super::discover::server_info()
    ));
    match RawValue::from_string(body) {
        Ok(raw) => Reply::Single(Outcome::Result(raw)),
        Err(e) => Reply::error(RpcError::internal(format!("cannot render tools/list: {e}"))),
    }
}

pub async fn call(gw: &Gateway, req: Request) -> Reply {
    let name = match req.params.parse::<String>("name") {
        Some(Ok(n)) => n,
        _ => {
            return Reply::error(RpcError::invalid_params(
                "tools/call needs params.name (a string)",
            ));
        }
    };
    let cat = gw.catalog();
    let Some(tool) = cat.tool(&name) else {
        return Reply::error(RpcError::unknown_tool(&name));
    };
    let args: Value = match req.params.parse::<Value>("arguments") {
        None => Value::Object(Default::default()),
        Some(Ok(v @ (Value::Object(_) | Value::Null))) => v,
        Some(_) => {
            return Reply::error(RpcError::invalid_params(
                "tools/call arguments must be an object",
            ));
        }
    };
    if let Some(received) = &req.param_headers
        && let Err(e) = xheader::check_inbound(&tool.headers, &args, received)
    {
        return Reply::error(e);
    }
    let Some(upstream) = gw.upstreams.get(tool.upstream).cloned() else {
        return Reply::error(RpcError::internal("catalogue points at a missing upstream"));
    };
    let mut params = req.params;
    params.remove("_meta");
    if params.set_json("name", &tool.original).is_err() {
        return Reply::error(RpcError::internal("cannot rewrite the tool name"));
    }
    let call = Call {
        method: "tools/call".into(),
        params,
        meta: req.meta.fields,
        name: Some(tool.original.clone()),
        param_headers: xheader::outbound(&tool.headers, &args),
    };
    drop(cat);
    upstream.call(call).await
}
