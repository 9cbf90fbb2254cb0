//! Per-user upstream identity (docs/auth-and-policy.md, "Each caller as themselves"): the gateway
//! as an OAuth 2.1 client of protected upstreams, on behalf of each caller. This module owns the
//! parts every flow shares and that do not move bytes themselves: reading an upstream's
//! `WWW-Authenticate` challenge (`challenge`), where its protected-resource and authorization-server
//! metadata live and what makes that metadata acceptable (`discovery`), PKCE (`pkce`), and which
//! URLs learnt from an upstream or an authorization server the gateway may fetch at all (`guard`).

pub mod challenge;
pub mod discovery;
pub mod guard;
pub mod pkce;
