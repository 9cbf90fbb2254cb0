//! A caller's view of the catalogue: listing and looking up go through the same decision
//! ([`super::allows`]), and an item the caller may not use is indistinguishable from one that
//! does not exist.

use super::{Grants, Item, allows};
use crate::catalog::{Catalog, Entry, Kind};

/// The policy item of a catalogue entry; `upstream_id` maps an upstream index to its id.
pub fn item<'a>(kind: Kind, e: &'a Entry, upstream_id: &'a dyn Fn(usize) -> &'a str) -> Item<'a> {
    Item { kind, name: e.policy_name(), upstream: upstream_id(e.upstream) }
}

/// The entries of `kind` the caller may see, in catalogue order.
pub fn visible<'a>(cat: &'a Catalog, kind: Kind, grants: &Grants, upstream_id: &'a dyn Fn(usize) -> &'a str) -> Vec<&'a Entry> {
    cat.section(kind).entries.iter().filter(|e| allows(grants, &item(kind, e, upstream_id))).collect()
}

/// The entry `name` of `kind`, if it exists and the caller may use it.
pub fn find<'a>(cat: &'a Catalog, kind: Kind, name: &str, grants: &Grants, upstream_id: &'a dyn Fn(usize) -> &'a str) -> Option<&'a Entry> {
    let e = cat.section(kind).get(name)?;
    allows(grants, &item(kind, e, upstream_id)).then_some(e)
}

#[cfg(test)]
mod tests;
