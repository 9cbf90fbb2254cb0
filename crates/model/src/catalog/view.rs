//! A caller's view of the catalogue: listing and looking up go through the same decision
//! ([`crate::policy::allows`]), and an item the caller may not use is indistinguishable from one that
//! does not exist.

use super::{Catalog, Entry, Kind};
use crate::policy::{Grants, Item, allows};

/// The policy item of a catalogue entry; `upstream_id` maps an upstream index to its id.
pub fn item<'a>(kind: Kind, e: &'a Entry, upstream_id: &'a dyn Fn(usize) -> &'a str) -> Item<'a> {
    Item { kind, name: e.policy_name(), upstream: upstream_id(e.upstream), json: Some(e.json.get()) }
}

/// How many distinct sets of grants a snapshot remembers the views of (more are computed each time).
const REMEMBERED: usize = 512;

/// The entries of `kind` the caller may see, in catalogue order. The decision is taken once per
/// catalogue snapshot for each set of grants (a list of 10,000 tools under a policy of globs
/// is then a lookup, not 10,000 × patterns matches); unrestricted grants need none.
pub fn visible<'a>(cat: &'a Catalog, kind: Kind, grants: &Grants, upstream_id: &'a dyn Fn(usize) -> &'a str) -> Vec<&'a Entry> {
    let entries = &cat.section(kind).entries;
    if grants.is_unrestricted() {
        return entries.iter().collect();
    }
    let hash = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        grants.hash(&mut h);
        h.finish()
    };
    let key = (kind, hash);
    let known = crate::sync::lock(&cat.views).get(&key).and_then(|v| v.iter().find(|(g, _)| g == grants).map(|(_, i)| i.clone()));
    let indices = match known {
        Some(i) => i,
        None => {
            let computed: std::sync::Arc<Vec<usize>> =
                std::sync::Arc::new((0..entries.len()).filter(|&i| allows(grants, &item(kind, &entries[i], upstream_id))).collect());
            let mut views = crate::sync::lock(&cat.views);
            if views.len() >= REMEMBERED {
                views.clear();
            }
            views.entry(key).or_default().push((grants.clone(), computed.clone()));
            computed
        }
    };
    indices.iter().filter_map(|&i| entries.get(i)).collect()
}

/// The entry `name` of `kind`, if it exists and the caller may use it.
pub fn find<'a>(cat: &'a Catalog, kind: Kind, name: &str, grants: &Grants, upstream_id: &'a dyn Fn(usize) -> &'a str) -> Option<&'a Entry> {
    let e = cat.section(kind).get(name)?;
    allows(grants, &item(kind, e, upstream_id)).then_some(e)
}

#[cfg(test)]
mod tests;
