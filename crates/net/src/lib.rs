//! mcpgate, layer 4: the network plumbing — the one HTTP client with TLS and PEM loading
//! (`http`), the Redis that replicas share (`cluster`), and files written atomically (`files`).

pub mod cluster;
pub mod files;
pub mod http;
