//! mcpgate, layer 4: the network plumbing — the one HTTP client with TLS and PEM loading
//! (`net`), and the Redis that replicas share (`cluster`).

use mcpgate_config::config;

pub mod cluster;
pub mod net;
