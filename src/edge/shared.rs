//! What every connection of one listener shares (`Shared`: the request service, the gateway the
//! console shows, limits that count across worker threads, the origin policy, the certificate),
//! what a listener is given to serve (`Mount`), and the one authentication of a caller that every
//! page and the MCP endpoint go through (`authenticate`: a failure is the finished 401/403).

use crate::auth::{AuthError, Authenticator, Principal, prm};
use crate::dispatch::Service;
use crate::edge::conns::{Conns, InFlight};
use crate::edge::era::legacy::LegacyState;
use crate::edge::origin::OriginPolicy;
use crate::edge::render::{self, Body};
use http::{Request, Response};
use hyper::body::Incoming;
use mcpgate_config::ServerConfig;
use mcpgate_config::auth::AuthMode;
use mcpgate_protocol::errors::RpcError;
use mcpgate_protocol::tasks::Background;
use std::sync::Arc;

/// What a listener serves: the request service, the gateway behind it when there is one (the
/// console shows its state), the legacy session state, and the authenticator of a service that
/// has none of its own.
pub struct Mount {
    pub svc: Arc<dyn Service>,
    pub console: Option<Arc<crate::gateway::Gateway>>,
    pub legacy: Arc<LegacyState>,
    pub auth: Option<Arc<Authenticator>>,
}

pub(crate) struct Shared {
    pub(crate) svc: Arc<dyn Service>,
    pub(crate) console: Option<Arc<crate::gateway::Gateway>>,
    pub(crate) cfg: ServerConfig,
    pub(crate) origin: OriginPolicy,
    pub(crate) legacy: Arc<LegacyState>,
    pub(crate) auth: Option<Arc<Authenticator>>,
    pub(crate) conns: Conns,
    pub(crate) in_flight: InFlight,
    /// Owns what a reply runs on its own (a legacy client's bridged call, the console's feed).
    pub(crate) tasks: Background,
    /// The certificate when the listener is HTTPS (kept fresh from its files).
    pub(crate) tls: Option<Arc<crate::edge::tls::Listener>>,
}

impl Shared {
    /// What every connection of a listener shares (its limits count across worker threads);
    /// `local` is the listening address, for the Host and Origin check.
    pub(crate) fn new(local: std::net::SocketAddr, mount: Mount, cfg: ServerConfig) -> std::io::Result<Arc<Shared>> {
        let Mount { svc, console, legacy, auth } = mount;
        let origin = OriginPolicy::new(local, &cfg.allowed_origins, &cfg.allowed_hosts);
        let conns = Conns::new(cfg.max_connections);
        let in_flight = InFlight::new(cfg.max_in_flight, cfg.max_in_flight_per_caller);
        let tasks = Background::new();
        let tls = match &cfg.tls {
            Some(t) => {
                let t = crate::edge::tls::Listener::load(t).map_err(std::io::Error::other)?;
                t.clone().keep_fresh(&tasks);
                Some(t)
            }
            None => None,
        };
        Ok(Arc::new(Shared { svc, console, cfg, origin, legacy, auth, conns, in_flight, tasks, tls }))
    }

    /// The authenticator in effect: the service's (a reload may replace it), else the listener's.
    pub(crate) fn authenticator(&self) -> Option<Arc<Authenticator>> {
        self.svc.authenticator().or_else(|| self.auth.clone())
    }
}

/// Authenticates the caller; a failure is the finished 401/403 response (RFC 6750/9728).
pub(crate) async fn authenticate(
    st: &Shared,
    req: &Request<Incoming>,
    host: Option<&str>,
    path: &str,
) -> Result<Arc<Principal>, Box<Response<Body>>> {
    let Some(auth) = st.authenticator() else { return Ok(Principal::anonymous()) };
    match auth.authenticate(req.headers()).await {
        Ok(p) => Ok(p),
        Err(e) => {
            let metadata = (auth.mode() == AuthMode::Jwt)
                .then(|| prm::metadata_url(&prm::resource_at(auth.config(), host, &st.cfg.path, path, st.cfg.tls.is_some())));
            let (status, challenge) = auth.challenge(&e, metadata.as_deref());
            let message = match &e {
                AuthError::Missing => "Unauthorized: send Authorization: Bearer <credential>".to_string(),
                AuthError::Unauthorized(reason) => format!("Unauthorized: {reason}"),
                AuthError::InsufficientScope(s) => format!("Forbidden: insufficient scope (needs {})", s.join(" ")),
            };
            tracing::info!(%status, reason = %message, "refused a request");
            let err = RpcError::invalid_request(message).with_status(status).with_header("www-authenticate", challenge);
            Err(Box::new(render::error(None, &err)))
        }
    }
}
