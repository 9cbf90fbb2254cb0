//! Integration tests: the real mcpgate binary in front of real upstreams on loopback.

mod harness;

mod affinity;
mod apps;
mod audit_chain;
mod browser;
mod caching;
mod callers;
mod chaos;
mod cli;
mod cluster;
mod code_child;
mod code_confirm;
mod code_mode;
mod confirm;
mod confirm_once;
mod conformance;
mod console_admission;
mod discovery;
mod discovery_import;
mod docs;
mod edge;
mod endpoints;
mod experience;
mod extensions;
mod guards;
mod identity;
mod identity_cluster;
mod identity_keys;
mod identity_sdk_as;
mod identity_signin;
mod input;
mod interop;
mod isolation;
mod isolation_escape;
mod legacy;
mod list_order;
mod logfmt;
mod malformed;
mod notifications;
mod observability;
mod openapi;
#[cfg(feature = "otlp")]
mod otlp;
mod pins;
mod pins_review;
mod policy;
mod pools;
mod quota_durable;
mod real_servers;
mod registry;
mod reload;
mod resilience;
mod routing;
mod schema_cost;
mod scripted;
mod search;
mod secrets_paths;
mod security;
mod security_bindings;
mod skills;
mod state_db;
mod state_start;
mod streams;
mod supervision;
mod test_command;
mod tls;
mod unreadable;
mod uri_tricks;
mod usage;
mod validation;

use harness::*;

/// A gateway in front of the Python SDK test upstream twice: `alpha` over HTTP, `beta` over stdio.
pub fn two_upstreams(timeout: &str) -> (Proc, String, Gateway) {
    two_upstreams_with(timeout, "")
}

/// [`two_upstreams`], with `beta_extra` (TOML lines) added to the stdio upstream's table.
pub fn two_upstreams_with(timeout: &str, beta_extra: &str) -> (Proc, String, Gateway) {
    let (alpha, alpha_url) = py_http("alpha", &[]);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"alpha\"\nurl = \"{alpha_url}\"\ntimeout = \"{timeout}\"\n\n[[upstream]]\nid = \"beta\"\ncommand = {}\ntimeout = \"{timeout}\"\n{beta_extra}\n",
        py_stdio_command("beta")
    );
    let gw = gateway(&config);
    (alpha, alpha_url, gw)
}

/// A gateway in front of the two built-in demo upstreams (stdio, this same binary).
pub fn demo_gateway(extra_server: &str) -> Gateway {
    gateway(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{extra_server}\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"calc\"]\n\n[[upstream]]\nid = \"text\"\ncommand = [\"mcpgate\", \"demo-server\", \"--profile\", \"text\"]\n"
    ))
}
