//! `[[endpoint]]`: virtual servers. Each is one more MCP endpoint on the gateway (its own
//! `path`), presenting a selection of the catalogue (`include`/`exclude` patterns, written like
//! caller patterns) with its own title and instructions, and per-tool presentation overrides
//! (`[[endpoint.tool]]`: a new name, title, description, annotations, and arguments fixed to a
//! value and hidden), or code mode in place of the catalogue (`code_mode`, see `code_mode`). What can be checked without the upstreams is checked here; what needs the
//! tools' schemas (a fixed argument must exist) is checked when the endpoint's view is built.

use super::{ConfigError, Locator};
pub use crate::catalog::endpoint::{Selection, ToolOverride};
use serde::Deserialize;
use serde_json::{Map, Value};
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointSection {
    pub path: Spanned<String>,
    pub title: Option<String>,
    pub instructions: Option<String>,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default, rename = "tool")]
    pub tools: Vec<ToolSection>,
    /// Serve code mode (search the tools, run a program over them) instead of the catalogue.
    pub code_mode: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSection {
    /// The tool's name in the gateway's catalogue.
    pub name: Spanned<String>,
    pub rename: Option<Spanned<String>>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub description_suffix: Option<String>,
    #[serde(default)]
    pub annotations: Map<String, Value>,
    #[serde(default)]
    pub fixed: Map<String, Value>,
}

/// A virtual server.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointConfig {
    pub path: String,
    pub title: Option<String>,
    pub instructions: Option<String>,
    /// Patterns selecting items (globs on gateway names and URIs, or `upstream:<id>`).
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub tools: Vec<ToolOverride>,
    /// Serves code mode instead of its catalogue.
    pub code_mode: bool,
}

impl EndpointConfig {
    /// What the endpoint selects and how it presents it, as the catalogue takes it.
    pub fn selection(&self) -> Selection<'_> {
        Selection { path: &self.path, include: &self.include, exclude: &self.exclude, tools: &self.tools }
    }
}

/// Paths the gateway serves itself, which an endpoint may not take.
const RESERVED: &[&str] = &["/metrics", "/healthz", "/readyz"];

pub(super) fn resolve(at: &Locator, sections: Vec<EndpointSection>, root: &str) -> Result<Vec<EndpointConfig>, ConfigError> {
    let mut out: Vec<EndpointConfig> = Vec::new();
    for e in sections {
        let path = e.path.get_ref().clone();
        let bad_path = |problem: String| {
            at.err(&e.path, "endpoint.path", problem, "use an absolute path such as \"/mcp/dev\", unique among endpoints")
        };
        if !path.starts_with('/') || path.contains(['?', '#', ' ']) || path.len() < 2 {
            return Err(bad_path(format!("'{path}' is not a path")));
        }
        // `<path>/server-card` is where an endpoint's Server Card is served (SEP-2127 reserves it).
        let card = path.ends_with("/server-card");
        if path == root
            || card
            || RESERVED.contains(&path.as_str())
            || path.starts_with("/.well-known/")
            || out.iter().any(|o| o.path == path)
        {
            return Err(bad_path(format!("'{path}' is already served")));
        }
        if e.include.is_empty() {
            return Err(at.err(
                &e.path,
                "endpoint.include",
                format!("endpoint '{path}' selects nothing"),
                "list what it serves, e.g. include = [\"github__*\", \"upstream:jira\"]",
            ));
        }
        let code_mode = e.code_mode.is_some_and(|c| c.into_inner());
        let mut tools: Vec<ToolOverride> = Vec::new();
        for t in e.tools {
            let name = t.name.get_ref().clone();
            if tools.iter().any(|o| o.name == name) {
                return Err(at.err(
                    &t.name,
                    "endpoint.tool.name",
                    format!("tool '{name}' is configured twice on '{path}'"),
                    "merge the two [[endpoint.tool]] entries",
                ));
            }
            if let Some(r) = &t.rename {
                if let Some(problem) = crate::catalog::names::tool_name_problem(r.get_ref()) {
                    return Err(at.err(
                        r,
                        "endpoint.tool.rename",
                        format!("'{}' cannot be served: {problem}", r.get_ref()),
                        "pick a name of 1-128 characters of A-Z a-z 0-9 _ . -",
                    ));
                }
                if tools.iter().any(|o| o.rename.as_deref() == Some(r.get_ref().as_str())) {
                    return Err(at.err(
                        r,
                        "endpoint.tool.rename",
                        format!("two tools of '{path}' are renamed '{}'", r.get_ref()),
                        "give each a name of its own",
                    ));
                }
            }
            tools.push(ToolOverride {
                name,
                rename: t.rename.map(|r| r.into_inner()),
                title: t.title,
                description: t.description,
                description_suffix: t.description_suffix,
                annotations: t.annotations,
                fixed: t.fixed,
            });
        }
        out.push(EndpointConfig {
            path,
            title: e.title,
            instructions: e.instructions,
            include: e.include,
            exclude: e.exclude,
            tools,
            code_mode,
        });
    }
    Ok(out)
}
