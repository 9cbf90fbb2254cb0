//! Where a protected upstream's authorization metadata lives and what makes it acceptable (MCP
//! basic/authorization; docs/auth-and-policy.md, "Each caller as themselves"): the
//! protected-resource metadata (RFC 9728) found from the challenge's `resource_metadata` or the
//! well-known URLs, its `resource` matching the upstream; the authorization server's metadata
//! (RFC 8414, then OpenID Connect discovery, in the spec's order) with an `issuer` exactly the one
//! asked for, PKCE `S256` offered, and an authorization endpoint on its own origin unless it
//! promises `iss` (mix-up); and which scopes an authorization request asks for.

use super::challenge::Challenge;
use http::Uri;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    #[error("the URL {0:?} cannot be used: {1}")]
    Url(String, &'static str),
    #[error("the protected resource metadata names resource {found:?}, not {expected:?}")]
    ResourceMismatch { expected: String, found: String },
    #[error("the protected resource metadata names no authorization server")]
    NoAuthorizationServer,
    #[error("the authorization server metadata names issuer {found:?}, not {expected:?}")]
    IssuerMismatch { expected: String, found: String },
    #[error("the authorization server does not offer PKCE with S256 (code_challenge_methods_supported)")]
    NoPkce,
    #[error(
        "the authorization server {issuer} sends browsers to {endpoint}, another origin, without promising to name itself in its responses (RFC 9207 iss): refused as a possible mix-up"
    )]
    ForeignAuthorizationEndpoint { issuer: String, endpoint: String },
}

/// RFC 9728 protected-resource metadata (the members the gateway uses).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct ResourceMetadata {
    pub resource: String,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// RFC 9728 §2: the resource takes DPoP proofs of these algorithms, or requires bound tokens.
    #[serde(default)]
    pub dpop_signing_alg_values_supported: Option<Vec<String>>,
    #[serde(default)]
    pub dpop_bound_access_tokens_required: Option<bool>,
}

/// RFC 8414 / OpenID Connect authorization-server metadata (the members the gateway uses).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct ServerMetadata {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub client_id_metadata_document_supported: Option<bool>,
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: Option<bool>,
    /// RFC 9449 §5.1: the proof algorithms the server takes; where ES256 is one, tokens are
    /// asked for bound to a key of the gateway's.
    #[serde(default)]
    pub dpop_signing_alg_values_supported: Option<Vec<String>>,
}

impl ResourceMetadata {
    /// Accepts the document for `resource` (the upstream's canonical URI): its `resource` must be
    /// that URI or one that contains it, on the same origin, whole path segments (RFC 9728 §3.3
    /// and the MCP spec: a server at `https://h/mcp` may be protected as `https://h`), against
    /// impersonation; and it must name an authorization server.
    pub fn check(&self, resource: &str) -> Result<(), DiscoveryError> {
        let covers = canonical_resource(&self.resource).is_some_and(|declared| {
            resource == declared
                || resource.strip_prefix(declared.as_str()).is_some_and(|rest| rest.starts_with('/') || rest.starts_with('?'))
        });
        if !covers {
            return Err(DiscoveryError::ResourceMismatch { expected: resource.into(), found: self.resource.clone() });
        }
        if self.authorization_servers.is_empty() {
            return Err(DiscoveryError::NoAuthorizationServer);
        }
        Ok(())
    }
}

impl ServerMetadata {
    /// Accepts the document fetched for `issuer`: the same issuer, character for character
    /// (RFC 8414 §3.3), and PKCE `S256` offered (the MCP spec: refuse to proceed otherwise).
    pub fn check(&self, issuer: &str) -> Result<(), DiscoveryError> {
        if self.issuer != issuer {
            return Err(DiscoveryError::IssuerMismatch { expected: issuer.into(), found: self.issuer.clone() });
        }
        if !self.code_challenge_methods_supported.as_ref().is_some_and(|m| m.iter().any(|x| x == "S256")) {
            return Err(DiscoveryError::NoPkce);
        }
        // Mix-up (RFC 9700 §4.4): a server whose metadata sends the browser to another origin's
        // authorization endpoint could be pointing at an honest server, to receive its codes. Such
        // metadata is taken only from a server that promises `iss` in its responses (RFC 9207),
        // which then must name it, so another server's response is refused.
        if origin_of(&self.authorization_endpoint) != origin_of(issuer) && self.authorization_response_iss_parameter_supported != Some(true)
        {
            return Err(DiscoveryError::ForeignAuthorizationEndpoint {
                issuer: issuer.into(),
                endpoint: self.authorization_endpoint.clone(),
            });
        }
        Ok(())
    }
}

/// The `scheme://host:port` of a URL (lower-cased), or `None`.
fn origin_of(url: &str) -> Option<String> {
    url::Url::parse(url).ok().map(|u| u.origin().ascii_serialization()).filter(|o| o != "null")
}

/// The canonical URI of a resource (RFC 8707 §2, the MCP spec): scheme and host lower-cased, no
/// fragment, no default port, and no trailing slash on an empty path; `None` when it is not an
/// absolute http(s) URI.
pub fn canonical_resource(url: &str) -> Option<String> {
    let uri: Uri = url.split('#').next()?.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return None;
    }
    let host = uri.host()?.to_ascii_lowercase();
    let port = match (uri.port_u16(), scheme.as_str()) {
        (Some(443), "https") | (Some(80), "http") | (None, _) => String::new(),
        (Some(p), _) => format!(":{p}"),
    };
    let path_query = uri.path_and_query().map(|p| p.as_str()).unwrap_or("");
    let path_query = if path_query == "/" { "" } else { path_query };
    Some(format!("{scheme}://{host}{port}{path_query}"))
}

/// The well-known URLs of a resource's protected-resource metadata (RFC 9728 §3.1), in the
/// order the MCP spec tries them: with the resource's path inserted, then at the root.
pub fn resource_metadata_urls(resource: &str) -> Result<Vec<String>, DiscoveryError> {
    let (origin, path) = split(resource)?;
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(format!("{origin}/.well-known/oauth-protected-resource{path}"));
    }
    urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
    Ok(urls)
}

/// The URLs of an issuer's metadata, in the MCP spec's order: for an issuer with a path, OAuth
/// (path inserted), OpenID Connect (path inserted), OpenID Connect (path appended); without one,
/// OAuth then OpenID Connect.
pub fn server_metadata_urls(issuer: &str) -> Result<Vec<String>, DiscoveryError> {
    let (origin, path) = split(issuer)?;
    Ok(if path.is_empty() {
        vec![format!("{origin}/.well-known/oauth-authorization-server"), format!("{origin}/.well-known/openid-configuration")]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    })
}

/// 2025-03-26 authorization, for a server that publishes no protected-resource metadata: its
/// authorization base URL is its own origin (the path dropped), the metadata is looked for at
/// `<origin>/.well-known/oauth-authorization-server` only, and where there is none the default
/// endpoints `/authorize`, `/token` and `/register` are used. `None` for a URL without an origin.
pub fn legacy_base(resource: &str) -> Option<String> {
    origin_of(resource)
}

/// The endpoints a 2025-03-26 server without metadata has by default, under its origin `base`.
/// PKCE is required of every client by that revision, so `S256` is assumed.
pub fn legacy_defaults(base: &str) -> ServerMetadata {
    ServerMetadata {
        issuer: base.into(),
        authorization_endpoint: format!("{base}/authorize"),
        token_endpoint: format!("{base}/token"),
        registration_endpoint: Some(format!("{base}/register")),
        code_challenge_methods_supported: Some(vec!["S256".into()]),
        scopes_supported: None,
        token_endpoint_auth_methods_supported: None,
        client_id_metadata_document_supported: None,
        authorization_response_iss_parameter_supported: None,
        dpop_signing_alg_values_supported: None,
    }
}

/// The `scope` of an authorization request: the challenge's when it names any, else the
/// resource metadata's `scopes_supported`, else none (the parameter is left out).
pub fn scopes_to_request(challenge: Option<&Challenge>, resource: Option<&ResourceMetadata>) -> Option<String> {
    if let Some(c) = challenge.filter(|c| !c.scopes.is_empty()) {
        return Some(c.scopes.join(" "));
    }
    resource.and_then(|r| r.scopes_supported.as_ref()).filter(|s| !s.is_empty()).map(|s| s.join(" "))
}

/// The scopes of a step-up: what was granted and what the challenge asks for, each once.
pub fn step_up_scopes(granted: &str, challenge: &Challenge) -> String {
    let mut all: Vec<&str> = granted.split_ascii_whitespace().collect();
    for s in &challenge.scopes {
        if !all.contains(&s.as_str()) {
            all.push(s);
        }
    }
    all.join(" ")
}

/// `https://host[:port]` and the path (no trailing slash, no query) of an absolute URL.
fn split(url: &str) -> Result<(String, String), DiscoveryError> {
    let uri: Uri = url.parse().map_err(|_| DiscoveryError::Url(url.into(), "not a URL"))?;
    let scheme = uri.scheme_str().ok_or(DiscoveryError::Url(url.into(), "not absolute"))?;
    let authority = uri.authority().ok_or(DiscoveryError::Url(url.into(), "no host"))?;
    let path = uri.path().trim_end_matches('/').to_string();
    Ok((format!("{scheme}://{authority}"), path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_follow_the_spec_order() {
        assert_eq!(
            resource_metadata_urls("https://mcp.example.com/public/mcp").unwrap(),
            [
                "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
                "https://mcp.example.com/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            resource_metadata_urls("https://mcp.example.com/").unwrap(),
            ["https://mcp.example.com/.well-known/oauth-protected-resource"]
        );
        assert_eq!(
            server_metadata_urls("https://auth.example.com/tenant1").unwrap(),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            server_metadata_urls("https://auth.example.com").unwrap(),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration"
            ]
        );
        assert!(server_metadata_urls("not a url").is_err());
    }

    #[test]
    fn resources_are_compared_in_canonical_form() {
        assert_eq!(canonical_resource("HTTPS://MCP.Example.com:443/mcp#x").as_deref(), Some("https://mcp.example.com/mcp"));
        assert_eq!(canonical_resource("https://mcp.example.com/").as_deref(), Some("https://mcp.example.com"));
        assert_eq!(canonical_resource("http://127.0.0.1:8080/mcp").as_deref(), Some("http://127.0.0.1:8080/mcp"));
        assert_eq!(canonical_resource("ftp://x/y"), None);
        let prm = |resource: &str| ResourceMetadata {
            resource: resource.into(),
            authorization_servers: vec!["https://as.example.com".into()],
            scopes_supported: None,
            dpop_signing_alg_values_supported: None,
            dpop_bound_access_tokens_required: None,
        };
        assert!(prm("https://MCP.example.com/mcp").check("https://mcp.example.com/mcp").is_ok());
        assert!(prm("https://mcp.example.com").check("https://mcp.example.com/mcp").is_ok(), "the origin covers its paths");
        assert!(prm("https://mcp.example.com/").check("https://mcp.example.com/mcp").is_ok());
        for other in
            ["https://mcp.example.com/m", "https://mcp.example.com/other", "https://mcp.example.com:8443/mcp", "http://mcp.example.com/mcp"]
        {
            assert!(prm(other).check("https://mcp.example.com/mcp").is_err(), "{other}");
        }
        assert!(matches!(
            prm("https://evil.example.com/mcp").check("https://mcp.example.com/mcp"),
            Err(DiscoveryError::ResourceMismatch { .. })
        ));
        let none = ResourceMetadata { authorization_servers: vec![], ..prm("https://mcp.example.com/mcp") };
        assert_eq!(none.check("https://mcp.example.com/mcp"), Err(DiscoveryError::NoAuthorizationServer));
    }

    #[test]
    fn server_metadata_needs_the_same_issuer_and_s256() {
        let md = |issuer: &str, methods: Option<Vec<&str>>| ServerMetadata {
            issuer: issuer.into(),
            authorization_endpoint: "https://as.example.com/authorize".into(),
            token_endpoint: "https://as.example.com/token".into(),
            registration_endpoint: None,
            code_challenge_methods_supported: methods.map(|m| m.into_iter().map(String::from).collect()),
            scopes_supported: None,
            token_endpoint_auth_methods_supported: None,
            client_id_metadata_document_supported: None,
            authorization_response_iss_parameter_supported: None,
            dpop_signing_alg_values_supported: None,
        };
        assert!(md("https://as.example.com", Some(vec!["S256"])).check("https://as.example.com").is_ok());
        assert!(matches!(
            md("https://as.example.com/", Some(vec!["S256"])).check("https://as.example.com"),
            Err(DiscoveryError::IssuerMismatch { .. })
        ));
        assert_eq!(md("https://as.example.com", Some(vec!["plain"])).check("https://as.example.com"), Err(DiscoveryError::NoPkce));
        assert_eq!(md("https://as.example.com", None).check("https://as.example.com"), Err(DiscoveryError::NoPkce));
    }

    #[test]
    fn a_2025_03_26_server_is_its_own_authorization_server_at_its_origin() {
        assert_eq!(legacy_base("https://MCP.example.com:8443/v1/mcp?x=1").as_deref(), Some("https://mcp.example.com:8443"));
        assert_eq!(legacy_base("https://mcp.example.com:443/mcp").as_deref(), Some("https://mcp.example.com"));
        assert_eq!(legacy_base("not a url"), None);
        let md = legacy_defaults("https://mcp.example.com");
        assert_eq!(
            (md.authorization_endpoint.as_str(), md.token_endpoint.as_str(), md.registration_endpoint.as_deref()),
            ("https://mcp.example.com/authorize", "https://mcp.example.com/token", Some("https://mcp.example.com/register"))
        );
        assert!(md.check("https://mcp.example.com").is_ok(), "the defaults pass the checks metadata passes");
    }

    #[test]
    fn scopes_come_from_the_challenge_then_the_resource() {
        let c = Challenge { scopes: vec!["a".into(), "b".into()], ..Default::default() };
        let prm = ResourceMetadata {
            resource: "r".into(),
            authorization_servers: vec![],
            scopes_supported: Some(vec!["x".into()]),
            dpop_signing_alg_values_supported: None,
            dpop_bound_access_tokens_required: None,
        };
        assert_eq!(scopes_to_request(Some(&c), Some(&prm)).as_deref(), Some("a b"));
        assert_eq!(scopes_to_request(Some(&Challenge::default()), Some(&prm)).as_deref(), Some("x"));
        assert_eq!(scopes_to_request(None, None), None);
        assert_eq!(step_up_scopes("a c", &c), "a c b");
    }
}
