//! HTTPS on the listener (rustls, the one aws-lc-rs crypto provider): the certificate chain and
//! key from PEM files, HTTP/2 and HTTP/1.1 offered by ALPN, and, with `client_ca`, client
//! certificates required and checked against that CA (mTLS). The files are checked every few
//! seconds and re-read when they change (a renewed certificate needs no restart); a bad new pair
//! is logged and the previous one keeps serving.

use arc_swap::ArcSwap;
use mcpgate_config::ListenerTls;
use mcpgate_net::http::pem::{TlsError, certs, key, provider, roots};
use rustls::server::WebPkiClientVerifier;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio_rustls::TlsAcceptor;

/// How often the certificate files are checked for changes.
const CHECK_EVERY: Duration = Duration::from_secs(2);

pub struct Listener {
    cfg: ListenerTls,
    current: ArcSwap<rustls::ServerConfig>,
    stamp: Mutex<Vec<Option<SystemTime>>>,
}

fn build(cfg: &ListenerTls) -> Result<rustls::ServerConfig, TlsError> {
    let rejected = |reason: String| TlsError::Rejected { setting: "server.tls", reason };
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| rejected(e.to_string()))?;
    let builder = match &cfg.client_ca {
        Some(ca) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider())
                .build()
                .map_err(|e| TlsError::Unreadable { path: ca.clone(), reason: e.to_string() })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs(&cfg.cert)?, key(&cfg.key)?).map_err(|e| rejected(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

fn stamps(cfg: &ListenerTls) -> Vec<Option<SystemTime>> {
    [Some(&cfg.cert), Some(&cfg.key), cfg.client_ca.as_ref()]
        .into_iter()
        .flatten()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

impl Listener {
    pub fn load(cfg: &ListenerTls) -> Result<Arc<Listener>, TlsError> {
        let config = build(cfg)?;
        Ok(Arc::new(Listener { cfg: cfg.clone(), current: ArcSwap::from_pointee(config), stamp: Mutex::new(stamps(cfg)) }))
    }

    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.load_full())
    }

    /// Re-reads the files when they change, for as long as the listener lives (and `owner` runs).
    pub fn keep_fresh(self: Arc<Self>, owner: &mcpgate_protocol::tasks::Background) {
        let me = Arc::downgrade(&self);
        owner.spawn(async move {
            loop {
                tokio::time::sleep(CHECK_EVERY).await;
                let Some(me) = me.upgrade() else { return };
                me.reload_if_changed();
            }
        });
    }

    fn reload_if_changed(&self) {
        let now = stamps(&self.cfg);
        {
            let mut seen = mcpgate_protocol::sync::lock(&self.stamp);
            if *seen == now {
                return;
            }
            *seen = now;
        }
        match build(&self.cfg) {
            Ok(config) => {
                self.current.store(Arc::new(config));
                tracing::info!(cert = %self.cfg.cert.display(), "TLS certificate reloaded");
            }
            Err(e) => tracing::warn!(error = %e, "the new TLS certificate or key is not usable; the previous one keeps serving"),
        }
    }
}
