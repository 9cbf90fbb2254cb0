//! The built-in demo upstream (`mcpgate demo-server`): a small, real, modern (2026-07-28) MCP
//! server over stdio or Streamable HTTP, built on the same edge adapter as the gateway. Two
//! profiles share the tool name `echo`, so the gateway's prefixing is visible out of the box. The
//! `dynamic` profile's list changes, and it announces that on `subscriptions/listen` streams.

mod tools;

use crate::dispatch::{BoxFuture, Request, Service};
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::json::Json;
use mcpgate_protocol::reply::{Event, EventStream, Outcome, Reply};
use mcpgate_protocol::{SUPPORTED_VERSIONS, jsonrpc, keys, xheader};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;
pub use tools::Profile;

pub struct Demo {
    profile: Profile,
    tools: Vec<tools::Tool>,
    /// Tools per `tools/list` page (0: one page), to exercise clients' pagination.
    page_size: usize,
    /// The dynamic profile's `bonus` tool is listed.
    bonus: std::sync::atomic::AtomicBool,
    /// Bumped on every change of the tool list (what listen streams wait for).
    generation: tokio::sync::watch::Sender<u64>,
}

impl Demo {
    pub fn new(profile: Profile) -> Demo {
        Demo {
            profile,
            tools: tools::for_profile(profile),
            page_size: 0,
            bonus: Default::default(),
            generation: tokio::sync::watch::channel(0).0,
        }
    }

    pub fn with_page_size(mut self, page_size: usize) -> Demo {
        self.page_size = page_size;
        self
    }

    /// One page of `tools/list`; the cursor is the decimal offset of the page.
    fn list(&self, req: &Request) -> Reply {
        let offset = match req.params.parse::<String>("cursor") {
            None => 0,
            Some(Ok(c)) => match c.parse::<usize>() {
                Ok(o) if o <= self.tools.len() => o,
                _ => return Reply::error(RpcError::invalid_params(format!("Invalid cursor: {c}"))),
            },
            Some(Err(_)) => return Reply::error(RpcError::invalid_params("cursor must be a string")),
        };
        let bonus = self.bonus.load(std::sync::atomic::Ordering::SeqCst).then(tools::bonus);
        let all: Vec<&Value> = self.tools.iter().chain(bonus.as_ref()).map(|t| &t.def).collect();
        let size = if self.page_size == 0 { all.len() } else { self.page_size };
        let end = (offset + size).min(all.len());
        let defs = &all[offset.min(end)..end];
        let ttl = if self.profile == Profile::Dynamic { 0 } else { 60000 };
        let mut result = json!({ "tools": defs, "ttlMs": ttl, "cacheScope": "public" });
        if end < all.len() {
            result["nextCursor"] = json!(end.to_string());
        }
        self.result(result)
    }

    fn info(&self) -> Value {
        json!({ "name": format!("mcpgate-demo-{}", self.profile.name()), "version": env!("CARGO_PKG_VERSION") })
    }

    fn result(&self, mut v: Value) -> Reply {
        v["resultType"] = json!("complete");
        v["_meta"] = json!({ keys::SERVER_INFO: self.info() });
        match Json::to_json(&v) {
            Ok(raw) => Reply::Single(Outcome::Result(raw)),
            Err(e) => Reply::error(RpcError::internal(e.to_string())),
        }
    }

    fn call(&self, req: Request) -> Reply {
        let name = match req.params.parse::<String>("name") {
            Some(Ok(n)) => n,
            _ => return Reply::error(RpcError::invalid_params("tools/call needs params.name")),
        };
        let bonus = self.bonus.load(std::sync::atomic::Ordering::SeqCst).then(tools::bonus);
        let Some(tool) = self.tools.iter().chain(bonus.as_ref()).find(|t| t.def["name"] == name.as_str()) else {
            return Reply::error(RpcError::unknown_tool(&name));
        };
        if name == "toggle_bonus" {
            let now = !self.bonus.fetch_xor(true, std::sync::atomic::Ordering::SeqCst);
            self.generation.send_modify(|g| *g += 1);
            return self
                .result(json!({ "content": [{ "type": "text", "text": format!("bonus tool {}", if now { "on" } else { "off" }) }] }));
        }
        let args = match req.params.parse::<Value>("arguments") {
            None | Some(Ok(Value::Null)) => json!({}),
            Some(Ok(v @ Value::Object(_))) => v,
            _ => return Reply::error(RpcError::invalid_params("arguments must be an object")),
        };
        if let Some(received) = &req.param_headers {
            let plan = xheader::plan(&tool.def["inputSchema"]).unwrap_or_default();
            if let Err(e) = xheader::check_inbound(&plan, &args, received) {
                return Reply::error(e);
            }
        }
        if name == "countdown"
            && let Some(token) = req.meta.progress_token().cloned()
        {
            return self.countdown(&args, token);
        }
        self.result((tool.run)(&args))
    }

    /// `subscriptions/listen` (dynamic profile): the acknowledgement, then one
    /// `tools/list_changed` per change of the list, tagged with the subscription id.
    fn listen(&self, req: Request) -> Reply {
        let asked = req.params.parse::<Value>("notifications").and_then(Result::ok).unwrap_or(Value::Null);
        let tools = self.profile == Profile::Dynamic && asked["toolsListChanged"] == true;
        let id: Value = serde_json::from_str(req.id.get()).unwrap_or(Value::Null);
        let meta = json!({ keys::SUBSCRIPTION_ID: id });
        let honoured = if tools { json!({ "toolsListChanged": true }) } else { json!({}) };
        let (tx, rx) = mpsc::channel(4);
        let mut changes = self.generation.subscribe();
        tokio::spawn(async move {
            let message = |method: &str, params: Value| {
                Json::to_json(&params).map(|raw| Event::Notification(jsonrpc::notification_message(method, &raw)))
            };
            let Ok(ack) = message("notifications/subscriptions/acknowledged", json!({ "_meta": meta, "notifications": honoured })) else {
                return;
            };
            if tx.send(ack).await.is_err() {
                return;
            }
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    _ = tx.closed() => return,
                }
                if !tools {
                    continue;
                }
                let Ok(n) = message("notifications/tools/list_changed", json!({ "_meta": meta })) else { return };
                if tx.send(n).await.is_err() {
                    return;
                }
            }
        });
        Reply::Stream(EventStream::new(rx))
    }

    /// `countdown` with a progress token: one progress notification per step, then the result.
    fn countdown(&self, args: &Value, token: Value) -> Reply {
        let steps = args["steps"].as_u64().unwrap_or(3).min(20);
        let (tx, rx) = mpsc::channel(4);
        let Reply::Single(final_outcome) =
            self.result(json!({ "content": [{ "type": "text", "text": format!("counted down from {steps}") }] }))
        else {
            return Reply::error(RpcError::internal("unexpected reply"));
        };
        tokio::spawn(async move {
            for i in 1..=steps {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let params = json!({ "progressToken": token, "progress": i, "total": steps, "message": format!("step {i} of {steps}") });
                let Ok(raw) = Json::to_json(&params) else {
                    return;
                };
                if tx.send(Event::Notification(jsonrpc::notification_message("notifications/progress", &raw))).await.is_err() {
                    return;
                }
            }
            let _ = tx.send(Event::Done(final_outcome)).await;
        });
        Reply::Stream(EventStream::new(rx))
    }
}

impl Service for Demo {
    fn handle(&self, req: Request) -> BoxFuture<'_, Reply> {
        Box::pin(async move {
            match req.method.as_str() {
                "server/discover" => self.result(json!({
                    "supportedVersions": SUPPORTED_VERSIONS,
                    "capabilities": { "tools": { "listChanged": self.profile == Profile::Dynamic } },
                    "instructions": self.profile.instructions(),
                    "ttlMs": 60000,
                    "cacheScope": "public",
                })),
                "tools/list" => self.list(&req),
                "tools/call" => self.call(req),
                "subscriptions/listen" => self.listen(req),
                other => Reply::error(RpcError::method_not_found(other)),
            }
        })
    }
}
