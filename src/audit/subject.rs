//! Who asked about what: the [`Subject`] of one request (its caller, the endpoint it came
//! through, its method, and the item it acts on once the call path resolved it: kind, catalogue
//! name, the name the endpoint presents, upstream; and the code-mode program that made it, if one
//! did). It is built once on the call path
//! (`dispatch::chain`: as asked, then resolved by the `Resolve` step) and borrowed by everything
//! that records or checks the request: the audit's records, the guards (and the request they
//! are sent), the secrets and skills checks; shared by `Arc` where a result is checked after
//! the handler returned. A definition the catalogue guards check has a subject too, with no
//! caller (`-`).

use crate::auth::Principal;
use mcpgate_model::catalog::Kind;
use mcpgate_protocol::Method;
use std::sync::Arc;

/// Who asked about what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The caller's id (`-` for the catalogue guards: no caller).
    pub caller: String,
    /// The virtual server's path the request came through; `None` for the root endpoint
    /// (written `-`).
    pub endpoint: Option<Arc<str>>,
    pub method: Method,
    /// The item's kind, once resolved.
    pub kind: Option<Kind>,
    /// The catalogue's name of the item (a URI in canonical form) once resolved; before, the name
    /// as asked.
    pub item: String,
    /// The name the endpoint presents (as the caller named it), when it differs from `item`.
    pub presented: Option<String>,
    /// The id of the upstream that owns the item, once resolved (written `-` when unknown).
    pub upstream: Option<String>,
    /// The code-mode program that made the call (`dispatch::code`), when one did: every record
    /// of its inner calls, and of the run itself, names it.
    pub program: Option<Arc<str>>,
    /// The HTTP request's id (`x-request-id`), when the request came over HTTP.
    pub request: Option<http::HeaderValue>,
}

impl Subject {
    /// A request of `caller` as asked, before its item is resolved: `name` as the caller named
    /// it (empty until the call path has read it).
    pub fn asked(caller: &Principal, method: Method, name: impl Into<String>) -> Subject {
        Subject {
            caller: caller.id.clone(),
            endpoint: caller.endpoint.clone(),
            method,
            kind: None,
            item: name.into(),
            presented: None,
            upstream: None,
            program: None,
            request: None,
        }
    }

    /// A definition the catalogue guards check (no caller, no endpoint): item `name` of kind
    /// `kind` of `upstream`, as it arrives in the list `method`.
    pub fn catalogue(kind: Kind, method: Method, name: &str, upstream: &str) -> Subject {
        Subject {
            caller: "-".into(),
            endpoint: None,
            method,
            kind: Some(kind),
            item: name.into(),
            presented: None,
            upstream: Some(upstream.into()),
            program: None,
            request: None,
        }
    }

    /// The item resolved: its kind, the upstream that owns it, and its catalogue name when that
    /// differs from the name as asked (`None`: the name as asked is the catalogue's, as for a URI
    /// in canonical form or a task id). The name as asked is kept as the presented one when it
    /// differs.
    pub fn resolve(&mut self, kind: Kind, upstream: &str, catalogue: Option<&str>) {
        if let Some(name) = catalogue.filter(|n| *n != self.item) {
            self.presented = Some(std::mem::replace(&mut self.item, name.to_string()));
        }
        self.kind = Some(kind);
        self.upstream = Some(upstream.to_string());
    }

    /// The name as the caller named it (the presented one, else the catalogue's).
    pub fn shown(&self) -> &str {
        self.presented.as_deref().unwrap_or(&self.item)
    }

    /// The endpoint as records write it: `-` for the root.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_deref().unwrap_or("-")
    }

    /// The upstream as records write it: `-` when unknown.
    pub fn upstream(&self) -> &str {
        self.upstream.as_deref().unwrap_or("-")
    }

    /// The kind's label (`tool`, `prompt`, …), `-` before the item is resolved.
    pub fn kind_label(&self) -> &'static str {
        self.kind.map_or("-", Kind::label)
    }
}
