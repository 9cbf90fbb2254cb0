//! The merged catalogue: gateway names (`<prefix><sep><name>`), the immutable snapshot of every
//! upstream's tools with their routing data, and the gateway's own list cursors. Pure functions
//! over data; the snapshot is rebuilt off the request path and swapped atomically by the caller.

pub mod cursor;
pub mod merge;
pub mod names;

pub use merge::{Catalog, CatalogTool, Problem, UpstreamTools};
