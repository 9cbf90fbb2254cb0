//! Per-user upstream identity (docs/auth-and-policy.md, "Each caller as themselves"): the gateway
//! as an OAuth 2.1 client of protected upstreams, on behalf of each caller. This module owns the
//! parts every flow shares and that do not move bytes themselves: reading an upstream's
//! `WWW-Authenticate` challenge (`challenge`), where its protected-resource and authorization-server
//! metadata live and what makes that metadata acceptable (`discovery`), PKCE (`pkce`), which URLs
//! learnt from an upstream or an authorization server the gateway may fetch at all (`guard`), the
//! started authorizations between consent page and redirect (`flow`), each caller's tokens, sealed
//! at rest (`vault`), the guarded HTTP requests for metadata, registration and tokens (`client`),
//! and the engine that puts them together for the request path and the consent pages (`service`).

pub mod challenge;
pub mod client;
pub mod connect;
pub mod discovery;
pub mod flow;
pub mod guard;
pub mod pkce;
pub mod service;
pub mod vault;

#[cfg(test)]
mod testserver;
