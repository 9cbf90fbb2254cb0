//! Building the merged catalogue from every upstream's lists: tools and prompts get prefixed
//! names, resources and templates get prefixed URIs (see `uris`). Names are validated (tools: the
//! tool-name rules and their `x-mcp-header` annotations), collisions are reported and never
//! silently shadowed (the first upstream in config order keeps the name), and the order is
//! deterministic (config order, then the upstream's own order). Every other field is kept verbatim.

use super::{Kind, names, uris};
use crate::protocol::rawobj::RawObject;
use crate::protocol::xheader::{self, HeaderPlan};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashMap;

/// One upstream's contribution to a rebuild.
pub struct UpstreamLists<'a> {
    pub upstream: usize,
    pub id: &'a str,
    pub prefix: &'a str,
    /// Items per kind, in [`Kind::ALL`] order.
    pub items: [&'a [Box<RawValue>]; 4],
    pub ttl_ms: u64,
    pub private: bool,
    pub has_resources: bool,
}

/// A served item and what routing needs to know about it.
#[derive(Debug)]
pub struct Entry {
    /// The gateway name (tools, prompts) or URI (resources, templates).
    pub name: String,
    pub upstream: usize,
    /// The upstream's own name or URI.
    pub original: String,
    /// Tools only: the mirrored arguments.
    pub headers: HeaderPlan,
    pub json: crate::protocol::json::Json,
}

#[derive(Debug, Default)]
pub struct Section {
    pub entries: Vec<Entry>,
    index: HashMap<String, usize>,
}

impl Section {
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.index.get(name).map(|&i| &self.entries[i])
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
    sections: [Section; 4],
    pub problems: Vec<Problem>,
    /// The smallest `ttlMs` any contributing upstream gave its lists.
    pub ttl_ms: u64,
    /// Any contributing list was `cacheScope: "private"`.
    pub private: bool,
    pub owners: Vec<UriOwner>,
}

impl Catalog {
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

    /// The upstream and upstream URI behind a gateway URI (see `uris::route`).
    pub fn route_uri(&self, uri: &str) -> Option<(usize, String)> {
        if let Some(e) = self.section(Kind::Resource).get(uri) {
            return Some((e.upstream, e.original.clone()));
        }
        uris::route(self, uri)
    }
}

pub fn build(inputs: &[UpstreamLists], sep: &str) -> Catalog {
    let mut cat = Catalog { ttl_ms: u64::MAX, ..Default::default() };
    for input in inputs {
        cat.ttl_ms = cat.ttl_ms.min(input.ttl_ms);
        cat.private |= input.private;
        cat.owners.push(UriOwner { upstream: input.upstream, prefix: input.prefix.to_string(), has_resources: input.has_resources });
        for kind in Kind::ALL {
            for raw in input.items[kind as usize] {
                match admit(kind, input, raw, sep, &cat.sections[kind as usize]) {
                    Ok(entry) => {
                        let section = &mut cat.sections[kind as usize];
                        section.index.insert(entry.name.clone(), section.entries.len());
                        section.entries.push(entry);
                    }
                    Err(problem) => cat.problems.push(problem),
                }
            }
        }
    }
    if cat.ttl_ms == u64::MAX {
        cat.ttl_ms = 0;
    }
    cat
}

fn admit(kind: Kind, input: &UpstreamLists, raw: &RawValue, sep: &str, section: &Section) -> Result<Entry, Problem> {
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
    let name = match kind {
        Kind::Tool | Kind::Prompt => names::join(input.prefix, sep, &original),
        Kind::Resource | Kind::Template => uris::to_gateway(input.prefix, &original),
    };
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
        match obj.parse::<Value>("inputSchema") {
            Some(Ok(schema)) => {
                xheader::plan(&schema).map_err(|reason| problem(&original, format!("invalid x-mcp-header annotation: {reason}")))?
            }
            Some(Err(_)) | None => {
                return Err(problem(&original, "the tool has no valid \"inputSchema\"".into()));
            }
        }
    } else {
        Vec::new()
    };
    if name != original {
        obj.set_json(key, &name).map_err(|e| problem(&original, e.to_string()))?;
    }
    let json = obj.to_json();
    Ok(Entry { name, upstream: input.upstream, original, headers, json })
}

#[cfg(test)]
mod tests;
