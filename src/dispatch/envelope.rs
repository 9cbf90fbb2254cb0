//! The envelope a guard's replacement of a result is given before it is relayed. A guard that
//! answers `modify` writes what the person should read (`content`, `structuredContent`,
//! `messages`, `contents`, `inputRequests`); the members the protocol requires around it
//! (`resultType`; a resource read's `ttlMs` and `cacheScope`; a question's sealed
//! `requestState`, which a guard never sees) come from the result it replaces, so a client that
//! checks the 2026-07-28 schema accepts it. A replacement that still is not a result of its method
//! (no `content` list for a tool call, no `messages` for a prompt, no `contents` for a read, no
//! `inputRequests` for a question) is refused, and the caller reads a withheld answer instead.

use mcpgate_protocol::Method;
use serde_json::{Map, Value};

/// Why a guard's replacement is not a result of its method (what the caller is told instead).
#[derive(Debug, thiserror::Error)]
#[error("the guard's replacement is not a {method} result ({why})")]
pub struct NotAResult {
    method: String,
    why: String,
}

/// The members copied from the replaced result when the replacement lacks them.
const CARRIED: &[&str] = &["ttlMs", "cacheScope"];

/// `new` (a guard's replacement of `original`, the result as the upstream sent it) completed to a
/// result of `method`, or why it is not one.
pub fn complete(method: &Method, original: Option<&Value>, new: Value) -> Result<Value, NotAResult> {
    let not = |why: String| NotAResult { method: method.as_str().to_string(), why };
    let Value::Object(mut new) = new else { return Err(not("it is not a JSON object".into())) };
    let original = original.and_then(Value::as_object);
    let was = original.and_then(|o| o.get("resultType")).and_then(Value::as_str);
    let asks = new.contains_key("inputRequests");
    if !new.contains_key("resultType")
        && let Some(was) = was
    {
        let kind = match was {
            "input_required" | "complete" if asks => "input_required",
            "task" if new.contains_key("taskId") => "task",
            _ => "complete",
        };
        new.insert("resultType".into(), Value::from(kind));
    }
    let kind = new.get("resultType").and_then(Value::as_str).unwrap_or("complete").to_string();
    if let Some(original) = original {
        carry(original, &mut new, CARRIED);
        if kind == "input_required" {
            carry(original, &mut new, &["requestState"]);
        }
    }
    let needed = match (kind.as_str(), method) {
        ("input_required", _) => Some("inputRequests"),
        ("task", _) => Some("taskId"),
        (_, Method::ToolsCall) => Some("content"),
        (_, Method::PromptsGet) => Some("messages"),
        (_, Method::ResourcesRead) => Some("contents"),
        _ => None,
    };
    let Some(member) = needed else { return Ok(Value::Object(new)) };
    match new.get(member) {
        None => Err(not(format!("it has no `{member}`"))),
        Some(v) if matches!(member, "content" | "messages" | "contents") && !v.is_array() => {
            Err(not(format!("its `{member}` is not a list")))
        }
        _ => Ok(Value::Object(new)),
    }
}

fn carry(from: &Map<String, Value>, to: &mut Map<String, Value>, members: &[&str]) {
    for m in members {
        if !to.contains_key(*m)
            && let Some(v) = from.get(*m)
        {
            to.insert((*m).to_string(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_replacement_gets_the_envelope_of_what_it_replaces() {
        let original = json!({ "resultType": "complete", "content": [{ "type": "text", "text": "secret" }] });
        let new = json!({ "content": [{ "type": "text", "text": "[masked]" }], "structuredContent": { "a": 1 } });
        let done = complete(&Method::ToolsCall, Some(&original), new).expect("a tool result");
        assert_eq!(done["resultType"], "complete");
        assert_eq!(done["structuredContent"]["a"], 1);
        // A legacy upstream's result has no resultType; neither has its replacement.
        let legacy = complete(&Method::ToolsCall, Some(&json!({ "content": [] })), json!({ "content": [] })).expect("ok");
        assert!(legacy.get("resultType").is_none());
        let read = json!({ "resultType": "complete", "contents": [], "ttlMs": 0, "cacheScope": "private" });
        let done = complete(&Method::ResourcesRead, Some(&read), json!({ "contents": [] })).expect("a read");
        assert_eq!((done["ttlMs"].clone(), done["cacheScope"].clone()), (json!(0), json!("private")));
    }

    #[test]
    fn a_question_keeps_its_sealed_state_and_a_replacement_that_is_not_a_result_is_refused() {
        let asked = json!({ "resultType": "input_required", "inputRequests": { "a": {} }, "requestState": "sealed" });
        let done = complete(&Method::ToolsCall, Some(&asked), json!({ "inputRequests": { "a": { "x": 1 } } })).expect("a question");
        assert_eq!((done["resultType"].clone(), done["requestState"].clone()), (json!("input_required"), json!("sealed")));
        // A guard may answer a question with a plain result instead: no state goes with it.
        let done = complete(&Method::ToolsCall, Some(&asked), json!({ "content": [] })).expect("a result");
        assert_eq!(done["resultType"], "complete");
        assert!(done.get("requestState").is_none());
        for (method, new) in [
            (Method::ToolsCall, json!({ "structuredContent": {} })),
            (Method::ToolsCall, json!({ "content": "text" })),
            (Method::PromptsGet, json!({ "content": [] })),
            (Method::ResourcesRead, json!({ "text": "x" })),
            (Method::ToolsCall, json!([1])),
        ] {
            assert!(complete(&method, Some(&json!({ "resultType": "complete" })), new.clone()).is_err(), "{method:?} {new}");
        }
    }
}
