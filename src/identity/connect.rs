//! The HTTP client of per-user identity: its own connection pool, whose DNS resolver hands the
//! connector only addresses the SSRF guard allows (public ones; loopback ones too when the rules
//! allow loopback). The check and the connection use the same answer, so a name that resolves to
//! a public address for the check and a private one for the connection (DNS rebinding) cannot get
//! through, and no connection made for an authorization server is ever shared with upstream
//! traffic. Literal IP hosts never reach a resolver: [`super::reach::check_url`] checks them.

use super::reach::{Rules, is_public};
use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioExecutor;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

pub type GuardedClient = Client<HttpsConnector<HttpConnector<GuardedResolver>>, Full<Bytes>>;

/// Resolves names and keeps only the addresses the rules allow; none left is an error.
#[derive(Clone, Copy)]
pub struct GuardedResolver {
    rules: Rules,
}

impl tower::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let rules = self.rules;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = all.into_iter().filter(|a| allowed(rules, &host, a)).collect();
            if allowed.is_empty() {
                return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, format!("{host} resolves to no public address")));
            }
            Ok(allowed.into_iter())
        })
    }
}

/// Whether an address of `host` may be connected to.
fn allowed(rules: Rules, host: &str, addr: &SocketAddr) -> bool {
    is_public(addr.ip()) || (rules.loopback && addr.ip().is_loopback() && (host == "localhost" || host.parse::<std::net::IpAddr>().is_ok()))
}

/// A client whose connections go only where the rules allow.
pub fn guarded_client(rules: Rules) -> GuardedClient {
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match builder.with_native_roots() {
        Ok(b) => b,
        Err(_) => hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots(),
    };
    let mut http = HttpConnector::new_with_resolver(GuardedResolver { rules });
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    let connector = builder.https_or_http().enable_http1().enable_http2().wrap_connector(http);
    Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(90)).build(connector)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::Service;

    #[tokio::test]
    async fn names_resolving_to_private_addresses_are_not_connected_to() {
        let mut strict = GuardedResolver { rules: Rules::default() };
        let err = strict.call("localhost".parse::<Name>().expect("name")).await.expect_err("loopback refused");
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        let mut dev = GuardedResolver { rules: Rules { loopback: true } };
        let addrs: Vec<SocketAddr> = dev.call("localhost".parse::<Name>().expect("name")).await.expect("loopback allowed").collect();
        assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()));
    }
}
