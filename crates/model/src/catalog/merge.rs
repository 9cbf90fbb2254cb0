//! Building the merged catalogue from every upstream's lists: tools and prompts get prefixed
//! names (or their `rename`, fitted to the name policy, see `names`), resources and templates get
//! prefixed URIs (see `uris`). Names are validated (tools: the tool-name rules, an object
//! `inputSchema` and their `x-mcp-header` annotations, and, where arguments are checked, a schema
//! within the cost budget of `args::cost`); an item that would land in another
//! upstream's namespace (`<its prefix><sep>...` or `<its prefix>+...`) is refused, so that grants
//! on that namespace never reach it; collisions are reported and never silently shadowed (the
//! first upstream in config order keeps the name); and the order is deterministic (config order,
//! then the upstream's own order). Every other field is kept verbatim.

use super::{Kind, names, uris};
use crate::protocol::rawobj::RawObject;
use crate::protocol::xheader::{self, HeaderPlan};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Per list and hash of a set of grants, those grants and the indices of the entries they may see
/// (kept with the grants, so that a lookup compares instead of cloning them).
pub(crate) type ViewMemo = HashMap<(Kind, u64), Vec<(crate::policy::Grants, std::sync::Arc<Vec<usize>>)>>;

/// The root `type` of a schema, read without reading the rest.
#[derive(serde::Deserialize)]
struct SchemaRoot<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<&'a str>,
}

/// One upstream's contribution to a rebuild.
pub struct UpstreamLists<'a> {
    pub upstream: usize,
    pub id: &'a str,
    pub prefix: &'a str,
    /// Items per kind, in [`Kind::ALL`] order.
    pub items: [&'a [Box<RawValue>]; Kind::COUNT],
    /// Per kind: the list's `ttlMs`, `None` when the upstream was not asked for it.
    pub ttl_ms: [Option<u64>; Kind::COUNT],
    /// When these lists were requested (their `ttlMs` counts from then).
    pub listed_at: Option<Instant>,
    /// Per kind: whether the list was not `cacheScope: "public"`.
    pub private: [bool; Kind::COUNT],
    pub has_resources: bool,
    /// The upstream's `rename` table: its tool or prompt name → the served name.
    pub rename: &'a [(String, String)],
    /// Whether the gateway checks calls' arguments against its tools' schemas
    /// (`validate_arguments`): then a schema too costly to check is not served.
    pub validate: bool,
}

/// What every upstream's names are fitted to: the name policy, and the namespaces of every
/// configured upstream with a prefix (by upstream index), whether it is up or not.
pub struct Naming<'a> {
    pub policy: &'a names::NamePolicy,
    pub namespaces: &'a [(usize, String)],
}

/// A served item and what routing needs to know about it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The gateway name (tools, prompts) or URI (resources, templates).
    pub name: String,
    pub upstream: usize,
    /// The upstream's own name or URI.
    pub original: String,
    /// Tools only: the mirrored arguments.
    pub headers: HeaderPlan,
    pub json: crate::protocol::json::Json,
    /// On an endpoint's view: the item's name in the gateway's catalogue, which policy decides on
    /// (`name` is what the endpoint presents).
    pub canonical: Option<String>,
    /// On an endpoint's view: arguments injected with these values (hidden from its schema).
    pub fixed: serde_json::Map<String, Value>,
    /// Tools only: the gateway URI of the MCP App UI resource the tool points at, if any.
    pub ui: Option<String>,
    /// Tools only: the check of a call's arguments against the upstream's own input schema.
    pub args: super::args::ArgCheck,
}

impl Entry {
    /// The name the policy decides on: the catalogue's, whatever an endpoint presents.
    pub fn policy_name(&self) -> &str {
        self.canonical.as_deref().unwrap_or(&self.name)
    }
}

#[derive(Debug, Default)]
pub struct Section {
    pub entries: Vec<Entry>,
    index: HashMap<String, usize>,
}

impl Section {
    /// Adds an entry; when its name is taken, returns the index of the entry that has it.
    pub(super) fn push(&mut self, entry: Entry) -> Result<(), usize> {
        if let Some(&i) = self.index.get(&entry.name) {
            return Err(i);
        }
        self.index.insert(entry.name.clone(), self.entries.len());
        self.entries.push(entry);
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.index.get(name).map(|&i| &self.entries[i])
    }

    /// The position of entry `name` in `entries`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    pub fn count_for(&self, upstream: usize) -> usize {
        self.entries.iter().filter(|t| t.upstream == upstream).count()
    }
}

/// An item that could not be served, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub upstream: String,
    pub kind: Kind,
    pub item: String,
    pub reason: String,
}

/// Where resource URIs of each upstream live (for routing URIs that are not listed).
#[derive(Debug, Clone)]
pub struct UriOwner {
    pub upstream: usize,
    pub prefix: String,
    pub has_resources: bool,
}

#[derive(Debug, Default)]
pub struct Catalog {
    pub(super) sections: [Section; Kind::COUNT],
    pub problems: Vec<Problem>,
    /// Per kind: until when every contributing list is fresh (the earliest `listed_at + ttlMs`);
    /// `None` when no upstream contributed that list.
    pub fresh_until: [Option<Instant>; Kind::COUNT],
    /// Per kind: whether any contributing list was not `cacheScope: "public"`.
    pub private: [bool; Kind::COUNT],
    pub owners: Vec<UriOwner>,
    /// Every configured upstream's prefix (by upstream index), up or not: a URI in a prefix's
    /// namespace routes to that upstream only.
    pub namespaces: Vec<(usize, String)>,
    /// On an endpoint's view: the endpoint's `include`/`exclude` selection, which every request
    /// on it must pass, whatever the item's kind (reads served by a template included).
    pub selection: Option<crate::policy::Grants>,
    /// Per kind: the fingerprint of the list's names (what pagination cursors are bound to).
    pub fingerprints: [u64; Kind::COUNT],
    /// What each set of grants may see of each list (indices into the section), computed once
    /// per snapshot: callers with the same rules share it (see `view::visible`).
    pub(crate) views: std::sync::Mutex<ViewMemo>,
    /// The tool-search index of this snapshot's tools, built on the first search.
    pub search: std::sync::OnceLock<std::sync::Arc<super::search::ToolIndex>>,
}

impl Catalog {
    /// The `ttlMs` to serve for a list at `now`: what remains of the smallest contributing TTL.
    pub fn ttl_ms(&self, kind: Kind, now: Instant) -> u64 {
        self.fresh_until[kind as usize].map_or(0, |t| u64::try_from(t.saturating_duration_since(now).as_millis()).unwrap_or(u64::MAX))
    }

    /// Whether a list holds anything an upstream did not mark `cacheScope: "public"`.
    pub fn is_private(&self, kind: Kind) -> bool {
        self.private[kind as usize]
    }

    pub fn section(&self, kind: Kind) -> &Section {
        &self.sections[kind as usize]
    }

    pub fn tool(&self, name: &str) -> Option<&Entry> {
        self.section(Kind::Tool).get(name)
    }

    pub fn prompt(&self, name: &str) -> Option<&Entry> {
        self.section(Kind::Prompt).get(name)
    }

    pub fn tools(&self) -> &[Entry] {
        &self.section(Kind::Tool).entries
    }

    /// The upstream and upstream URI behind a gateway URI (see [`Catalog::route`]).
    pub fn route_uri(&self, uri: &str) -> Option<(usize, String)> {
        if let Some(e) = self.section(Kind::Resource).get(uri) {
            return Some((e.upstream, e.original.clone()));
        }
        self.route(uri)
    }

    /// The upstream behind a gateway URI that no listed resource names: its namespace's owner
    /// (`p+<uri>`, `ui://p/…`), else an unprefixed upstream's template that matches it, else the
    /// first unprefixed upstream with resources; and the upstream's own URI.
    pub fn route(&self, uri: &str) -> Option<(usize, String)> {
        if let Some((head, inner)) = uris::split_namespace(uri)
            && let Some((upstream, _)) = self.namespaces.iter().find(|(_, p)| !p.is_empty() && p.eq_ignore_ascii_case(head))
        {
            return Some((*upstream, inner));
        }
        let unprefixed = |up: usize| self.owners.iter().any(|o| o.upstream == up && o.prefix.is_empty());
        if let Some(t) =
            self.section(Kind::Template).entries.iter().find(|t| unprefixed(t.upstream) && uris::template_matches(&t.original, uri))
        {
            return Some((t.upstream, uri.to_string()));
        }
        self.owners.iter().find(|o| o.prefix.is_empty() && o.has_resources).map(|o| (o.upstream, uri.to_string()))
    }
}

pub fn build(inputs: &[UpstreamLists], naming: &Naming) -> Catalog {
    let mut cat = Catalog { namespaces: naming.namespaces.to_vec(), ..Default::default() };
    for input in inputs.iter().filter(|i| !i.prefix.is_empty()) {
        if !cat.namespaces.iter().any(|(up, _)| *up == input.upstream) {
            cat.namespaces.push((input.upstream, input.prefix.to_string()));
        }
    }
    for input in inputs {
        for kind in Kind::ALL {
            let k = kind as usize;
            let Some(ttl) = input.ttl_ms[k] else { continue };
            // A list with no known fetch time promises nothing.
            let until = input.listed_at.map_or_else(Instant::now, |at| at + Duration::from_millis(ttl));
            cat.fresh_until[k] = Some(cat.fresh_until[k].map_or(until, |t| t.min(until)));
            cat.private[k] |= input.private[k];
        }
        cat.owners.push(UriOwner { upstream: input.upstream, prefix: input.prefix.to_string(), has_resources: input.has_resources });
        for kind in Kind::ALL {
            for raw in input.items[kind as usize] {
                match admit(kind, input, raw, naming, &cat.sections[kind as usize]) {
                    Ok(entry) => {
                        // invariant: `admit` refused a taken name, so this push succeeds.
                        let _ = cat.sections[kind as usize].push(entry);
                    }
                    Err(problem) => cat.problems.push(problem),
                }
            }
        }
    }
    cat.seal_fingerprints();
    cat
}

/// An upstream's re-listed items of `kind` in the order its previous listing gave them, when both
/// hold the same items (by name, a resource's `uri`, a template's `uriTemplate`; duplicates
/// counted): a server that answers the same list in another order each time then leaves the
/// merged list, its cursors and every client's view as they were. A list whose items changed is
/// taken in the order the server gives now.
pub fn keep_order(kind: Kind, previous: &[Box<RawValue>], new: Vec<Box<RawValue>>) -> Vec<Box<RawValue>> {
    #[derive(serde::Deserialize)]
    struct Ids<'a> {
        #[serde(borrow, default)]
        name: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        uri: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default, rename = "uriTemplate")]
        uri_template: Option<std::borrow::Cow<'a, str>>,
    }
    let id = |raw: &RawValue| -> Option<String> {
        let ids = serde_json::from_str::<Ids<'_>>(raw.get()).ok()?;
        let id = match kind {
            Kind::Tool | Kind::Prompt => ids.name,
            Kind::Resource | Kind::Skill => ids.uri,
            Kind::Template => ids.uri_template,
        };
        id.map(std::borrow::Cow::into_owned)
    };
    if previous.len() != new.len() || previous.is_empty() {
        return new;
    }
    let Some(was) = previous.iter().map(|r| id(r)).collect::<Option<Vec<String>>>() else { return new };
    let Some(now) = new.iter().map(|r| id(r)).collect::<Option<Vec<String>>>() else { return new };
    if was == now {
        return new;
    }
    // Each previous name, in order, takes the first unclaimed new item of that name.
    let mut slots: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in now.iter().enumerate().rev() {
        slots.entry(n.as_str()).or_default().push(i);
    }
    let mut order = Vec::with_capacity(new.len());
    for n in &was {
        match slots.get_mut(n.as_str()).and_then(Vec::pop) {
            Some(i) => order.push(i),
            None => return new,
        }
    }
    let mut items: Vec<Option<Box<RawValue>>> = new.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| items[i].take()).collect()
}

impl Catalog {
    /// Computes every list's fingerprint (after the sections are final).
    pub(super) fn seal_fingerprints(&mut self) {
        for kind in Kind::ALL {
            self.fingerprints[kind as usize] =
                super::cursor::fingerprint(self.sections[kind as usize].entries.iter().map(|e| e.name.as_str()));
        }
    }
}

/// Whether gateway name `name` lies in the namespace `<prefix><mark>`. A URI's prefix is part of
/// its scheme, which is case-insensitive: `VAULT+mem:` is in the namespace of `vault`.
fn in_namespace(kind: Kind, name: &str, prefix: &str, mark: &str) -> bool {
    match kind {
        Kind::Resource | Kind::Template | Kind::Skill => {
            uris::split_namespace(name).is_some_and(|(head, _)| head.eq_ignore_ascii_case(prefix))
        }
        Kind::Tool | Kind::Prompt => name.strip_prefix(prefix).is_some_and(|r| r.starts_with(mark)),
    }
}

fn admit(kind: Kind, input: &UpstreamLists, raw: &RawValue, naming: &Naming, section: &Section) -> Result<Entry, Problem> {
    let problem = |item: &str, reason: String| Problem { upstream: input.id.to_string(), kind, item: item.to_string(), reason };
    let key = kind.id_key();
    let mut obj: RawObject =
        serde_json::from_str(raw.get()).map_err(|_| problem("?", format!("the {} is not a JSON object", kind.label())))?;
    let original = match obj.parse::<String>(key) {
        Some(Ok(n)) => n,
        _ => {
            return Err(problem("?", format!("the {} has no string \"{key}\"", kind.label())));
        }
    };
    let (name, mark) = match kind {
        Kind::Tool | Kind::Prompt => {
            let rename = input.rename.iter().find(|(from, _)| *from == original).map(|(_, to)| to.as_str());
            (naming.policy.gateway_name(input.prefix, &original, rename), naming.policy.separator.as_str())
        }
        Kind::Resource | Kind::Template | Kind::Skill => (uris::to_gateway(input.prefix, &original), "+"),
    };
    if let Some((owner, prefix)) =
        naming.namespaces.iter().find(|(up, prefix)| *up != input.upstream && in_namespace(kind, &name, prefix, mark))
    {
        return Err(problem(
            &original,
            format!(
                "gateway {key} '{name}' lies in the namespace of upstream #{} ('{prefix}{mark}'), which it may not publish into",
                owner + 1
            ),
        ));
    }
    if kind == Kind::Tool
        && let Some(reason) = names::tool_name_problem(&name)
    {
        return Err(problem(&original, format!("gateway name '{name}' is not servable: {reason}")));
    }
    if let Some(owner) = section.get(&name) {
        return Err(problem(
            &original,
            format!(
                "gateway {key} '{name}' collides with '{}' of an earlier upstream (#{}), which keeps it",
                owner.original,
                owner.upstream + 1
            ),
        ));
    }
    let headers = if kind == Kind::Tool {
        match obj.get("inputSchema").map(|s| (s, s.parse::<SchemaRoot>())) {
            // Arguments are always an object, so the schema must say so at its root.
            Some((schema, Ok(SchemaRoot { kind: Some("object") }))) => {
                // Only a schema that mentions the annotation is read whole (a catalogue of
                // thousands of tools is rebuilt on every change).
                if schema.get().contains("x-mcp-header") {
                    let schema: Value = schema.parse().map_err(|e| problem(&original, format!("the inputSchema cannot be read: {e}")))?;
                    xheader::plan(&schema).map_err(|reason| problem(&original, format!("invalid x-mcp-header annotation: {reason}")))?
                } else {
                    Vec::new()
                }
            }
            Some(_) => {
                return Err(problem(
                    &original,
                    "the tool's \"inputSchema\" is not an object schema (\"type\": \"object\" at its root)".into(),
                ));
            }
            None => {
                return Err(problem(&original, "the tool has no \"inputSchema\"".into()));
            }
        }
    } else {
        Vec::new()
    };
    if kind == Kind::Skill {
        // The skill's files are named in the gateway's URI space too, their digests kept.
        super::links::skill_entry(&mut obj, input.prefix);
    } else if name != original {
        obj.set_json(key, &name).map_err(|e| problem(&original, e.to_string()))?;
    }
    let ui = if kind == Kind::Tool {
        // An MCP App's tool points at its UI resource, which is listed under the gateway's URI.
        super::links::ui_meta(&mut obj, input.prefix);
        super::links::ui_uri(&obj)
    } else {
        None
    };
    let json = obj.to_json();
    let args = super::args::ArgCheck::new(json.clone());
    if kind == Kind::Tool
        && input.validate
        && let Err(reason) = args.affordable()
    {
        return Err(problem(&original, reason.to_string()));
    }
    Ok(Entry { name, upstream: input.upstream, original, headers, json, canonical: None, fixed: Default::default(), ui, args })
}

#[cfg(test)]
mod tests;
