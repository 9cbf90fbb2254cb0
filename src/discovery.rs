//! Found before it is connected: what the gateway publishes about its endpoints so that clients,
//! IDEs and platforms find them before they connect. `card`: the MCP Server Card of each endpoint
//! (SEP-2127, the `experimental-ext-server-card` extension) and the AI Catalog that lists the
//! public ones, built from `[discovery]` and the endpoints alone (never from an upstream: no
//! upstream URL, command or name reaches a card). `registry`: the read-only MCP Registry API,
//! answered per caller from what its grants let it see.

pub mod card;
pub mod registry;
