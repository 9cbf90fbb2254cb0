//! mcpgate, layer 1: the MCP wire model (`protocol`: JSON-RPC with raw pass-through payloads,
//! eras, `_meta`, the `Mcp-*` header codec, `x-mcp-header`, errors, `Method`, `Kind`, the
//! canonical form of a URI), the reply model (`reply`), and the runtime helpers every layer uses
//! (`sync`: poison-tolerant locks; `tasks`: the owner of background work; `text`: counted nouns
//! in what people read; `toolbox`: the clock, hex digests and random tokens). It depends on no other part of mcpgate; see docs/architecture.md for
//! the layers.

pub mod protocol;
pub mod reply;
pub mod sync;
pub mod tasks;
pub mod text;
pub mod toolbox;
