//! mcpgate, layer 2, pure: the catalogue (`catalog`: gateway names and URIs, the merged
//! snapshot, views, cursors, tool search), who may use what (`policy`), and sealed tokens
//! (`token`). It takes settings and rules as plain values, never the configuration file's types.

use mcpgate_protocol::{self as protocol, sync, toolbox};

pub mod catalog;
pub mod openapi;
pub mod policy;
pub mod token;
pub mod yaml;
