//! The network plumbing every part that talks HTTP shares: the HTTP client (connection pooling,
//! HTTP/1.1 and h2 over rustls with the aws-lc-rs provider), used for upstreams, JWKS, OAuth token
//! endpoints and the OTLP exporter alike, [`HttpClients`] (one pool per thread, so a worker's
//! upstream connections are driven by the thread that serves its calls), and PEM loading for
//! certificates, keys and root stores (the listener's TLS and upstreams' own CAs and client
//! certificates).

pub mod pem;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Weak};
use std::time::Duration;

pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// How long an idle pooled connection to an upstream is kept.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// Idle keep-alive connections kept per upstream host, per thread: enough for the calls a worker
/// has in progress at once, without holding hundreds of sockets for a burst long past.
const POOL_IDLE_PER_HOST: usize = 256;

/// An HTTP client with its own connection pool: HTTP/1.1 and h2 (ALPN), system roots with the
/// bundled Mozilla roots as a fallback. For a client shared across threads (token endpoints,
/// JWKS, the exporter); upstream calls use [`HttpClients`].
pub fn new_http_client() -> HttpClient {
    HttpClients::new().detached()
}

/// A client for upstreams with their own TLS settings: their CA instead of the system roots,
/// and a client certificate (mTLS).
pub fn new_http_client_tls(tls: &mcpgate_config::UpstreamTls) -> Result<HttpClient, pem::TlsError> {
    Ok(HttpClients::with_tls(tls)?.detached())
}

/// A family of HTTP clients with one TLS setup and one connection pool per thread. The gateway
/// serves each client connection on one worker thread (a runtime per worker); when that thread
/// calls an upstream through [`HttpClients::get`], the pooled connection it uses was opened, and
/// is driven, by the same thread, so a call never waits on a wake-up of another thread. Cheap to
/// clone (the clones share the family).
#[derive(Clone)]
pub struct HttpClients(Arc<Family>);

struct Family {
    connector: HttpsConnector<HttpConnector>,
}

thread_local! {
    /// This thread's client of each family it has used (few: the default setup and the
    /// upstreams with their own TLS settings). Entries of families that are gone are pruned
    /// when another is added.
    static PER_THREAD: RefCell<Vec<(Weak<Family>, Rc<HttpClient>)>> = const { RefCell::new(Vec::new()) };
}

impl Default for HttpClients {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpClients {
    /// System roots, with the bundled Mozilla roots when the system has none usable.
    pub fn new() -> HttpClients {
        let builder = match hyper_rustls::HttpsConnectorBuilder::new().with_native_roots() {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "no usable system root certificates; using the bundled Mozilla roots");
                hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots()
            }
        };
        let connector = builder.https_or_http().enable_http1().enable_http2().wrap_connector(plain_connector());
        HttpClients(Arc::new(Family { connector }))
    }

    /// An upstream's own TLS settings: its CA instead of the system roots, and a client
    /// certificate (mTLS).
    pub fn with_tls(tls: &mcpgate_config::UpstreamTls) -> Result<HttpClients, pem::TlsError> {
        use pem::{certs, key, roots};
        let roots = match &tls.ca {
            Some(ca) => roots(ca)?,
            None => {
                let mut store = rustls::RootCertStore::empty();
                for c in rustls_native_certs::load_native_certs().certs {
                    let _ = store.add(c);
                }
                store
            }
        };
        let builder = rustls::ClientConfig::builder_with_provider(pem::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| pem::TlsError::Rejected { setting: "upstream.tls", reason: e.to_string() })?
            .with_root_certificates(roots);
        let config = match &tls.cert {
            Some((cert, k)) => builder
                .with_client_auth_cert(certs(cert)?, key(k)?)
                .map_err(|e| pem::TlsError::Rejected { setting: "upstream.tls", reason: e.to_string() })?,
            None => builder.with_no_client_auth(),
        };
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(plain_connector());
        Ok(HttpClients(Arc::new(Family { connector })))
    }

    /// This thread's client of the family (made on first use).
    pub fn get(&self) -> HttpClient {
        self.with(HttpClient::clone)
    }

    /// Runs `f` with this thread's client of the family, without cloning it (the call path:
    /// `clients.with(|c| c.request(req))`).
    pub fn with<R>(&self, f: impl FnOnce(&HttpClient) -> R) -> R {
        let me = Arc::as_ptr(&self.0);
        // An `Rc` clone (no atomics), so `f` runs with the thread's list released.
        let found =
            PER_THREAD.with(|cell| cell.borrow().iter().find(|(family, _)| std::ptr::eq(family.as_ptr(), me)).map(|(_, c)| c.clone()));
        let client = found.unwrap_or_else(|| {
            let c = Rc::new(self.detached());
            PER_THREAD.with(|cell| {
                let mut clients = cell.borrow_mut();
                clients.retain(|(family, _)| family.strong_count() > 0);
                clients.push((Arc::downgrade(&self.0), c.clone()));
            });
            c
        });
        f(&client)
    }

    /// A client of the family with a pool of its own, not tied to a thread.
    pub fn detached(&self) -> HttpClient {
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_max_idle_per_host(POOL_IDLE_PER_HOST)
            .pool_timer(TokioTimer::new())
            .build(self.0.connector.clone())
    }
}

/// The TCP connector under TLS: no Nagle delay, a bounded connect.
fn plain_connector() -> HttpConnector {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    http
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_keeps_its_client_and_families_that_are_gone_are_pruned() {
        let a = HttpClients::new();
        let b = HttpClients::new();
        let _ = (a.get(), b.get(), a.get());
        assert_eq!(PER_THREAD.with(|c| c.borrow().len()), 2, "one client per family on this thread");
        drop(b);
        let c = HttpClients::new();
        let _ = c.get();
        assert_eq!(PER_THREAD.with(|c| c.borrow().len()), 2, "the client of a family that is gone was pruned");
        let other = std::thread::spawn(move || {
            let _ = a.get();
            PER_THREAD.with(|c| c.borrow().len())
        });
        assert_eq!(other.join().ok(), Some(1), "another thread has clients of its own");
    }
}
