//! Building the per-user identity engine from the configuration: the protected upstreams, the
//! vault (the state database, the cluster's Redis, or the legacy file), the started
//! authorizations, and where JWT callers sign in.

use super::*;
/// Where JWT callers sign in on a consent page: their issuer, asked for a token to the gateway's
/// resource (`[auth] resource`, else the first audience that is a URL, else the public URL's
/// `/mcp`), with the scopes every request needs.
fn sign_in_at(config: &mcpgate_config::Config, public_url: &str) -> Option<crate::identity::service::SignInAt> {
    let jwt = config.auth.jwt.as_ref().filter(|_| config.auth.mode == mcpgate_config::auth::AuthMode::Jwt)?;
    let resource = config
        .auth
        .resource
        .clone()
        .or_else(|| jwt.audiences.iter().find(|a| a.starts_with("https://") || a.starts_with("http://")).cloned())
        .unwrap_or_else(|| format!("{public_url}{}", config.server.path));
    let scope = Some(config.auth.required_scopes.join(" ")).filter(|s| !s.is_empty());
    Some(crate::identity::service::SignInAt { issuer: jwt.issuer.clone(), resource, scope })
}

/// The identity engine for a configuration with `[identity]`, or `None` without.
pub(in crate::gateway) fn identity(
    config: &mcpgate_config::Config,
    sealer: &Arc<mcpgate_model::token::Sealer>,
    cluster: Option<&Arc<mcpgate_net::cluster::Cluster>>,
    db: Option<&Arc<mcpgate_store::Db>>,
    tasks: &mcpgate_protocol::tasks::Background,
) -> Result<Option<Identity>, crate::gateway::StartError> {
    use crate::identity::{client::OAuthHttp, discovery, flow::Flows, reach::Rules, service, vault::Vault};
    let exchange_only = config.upstreams.iter().any(|u| u.user_auth.as_ref().is_some_and(|a| a.exchange));
    let fallback;
    let ic = match &config.identity {
        Some(ic) => ic,
        // Token exchange needs no consent pages: nothing is public, and nothing is kept.
        None if exchange_only => {
            fallback = mcpgate_config::identity::IdentityConfig {
                public_url: String::new(),
                vault: std::path::PathBuf::new(),
                allow_loopback: false,
                client_metadata_url: None,
            };
            &fallback
        }
        None => return Ok(None),
    };
    let mut protected = Vec::new();
    for u in &config.upstreams {
        let Some(ua) = &u.user_auth else { continue };
        // The resource a caller's token is for: the MCP URL, or a REST API's base URL.
        let url = match &u.transport {
            mcpgate_config::TransportConfig::Http { endpoints } => endpoints.first().map(|e| e.url.to_string()),
            mcpgate_config::TransportConfig::OpenApi(o) => o.base_url.as_ref().map(|b| b.to_string()),
            mcpgate_config::TransportConfig::Stdio { .. } => None,
        };
        let Some(url) = url else { continue };
        let resource = discovery::canonical_resource(&url)
            .ok_or_else(|| crate::gateway::StartError::Identity(format!("upstream '{}': {url} has no canonical resource URI", u.id)))?;
        protected.push(service::Protected {
            upstream: u.id.clone(),
            resource,
            client_id: ua.client_id.clone(),
            client_issuer: ua.issuer.clone(),
            client_secret: ua.client_secret.clone(),
            secret_in_body: ua.secret_in_body,
            scopes: ua.scopes.clone(),
            exchange: ua.exchange,
            api_key: ua.api_key.clone(),
            id_jag: ua.id_jag.clone(),
        });
    }
    // Replicas share the vault and the started authorizations through a shared state database
    // (PostgreSQL), else through the cluster's Redis; one gateway keeps them in its own database.
    let db = db.filter(|d| d.shared() || cluster.is_none());
    let vault = match (db, cluster, &config.identity) {
        (_, _, None) => Vault::in_memory(sealer.clone()),
        (Some(db), _, Some(_)) => {
            let v = Vault::in_db(sealer.clone(), db.clone(), &ic.vault).map_err(|e| crate::gateway::StartError::Identity(e.to_string()))?;
            v.watch(tasks);
            v
        }
        (None, Some(c), Some(_)) => Vault::shared(sealer.clone(), c.clone(), tasks),
        (None, None, Some(_)) => {
            Vault::open(sealer.clone(), ic.vault.clone()).map_err(|e| crate::gateway::StartError::Identity(e.to_string()))?
        }
    };
    let flows = match (db, cluster) {
        (Some(db), _) => Flows::in_db(db.clone(), sealer.clone()),
        (None, Some(c)) => Flows::shared(c.clone(), sealer.clone()),
        (None, None) => Flows::default(),
    };
    let settings = service::Settings {
        redirect_uri: ic.redirect_uri(),
        client_metadata_url: ic.client_metadata_url(),
        client_metadata_usable: ic.client_metadata_url().starts_with("https://"),
        consent_url: format!("{}/oauth/connect", ic.public_url),
        sign_in: sign_in_at(config, &ic.public_url),
    };
    let http = OAuthHttp::new(Rules { loopback: ic.allow_loopback });
    Ok(Some(Identity::new(settings, sealer.clone(), vault, http, protected).with_flows(flows)))
}
