//! `mcpgate import --discover URL` and `--registry URL`: the servers a domain publishes (its AI
//! Catalog at `/.well-known/ai-catalog.json`, else the older `/.well-known/mcp/catalog.json`, and
//! the Server Cards its entries point at or carry) or a registry lists (`GET /v0.1/servers`, page
//! by page), as `[[upstream]]` entries. Each server's remote is asked once, without credentials,
//! whether it wants OAuth (the MCP authorization spec's 401 and protected-resource metadata, read
//! the way the gateway itself reads them), since a card has no field that says so. The documents
//! are fetched under [`crate::commands::fetch`]'s rules; what they say is untrusted text.

use super::remote::{self, Probed, shown};
use super::{Ctx, ImportError, Imported, Server, render, unique_id};
use crate::commands::fetch::{FetchError, Fetcher, is_loopback};
use crate::discovery::card::CARD_TYPE;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Servers imported at most (catalog entries, or distinct registry names).
const MAX_SERVERS: usize = 100;
/// Pages of a registry's list read at most.
const MAX_PAGES: usize = 50;
const CATALOG_ACCEPT: &str = "application/ai-catalog+json, application/json;q=0.9";
/// Where a domain's catalog is, newest first.
const CATALOG_PATHS: [&str; 2] = ["/.well-known/ai-catalog.json", "/.well-known/mcp/catalog.json"];
/// The `_meta` key a registry keeps its own facts about an entry under.
const OFFICIAL: &str = "io.modelcontextprotocol.registry/official";

/// Why nothing could be imported.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("{0}: no AI Catalog there (neither /.well-known/ai-catalog.json nor /.well-known/mcp/catalog.json)")]
    NoCatalog(String),
    #[error("{0}: not an AI Catalog (no \"entries\" array)")]
    NotCatalog(String),
    #[error("{0}: no MCP registry there (HTTP 404)")]
    NoRegistry(String),
    #[error("{0}: not an MCP registry's server list (no \"servers\" array)")]
    NotRegistry(String),
    #[error(transparent)]
    Import(#[from] ImportError),
}

/// A server found: its name, where its description came from, and the description (a Server
/// Card, or a registry's `server.json`).
struct Found {
    name: String,
    title: Option<String>,
    origin: String,
    detail: Value,
}

/// `mcpgate import --discover`: the servers of the AI Catalog of `start` (a domain, or the
/// catalog's own URL).
pub async fn discover(start: &str) -> Result<Imported, DiscoverError> {
    let (fetcher, start) = Fetcher::starting_at(&with_scheme(start))?;
    let (at, catalog) = catalog(&fetcher, &start).await?;
    let entries = catalog.get("entries").and_then(Value::as_array).ok_or_else(|| DiscoverError::NotCatalog(at.to_string()))?;
    let mut warnings = Vec::new();
    let mut found = Vec::new();
    let mut others = 0;
    for (i, entry) in entries.iter().enumerate() {
        let kind = entry.get("type").and_then(Value::as_str).unwrap_or("");
        if !kind.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case(CARD_TYPE) {
            others += 1;
            continue;
        }
        if found.len() == MAX_SERVERS {
            warnings.push(format!("the catalog lists more than {MAX_SERVERS} MCP servers: only the first {MAX_SERVERS} are imported"));
            break;
        }
        let label = entry.get("identifier").and_then(Value::as_str).map(|s| format!("'{}'", shown(s))).unwrap_or(format!("#{}", i + 1));
        let (card, origin) = match (entry.get("data"), entry.get("url").and_then(Value::as_str)) {
            (Some(data), _) => (data.clone(), format!("{at} (inline)")),
            (None, Some(url)) => match card_at(&fetcher, &at, url).await {
                Ok(Some(doc)) => (doc.json, doc.url.to_string()),
                Ok(None) => {
                    warnings.push(format!("catalog entry {label}: its card {} answered 404; skipped", shown(url)));
                    continue;
                }
                Err(e) => {
                    warnings.push(format!("catalog entry {label}: {}; skipped", shown(&e.to_string())));
                    continue;
                }
            },
            (None, None) => {
                warnings.push(format!("catalog entry {label}: neither a url nor inline data; skipped"));
                continue;
            }
        };
        let Some(name) = card.get("name").and_then(Value::as_str).map(str::to_string) else {
            warnings.push(format!("catalog entry {label}: not a Server Card (no name); skipped"));
            continue;
        };
        if let Some(schema) = card.get("$schema").and_then(Value::as_str).filter(|s| *s != crate::discovery::card::SCHEMA) {
            warnings.push(format!("server '{}': its card names the schema \"{}\", not the v1 Server Card's", shown(&name), shown(schema)));
        }
        let title = card.get("title").and_then(Value::as_str).map(str::to_string);
        found.push(Found { name, title, origin, detail: card });
    }
    if others > 0 {
        let entries = mcpgate_protocol::text::count_of(others, "catalog entry", "catalog entries");
        warnings.push(format!("{entries} of another type than MCP Server Card left out"));
    }
    convert(|url| probe(&fetcher, url), found, warnings, &format!("the AI Catalog {at}")).await
}

/// `mcpgate import --registry`: the servers a registry lists at `<start>/v0.1/servers`.
pub async fn registry(start: &str) -> Result<Imported, DiscoverError> {
    let (fetcher, start) = Fetcher::starting_at(&with_scheme(start))?;
    let list = servers_url(&start);
    let mut warnings = Vec::new();
    let mut found: Vec<Found> = Vec::new();
    // Per name: its index in `found`, and whether that entry is the registry's latest version.
    let mut names: BTreeMap<String, (usize, bool)> = BTreeMap::new();
    let mut cursors = BTreeSet::new();
    let mut cursor: Option<String> = None;
    let mut dropped = false;
    for page in 0..MAX_PAGES {
        let mut url = list.clone();
        if let Some(c) = &cursor {
            url.query_pairs_mut().append_pair("cursor", c);
        }
        let doc = fetcher.get_json(&url, "application/json").await?.ok_or_else(|| DiscoverError::NoRegistry(url.to_string()))?;
        let servers = doc.json.get("servers").and_then(Value::as_array).ok_or_else(|| DiscoverError::NotRegistry(url.to_string()))?;
        for entry in servers {
            let Some(server) = entry.get("server").filter(|s| s.is_object()) else { continue };
            let Some(name) = server.get("name").and_then(Value::as_str) else { continue };
            let official = entry.get("_meta").and_then(|m| m.get(OFFICIAL));
            let status = official.and_then(|o| o.get("status")).and_then(Value::as_str).unwrap_or("active");
            if status == "deleted" {
                continue;
            }
            let latest = official.and_then(|o| o.get("isLatest")).and_then(Value::as_bool) == Some(true);
            let item = Found {
                name: name.to_string(),
                title: server.get("title").and_then(Value::as_str).map(str::to_string),
                origin: format!("listed by {list}"),
                detail: server.clone(),
            };
            match names.get(name).copied() {
                // A later version the registry marks as its latest replaces the one kept.
                Some((i, false)) if latest => {
                    found[i] = item;
                    names.insert(name.to_string(), (i, true));
                }
                Some(_) => {}
                None if found.len() == MAX_SERVERS => dropped = true,
                None => {
                    if status == "deprecated" {
                        warnings.push(format!("server '{}': the registry marks it deprecated", shown(name)));
                    }
                    names.insert(name.to_string(), (found.len(), latest));
                    found.push(item);
                }
            }
        }
        cursor = doc
            .json
            .get("metadata")
            .and_then(|m| m.get("nextCursor"))
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .map(str::to_string);
        let Some(next) = &cursor else { break };
        if !cursors.insert(next.clone()) {
            warnings.push(format!("the registry gave the cursor \"{}\" twice: its list was read up to there", shown(next)));
            break;
        }
        if page + 1 == MAX_PAGES {
            warnings.push(format!("the registry's list was read up to {MAX_PAGES} pages; the rest is left out"));
        }
    }
    if dropped {
        warnings.push(format!("at most {MAX_SERVERS} servers are imported; the rest of the registry's list is left out"));
    }
    convert(|url| probe(&fetcher, url), found, warnings, &format!("the registry {list}")).await
}

/// The catalog of `start`: the well-known locations of its origin when `start` names no path,
/// else `start` itself. The first location's failure is the one reported when both fail.
async fn catalog(fetcher: &Fetcher, start: &url::Url) -> Result<(url::Url, Value), DiscoverError> {
    if !matches!(start.path(), "" | "/") {
        return match fetcher.get_json(start, CATALOG_ACCEPT).await? {
            Some(doc) => Ok((doc.url, doc.json)),
            None => Err(DiscoverError::NoCatalog(start.to_string())),
        };
    }
    let mut first: Option<FetchError> = None;
    for path in CATALOG_PATHS {
        let url = start.join(path).map_err(|_| FetchError::Malformed(start.to_string()))?;
        match fetcher.get_json(&url, CATALOG_ACCEPT).await {
            Ok(Some(doc)) => return Ok((doc.url, doc.json)),
            Ok(None) => {}
            Err(e) => first = first.or(Some(e)),
        }
    }
    Err(first.map(DiscoverError::Fetch).unwrap_or_else(|| DiscoverError::NoCatalog(start.to_string())))
}

/// The card an entry of the catalog at `catalog` points at (`url` may be relative to it).
async fn card_at(fetcher: &Fetcher, catalog: &url::Url, url: &str) -> Result<Option<crate::commands::fetch::Document>, FetchError> {
    let url = catalog.join(url).map_err(|_| FetchError::Malformed(url.to_string()))?;
    fetcher.get_json(&url, CARD_TYPE).await
}

/// A registry's list: `<start>/v0.1/servers`, or `start` when it is that already.
fn servers_url(start: &url::Url) -> url::Url {
    let mut url = start.clone();
    url.set_query(None);
    url.set_fragment(None);
    let path = url.path().trim_end_matches('/').to_string();
    if !path.ends_with("/v0.1/servers") {
        url.set_path(&format!("{path}/v0.1/servers"));
    }
    url
}

/// `example.com` → `https://example.com`.
fn with_scheme(start: &str) -> String {
    let start = start.trim();
    if start.contains("://") { start.to_string() } else { format!("https://{start}") }
}

/// Each server as an upstream, its remote asked whether it wants OAuth (`probe`, given its URL);
/// the file, from `from`.
async fn convert<P, F>(probe: P, found: Vec<Found>, warnings: Vec<String>, from: &str) -> Result<Imported, DiscoverError>
where
    P: Fn(String) -> F,
    F: std::future::Future<Output = Probed>,
{
    let mut out = Imported { warnings, ..Imported::default() };
    let mut ids = BTreeSet::new();
    let mut vars = BTreeMap::new();
    let mut converted = Vec::new();
    // Some upstream has user_auth, and whether one of those is on this machine.
    let mut oauth: Option<bool> = None;
    for f in found {
        let label = format!("'{}'", shown(&f.name));
        let mut notes = Vec::new();
        let chosen = match remote::choose(&f.detail, &mut notes) {
            Ok(c) => c,
            Err(e) => {
                out.warnings.push(format!("server {label}: {e}; skipped"));
                continue;
            }
        };
        out.warnings.extend(notes.into_iter().map(|n| format!("server {label}: {n}")));
        let auth = probe(chosen.url.clone()).await;
        if matches!(auth, Probed::OAuth { .. }) {
            let here = url::Url::parse(&chosen.url).is_ok_and(|u| is_loopback(&u));
            oauth = Some(oauth.unwrap_or(false) || here);
        }
        // Named after the card's name without its publisher, kept short (a name may be 200 long).
        let short: String = f.name.rsplit('/').next().unwrap_or(&f.name).chars().take(40).collect();
        let id = unique_id(&short, &mut ids);
        let mut ctx = Ctx { id: &id, vars: &mut vars, warnings: &mut out.warnings };
        let body = remote::body(&mut ctx, &label, &chosen, &auth);
        let title = f.title.as_deref().map(|t| format!(", \"{}\"", shown(t))).unwrap_or_default();
        converted.push(Server { id, original: format!("{}{title}, from {}", shown(&f.name), shown(&f.origin)), body });
    }
    if converted.is_empty() {
        return Err(ImportError::NoneImported { source_name: from.to_string(), why: out.warnings.join("; ") }.into());
    }
    let mut extra = String::new();
    if let Some(here) = oauth {
        extra.push_str(
            "\n# Callers connect their own accounts to the user_auth upstreams below on the gateway's pages:\n\
             # public_url is where their browsers reach the gateway (https in production; http only on loopback).\n\
             [identity]\npublic_url = \"http://127.0.0.1:8811\"\n",
        );
        if here {
            extra.push_str(
                "# An OAuth upstream is on this machine: its authorization metadata is fetched over http on loopback.\n\
                 # For development only; never in production.\nallow_loopback = true\n",
            );
        }
    }
    render(&mut out, vars, &converted, from, &extra);
    Ok(out)
}

/// Whether the remote at `url` asks for OAuth: one unauthenticated MCP request, and when it is
/// answered with a `Bearer` challenge, its protected-resource metadata (the challenge's
/// `resource_metadata`, else the RFC 9728 well-known URLs), which must be about that URL and
/// name an authorization server. The identity client's own rules apply (https to public
/// addresses; loopback only when the importer started on loopback).
async fn probe(fetcher: &Fetcher, url: String) -> Probed {
    let url = url.as_str();
    let http = crate::identity::client::OAuthHttp::new(crate::identity::reach::Rules { loopback: fetcher.on_loopback() });
    let challenge = match http.challenge(url).await {
        Ok(Some(c)) => c,
        Ok(None) => return Probed::NotOAuth,
        Err(e) => return Probed::Unknown(e.to_string()),
    };
    match http.resource_metadata(url, Some(&challenge)).await {
        Ok(doc) => match doc.authorization_servers.first() {
            Some(server) => Probed::OAuth { authorization_server: server.clone() },
            None => Probed::Unknown("its protected-resource metadata names no authorization server".into()),
        },
        Err(e) if challenge.resource_metadata.is_some() => {
            Probed::Unknown(format!("its 401 names protected-resource metadata that could not be used: {e}"))
        }
        // A Bearer challenge and no metadata anywhere: a token of its own kind, not OAuth.
        Err(_) => Probed::NotOAuth,
    }
}

#[cfg(test)]
mod tests;
