//! mcpgate: an MCP gateway. One Streamable HTTP endpoint in front of many MCP servers, with one
//! merged, prefixed catalogue, per-call routing and strict protocol validation.
//!
//! Layout: `protocol` (pure wire model), `catalog` (pure merge and naming), `config` (the TOML
//! model), `upstream` (one handle per upstream server, HTTP or stdio), `server` (serving clients
//! over HTTP and stdio), `dispatch` (the era-free request pipeline), `demo` (the built-in demo
//! server), `check` (the `check` and `tools` commands).

pub mod audit;
pub mod auth;
pub mod catalog;
pub mod check;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod console;
pub mod demo;
pub mod dispatch;
pub mod gateway;
pub mod hub;
pub mod import;
pub mod net;
pub mod policy;
pub mod protocol;
pub mod ratelimit;
pub mod reply;
pub mod server;
pub mod sync;
pub mod tasks;
pub mod telemetry;
pub mod token;
pub mod upstream;
