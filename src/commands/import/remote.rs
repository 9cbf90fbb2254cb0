//! One discovered server as an `[[upstream]]`: the remote a Server Card (or a registry entry)
//! gives — its first `streamable-http` one — with its templated URL filled from the defaults the
//! card declares, each header it declares as an `{ env = … }` placeholder named after the server
//! and the header, and `[upstream.user_auth]` when the importer's probe found that the server
//! asks for OAuth ([`Probed`]). Everything a card says is untrusted text: it reaches the output only
//! as TOML strings ([`super::quote`]) or as comments made one plain line ([`plain`]), never as a
//! value copied into a secret's place.

use super::{Ctx, Skipped, key, quote};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::fmt::Write;

/// What the importer learnt of a remote's authorization by asking it once, unauthenticated.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Probed {
    /// It answered 401 and its protected-resource metadata (RFC 9728) names this authorization
    /// server: each caller should connect their own account.
    OAuth { authorization_server: String },
    /// It did not ask for OAuth.
    NotOAuth,
    /// It was not asked, or its answer could not be read: why.
    Unknown(String),
}

/// Why a discovered server is not imported.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unusable {
    #[error("it lists only packages to run, no remote to connect to (add it by hand as a command)")]
    PackagesOnly,
    #[error("it lists no remote to connect to")]
    NoRemote,
    #[error("its remotes use only the deprecated HTTP+SSE transport, which mcpgate does not speak")]
    SseOnly,
    #[error("its url {url} needs {{{name}}}, which has no default: add the server by hand with the value filled in")]
    NoDefault { url: String, name: String },
    #[error("its url {url} needs {{{name}}}, a secret, and gateway.toml takes a URL only as written: add the server by hand")]
    SecretInUrl { url: String, name: String },
    #[error("its url {url}: {{{name}}} would be {value}, which is not a plain part of a URL")]
    BadValue { url: String, name: String, value: String },
    #[error("its url {0} is not an absolute http or https URL")]
    BadUrl(String),
    #[error(transparent)]
    Skipped(#[from] Skipped),
}

/// The remote to connect to, and its URL with every `{variable}` filled.
pub(super) struct Chosen<'a> {
    pub remote: &'a Map<String, Value>,
    pub url: String,
}

/// The first `streamable-http` remote of `detail` (a Server Card or a registry's server), its URL
/// filled; what was filled is added to `notes`.
pub(super) fn choose<'a>(detail: &'a Value, notes: &mut Vec<String>) -> Result<Chosen<'a>, Unusable> {
    let remotes: Vec<&Map<String, Value>> =
        detail.get("remotes").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_object).collect()).unwrap_or_default();
    let kind = |r: &Map<String, Value>| r.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    let Some(remote) = remotes.iter().find(|r| kind(r) == "streamable-http") else {
        if remotes.iter().any(|r| kind(r) == "sse") {
            return Err(Unusable::SseOnly);
        }
        let packages = detail.get("packages").and_then(Value::as_array).is_some_and(|p| !p.is_empty());
        return Err(if packages { Unusable::PackagesOnly } else { Unusable::NoRemote });
    };
    let template = remote.get("url").and_then(Value::as_str).unwrap_or("");
    let url = fill(template, remote.get("variables").and_then(Value::as_object), notes)?;
    let parsed = url::Url::parse(&url).map_err(|_| Unusable::BadUrl(shown(template)))?;
    // The gateway reads it as an `http::Uri`, stricter than a browser's URL.
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) || url.parse::<http::Uri>().is_err() {
        return Err(Unusable::BadUrl(shown(template)));
    }
    let found = super::secrets::find("url", &url);
    if mcpgate_config::cluster::url_userinfo(&url).is_some() || !found.is_empty() {
        let places = if found.is_empty() { "user name".to_string() } else { super::places(&found) };
        return Err(Skipped::CredentialsInUrl(places).into());
    }
    if parsed.scheme() == "http" && !crate::commands::fetch::is_loopback(&parsed) {
        notes.push(format!("its url {} is plain http: its traffic, credentials included, is not encrypted", shown(&url)));
    }
    Ok(Chosen { remote, url })
}

/// `template` with each `{name}` replaced by its variable's pre-set `value`, else its `default`.
fn fill(template: &str, variables: Option<&Map<String, Value>>, notes: &mut Vec<String>) -> Result<String, Unusable> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        // An unclosed `{`: not a template the card's reader can fill.
        let Some(close) = rest[open..].find('}').map(|c| open + c) else { return Err(Unusable::BadUrl(shown(template))) };
        let name = &rest[open + 1..close];
        out.push_str(&rest[..open]);
        let var = variables.and_then(|v| v.get(name));
        let text = |k: &str| var.and_then(|v| v.get(k)).and_then(Value::as_str);
        let no_default = || Unusable::NoDefault { url: shown(template), name: shown(name) };
        if var.and_then(|v| v.get("isSecret")).and_then(Value::as_bool) == Some(true) {
            return Err(Unusable::SecretInUrl { url: shown(template), name: shown(name) });
        }
        let (value, which) = match (text("value"), text("default")) {
            (Some(v), _) => (v, "its pre-set value"),
            (None, Some(d)) => (d, "its default"),
            (None, None) => return Err(no_default()),
        };
        if value.is_empty() || value.chars().any(|c| c.is_control() || c.is_whitespace() || "/?#@\\{}[]%".contains(c)) {
            return Err(Unusable::BadValue { url: shown(template), name: shown(name), value: format!("\"{}\"", shown(value)) });
        }
        let about = text("description").map(|d| format!(" ({})", shown(d))).unwrap_or_default();
        notes.push(format!("url variable {{{}}} is \"{}\", {which}{about}", shown(name), shown(value)));
        out.push_str(value);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The upstream's body after its `id`: `url`, the headers as placeholders, and `user_auth` when
/// the server asks for OAuth. `server` names it in notes (quoted, made [`plain`] by the caller).
pub(super) fn body(ctx: &mut Ctx, server: &str, chosen: &Chosen, auth: &Probed) -> String {
    let mut body = String::new();
    let _ = writeln!(body, "url = {}", quote(&chosen.url));
    let oauth = matches!(auth, Probed::OAuth { .. });
    let headers: Vec<&Map<String, Value>> =
        chosen.remote.get("headers").and_then(Value::as_array).map(|h| h.iter().filter_map(Value::as_object).collect()).unwrap_or_default();
    let mut lines = Vec::new();
    let mut api_key: Option<(String, Option<String>)> = None;
    let mut seen = BTreeSet::new();
    for h in headers {
        let Some(name) = h.get("name").and_then(Value::as_str) else { continue };
        let lower = name.to_ascii_lowercase();
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            ctx.warnings.push(format!("server {server}: its header \"{}\" is not a valid header name; left out", shown(name)));
            continue;
        }
        if !seen.insert(lower.clone()) {
            continue;
        }
        if mcpgate_config::gateway_sets(&lower) {
            ctx.warnings.push(format!("server {server}: the gateway sets {name} itself; the card's declaration is left out"));
            continue;
        }
        if oauth && lower == "authorization" {
            lines.push(format!("# {name}: each caller's own OAuth token ([upstream.user_auth] below)"));
            continue;
        }
        let flag = |k: &str| h.get(k).and_then(Value::as_bool) == Some(true);
        let value = h.get("value").and_then(Value::as_str).unwrap_or("");
        let secret = flag("isSecret") || super::secrets::is_secret_name(name) || super::secrets::is_secret(name, value);
        let (prefix, whole) = template_prefix(value);
        let mut origin = format!("server {server}, header {name}");
        if let Some(d) = h.get("description").and_then(Value::as_str) {
            let _ = write!(origin, ": {}", shown(d));
        }
        if whole {
            let _ = write!(origin, " (the whole value, which the card describes as \"{}\")", shown(value));
        } else if !secret && !value.is_empty() && !value.contains('{') {
            let _ = write!(origin, " (the card gives its value: \"{}\")", shown(value));
        }
        if !flag("isRequired") {
            // Optional: written for the operator to enable, and no variable to export until then.
            let wanted = super::env_name(&format!("{}_{name}", ctx.id));
            lines.push(format!("# {} = {{ env = {} }}   # optional, the card says: {}", key(name), quote(&wanted), plain(&origin)));
            continue;
        }
        let var = ctx.fresh(&format!("{}_{name}", ctx.id), origin, &BTreeSet::new());
        match prefix.filter(|p| !p.is_empty()) {
            Some(p) => lines.push(format!("{} = {{ env = {}, prefix = {} }}", key(name), quote(&var), quote(p))),
            None => lines.push(format!("{} = {{ env = {} }}", key(name), quote(&var))),
        }
        if secret && api_key.is_none() {
            api_key = Some((name.to_string(), prefix.map(str::to_string)));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(body, "[upstream.headers]");
        for l in &lines {
            let _ = writeln!(body, "{l}");
        }
    }
    if let Some((header, prefix)) = api_key.filter(|_| !oauth) {
        // The default is one key for the gateway (it works at once, and `mcpgate check` can try
        // it); the comment says how each caller brings their own instead.
        let _ = writeln!(
            body,
            "# One {header} header for every caller, from the gateway's environment. For each caller's own key instead\n\
             # (entered once on a gateway page; docs/auth-and-policy.md, \"Each caller's own API key\"),\n\
             # drop that header and add:\n\
             #   [upstream.user_auth]\n\
             #   kind = \"api_key\""
        );
        if !header.eq_ignore_ascii_case("authorization") {
            let _ = writeln!(body, "#   header = {}", quote(&header));
        }
        let default = |p: &str| p.is_empty() || (header.eq_ignore_ascii_case("authorization") && p == "Bearer ");
        if let Some(p) = prefix.filter(|p| !default(p)) {
            let _ = writeln!(body, "#   prefix = {}", quote(&p));
        }
    }
    match auth {
        Probed::OAuth { authorization_server } => {
            let _ = writeln!(
                body,
                "# It asks for OAuth: an unauthenticated request was answered 401, with protected-resource metadata\n\
                 # naming the authorization server {}. Each caller connects their own account\n\
                 # (docs/auth-and-policy.md, \"Each caller as themselves\").\n\
                 [upstream.user_auth]\nkind = \"oauth\"",
                shown(authorization_server)
            );
        }
        Probed::Unknown(why) => ctx.warnings.push(format!(
            "server {server}: not known whether it asks for OAuth ({}); if it does, add [upstream.user_auth] to its upstream",
            plain(why)
        )),
        Probed::NotOAuth => {}
    }
    body
}

/// A header's `value` template (`Bearer {token}`): the text before its only variable, when that
/// variable ends it (the prefix of the placeholder), and whether the variable must hold the whole
/// value instead (several variables, or text after one). A value with no variable: `(None, false)`.
fn template_prefix(value: &str) -> (Option<&str>, bool) {
    let Some(open) = value.find('{') else { return (None, false) };
    let close = value[open..].find('}').map(|c| open + c);
    let simple = close.is_some_and(|c| c + 1 == value.len()) && !value[..open].contains(['{', '}']);
    let printable = value[..open].chars().all(|c| c == ' ' || c.is_ascii_graphic());
    if simple && printable { (Some(&value[..open]), false) } else { (None, true) }
}

/// `text` as one plain line for a TOML comment or a terminal: control characters (a newline ends
/// a comment, and what follows would be TOML), line separators and bidirectional overrides
/// become spaces.
pub fn plain(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') { ' ' } else { c }
        })
        .collect()
}

/// Untrusted text as shown in a note: [`plain`], and at most 120 characters.
pub fn shown(text: &str) -> String {
    let p = plain(text);
    if p.chars().count() > 120 { p.chars().take(119).collect::<String>() + "…" } else { p }
}

#[cfg(test)]
mod tests;
