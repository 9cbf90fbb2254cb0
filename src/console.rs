//! The console (`[console] enabled = true`): a web page at `/console` and the JSON it reads. This
//! module owns what the page shows — upstreams with era, transport, health, latency and circuit
//! state; the merged catalogue; what one configured caller's policy lets it see; the recent calls
//! of the audit stream (kept from when the console was turned on) and the tools held for review —
//! and the live feed (an SSE stream of upstream and catalogue
//! changes and of calls as they end), and the usage report (every caller's to an admin, a
//! caller's own to anyone else). Who may read it (admin callers; anyone on loopback when
//! authentication is off) is decided here too. The page itself (HTML, CSS, JS) is embedded.

use crate::auth::Principal;
use crate::gateway::Gateway;
use crate::upstream::Status;
use mcpgate_model::catalog::Kind;
use serde_json::{Value, json};

pub const INDEX_HTML: &str = include_str!("console/index.html");
pub const APP_JS: &str = include_str!("console/app.js");
pub const APP_CSS: &str = include_str!("console/app.css");

/// Whether `caller` may administer the gateway (the console, every caller's accounts, the
/// metrics): an admin `[[caller]]`, or, without authentication, whoever sends the console key
/// (`Authorization: Bearer <key>`). Never the address a request comes from: on loopback every
/// local process is, sandboxed servers with an open network included.
pub fn may_read(gw: &Gateway, caller: &Principal, headers: &http::HeaderMap) -> bool {
    let cfg = gw.config();
    if cfg.auth.mode == mcpgate_config::auth::AuthMode::None {
        return crate::auth::bearer(headers)
            .is_some_and(|k| aws_lc_rs::constant_time::verify_slices_are_equal(k.as_bytes(), gw.console_key.as_bytes()).is_ok());
    }
    cfg.callers.iter().any(|c| c.admin && caller.rules.contains(&c.id))
}

/// Each live upstream as the page's table shows it.
pub fn upstreams(gw: &Gateway) -> Value {
    let cat = gw.catalog();
    let rows: Vec<Value> = gw
        .live_upstreams()
        .iter()
        .map(|up| {
            let st = up.state();
            let (status, era) = match &st.status {
                // Reached with each caller's own token: no state of the gateway's own.
                _ if gw.is_personal(up.index) => ("per caller", "-".to_string()),
                Status::Ready => (
                    "ready",
                    st.version
                        .as_deref()
                        .map(|v| format!("{} ({v})", if mcpgate_protocol::is_legacy_version(v) { "legacy" } else { "modern" }))
                        .unwrap_or_default(),
                ),
                Status::Pending => ("starting", "-".to_string()),
                Status::Down(_) => ("down", "-".to_string()),
            };
            let failures = up.consecutive_failures();
            // No call is sent to a down upstream (open); calls that keep failing make the gateway
            // probe it (half-open); otherwise calls flow (closed).
            let circuit = match (&st.status, failures) {
                (Status::Down(_), _) => "open",
                (_, 0) => "closed",
                _ => "half-open",
            };
            json!({
                "id": up.id(),
                "transport": up.cfg.transport.kind(),
                "era": era,
                "status": status,
                "reason": match &st.status { Status::Down(r) => Value::String(r.to_string()), _ => Value::Null },
                "tools": cat.section(Kind::Tool).count_for(up.index),
                "latency_ms": st.latency.map(|l| l.as_millis() as u64),
                "circuit": circuit,
                "failures": failures,
            })
        })
        .collect();
    Value::Array(rows)
}

/// Every served item of every kind, with its upstream, title and description.
pub fn catalog(gw: &Gateway) -> Value {
    let cat = gw.catalog();
    let mut out = Vec::new();
    for kind in Kind::ALL {
        for e in &cat.section(kind).entries {
            let item: Value = serde_json::from_str(e.json.get()).unwrap_or(Value::Null);
            out.push(json!({
                "kind": kind.label(),
                "name": e.name,
                "upstream": gw.upstream_id(e.upstream),
                "title": item.get("title").cloned().unwrap_or(Value::Null),
                // A skill's description is in its frontmatter.
                "description": item.get("description").or_else(|| item.get("frontmatter").and_then(|f| f.get("description"))).cloned().unwrap_or(Value::Null),
            }));
        }
    }
    Value::Array(out)
}

/// The whole state the page opens with.
pub fn state(gw: &Gateway) -> Value {
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "upstreams": upstreams(gw),
        "catalog": catalog(gw),
        "callers": gw.config().callers.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        "tokens": tokens(gw, None),
        "held": gw.held_tools(),
        "calls_since_ms": gw.audit.kept_since(),
    })
}

/// The upstream accounts callers connected (per-user identity): who, which upstream, which
/// authorization server, the scopes, when it expires and whether it refreshes; never a token.
/// `caller`: one caller's only.
pub fn tokens(gw: &Gateway, caller: Option<&str>) -> Value {
    let Some(p) = &gw.personal else { return json!([]) };
    let rows: Vec<Value> = p
        .identity
        .vault()
        .list(caller)
        .into_iter()
        .map(|h| {
            json!({
                "caller": h.caller,
                "upstream": h.upstream,
                "issuer": h.issuer,
                "scope": h.scope,
                "expiresAt": h.expires_at,
                "refreshable": h.refreshable,
                "issuedAt": h.issued_at,
            })
        })
        .collect();
    Value::Array(rows)
}

/// What `[[caller]]` `id` may see, exactly as its policy decides for lists (`kind:name` keys):
/// `None` for an unknown caller.
pub fn view_as(gw: &Gateway, id: &str) -> Option<Value> {
    let grants = gw.auth().as_entry(id)?.grants;
    let cat = gw.catalog();
    let id_of = |i: usize| gw.upstream_id(i);
    let mut visible = Vec::new();
    for kind in Kind::ALL {
        for e in mcpgate_model::catalog::view::visible(&cat, kind, &grants, &id_of) {
            visible.push(format!("{}:{}", kind.label(), e.name));
        }
    }
    Some(json!({ "caller": id, "visible": visible }))
}

/// The usage report the console shows: every caller's to an admin (narrowed by `caller=`), a
/// caller's own to anyone else; `since=` (default 24h) and `tool=` (a glob) as `mcpgate usage`.
pub async fn usage(
    gw: &Gateway,
    caller: &Principal,
    admin: bool,
    param: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Value, (http::StatusCode, String)> {
    let since = match param("since") {
        None => std::time::Duration::from_secs(86_400),
        Some(s) => humantime::parse_duration(&s).map_err(|e| (http::StatusCode::BAD_REQUEST, format!("since={s}: {e}")))?,
    };
    let who = if admin { param("caller").filter(|c| !c.is_empty()) } else { Some(caller.id.clone()) };
    let q = crate::usage::query::Query { caller: who, tool: param("tool").filter(|t| !t.is_empty()), since };
    let cfg = gw.config();
    let known: Vec<String> = if admin { cfg.callers.iter().map(|c| c.id.clone()).collect() } else { vec![caller.id.clone()] };
    let report = gw.usage.report(&q, &cfg.quotas, &known).await.map_err(|e| (http::StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    let mut v = serde_json::to_value(report).unwrap_or(Value::Null);
    v["scope"] = json!(if admin { "everyone" } else { "self" });
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::{APP_CSS, APP_JS, INDEX_HTML};

    /// The operations guide's "The console" section.
    fn guide() -> &'static str {
        let doc = include_str!("../docs/operations.md");
        let start = doc.find("### The console").expect("docs/operations.md has a console section");
        let rest = &doc[start..];
        &rest[..rest[4..].find("\n### ").map_or(rest.len(), |e| e + 4)]
    }

    /// Every section of the page (its `<h2>` headings, and the health strip) is described in the
    /// guide, by name, as a bold item; and the page is not called read-only (it approves pins and
    /// revokes accounts).
    #[test]
    fn the_guide_describes_every_section_of_the_page() {
        let mut names: Vec<String> =
            INDEX_HTML.split("<h2>").skip(1).filter_map(|h| h.split(['<', '\n']).next()).map(|h| h.trim().to_string()).collect();
        names.extend(INDEX_HTML.split("aria-label=\"").skip(1).filter_map(|a| a.split('"').next()).map(str::to_string));
        assert!(names.len() >= 7, "{names:?}");
        let guide = guide();
        let missing: Vec<&String> = names.iter().filter(|n| !guide.contains(&format!("**{n}"))).collect();
        assert!(missing.is_empty(), "docs/operations.md \"The console\" does not describe {missing:?}");
        assert!(!guide.contains("read-only"), "the console takes actions: it is not read-only");
    }

    /// A number is never glued to a plural noun (`n + " calls"` says "1 calls"): the page counts
    /// through `count(n, one, many)`.
    #[test]
    fn the_page_counts_through_count_so_one_is_singular() {
        for noun in ["calls", "errors", "upstreams", "tools", "records", "callers", "skills", "accounts"] {
            for glue in [format!("+ \" {noun}\""), format!("+ \" {noun},"), format!("}} {noun}`")] {
                assert!(!APP_JS.contains(&glue), "app.js glues a number to \"{noun}\" ({glue}): use count(n, one, many)");
            }
        }
        assert!(APP_JS.contains("function count(n, one, many)"), "app.js has its count helper");
    }

    /// Before a key is entered the badge is neutral: an empty key prompt is not an error.
    #[test]
    fn the_badge_is_grey_until_the_live_stream_runs() {
        assert!(INDEX_HTML.contains(r#"<span id="live" class="badge idle""#), "the badge starts neutral");
        assert!(APP_JS.contains(r#"setLive("waiting for a key", "idle")"#), "the key prompt's badge is neutral");
        assert!(APP_CSS.contains(".badge.idle"), "the neutral badge has a style");
    }

    /// What the guide says the recent calls hold is what the audit keeps.
    #[test]
    fn the_guide_says_how_many_recent_calls_are_kept_and_since_when() {
        let kept = crate::audit::KEPT;
        assert!(guide().contains(&format!("the last {kept} calls of the audit stream since the console was turned on")), "{}", guide());
    }
}
