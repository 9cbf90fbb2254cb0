//! mcpgate, layer 4: the processes around a stdio server, and the one crate of the workspace with
//! `unsafe` code (every other crate forbids it). `exec`: the policy of a sandboxed start, the
//! container command, and `mcpgate sandbox-exec`, which applies the policy to itself (rlimits,
//! cgroup, capabilities, Landlock, seccomp) and becomes the server, and `confine_self`, with which
//! a process confines itself under a strict policy before it runs untrusted code (code mode);
//! `supervise`: `mcpgate supervise`, which owns the life of everything a server starts; `spawn`:
//! what the gateway's child does between fork and exec. These programs run single-threaded,
//! before any runtime.
//! `unsafe` is denied but in the modules that allow it (`#[allow(unsafe_code)]` below and in
//! `exec.rs`), and each block says why it holds (`// SAFETY:`, which clippy requires).

use mcpgate_protocol::toolbox;

pub mod exec;
#[allow(unsafe_code)]
pub mod spawn;
#[allow(unsafe_code)]
pub mod supervise;
