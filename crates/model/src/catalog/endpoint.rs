//! An endpoint's view of the catalogue (virtual servers, `[[endpoint]]`): the items its
//! `include`/`exclude` patterns select (decided like a caller's grants, on catalogue names), with
//! its tool overrides applied: a new name, title or description, merged annotations, and fixed
//! arguments removed from the `inputSchema` (and its `required`). The result is a [`Catalog`] like
//! the gateway's own, so lists, lookups, pagination, cursors and change notifications work on an
//! endpoint exactly as on the root; each entry keeps its catalogue name (`canonical`), which the
//! caller's policy still decides on. Overrides that cannot apply (a fixed argument the schema does
//! not have, a new name already taken) are problems ([`OverrideError`]), shown by `mcpgate check`.

use super::Kind;
use super::merge::{Catalog, Entry, Problem};
use crate::policy::{Grants, Item, allows};
use crate::protocol::rawobj::RawObject;
use serde_json::{Map, Value};

/// What an endpoint selects (`include`/`exclude` patterns, decided like a caller's grants) and
/// how it presents its tools, at `path`.
#[derive(Debug, Clone, Copy)]
pub struct Selection<'a> {
    pub path: &'a str,
    pub include: &'a [String],
    pub exclude: &'a [String],
    pub tools: &'a [ToolOverride],
}

/// How one tool is presented on an endpoint.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOverride {
    /// The tool's name in the gateway's catalogue.
    pub name: String,
    pub rename: Option<String>,
    pub title: Option<String>,
    /// Replaces the description.
    pub description: Option<String>,
    /// Appended to the description (after a blank line).
    pub description_suffix: Option<String>,
    /// Added to (or replacing members of) the tool's annotations.
    pub annotations: Map<String, Value>,
    /// Arguments injected with these values and hidden from the endpoint's schema.
    pub fixed: Map<String, Value>,
}

/// The view `ep` presents of `base`; `upstream_id` maps an upstream index to its id.
pub fn view<'a>(base: &Catalog, ep: &Selection, upstream_id: &(dyn Fn(usize) -> &'a str + 'a)) -> Catalog {
    let include: Vec<&str> = ep.include.iter().map(String::as_str).collect();
    let exclude: Vec<&str> = ep.exclude.iter().map(String::as_str).collect();
    let selection = Grants::from_patterns(&include, &exclude);
    let mut cat = Catalog {
        fresh_until: base.fresh_until,
        private: base.private,
        owners: base.owners.clone(),
        namespaces: base.namespaces.clone(),
        selection: Some(selection.clone()),
        ..Default::default()
    };
    let problem = |e: &Entry, kind: Kind, reason: String| Problem {
        upstream: upstream_id(e.upstream).to_string(),
        kind,
        item: e.name.clone(),
        reason: format!("on endpoint {}: {reason}", ep.path),
    };
    for kind in Kind::ALL {
        for e in &base.section(kind).entries {
            if !allows(&selection, &Item { kind, name: e.policy_name(), upstream: upstream_id(e.upstream), json: Some(e.json.get()) }) {
                continue;
            }
            let over = if kind == Kind::Tool { ep.tools.iter().find(|o| o.name == e.name) } else { None };
            let entry = match over.map(|o| present(e, o)) {
                None => Entry { canonical: Some(e.name.clone()), ..e.clone() },
                Some(Ok(entry)) => entry,
                Some(Err(reason)) => {
                    cat.problems.push(problem(e, kind, reason.to_string()));
                    continue;
                }
            };
            let name = entry.name.clone();
            if let Err(owner) = cat.sections[kind as usize].push(entry) {
                let taken = &cat.sections[kind as usize].entries[owner];
                let reason = format!("'{name}' is already the name of '{}', which keeps it", taken.policy_name());
                cat.problems.push(problem(e, kind, reason));
            }
        }
    }
    for o in ep.tools {
        let served = cat.tools().iter().any(|t| t.policy_name() == o.name);
        let reported = cat.problems.iter().any(|p| p.item == o.name);
        if !served && !reported {
            cat.problems.push(Problem {
                upstream: "-".into(),
                kind: Kind::Tool,
                item: o.name.clone(),
                reason: format!("on endpoint {}: the [[endpoint.tool]] matches no tool the endpoint selects", ep.path),
            });
        }
    }
    if Kind::ALL.iter().all(|k| cat.section(*k).entries.is_empty()) && base.tools().iter().len() > 0 {
        cat.problems.push(Problem {
            upstream: "-".into(),
            kind: Kind::Tool,
            item: ep.include.join(" "),
            reason: format!("on endpoint {}: the selection matches nothing", ep.path),
        });
    }
    cat.seal_fingerprints();
    cat
}

/// Why an `[[endpoint.tool]]` cannot present its tool.
#[derive(Debug, thiserror::Error)]
pub enum OverrideError {
    #[error("the tool is not an object ({0})")]
    NotObject(#[source] serde_json::Error),
    /// A field could not be written back (serde_json's words).
    #[error(transparent)]
    Write(#[from] serde_json::Error),
    #[error("the tool has no inputSchema object")]
    NoInputSchema,
    #[error("fixed argument '{0}' is not in the tool's inputSchema")]
    FixedNotInSchema(String),
}

/// A tool as `o` presents it.
fn present(e: &Entry, o: &ToolOverride) -> Result<Entry, OverrideError> {
    let mut obj = RawObject::from_json(&e.json).map_err(OverrideError::NotObject)?;
    let name = o.rename.clone().unwrap_or_else(|| e.name.clone());
    put(&mut obj, "name", &name)?;
    if let Some(title) = &o.title {
        put(&mut obj, "title", title)?;
    }
    let current = obj.parse::<String>("description").and_then(Result::ok);
    let description = match (&o.description, &o.description_suffix) {
        (Some(d), Some(s)) => Some(format!("{d}\n\n{s}")),
        (Some(d), None) => Some(d.clone()),
        (None, Some(s)) => Some(match current {
            Some(c) if !c.is_empty() => format!("{c}\n\n{s}"),
            _ => s.clone(),
        }),
        (None, None) => None,
    };
    if let Some(d) = description {
        put(&mut obj, "description", &d)?;
    }
    if !o.annotations.is_empty() {
        let mut annotations = obj.parse::<Map<String, Value>>("annotations").and_then(Result::ok).unwrap_or_default();
        annotations.extend(o.annotations.clone());
        put(&mut obj, "annotations", &Value::Object(annotations))?;
    }
    if !o.fixed.is_empty() {
        let mut schema = obj.parse::<Map<String, Value>>("inputSchema").and_then(Result::ok).ok_or(OverrideError::NoInputSchema)?;
        let properties = schema.get_mut("properties").and_then(Value::as_object_mut);
        let Some(properties) = properties else {
            return Err(OverrideError::FixedNotInSchema(o.fixed.keys().next().cloned().unwrap_or_default()));
        };
        for key in o.fixed.keys() {
            if properties.remove(key).is_none() {
                return Err(OverrideError::FixedNotInSchema(key.clone()));
            }
        }
        if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| r.as_str().is_none_or(|r| !o.fixed.contains_key(r)));
        }
        put(&mut obj, "inputSchema", &Value::Object(schema))?;
    }
    Ok(Entry { name, json: obj.to_json(), canonical: Some(e.name.clone()), fixed: o.fixed.clone(), ..e.clone() })
}

fn put<T: serde::Serialize + ?Sized>(obj: &mut RawObject, key: &str, value: &T) -> Result<(), OverrideError> {
    Ok(obj.set_json(key, value)?)
}

#[cfg(test)]
mod tests;
