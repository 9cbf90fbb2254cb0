//! The Server Card of one endpoint and the AI Catalog of the public ones, as JSON. A card says who
//! publishes the endpoint, its title and description, and how to reach it (one streamable-HTTP
//! remote at the public URL, the protocol versions the gateway speaks, and the `Authorization`
//! header a caller must send when `[auth]` asks for one); it lists no tools. Its `title`,
//! `version`, website and icons are what `server/discover` answers on the same endpoint
//! ([`server_info`], built from the same values).

use mcpgate_config::Config;
use mcpgate_config::auth::AuthMode;
use mcpgate_protocol::{LEGACY_VERSIONS, MODERN_VERSION};
use serde_json::{Value, json};

/// The schema every card names (`$schema`).
pub const SCHEMA: &str = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json";
/// A Server Card's media type.
pub const CARD_TYPE: &str = "application/mcp-server-card+json";
/// The AI Catalog's media type.
pub const CATALOG_TYPE: &str = "application/ai-catalog+json";
/// The gateway's `serverInfo.name` (a card's `name` is the reverse-DNS one of `[discovery]`).
pub const SERVER_NAME: &str = "mcpgate";
/// The title of an endpoint that configures none.
pub const DEFAULT_TITLE: &str = "mcpgate MCP gateway";

/// The title of the endpoint at `path`, as its card and `server/discover` give it: the virtual
/// server's own `title`, else `[discovery] title`, else [`DEFAULT_TITLE`].
pub fn title<'a>(cfg: &'a Config, path: &str) -> &'a str {
    cfg.endpoints
        .iter()
        .find(|e| e.path == path)
        .and_then(|e| e.title.as_deref())
        .or(cfg.discovery.title.as_deref())
        .unwrap_or(DEFAULT_TITLE)
}

/// The `serverInfo` (an `Implementation`) of the endpoint at `path`, as `server/discover`, the
/// legacy `initialize` and every result's `_meta` give it: the gateway's name and version, the
/// endpoint's [`title`], and what `[discovery]` configures of the rest (the description when it
/// is not the default, the website, the icons), so that it never contradicts the card.
pub fn server_info(cfg: &Config, path: &str) -> Value {
    let d = &cfg.discovery;
    let mut info = json!({ "name": SERVER_NAME, "title": title(cfg, path), "version": env!("CARGO_PKG_VERSION") });
    if d.description != mcpgate_config::discovery::DEFAULT_DESCRIPTION {
        info["description"] = json!(d.description);
    }
    if let Some(url) = &d.website_url {
        info["websiteUrl"] = json!(url);
    }
    if !d.icons.is_empty() {
        info["icons"] = Value::Array(d.icons.iter().map(icon).collect());
    }
    info
}

/// Whether `path` is one of the gateway's endpoints (the root or a virtual server).
pub fn is_endpoint(cfg: &Config, path: &str) -> bool {
    path == cfg.server.path || cfg.endpoints.iter().any(|e| e.path == path)
}

/// The card of the endpoint at `path`, reached at `base` (the public URL, no trailing slash);
/// `None` when `path` is not an endpoint.
pub fn card(cfg: &Config, base: &str, path: &str) -> Option<Value> {
    if !is_endpoint(cfg, path) {
        return None;
    }
    let d = &cfg.discovery;
    let mut versions = vec![MODERN_VERSION];
    versions.extend(LEGACY_VERSIONS.iter().copied());
    let mut remote = json!({ "type": "streamable-http", "url": format!("{base}{path}"), "supportedProtocolVersions": versions });
    if cfg.auth.mode != AuthMode::None {
        let how = if cfg.auth.mode == AuthMode::Jwt { "a token from the gateway's issuer" } else { "an API key the operator gave you" };
        remote["headers"] = json!([{
            "name": "Authorization",
            "description": format!("Bearer credential: {how}."),
            "isRequired": true,
            "isSecret": true,
            "value": "Bearer {token}",
            "variables": { "token": { "description": "Your credential for this gateway.", "isRequired": true, "isSecret": true } },
        }]);
    }
    let mut card = json!({
        "$schema": SCHEMA,
        "name": d.card_name(path, &cfg.server.path),
        "version": env!("CARGO_PKG_VERSION"),
        "title": title(cfg, path),
        "description": d.description,
        "remotes": [remote],
    });
    if let Some(url) = &d.website_url {
        card["websiteUrl"] = json!(url);
    }
    if !d.icons.is_empty() {
        card["icons"] = Value::Array(d.icons.iter().map(icon).collect());
    }
    Some(card)
}

fn icon(i: &mcpgate_config::discovery::Icon) -> Value {
    let mut v = json!({ "src": i.src });
    if let Some(m) = &i.mime_type {
        v["mimeType"] = json!(m);
    }
    if !i.sizes.is_empty() {
        v["sizes"] = json!(i.sizes);
    }
    if let Some(t) = &i.theme {
        v["theme"] = json!(t);
    }
    v
}

/// The AI Catalog: one entry per public endpoint, pointing at its card under `base`.
pub fn catalog(cfg: &Config, base: &str) -> Value {
    let d = &cfg.discovery;
    let entries: Vec<Value> = d
        .public
        .iter()
        .filter(|p| is_endpoint(cfg, p))
        .map(|path| {
            json!({
                "identifier": identifier(&d.card_name(path, &cfg.server.path)),
                "type": CARD_TYPE,
                "url": format!("{base}{path}/server-card"),
            })
        })
        .collect();
    json!({ "specVersion": "1.0", "entries": entries })
}

/// The catalog identifier of a card name: `com.example/weather` → `urn:air:example.com:mcp:weather`
/// (the publisher's labels in domain order).
pub fn identifier(card_name: &str) -> String {
    let (publisher, name) = card_name.split_once('/').unwrap_or((card_name, ""));
    let domain: Vec<&str> = publisher.split('.').rev().collect();
    format!("urn:air:{}:mcp:{name}", domain.join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text, std::path::Path::new("gateway.toml"), None, &|_| None).expect("config")
    }

    #[test]
    fn a_card_names_the_endpoint_and_no_upstream() {
        let cfg = config(
            "[discovery]\npublisher = \"com.example\"\nname = \"tools\"\n\n[[upstream]]\nid = \"secretive\"\nurl = \"http://10.1.2.3:9/mcp\"\n\n\
             [[endpoint]]\npath = \"/eng\"\ntitle = \"Engineering\"\ninclude = [\"secretive__*\"]\n",
        );
        let root = card(&cfg, "https://gw.example.com", "/mcp").expect("the root's card");
        assert_eq!(root["name"], "com.example/tools");
        assert_eq!(root["title"], DEFAULT_TITLE);
        assert_eq!(root["remotes"][0]["url"], "https://gw.example.com/mcp");
        let eng = card(&cfg, "https://gw.example.com", "/eng").expect("a virtual server's card");
        assert_eq!((eng["name"].as_str(), eng["title"].as_str()), (Some("com.example/eng"), Some("Engineering")));
        for c in [&root, &eng] {
            let text = c.to_string();
            assert!(!text.contains("10.1.2.3") && !text.contains("secretive"), "{text}");
            assert!(c.get("remotes").is_some_and(|r| r[0].get("headers").is_none()), "no auth, no header: {c}");
        }
        assert!(card(&cfg, "https://gw.example.com", "/nope").is_none());
        let cat = catalog(&cfg, "https://gw.example.com");
        assert_eq!(cat["entries"].as_array().map(Vec::len), Some(1), "only the root by default: {cat}");
        assert_eq!(cat["entries"][0]["identifier"], "urn:air:example.com:mcp:tools");
        assert_eq!(cat["entries"][0]["url"], "https://gw.example.com/mcp/server-card");
    }

    #[test]
    fn server_info_agrees_with_the_card() {
        let plain = config("");
        let info = server_info(&plain, "/mcp");
        assert_eq!(info, json!({ "name": SERVER_NAME, "title": DEFAULT_TITLE, "version": env!("CARGO_PKG_VERSION") }));
        let cfg = config(
            "[discovery]\ntitle = \"Acme tools\"\ndescription = \"Acme's tools\"\nwebsite_url = \"https://acme.example\"\n\
             [[discovery.icons]]\nsrc = \"https://acme.example/i.png\"\nmime_type = \"image/png\"\n\n\
             [[endpoint]]\npath = \"/eng\"\ntitle = \"Engineering\"\ninclude = [\"*\"]\n",
        );
        for path in ["/mcp", "/eng"] {
            let (info, card) = (server_info(&cfg, path), card(&cfg, "https://x.example", path).expect("a card"));
            for key in ["title", "version", "description", "websiteUrl", "icons"] {
                assert_eq!(info[key], card[key], "{path} {key}");
            }
        }
        assert_eq!(server_info(&cfg, "/eng")["title"], "Engineering");
    }

    #[test]
    fn identifiers_read_the_publisher_as_a_domain() {
        assert_eq!(identifier("com.example/weather"), "urn:air:example.com:mcp:weather");
        assert_eq!(identifier("local.mcpgate/mcpgate"), "urn:air:mcpgate.local:mcp:mcpgate");
    }
}
