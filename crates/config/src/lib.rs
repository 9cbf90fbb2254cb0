//! mcpgate, layer 3: `gateway.toml` — the file model, validation with line-accurate errors, and
//! its resolution into the values the layers above run on.

use mcpgate_model::{catalog, policy};

pub mod config;
