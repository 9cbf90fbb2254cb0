//! The merged catalogue: gateway names (`<prefix><sep><name>`) and URIs (`<prefix>+<uri>`), the
//! immutable snapshot of every upstream's tools, prompts, resources and templates with their
//! routing data, and the gateway's own list cursors. Pure functions over data; the snapshot is
//! rebuilt off the request path and swapped atomically by the caller.

pub mod args;
pub mod cursor;
pub mod endpoint;
pub mod frontmatter;
pub mod links;
pub mod merge;
pub mod names;
pub mod pins;
pub mod search;
pub mod signature;
pub mod skills;
pub mod uris;
pub mod view;

pub use crate::protocol::Kind;
pub use merge::{Catalog, Entry, Problem, UpstreamLists};
