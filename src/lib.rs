//! mcpgate: an MCP gateway. One Streamable HTTP endpoint in front of many MCP servers, with one
//! merged, prefixed catalogue, per-call routing and strict protocol validation.
//!
//! Layout, bottom to top (docs/architecture.md): the crates `mcpgate-protocol` (wire model),
//! `mcpgate-model` (catalogue, policy, sealed tokens), `mcpgate-config` (the file),
//! `mcpgate-net` (HTTP client, TLS, Redis) with `mcpgate-store` (the state database) and
//! `mcpgate-sandbox` (the sandbox of stdio servers, their supervisor, the child's pre-exec step:
//! the one crate that makes raw system calls). This crate names each by its own path
//! (`mcpgate_model::catalog::…`, `mcpgate_config::Config`): nothing is re-exported, so every path
//! says where its module lives. Then in this crate `upstream`, `auth`, `identity` and `telemetry`; the core (`gateway`,
//! `dispatch`, `hub`, `audit`, `usage` (with rate limits)); the edges (`edge`, `console`, `demo`);
//! and the commands (`commands`: serving, booting, the admin and offline commands, `explain`,
//! `import`). `tests/layers.rs` keeps this crate's modules, and the crates they use (each one unit
//! there, named by its folder under `crates/`), in their layers. This crate, like every crate but
//! `mcpgate-sandbox`, takes the workspace's lints (Cargo.toml), which refuse code the compiler
//! cannot check.

pub mod audit;
pub mod auth;
pub mod commands;
pub mod console;
pub mod demo;
pub mod discovery;
pub mod dispatch;
pub mod edge;
pub mod gateway;
pub mod hub;
pub mod identity;
pub mod telemetry;
pub mod upstream;
pub mod usage;
