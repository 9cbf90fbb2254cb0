//! mcpgate, layer 4: code mode's interpreter, the child side of `mcpgate code-run` (issue 56). A
//! program is JavaScript run by QuickJS-ng (through rquickjs, whose API is safe, so this crate
//! keeps the workspace's `forbid(unsafe_code)`), one fresh runtime per program, with its heap,
//! stack, running time, inner calls, output and logs bounded (`engine`). Every inner call leaves
//! through a [`engine::Host`], which in production is the pipe to the gateway (`wire`: the JSON
//! lines both ends share), so each call is the caller's own `tools/call` there, governed by the
//! whole chain; `child` is the loop of the process, `mcpgate code-run`, over its two streams.
//! QuickJS is C: the process sandbox around the child is the security boundary, and the
//! interpreter's limits are defence in depth. The crate sits apart from the main one so that the
//! unit tests run the engine in-process and QuickJS stays out of the main crate's rebuilds.

pub mod child;
pub mod engine;
pub mod wire;

pub use engine::{Ended, Engine, Host};
pub use wire::{Answer, Limits, ToolFailure};
