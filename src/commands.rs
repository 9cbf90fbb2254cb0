//! The commands: what each `mcpgate` subcommand runs once `main.rs` has read the command line.
//! `serve` runs the gateway (`run`, `stdio`) and the demo server; `boot` is what starting and
//! reloading share (loading the configuration, the stop signals, the open-files limit, reloading on
//! SIGHUP or a changed file); `admin` the commands that ask a configuration or a running gateway
//! (`health`, `check`, `tools`, `pin`, `import`, `tokens`, `usage`, `reload`), with `check`'s
//! tables; `offline` those that read the state database or files with no gateway running
//! (`migrate`, `tokens list -c`, `hash-key`, `audit verify`); `explain` the policy's own
//! (`policy explain`, `policy test`); `import` turns a client's MCP configuration, a domain's AI
//! Catalog or a registry's list into `gateway.toml`; `fetch` reads the public documents of
//! discovery (catalogs, Server Cards, registry lists) within bounds.

pub mod admin;
pub mod boot;
pub mod check;
pub mod explain;
pub mod fetch;
pub mod import;
pub mod offline;
pub mod serve;
