//! `mcpgate check`'s reading of the upstreams' Server Cards: each HTTP upstream that is ready and
//! reached with the gateway's own credentials is asked for `GET <url>/server-card` (the location
//! the Server Card extension reserves, `Accept: application/mcp-server-card+json`, no credentials:
//! a card is public), and a card it publishes is compared with what the upstream itself answered
//! (`server/discover`, or the legacy handshake): its name, version and title, and the protocol
//! versions of its remote. A card is advisory: where the two disagree, a line says so, and the
//! check does not fail. An upstream with no card (404, or anything that is not one) says nothing.

use crate::commands::fetch::Fetcher;
use crate::commands::import::shown;
use crate::discovery::card::CARD_TYPE;
use crate::gateway::Gateway;
use crate::upstream::{Status, Upstream, UpstreamState};
use mcpgate_config::TransportConfig;
use serde_json::Value;
use std::sync::Arc;

/// One line per upstream that publishes a card: that it agrees, or each disagreement.
pub async fn verify(gw: &Gateway) -> Vec<String> {
    let ups: Vec<Arc<Upstream>> = gw
        .live_upstreams()
        .into_iter()
        .filter(|u| !gw.is_personal(u.index) && u.state().status == Status::Ready && card_url(u).is_some())
        .collect();
    let cards = futures_util::future::join_all(ups.iter().map(|u| card_of(u))).await;
    let mut lines = Vec::new();
    for (up, card) in ups.iter().zip(cards) {
        let Some((at, card)) = card else { continue };
        let differences = compare(&card, &up.state());
        if differences.is_empty() {
            lines.push(format!("{}: its card ({at}) agrees with what it answers", up.id()));
        }
        lines.extend(differences.into_iter().map(|d| format!("{}: {d}", up.id())));
    }
    lines
}

/// `<url>/server-card` of an HTTP upstream's default endpoint.
fn card_url(up: &Upstream) -> Option<url::Url> {
    let TransportConfig::Http { endpoints } = &up.cfg.transport else { return None };
    let endpoint = endpoints.iter().find(|e| e.when.is_empty()).or(endpoints.first())?;
    let mut url = url::Url::parse(&endpoint.url.to_string()).ok()?;
    url.set_query(None);
    url.set_fragment(None);
    let path = format!("{}/server-card", url.path().trim_end_matches('/'));
    url.set_path(&path);
    Some(url)
}

/// The card `up` publishes, and where; `None` when it publishes none (or it cannot be read).
async fn card_of(up: &Upstream) -> Option<(url::Url, Value)> {
    let url = card_url(up)?;
    let client = match &up.cfg.tls {
        Some(tls) => mcpgate_net::http::new_http_client_tls(tls).ok()?,
        None => mcpgate_net::http::new_http_client(),
    };
    let doc = Fetcher::trusting(client).get_json(&url, CARD_TYPE).await.ok()??;
    doc.json.get("name").and_then(Value::as_str)?;
    Some((doc.url, doc.json))
}

/// Where `card` disagrees with what the upstream answered (`st`): name, version, title, and the
/// protocol versions its remote lists.
pub fn compare(card: &Value, st: &UpstreamState) -> Vec<String> {
    let mut out = Vec::new();
    let info = st.server_info.as_ref();
    // What the server did not say (or said empty) is not compared.
    let live = |k: &str| info.and_then(|i| i.get(k)).and_then(Value::as_str).filter(|s| !s.is_empty());
    let said = |k: &str| card.get(k).and_then(Value::as_str);
    if let (Some(c), Some(l)) = (said("name"), live("name")) {
        // A card's name is reverse-DNS (`com.example/weather`); a server names itself `weather`.
        if c != l && c.rsplit('/').next() != Some(l) {
            out.push(format!("its card names it \"{}\", the server \"{}\"", shown(c), shown(l)));
        }
    }
    for (key, what) in [("version", "version"), ("title", "title")] {
        if let (Some(c), Some(l)) = (said(key), live(key))
            && c != l
        {
            out.push(format!("its card gives the {what} \"{}\", the server \"{}\"", shown(c), shown(l)));
        }
    }
    let remote = card
        .get("remotes")
        .and_then(Value::as_array)
        .and_then(|r| r.iter().find(|r| r.get("type").and_then(Value::as_str) == Some("streamable-http")));
    let Some(listed) = remote.and_then(|r| r.get("supportedProtocolVersions")).and_then(Value::as_array) else { return out };
    let listed: Vec<&str> = listed.iter().filter_map(Value::as_str).collect();
    let quoted = |v: &[&str]| v.iter().map(|s| format!("\"{}\"", shown(s))).collect::<Vec<_>>().join(", ");
    let supported: Vec<&str> = st.supported_versions.iter().map(String::as_str).collect();
    if st.is_modern() {
        let overstated: Vec<&str> = listed.iter().copied().filter(|v| !supported.contains(v)).collect();
        let missing: Vec<&str> = supported.iter().copied().filter(|v| !listed.contains(v)).collect();
        if !overstated.is_empty() {
            out.push(format!("its card lists protocol versions the server does not support: {}", quoted(&overstated)));
        }
        if !missing.is_empty() {
            out.push(format!("the server supports protocol versions its card does not list: {}", quoted(&missing)));
        }
    } else if let Some(agreed) = st.version.as_deref().filter(|v| !listed.contains(v)) {
        // A legacy server tells only the version its handshake agreed on.
        out.push(format!("the server agreed on protocol version \"{}\", which its card does not list", shown(agreed)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state(version: &str, supported: &[&str], info: Value) -> UpstreamState {
        UpstreamState {
            version: Some(version.into()),
            supported_versions: supported.iter().map(|s| s.to_string()).collect(),
            server_info: Some(info),
            ..Default::default()
        }
    }

    #[test]
    fn a_card_that_agrees_says_nothing_and_each_difference_is_a_line() {
        let modern = mcpgate_protocol::MODERN_VERSION;
        let card = json!({
            "name": "com.example/weather", "version": "1.0.0", "title": "Weather",
            "remotes": [{ "type": "streamable-http", "url": "https://x/mcp", "supportedProtocolVersions": [modern, "2025-11-25"] }]
        });
        let st = state(modern, &[modern, "2025-11-25"], json!({ "name": "weather", "version": "1.0.0", "title": "Weather" }));
        assert!(compare(&card, &st).is_empty(), "{:?}", compare(&card, &st));

        let st = state(modern, &[modern], json!({ "name": "other", "version": "2.0.0\u{1b}[31m", "title": "Weather" }));
        let lines = compare(&card, &st);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("\"com.example/weather\", the server \"other\""), "{lines:?}");
        assert!(lines[1].contains("version \"1.0.0\", the server \"2.0.0 [31m\""), "control characters are not printed: {lines:?}");
        assert!(lines[2].contains("does not support: \"2025-11-25\""), "{lines:?}");

        // A legacy server: only the version its handshake agreed on can be compared.
        let st = state("2025-03-26", &["2025-03-26"], json!({ "name": "weather" }));
        let lines = compare(&card, &st);
        assert_eq!(lines, vec!["the server agreed on protocol version \"2025-03-26\", which its card does not list".to_string()]);
    }
}
