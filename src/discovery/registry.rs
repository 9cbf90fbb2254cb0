//! The read-only MCP Registry API (`GET /v0.1/servers`, `…/{serverName}/versions`,
//! `…/{serverName}/versions/{version}`, as the registry's OpenAPI description defines the read
//! side) over the gateway's own endpoints, one server each, answered for one caller: what it is
//! given is the [`View`] of each endpoint it may use (the edge takes them from the catalogue
//! through the caller's grants), and an endpoint where it may use nothing is not there. Each
//! server's `ServerDetail` is what the endpoint's Server Card says ([`card::card`], within the
//! registry's limits), so no upstream's URL, command or name reaches it; the caller's live counts
//! and tool names are under `_meta["io.mcpgate/view"]`. Paging is by name (a stable order) with a
//! sealed cursor holding the last name given; `publishedAt`/`updatedAt` are when the
//! configuration in effect was loaded.

use super::card;
use mcpgate_config::Config;
use mcpgate_model::token::{SealError, Sealer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::time::{Duration, SystemTime};

/// Where the API lives.
pub const PREFIX: &str = "/v0.1/servers";
/// The registry-managed metadata every answer carries (`ServerResponse._meta`).
pub const OFFICIAL: &str = "io.modelcontextprotocol.registry/official";
/// The gateway's own metadata: what the caller may use through the endpoint.
pub const VIEW: &str = "io.mcpgate/view";
/// Servers per page unless `limit` says otherwise, and the most one page holds.
pub const DEFAULT_LIMIT: usize = 30;
pub const MAX_LIMIT: usize = 100;
/// The most tool names one server's view lists (the count is always whole).
pub const MAX_NAMES: usize = 1000;

const CURSOR: &str = "mcpgate/registry-cursor/v1";

/// The fields of a Server Card a `ServerDetail` carries.
const DETAIL: &[&str] = &["name", "title", "description", "version", "websiteUrl", "repository", "remotes", "icons"];

/// What one caller may use through one endpoint, as its lists would show it now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// The endpoint's path.
    pub path: String,
    /// Nothing restricts the caller there: the endpoint is listed even while it serves nothing.
    pub unrestricted: bool,
    /// The tools the caller sees there, in list order.
    pub tools: Vec<String>,
    pub prompts: usize,
    pub resources: usize,
    pub templates: usize,
    pub skills: usize,
}

impl View {
    /// Whether the endpoint is listed for the caller: it may use something there, or anything.
    pub fn listed(&self) -> bool {
        self.unrestricted || !self.tools.is_empty() || self.prompts + self.resources + self.templates + self.skills > 0
    }

    fn meta(&self) -> Value {
        let mut v = json!({
            "tools": self.tools.len(),
            "prompts": self.prompts,
            "resources": self.resources,
            "resourceTemplates": self.templates,
            "skills": self.skills,
            "toolNames": self.tools.iter().take(MAX_NAMES).collect::<Vec<_>>(),
        });
        if self.tools.len() > MAX_NAMES {
            v["toolNamesTruncated"] = json!(true);
        }
        v
    }
}

/// What a request asks for; `None` from [`route`]: nothing the API defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    List,
    /// A server's versions, by its (decoded) name.
    Versions(String),
    /// One version of a server (`latest` or an exact version).
    Version(String, String),
}

/// Whether `path` is under the API (answered by it, if only with a 404).
pub fn owns(path: &str) -> bool {
    path == PREFIX || path.strip_prefix(PREFIX).is_some_and(|rest| rest.starts_with('/'))
}

/// The route of `path` (as the request line has it: `serverName` percent-encoded, `%2F` for its
/// slash; a slash written as is works too).
pub fn route(path: &str) -> Option<Route> {
    if path == PREFIX || path == "/v0.1/servers/" {
        return Some(Route::List);
    }
    let rest = path.strip_prefix("/v0.1/servers/")?;
    if let Some(name) = rest.strip_suffix("/versions") {
        return Some(Route::Versions(decode(name)));
    }
    let (name, version) = rest.rsplit_once("/versions/")?;
    (!version.is_empty() && !version.contains('/')).then(|| Route::Version(decode(name), decode(version)))
}

fn decode(s: &str) -> String {
    mcpgate_protocol::toolbox::percent_decode(s)
}

/// Why the API answers with an error (the text is its `error`).
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// No such server for this caller, or not that version: the same answer either way.
    #[error("Server not found")]
    NotFound,
    #[error("Invalid cursor: list again from the start")]
    Cursor,
    #[error("Invalid limit '{0}': give a whole number from 1 to {MAX_LIMIT}")]
    Limit(String),
    #[error("Invalid updated_since '{0}': give an RFC 3339 date-time such as 2025-08-07T13:15:04Z")]
    UpdatedSince(String),
    #[error("cannot issue a cursor: {0}")]
    Seal(#[source] SealError),
}

impl RegistryError {
    pub fn status(&self) -> http::StatusCode {
        match self {
            RegistryError::NotFound => http::StatusCode::NOT_FOUND,
            RegistryError::Seal(_) => http::StatusCode::INTERNAL_SERVER_ERROR,
            _ => http::StatusCode::BAD_REQUEST,
        }
    }

    /// The answer's body.
    pub fn body(&self) -> Value {
        json!({ "error": self.to_string() })
    }
}

/// The query of `GET /v0.1/servers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub cursor: Option<String>,
    pub limit: usize,
    /// A part of the name, any case.
    pub search: Option<String>,
    pub updated_since: Option<SystemTime>,
    /// `latest`, or an exact version.
    pub version: Option<String>,
}

impl Query {
    /// Reads a query string (`None`: there is none); unknown parameters are ignored, the last of
    /// a repeated one counts, and empty values count as absent.
    pub fn parse(raw: Option<&str>) -> Result<Query, RegistryError> {
        let mut q = Query { cursor: None, limit: DEFAULT_LIMIT, search: None, updated_since: None, version: None };
        for (key, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            if value.is_empty() {
                continue;
            }
            match key.as_ref() {
                "cursor" => q.cursor = Some(value.into_owned()),
                "search" => q.search = Some(value.into_owned()),
                "version" => q.version = Some(value.into_owned()),
                "limit" => {
                    q.limit = match value.trim().parse::<u64>() {
                        Ok(n) if n >= 1 => (n as usize).min(MAX_LIMIT),
                        _ => return Err(RegistryError::Limit(value.into_owned())),
                    }
                }
                "updated_since" => {
                    q.updated_since = Some(rfc3339(&value).ok_or_else(|| RegistryError::UpdatedSince(value.into_owned()))?);
                }
                _ => {}
            }
        }
        Ok(q)
    }
}

/// An RFC 3339 date-time, with `Z` or any offset.
fn rfc3339(text: &str) -> Option<SystemTime> {
    let t = text.trim().to_ascii_uppercase();
    let cut = t.len().checked_sub(6)?;
    if let (Some(head), Some(offset)) = (t.get(..cut), t.get(cut..)) {
        let b = offset.as_bytes();
        if matches!(b[0], b'+' | b'-') && b[3] == b':' && head.len() >= 19 {
            let (h, m) = (offset.get(1..3)?.parse::<u64>().ok()?, offset.get(4..6)?.parse::<u64>().ok()?);
            if h > 23 || m > 59 {
                return None;
            }
            let utc = humantime::parse_rfc3339(&format!("{head}Z")).ok()?;
            let shift = Duration::from_secs(h * 3600 + m * 60);
            return if b[0] == b'+' { utc.checked_sub(shift) } else { utc.checked_add(shift) };
        }
    }
    humantime::parse_rfc3339(&t).ok()
}

/// What every answer is built from: the configuration in effect, the public URL the remotes
/// name, and when the configuration was loaded.
pub struct Registry<'a> {
    pub cfg: &'a Config,
    /// The gateway's public URL, without a trailing slash.
    pub base: &'a str,
    pub loaded_at: SystemTime,
}

/// The registry's `ServerDetail` of the endpoint at `path`: what its Server Card says, within
/// the registry's limits (a title of at most 100 characters, the icons it accepts).
pub fn detail(cfg: &Config, base: &str, path: &str) -> Option<Value> {
    let card = card::card(cfg, base, path)?;
    let mut out = Map::new();
    for key in DETAIL {
        if let Some(v) = card.get(*key) {
            out.insert((*key).to_string(), v.clone());
        }
    }
    if let Some(Value::String(t)) = out.get_mut("title")
        && t.chars().count() > 100
    {
        *t = t.chars().take(100).collect();
    }
    let icons: Vec<Value> = match out.remove("icons") {
        Some(Value::Array(all)) => all.into_iter().filter(icon_fits).collect(),
        _ => Vec::new(),
    };
    if !icons.is_empty() {
        out.insert("icons".into(), Value::Array(icons));
    }
    Some(Value::Object(out))
}

/// Whether the registry's `Icon` takes `icon` (a URI of at most 255 characters, one of its
/// media types, sizes as `WxH` or `any`).
fn icon_fits(icon: &Value) -> bool {
    const TYPES: &[&str] = &["image/png", "image/jpeg", "image/jpg", "image/svg+xml", "image/webp"];
    let src_fits = icon.get("src").and_then(Value::as_str).is_some_and(|s| s.len() <= 255);
    let type_fits = icon.get("mimeType").and_then(Value::as_str).is_none_or(|m| TYPES.contains(&m));
    let size = |s: &str| s == "any" || s.split_once('x').is_some_and(|(w, h)| digits(w) && digits(h));
    let sizes_fit = icon.get("sizes").and_then(Value::as_array).is_none_or(|all| all.iter().all(|s| s.as_str().is_some_and(size)));
    src_fits && type_fits && sizes_fit
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

impl Registry<'_> {
    fn name(&self, view: &View) -> String {
        self.cfg.discovery.card_name(&view.path, &self.cfg.server.path)
    }

    /// The `ServerResponse` of one endpoint for the caller whose view it is.
    pub fn server(&self, view: &View) -> Option<Value> {
        let at = humantime::format_rfc3339_millis(self.loaded_at).to_string();
        Some(json!({
            "server": detail(self.cfg, self.base, &view.path)?,
            "_meta": {
                OFFICIAL: { "status": "active", "publishedAt": at, "updatedAt": at, "isLatest": true },
                VIEW: view.meta(),
            },
        }))
    }

    /// Every server the caller may see, by name (the first endpoint of a name, when two share
    /// it), each with its `ServerResponse`.
    fn servers(&self, views: &[View]) -> Vec<(String, Value)> {
        let mut all: Vec<(String, Value)> =
            views.iter().filter(|v| v.listed()).filter_map(|v| Some((self.name(v), self.server(v)?))).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.dedup_by(|b, a| a.0 == b.0);
        all
    }

    /// `GET /v0.1/servers`: a page of the servers the caller may see.
    pub fn list(&self, views: &[View], q: &Query, sealer: &Sealer) -> Result<Value, RegistryError> {
        let after = match &q.cursor {
            Some(c) => Some(sealer.open_aged::<Position>(CURSOR, c).ok_or(RegistryError::Cursor)?.0.after),
            None => None,
        };
        let search = q.search.as_ref().map(|s| s.to_lowercase());
        let fresh = q.updated_since.is_none_or(|since| self.loaded_at > since);
        let matching: Vec<(String, Value)> = self
            .servers(views)
            .into_iter()
            .filter(|(name, _)| fresh && after.as_ref().is_none_or(|a| name > a))
            .filter(|(name, _)| search.as_ref().is_none_or(|s| name.to_lowercase().contains(s)))
            .filter(|(_, s)| q.version.as_deref().is_none_or(|v| v == "latest" || s["server"]["version"].as_str() == Some(v)))
            .collect();
        let more = matching.len() > q.limit;
        let page: Vec<(String, Value)> = matching.into_iter().take(q.limit).collect();
        let mut metadata = json!({ "count": page.len() });
        if more && let Some((last, _)) = page.last() {
            metadata["nextCursor"] = json!(sealer.seal(CURSOR, &Position { after: last.clone() }).map_err(RegistryError::Seal)?);
        }
        Ok(json!({ "servers": page.into_iter().map(|(_, s)| s).collect::<Vec<_>>(), "metadata": metadata }))
    }

    fn find(&self, views: &[View], name: &str) -> Result<Value, RegistryError> {
        self.servers(views).into_iter().find(|(n, _)| n == name).map(|(_, s)| s).ok_or(RegistryError::NotFound)
    }

    /// `GET /v0.1/servers/{serverName}/versions`: the one version each endpoint has.
    pub fn versions(&self, views: &[View], name: &str) -> Result<Value, RegistryError> {
        let server = self.find(views, name)?;
        Ok(json!({ "servers": [server], "metadata": { "count": 1 } }))
    }

    /// `GET /v0.1/servers/{serverName}/versions/{version}` (`latest`, or the exact version).
    pub fn version(&self, views: &[View], name: &str, version: &str) -> Result<Value, RegistryError> {
        let server = self.find(views, name)?;
        if version != "latest" && server["server"]["version"].as_str() != Some(version) {
            return Err(RegistryError::NotFound);
        }
        Ok(server)
    }
}

/// What a cursor holds: the last name of the page it follows.
#[derive(Serialize, Deserialize)]
struct Position {
    after: String,
}

#[cfg(test)]
mod tests;
