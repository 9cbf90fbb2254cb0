//! TLS (Part 8): a client reaches the gateway over HTTPS; the gateway reaches an upstream over
//! HTTPS with a custom CA and a client certificate (mTLS), the upstream being a second mcpgate
//! that requires one; a renewed listener certificate is picked up without a restart.

use crate::harness::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mcpgate_config::UpstreamTls;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

fn client(ca: &Path, cert: Option<(&Path, &Path)>) -> mcpgate_net::http::HttpClient {
    let tls = UpstreamTls { ca: Some(ca.to_path_buf()), cert: cert.map(|(c, k)| (c.to_path_buf(), k.to_path_buf())) };
    mcpgate_net::http::new_http_client_tls(&tls).expect("TLS client")
}

async fn list(client: &mcpgate_net::http::HttpClient, url: &str) -> Result<Value, String> {
    let params = json!({ "_meta": meta() });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params }).to_string();
    let mut b = http::Request::post(url);
    for (k, v) in modern_headers("tools/list", &params) {
        b = b.header(k, v);
    }
    let req = b.body(Full::new(Bytes::from(body))).map_err(|e| e.to_string())?;
    let resp = tokio::time::timeout(Duration::from_secs(10), client.request(req))
        .await
        .map_err(|_| "timeout".to_string())?
        .map_err(|e| format!("{e:?}"))?;
    let bytes = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

fn names(v: &Value) -> Vec<String> {
    v["result"]["tools"].as_array().map(|t| t.iter().filter_map(|t| t["name"].as_str().map(String::from)).collect()).unwrap_or_default()
}

async fn until_ready(client: &mcpgate_net::http::HttpClient, url: &str, want: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(v) = list(client, url).await {
            let n = names(&v);
            if n.iter().any(|x| x == want) || Instant::now() > deadline {
                return n;
            }
        } else if Instant::now() > deadline {
            return Vec::new();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn https_to_the_gateway_and_mtls_to_an_upstream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let made = std::process::Command::new(python()).arg(repo().join("tests/py/make_certs.py")).arg(d).status().expect("make certs");
    assert!(made.success());
    let p = |f: &str| d.join(f).display().to_string();
    // The upstream: an mcpgate that wants a client certificate from its CA.
    let upstream = gateway_listening(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[server.tls]\ncert = {:?}\nkey = {:?}\nclient_ca = {:?}\n\n[[upstream]]\nid = \"calc\"\ncommand = [\"mcpgate\", \"demo-server\"]\n",
        p("server.pem"),
        p("server-key.pem"),
        p("ca.pem")
    ));
    assert!(upstream.url.starts_with("https://"), "{}", upstream.url);
    let ca = d.join("ca.pem");
    let with_cert = client(&ca, Some((&d.join("client.pem"), &d.join("client-key.pem"))));
    assert!(until_ready(&with_cert, &upstream.url, "calc__add").await.contains(&"calc__add".to_string()));
    assert!(list(&client(&ca, None), &upstream.url).await.is_err(), "no client certificate, no service");
    // The gateway in front: HTTPS itself, mTLS to the upstream with the custom CA.
    let gw = gateway_listening(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[server.tls]\ncert = {:?}\nkey = {:?}\n\n[[upstream]]\nid = \"far\"\nurl = \"{}\"\n[upstream.tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n",
        p("server.pem"),
        p("server-key.pem"),
        upstream.url,
        p("ca.pem"),
        p("client.pem"),
        p("client-key.pem")
    ));
    let trusting = client(&ca, None);
    let tools = until_ready(&trusting, &gw.url, "far__calc__add").await;
    assert!(tools.contains(&"far__calc__add".to_string()), "{tools:?}\n{}", gw.proc.log());
    assert!(list(&mcpgate_net::http::new_http_client(), &gw.url).await.is_err(), "a client that does not trust the CA refuses it");
    // A renewed certificate (from another CA here) is picked up without a restart.
    let other = client(&d.join("other-ca.pem"), None);
    assert!(list(&other, &gw.url).await.is_err());
    std::fs::copy(d.join("other-server.pem"), d.join("server.pem")).expect("copy");
    std::fs::copy(d.join("other-server-key.pem"), d.join("server-key.pem")).expect("copy");
    let deadline = Instant::now() + Duration::from_secs(10);
    while list(&other, &gw.url).await.is_err() {
        assert!(Instant::now() < deadline, "the new certificate was not picked up\n{}", gw.proc.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(gw.proc.log().contains("TLS certificate reloaded"));
}
