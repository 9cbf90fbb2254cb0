//! What `mcpgate check` says about an upstream reached with each caller's own authorization
//! (`[upstream.user_auth]`): the discovery a caller's first call would run (protected-resource
//! metadata, the authorization server's metadata, in the spec's order), and, without registering
//! anything, how the gateway would be known to that server and authenticate at its token
//! endpoint — so a configuration that cannot work fails `check`, not a caller's first call.

use super::super::client::{ClientAuth, IdentityError, registration_method};
use super::super::discovery::ServerMetadata;
use super::{Identity, Protected};

impl Identity {
    /// Runs `upstream`'s discovery and describes what a caller will meet, one line each; `Err`:
    /// what stops callers from signing in.
    pub async fn explain(&self, upstream: &str) -> Result<Vec<String>, IdentityError> {
        let Some(p) = self.protected.get(upstream) else { return Ok(Vec::new()) };
        if let Some(k) = &p.api_key {
            return Ok(vec![format!("each caller enters an API key of their own once (a gateway page), sent in the {} header", k.header)]);
        }
        self.discover(upstream).await?;
        let Some(known) = mcpgate_protocol::sync::lock(&self.known)
            .get(upstream)
            .map(|k| (k.server.clone(), k.scope.clone(), k.resource.clone(), k.dpop))
        else {
            return Ok(vec!["no authorization discovered".into()]);
        };
        let (server, scope, resource, dpop) = known;
        let mut lines = vec![
            format!("resource {resource}, authorization server {}", server.issuer),
            format!("callers sign in at {}", server.authorization_endpoint),
            format!("scopes asked: {}", scope.as_deref().unwrap_or("(none named)")),
        ];
        if p.exchange {
            lines.push(format!("the caller's own token is exchanged at {} (no sign-in page)", p.client_issuer.as_deref().unwrap_or("?")));
        }
        lines.push(format!("the gateway is known as {}", self.client_plan(p, &server)?));
        if dpop {
            lines.push("tokens are bound to a key of the gateway's (DPoP)".into());
        }
        Ok(lines)
    }

    /// How the gateway would present itself to `server`, in [`Identity::client_for`]'s order and
    /// by its rules ([`client_at`](super::client_at), [`registration_method`]), without
    /// registering.
    fn client_plan(&self, p: &Protected, server: &ServerMetadata) -> Result<String, IdentityError> {
        if server.client_id_metadata_document_supported == Some(true) && self.settings.client_metadata_usable {
            return Ok(format!("its client metadata document {}", self.settings.client_metadata_url));
        }
        if p.client_issuer.as_deref() == Some(server.issuer.as_str())
            && let Some(auth) = p.configured_client(server)
        {
            let (id, how) = match &auth {
                ClientAuth::None { client_id } => (client_id, "a public client (no secret)"),
                ClientAuth::Post { client_id, .. } => (client_id, "client_secret_post"),
                ClientAuth::Basic { client_id, .. } => (client_id, "client_secret_basic, with client_id in the body too"),
                ClientAuth::Assertion { client_id, .. } => (client_id, "private_key_jwt"),
            };
            return Ok(format!("the configured client {id}; at the token endpoint: {how}"));
        }
        let Some(endpoint) = &server.registration_endpoint else {
            return Err(IdentityError::NoRegistration(server.issuer.clone()));
        };
        Ok(format!("a client it registers on first use at {endpoint} (token endpoint authentication: {})", registration_method(server)))
    }
}
