//! Which upstream serves a resource URI for a caller, if the caller may read it: the one
//! decision reads, follows, completions and relayed updates share (see [`Gateway::route_uri`]).
//! An Agent Skill's files (`skill://` URIs of an upstream that declares the skills extension) are
//! readable only inside a skill the caller may see, and only what its listing names (with a
//! digest and a size, so the read is checked) or a directory on the way to it: a denied or held
//! skill's files, and a file the listing does not name, answer like unknown ones, whatever the
//! resource rules say.

use super::Gateway;
use crate::auth::Principal;
use mcpgate_model::catalog::{Catalog, Kind, uris};
use mcpgate_model::policy::{Grants, Item, allows};

impl Gateway {
    /// The upstream and upstream URI of a gateway URI the caller may read.
    ///
    /// Every decision is taken on the URI's canonical form (`uris::canonical`), which is also what
    /// the upstream receives, so that no spelling of a URI (`%73ecret` for `secret`) reaches what
    /// the policy refused; a URI without a canonical form is refused. A caller with restricted
    /// grants reaches only listed resources, or URIs that expand a template it may see and that carry
    /// no path tricks (`..`, encoded dots, slashes or percent signs, backslashes, empty segments,
    /// `;` path parameters, whitespace; see `uris::has_path_tricks`): a
    /// grant such as `files+file:///docs/*` must not stretch to `file:///docs/../x`.
    ///
    /// On a virtual server every caller is held to what the endpoint selects, the same way, and the
    /// URI itself must pass the endpoint's selection (an excluded URI is not reachable through an
    /// included template).
    pub fn route_uri(&self, caller: &Principal, uri: &str) -> Option<(usize, String)> {
        self.route_uri_in(&self.catalog_for(caller), caller, &caller.grants, uri)
    }

    /// [`Gateway::route_uri`] in the caller's view `cat` (taken once for its request), under
    /// `grants` (the caller's, or the same ignoring scopes).
    pub fn route_uri_in(&self, cat: &Catalog, caller: &Principal, grants: &Grants, uri: &str) -> Option<(usize, String)> {
        let canonical = uris::canonical(uri).ok()?;
        let resources = cat.section(Kind::Resource);
        let listed = resources.get(uri).or_else(|| resources.get(&canonical));
        let (upstream, original) = match listed {
            Some(e) => (e.upstream, e.original.clone()),
            None => cat.route(&canonical)?,
        };
        let id = self.upstream_id(upstream);
        let item = Item { kind: Kind::Resource, name: &canonical, upstream: id, json: None };
        if !allows(grants, &item) || cat.selection.as_ref().is_some_and(|s| !allows(s, &item)) {
            return None;
        }
        if uris::is_skill(&canonical) && self.serves_skills(upstream) {
            return self.in_visible_skill(cat, grants, upstream, &canonical).then_some((upstream, original));
        }
        let everything = grants.is_unrestricted() && caller.endpoint.is_none();
        if everything || listed.is_some() {
            return Some((upstream, original));
        }
        let templated = cat.section(Kind::Template).entries.iter().any(|t| {
            t.upstream == upstream
                && uris::canonical(&t.name).is_ok_and(|name| uris::template_matches(&name, &canonical))
                && allows(grants, &Item { kind: Kind::Template, name: &t.name, upstream: id, json: None })
        });
        (templated && !uris::has_path_tricks(&canonical)).then_some((upstream, original))
    }

    /// Whether upstream `index` declares the skills extension (its `skill://` URIs are skills'
    /// files).
    fn serves_skills(&self, index: usize) -> bool {
        self.upstreams().get(index).is_some_and(|u| u.state().capabilities.as_ref().is_some_and(|c| Kind::Skill.declared_by(c)))
    }

    /// Whether gateway URI `uri` (canonical) of upstream `upstream` carries no path tricks and lies
    /// in the directory of a skill the caller may see: the deepest skill that holds it
    /// (`catalog::skills::owner`; a held skill, out of the catalogue, keeps its files), whose
    /// listing names it (`catalog::skills::reaches`).
    fn in_visible_skill(&self, cat: &Catalog, grants: &Grants, upstream: usize, uri: &str) -> bool {
        if uris::has_path_tricks(uri) {
            return false;
        }
        let id = self.upstream_id(upstream);
        let prefix = self.upstreams().get(upstream).map(|u| u.cfg.prefix.clone()).unwrap_or_default();
        let held: Vec<String> = self
            .catalog()
            .problems
            .iter()
            .filter(|p| p.kind == Kind::Skill && p.upstream == id && p.reason.starts_with(super::pins::HELD))
            .filter_map(|p| uris::canonical(&uris::to_gateway(&prefix, &p.item)).ok().map(|c| c.into_owned()))
            .collect();
        let skills: Vec<(String, &mcpgate_model::catalog::Entry)> = cat
            .section(Kind::Skill)
            .entries
            .iter()
            .filter(|s| s.upstream == upstream)
            .filter_map(|s| Some((uris::canonical(&s.name).ok()?.into_owned(), s)))
            .collect();
        let names: Vec<&str> = skills.iter().map(|(n, _)| n.as_str()).collect();
        let id_of = |i: usize| self.upstream_id(i);
        mcpgate_model::catalog::skills::owner(&names, &held, uri).and_then(|i| skills.get(i)).is_some_and(|(_, s)| {
            mcpgate_model::catalog::view::find(cat, Kind::Skill, &s.name, grants, &id_of).is_some()
                && mcpgate_model::catalog::skills::reaches(&s.json, uri)
        })
    }

    /// Whether `caller` may read `uri` now (a resource update is delivered only then).
    pub fn may_read(&self, caller: &Principal, uri: &str) -> bool {
        self.route_uri(caller, uri).is_some()
    }
}
