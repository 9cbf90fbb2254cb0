//! The edge's HTML pages and their forms, apart from the MCP endpoint: the operator's console
//! (`console`), the per-user sign-in and key pages (`connect`) and the consent page both use
//! (`consent`). Each authenticates through `shared::authenticate` and renders with `render`.

pub mod connect;
pub mod consent;
pub mod console;
