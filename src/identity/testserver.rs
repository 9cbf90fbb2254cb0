//! A loopback HTTP server for the identity tests: it answers paths with canned (status, headers,
//! body), as an authorization server or a protected resource would, and records each request.

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
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
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
