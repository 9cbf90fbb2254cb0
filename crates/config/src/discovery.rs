//! The `[discovery]` part of `gateway.toml`: what the gateway publishes so that clients find its
//! endpoints before they connect — a Server Card per endpoint (`<endpoint>/server-card`), the AI
//! Catalog of the endpoints marked public (`/.well-known/ai-catalog.json`), and a read-only MCP
//! Registry API (`/v0.1/servers`, answered per caller). What a card says is written here (who
//! publishes, titles, a description, icons, the public URL); nothing on a card ever comes from an
//! upstream (its URL, command or name), so the cards show the gateway's endpoints and no topology.

use super::{ConfigError, Locator};
use serde::Deserialize;
use toml::Spanned;

/// `[discovery]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverySection {
    /// Serve the cards, the catalog and the registry API (default true).
    pub enabled: Option<bool>,
    /// Who publishes, in reverse-DNS form (`com.example`): the part of every card's `name` before
    /// the slash.
    pub publisher: Option<Spanned<String>>,
    /// The root endpoint's card name after the slash (default `mcpgate`).
    pub name: Option<Spanned<String>>,
    pub title: Option<Spanned<String>>,
    pub description: Option<Spanned<String>>,
    pub website_url: Option<Spanned<String>>,
    #[serde(default)]
    pub icons: Vec<IconSection>,
    /// Where clients reach the gateway (`https://mcp.example.com`): the base of every card's
    /// remote. Default: `[identity] public_url`, else the listener's own address.
    pub public_url: Option<Spanned<String>>,
    /// The endpoints (their paths) the AI Catalog lists (default: the root endpoint).
    pub public: Option<Vec<Spanned<String>>>,
    /// Serve the read-only MCP Registry API at `/v0.1/servers` (default true).
    pub registry: Option<bool>,
}

/// `[[discovery.icons]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IconSection {
    pub src: Spanned<String>,
    pub mime_type: Option<String>,
    #[serde(default)]
    pub sizes: Vec<String>,
    pub theme: Option<Spanned<String>>,
}

/// The resolved `[discovery]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveryConfig {
    pub enabled: bool,
    pub publisher: String,
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub website_url: Option<String>,
    pub icons: Vec<Icon>,
    /// Without a trailing slash; `None`: the listener's own address, known when it listens.
    pub public_url: Option<String>,
    /// The paths of the endpoints the catalog lists (the root endpoint's path included when it is).
    pub public: Vec<String>,
    pub registry: bool,
}

/// An icon as a card carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct Icon {
    pub src: String,
    pub mime_type: Option<String>,
    pub sizes: Vec<String>,
    pub theme: Option<String>,
}

/// The description a card carries when none is configured (1 to 100 characters, as cards require).
pub const DEFAULT_DESCRIPTION: &str = "An MCP gateway: many MCP servers behind one endpoint";

/// A reverse-DNS label list (`com.example`, `io.github.team`): what a card's name starts with.
fn reverse_dns(s: &str) -> bool {
    !s.is_empty() && s.len() <= 100 && s.split('.').all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

/// A card name's part after the slash.
fn card_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 90 && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn http_url(at: &Locator, v: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
    let url = v.get_ref().trim_end_matches('/');
    let parsed: Result<http::Uri, _> = url.parse();
    match parsed {
        Ok(u) if matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some() && u.query().is_none() => Ok(url.to_string()),
        _ => Err(at.err(v, key, format!("'{}' is not an http(s) URL", v.get_ref()), "write e.g. \"https://mcp.example.com\"")),
    }
}

/// Resolves `[discovery]`; `endpoints` are the configured endpoints' paths, the root's first.
pub(super) fn resolve(
    at: &Locator,
    s: DiscoverySection,
    endpoints: &[String],
    identity_public_url: Option<&str>,
) -> Result<DiscoveryConfig, ConfigError> {
    let publisher = match &s.publisher {
        Some(p) if reverse_dns(p.get_ref()) => p.get_ref().clone(),
        Some(p) => {
            return Err(at.err(
                p,
                "discovery.publisher",
                format!("'{}' is not a reverse-DNS name", p.get_ref()),
                "write e.g. \"com.example\"",
            ));
        }
        None => "local.mcpgate".to_string(),
    };
    let name = match &s.name {
        Some(n) if card_name(n.get_ref()) => n.get_ref().clone(),
        Some(n) => {
            return Err(at.err(
                n,
                "discovery.name",
                format!("'{}' is not a server name", n.get_ref()),
                "use letters, digits, '.', '_' and '-'",
            ));
        }
        None => "mcpgate".to_string(),
    };
    let text = |v: &Option<Spanned<String>>, key: &str| -> Result<Option<String>, ConfigError> {
        match v {
            Some(t) if t.get_ref().trim().is_empty() || t.get_ref().chars().count() > 100 => {
                Err(at.err(t, key, "it must hold 1 to 100 characters".to_string(), "shorten it, or remove the key"))
            }
            Some(t) => Ok(Some(t.get_ref().clone())),
            None => Ok(None),
        }
    };
    let title = text(&s.title, "discovery.title")?;
    let description = text(&s.description, "discovery.description")?.unwrap_or_else(|| DEFAULT_DESCRIPTION.to_string());
    let website_url = s.website_url.as_ref().map(|u| http_url(at, u, "discovery.website_url")).transpose()?;
    let public_url = match &s.public_url {
        Some(u) => Some(http_url(at, u, "discovery.public_url")?),
        None => identity_public_url.map(|u| u.trim_end_matches('/').to_string()),
    };
    let mut icons = Vec::new();
    for i in s.icons {
        let theme = match &i.theme {
            Some(t) if matches!(t.get_ref().as_str(), "light" | "dark") => Some(t.get_ref().clone()),
            Some(t) => {
                return Err(at.err(t, "discovery.icons.theme", format!("'{}' is not a theme", t.get_ref()), "write \"light\" or \"dark\""));
            }
            None => None,
        };
        let src = i.src.get_ref();
        if !(src.starts_with("https://") || src.starts_with("http://") || src.starts_with("data:")) {
            return Err(at.err(&i.src, "discovery.icons.src", format!("'{src}' is not a URL"), "give an https URL or a data: URI"));
        }
        icons.push(Icon { src: src.clone(), mime_type: i.mime_type, sizes: i.sizes, theme });
    }
    let public = match s.public {
        Some(list) => {
            let mut out = Vec::new();
            for p in list {
                if !endpoints.iter().any(|e| e == p.get_ref()) {
                    return Err(at.err(
                        &p,
                        "discovery.public",
                        format!("'{}' is not an endpoint of this gateway", p.get_ref()),
                        &format!("name one of {}", endpoints.join(", ")),
                    ));
                }
                out.push(p.get_ref().clone());
            }
            out
        }
        None => endpoints.first().cloned().into_iter().collect(),
    };
    Ok(DiscoveryConfig {
        enabled: s.enabled.unwrap_or(true),
        publisher,
        name,
        title,
        description,
        website_url,
        icons,
        public_url,
        public,
        registry: s.registry.unwrap_or(true),
    })
}

impl DiscoveryConfig {
    /// The card name of the endpoint at `path` (`root` is the root endpoint's path): the
    /// configured name for the root, else the path's segments joined by `-` (`/teams/eng` →
    /// `com.example/teams-eng`).
    pub fn card_name(&self, path: &str, root: &str) -> String {
        if path == root {
            return format!("{}/{}", self.publisher, self.name);
        }
        let slug: String = path
            .trim_matches('/')
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
            .collect();
        format!("{}/{}", self.publisher, if slug.is_empty() { self.name.clone() } else { slug })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_reverse_dns_and_endpoint_slugs() {
        assert!(reverse_dns("com.example") && reverse_dns("io.github.team-x") && !reverse_dns("") && !reverse_dns("com..x"));
        assert!(!reverse_dns("com.example/x") && card_name("gateway_1.v2") && !card_name("a/b"));
        let cfg = DiscoveryConfig {
            enabled: true,
            publisher: "com.example".into(),
            name: "gateway".into(),
            title: None,
            description: DEFAULT_DESCRIPTION.into(),
            website_url: None,
            icons: Vec::new(),
            public_url: None,
            public: vec!["/mcp".into()],
            registry: true,
        };
        assert_eq!(cfg.card_name("/mcp", "/mcp"), "com.example/gateway");
        assert_eq!(cfg.card_name("/teams/eng", "/mcp"), "com.example/teams-eng");
        assert!(DEFAULT_DESCRIPTION.chars().count() <= 100);
    }
}
