//! OAuth 2.0 Protected Resource Metadata (RFC 9728) for the gateway's own endpoint: the document
//! served at `/.well-known/oauth-protected-resource` and at the path-specific form, and the URL
//! that 401/403 challenges point to.

use mcpgate_config::auth::AuthConfig;
use serde_json::json;

/// The canonical resource URI: `[auth] resource`, else derived from the request's Host.
pub fn resource(cfg: &AuthConfig, host: Option<&str>, path: &str, tls: bool) -> String {
    match &cfg.resource {
        Some(r) => r.clone(),
        // The Host header is client input: keep only characters a host:port can have.
        None => {
            let host: String =
                host.unwrap_or("127.0.0.1").chars().filter(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(*c)).take(255).collect();
            format!("{}://{host}{path}", if tls { "https" } else { "http" })
        }
    }
}

/// The resource identifier of the endpoint at `path`: the root's (`[auth] resource`, or this
/// host and `root`) with its path replaced by `path`, so each virtual server is its own resource.
pub fn resource_at(cfg: &AuthConfig, host: Option<&str>, root: &str, path: &str, tls: bool) -> String {
    let base = resource(cfg, host, root, tls);
    if path == root {
        return base;
    }
    match base.strip_suffix(root) {
        Some(origin) => format!("{origin}{path}"),
        None => format!("{}{path}", base.trim_end_matches('/')),
    }
}

/// Where the metadata document for `resource` lives (the path-specific well-known form).
pub fn metadata_url(resource: &str) -> String {
    match resource.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').map(|(a, p)| (a, format!("/{p}"))).unwrap_or((rest, String::new()));
            format!("{scheme}://{authority}/.well-known/oauth-protected-resource{}", path.trim_end_matches('/'))
        }
        None => format!("{resource}/.well-known/oauth-protected-resource"),
    }
}

pub fn document(cfg: &AuthConfig, resource: &str) -> serde_json::Value {
    let servers = if cfg.authorization_servers.is_empty() {
        cfg.jwt.iter().map(|j| j.issuer.clone()).collect()
    } else {
        cfg.authorization_servers.clone()
    };
    let mut doc = json!({
        "resource": resource,
        "authorization_servers": servers,
        "bearer_methods_supported": ["header"],
        "resource_name": "mcpgate",
    });
    let scopes: Vec<&String> = cfg.scopes_supported.iter().filter(|s| *s != "offline_access").collect();
    if !scopes.is_empty() {
        doc["scopes_supported"] = json!(scopes);
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_follow_rfc_9728() {
        assert_eq!(metadata_url("https://gw.example.com/mcp"), "https://gw.example.com/.well-known/oauth-protected-resource/mcp");
        assert_eq!(metadata_url("https://gw.example.com"), "https://gw.example.com/.well-known/oauth-protected-resource");
        assert_eq!(metadata_url("http://127.0.0.1:8811/mcp/"), "http://127.0.0.1:8811/.well-known/oauth-protected-resource/mcp");
    }
}
