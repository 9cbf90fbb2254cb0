//! The network plumbing every part that talks HTTP shares: the one HTTP client (connection
//! pooling, HTTP/1.1 and h2 over rustls with the aws-lc-rs provider), used for upstreams, JWKS,
//! OAuth token endpoints and the OTLP exporter alike, and PEM loading for certificates, keys and
//! root stores (the listener's TLS and upstreams' own CAs and client certificates).

pub mod pem;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The one upstream HTTP client: connection pooling, HTTP/1.1 and h2 (ALPN), system roots with
/// the bundled Mozilla roots as a fallback.
pub fn new_http_client() -> HttpClient {
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match builder.with_native_roots() {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "no usable system root certificates; using the bundled Mozilla roots");
            hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots()
        }
    };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    let connector = builder.https_or_http().enable_http1().enable_http2().wrap_connector(http);
    Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(90)).build(connector)
}

/// A client for upstreams with their own TLS settings: their CA instead of the system roots,
/// and a client certificate (mTLS).
pub fn new_http_client_tls(tls: &crate::config::UpstreamTls) -> Result<HttpClient, pem::TlsError> {
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
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(90)).build(connector))
}
