//! Per-user upstream identity (docs/auth-and-policy.md, "Each caller as themselves"): the gateway
//! as an OAuth 2.1 client of protected upstreams, on behalf of each caller. This module owns the
//! parts every flow shares and that do not move bytes themselves: reading an upstream's
//! `WWW-Authenticate` challenge (`challenge`), where its protected-resource and authorization-server
//! metadata live and what makes that metadata acceptable (`discovery`), PKCE (`pkce`), which URLs
//! learnt from an upstream or an authorization server the gateway may fetch at all (`reach`), the
//! started authorizations between consent page and redirect (`flow`), each caller's tokens, sealed
//! at rest (`vault`), the guarded HTTP requests for metadata, registration and tokens (`client`),
//! when a request with a credential or a DPoP proof is sent again, for token endpoints and
//! upstreams alike (`exchange`), and the engine that puts them together for the request path and
//! the consent pages (`service`).

pub mod assertion;
pub mod challenge;
pub mod client;
pub mod connect;
pub mod discovery;
pub mod dpop;
pub mod exchange;
pub mod flow;
pub mod pkce;
pub mod reach;
pub mod service;
pub mod single;
pub mod vault;

/// A loopback HTTP server for the identity tests: it answers paths with canned (status, headers,
/// body), as an authorization server or a protected resource would, and records each request.
#[cfg(test)]
pub(crate) mod testserver {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    pub type Route = (&'static str, u16, Vec<(&'static str, String)>, String);
    type Answer = (u16, Vec<(&'static str, String)>, String);

    /// Serves the routes `routes` gives for the server's base URL; returns the base and the log.
    pub async fn server(routes: impl FnOnce(&str) -> Vec<Route>) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let routes = routes(&base);
        let routes: HashMap<&str, Answer> = routes.into_iter().map(|(p, s, h, b)| (p, (s, h, b))).collect();
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                // The head, then as much body as its content-length says.
                let mut buf = Vec::new();
                let mut chunk = vec![0u8; 16384];
                loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some(end) = text.find("\r\n\r\n") else {
                        if n == 0 {
                            break;
                        }
                        continue;
                    };
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if n == 0 || buf.len() >= end + 4 + length {
                        break;
                    }
                }
                let text = String::from_utf8_lossy(&buf).to_string();
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                log.lock().unwrap().push(text);
                let (status, headers, body) = routes.get(path.as_str()).cloned().unwrap_or((404, vec![], String::new()));
                let mut head = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
                for (k, v) in headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                let _ = sock.write_all(format!("{head}\r\n{body}").as_bytes()).await;
            }
        });
        (base, seen)
    }
}
