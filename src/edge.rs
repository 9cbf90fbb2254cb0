//! The client edge: everything that faces the MCP clients (the upstreams are `upstream`). Read it
//! in the order a request meets it:
//! - `listen`: the listeners (one runtime or worker threads) and write deadlines, with `tls` (the
//!   certificate kept fresh) and `conns` (connection and in-flight limits);
//! - `http`: the Streamable HTTP router and its transport checks (Host/Origin via `origin`, CORS
//!   via `cors`, method, media types, size, deadline, envelope), then era classification;
//! - `discovery`: the Server Cards and the AI Catalog over HTTP (public, CORS `*`, ETags);
//! - `shared`: what one listener's connections share, and the one caller authentication;
//! - `era`: classification and the era adapters (`modern`, `legacy`, and `bridge` for input
//!   requests relayed to legacy clients); `legacy_http` is the legacy HTTP session transport;
//! - `stack`: the one request path every edge (modern HTTP, legacy sessions, stdio) goes through
//!   into `dispatch`;
//! - `render`: replies written back (JSON or SSE);
//! - `stdio`: the stdio server (`mcpgate stdio`);
//! - `pages`: the HTML pages and their forms (`console`, `connect` for per-user sign-in,
//!   `consent`);
//! - `registry`: the read-only MCP Registry API (`/v0.1/servers`), answered per caller.

pub mod conns;
pub mod cors;
pub mod discovery;
pub mod era;
pub mod http;
pub mod legacy_http;
pub mod listen;
pub mod origin;
pub mod pages;
pub mod registry;
pub mod render;
pub mod shared;
pub mod stack;
pub mod stdio;
pub mod tls;
