//! Progress tokens are unique per upstream (the spec requires it), but two callers may pick the
//! same one. So every request with a `progressToken` goes upstream with the gateway's own token,
//! `mcpgate-<request id>`, and each `notifications/progress` the upstream sends comes back with
//! the caller's token put in again. Both transports use these two functions.

use mcpgate_protocol::jsonrpc::{self, Message};
use mcpgate_protocol::keys;
use mcpgate_protocol::rawobj::RawObject;
use serde_json::{Map, Value};

const PREFIX: &str = "mcpgate-";

/// Replaces the caller's token in `meta` with the gateway's one for request `id`; the caller's.
pub fn swap(meta: &mut Map<String, Value>, id: u64) -> Option<Value> {
    let client = meta.get(keys::PROGRESS_TOKEN).cloned()?;
    meta.insert(keys::PROGRESS_TOKEN.into(), Value::String(format!("{PREFIX}{id}")));
    Some(client)
}

/// The request id a progress notification's (gateway) token names.
pub fn request_of(msg: &Message) -> Option<u64> {
    let params: RawObject = serde_json::from_str(msg.params.as_ref()?.get()).ok()?;
    let token = params.parse::<String>(keys::PROGRESS_TOKEN)?.ok()?;
    token.strip_prefix(PREFIX)?.parse().ok()
}

/// The notification with `client`'s token in place of the gateway's.
pub fn restore(msg: &Message, client: &Value) -> Option<Vec<u8>> {
    let mut params: RawObject = serde_json::from_str(msg.params.as_ref()?.get()).ok()?;
    params.set_json(keys::PROGRESS_TOKEN, client).ok()?;
    Some(jsonrpc::notification_message("notifications/progress", &params.to_json()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokens_go_out_unique_and_come_back_as_the_callers() {
        let mut meta = Map::new();
        meta.insert(keys::PROGRESS_TOKEN.into(), json!(1));
        assert_eq!(swap(&mut meta, 42), Some(json!(1)));
        assert_eq!(meta[keys::PROGRESS_TOKEN], "mcpgate-42");
        let n =
            Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"mcpgate-42","progress":1}}"#)
                .unwrap();
        assert_eq!(request_of(&n), Some(42));
        let back: Value = serde_json::from_slice(&restore(&n, &json!(1)).unwrap()).unwrap();
        assert_eq!(back["params"], json!({ "progressToken": 1, "progress": 1 }));
        assert_eq!(swap(&mut Map::new(), 1), None);
    }
}
