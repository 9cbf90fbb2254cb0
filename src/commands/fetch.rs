//! Bounded fetches of the public documents discovery is made of (an AI Catalog, Server Cards, a
//! registry's server list), for `mcpgate import --discover/--registry` and `mcpgate check`'s card
//! verification. Every document is fetched with the gateway's HTTP client, under a deadline and a
//! size limit, as JSON; redirects are followed by hand, at most [`MAX_REDIRECTS`], and only within
//! the same origin (scheme, host and port). What the importer reads comes from URLs that documents
//! name, so [`Fetcher::starting_at`] lets through `https` only, and `http` to a loopback host only
//! when the address the operator gave is itself on loopback (development and tests).

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Full, Limited};
use mcpgate_net::http::HttpClient;
use serde_json::Value;
use std::time::Duration;

/// The largest document read (a catalog, a card, one page of a registry's list).
pub const MAX_DOCUMENT: usize = 1024 * 1024;
/// How long one request may take, body included.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// Redirects followed (within one origin) before giving up.
pub const MAX_REDIRECTS: usize = 3;

/// Why a document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{0}: not an absolute http or https URL")]
    Malformed(String),
    #[error("{0}: only https URLs are fetched (http only to a loopback host, when the address you gave is one)")]
    Scheme(String),
    #[error("{url}: no answer within {} s", DEADLINE.as_secs())]
    Timeout { url: String },
    #[error("{url}: unreachable: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    #[error("{url}: redirected to {to}, another origin, which is not followed")]
    OtherOrigin { url: String, to: String },
    #[error("{url}: more than {MAX_REDIRECTS} redirects")]
    Redirects { url: String },
    #[error("{url}: HTTP {status}")]
    Status { url: String, status: StatusCode },
    #[error("{url}: answered with an event stream, not a document")]
    Stream { url: String },
    #[error("{url}: the document is larger than {MAX_DOCUMENT} bytes")]
    TooLarge { url: String },
    #[error("{url}: the body could not be read: {reason}")]
    Body { url: String, reason: String },
    #[error("{url}: not JSON: {source}")]
    NotJson {
        url: String,
        #[source]
        source: serde_json::Error,
    },
}

/// A document that was read: where it finally came from, its `Content-Type`, and its JSON.
#[derive(Debug)]
pub struct Document {
    pub url: url::Url,
    pub content_type: String,
    pub json: Value,
}

/// Fetches documents under one set of rules.
pub struct Fetcher {
    client: HttpClient,
    /// `http` to loopback hosts is allowed.
    loopback: bool,
    /// Any http(s) URL is allowed (the operator's own configured upstreams).
    any: bool,
}

impl Fetcher {
    /// For what the importer reads, starting at `start` (the address the operator gave): `https`
    /// only, or `http` to loopback when `start` is itself on loopback. `start` must pass too.
    pub fn starting_at(start: &str) -> Result<(Fetcher, url::Url), FetchError> {
        let url = parse(start)?;
        let fetcher = Fetcher { client: mcpgate_net::http::new_http_client(), loopback: is_loopback(&url), any: false };
        fetcher.allowed(&url)?;
        Ok((fetcher, url))
    }

    /// For URLs the operator configured (an upstream's own): any http or https URL, with
    /// `client` (the upstream's TLS settings).
    pub fn trusting(client: HttpClient) -> Fetcher {
        Fetcher { client, loopback: true, any: true }
    }

    /// Whether the rules let `url` be fetched.
    pub fn allowed(&self, url: &url::Url) -> Result<(), FetchError> {
        match url.scheme() {
            _ if url.host_str().is_none_or(str::is_empty) => Err(FetchError::Malformed(url.to_string())),
            "https" => Ok(()),
            "http" if self.any || (self.loopback && is_loopback(url)) => Ok(()),
            "http" => Err(FetchError::Scheme(url.to_string())),
            _ => Err(FetchError::Malformed(url.to_string())),
        }
    }

    /// Whether `http` to loopback hosts is allowed (the start was on loopback).
    pub fn on_loopback(&self) -> bool {
        self.loopback
    }

    /// GETs `url` as JSON, asking for `accept`; `None` for a 404 or a 410 (nothing there).
    pub async fn get_json(&self, url: &url::Url, accept: &str) -> Result<Option<Document>, FetchError> {
        let mut at = url.clone();
        for _ in 0..=MAX_REDIRECTS {
            self.allowed(&at)?;
            let req = http::Request::get(at.as_str())
                .header(http::header::ACCEPT, accept)
                .body(Full::new(Bytes::new()))
                .map_err(|_| FetchError::Malformed(at.to_string()))?;
            let shown = at.to_string();
            let resp = tokio::time::timeout(DEADLINE, self.client.request(req))
                .await
                .map_err(|_| FetchError::Timeout { url: shown.clone() })?
                .map_err(|source| FetchError::Unreachable { url: shown.clone(), source })?;
            let status = resp.status();
            if status.is_redirection() {
                let location = resp.headers().get(http::header::LOCATION).and_then(|v| v.to_str().ok()).unwrap_or("");
                let next = at.join(location).map_err(|_| FetchError::Malformed(location.to_string()))?;
                if next.origin() != at.origin() {
                    return Err(FetchError::OtherOrigin { url: shown, to: next.to_string() });
                }
                at = next;
                continue;
            }
            if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
                return Ok(None);
            }
            if !status.is_success() {
                return Err(FetchError::Status { url: shown, status });
            }
            let content_type =
                resp.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
            // A server that routes every path under its MCP endpoint there opens a stream that
            // never ends: not waited for.
            if content_type.starts_with("text/event-stream") {
                return Err(FetchError::Stream { url: shown });
            }
            let bytes = tokio::time::timeout(DEADLINE, Limited::new(resp.into_body(), MAX_DOCUMENT).collect())
                .await
                .map_err(|_| FetchError::Timeout { url: shown.clone() })?
                .map_err(|e| match e.downcast_ref::<http_body_util::LengthLimitError>() {
                    Some(_) => FetchError::TooLarge { url: shown.clone() },
                    None => FetchError::Body { url: shown.clone(), reason: e.to_string() },
                })?
                .to_bytes();
            let json = serde_json::from_slice(&bytes).map_err(|source| FetchError::NotJson { url: shown, source })?;
            return Ok(Some(Document { url: at, content_type, json }));
        }
        Err(FetchError::Redirects { url: url.to_string() })
    }
}

/// `text` as an absolute http(s) URL.
pub fn parse(text: &str) -> Result<url::Url, FetchError> {
    let url = url::Url::parse(text.trim()).map_err(|_| FetchError::Malformed(text.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(FetchError::Malformed(text.to_string()));
    }
    Ok(url)
}

/// Whether `url`'s host is a loopback one (`localhost`, 127.0.0.0/8, `::1`).
pub fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_anywhere_and_http_only_to_loopback_from_loopback() {
        let (public, _) = Fetcher::starting_at("https://example.com").expect("https");
        assert!(public.allowed(&parse("https://cards.example.net/x").expect("url")).is_ok());
        assert!(matches!(public.allowed(&parse("http://127.0.0.1:9/x").expect("url")), Err(FetchError::Scheme(_))));
        assert!(matches!(Fetcher::starting_at("http://example.com"), Err(FetchError::Scheme(_))));
        assert!(matches!(Fetcher::starting_at("file:///etc/passwd"), Err(FetchError::Malformed(_))));
        let (local, _) = Fetcher::starting_at("http://127.0.0.1:8000").expect("loopback");
        assert!(local.allowed(&parse("http://localhost:9/x").expect("url")).is_ok());
        assert!(matches!(local.allowed(&parse("http://10.0.0.1/x").expect("url")), Err(FetchError::Scheme(_))));
        assert!(Fetcher::trusting(mcpgate_net::http::new_http_client()).allowed(&parse("http://10.0.0.1/x").expect("url")).is_ok());
    }
}
