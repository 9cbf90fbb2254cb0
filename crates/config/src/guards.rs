//! `[[guard]]`: checks on what flows through (docs/guards.md): where each runs (`points`), on which
//! items (`tools`, globs on catalogue names and URIs; empty: all), and what it is: a `webhook`
//! (an HTTP endpoint speaking the contract, with `headers` whose secrets come from env or file
//! and optional mutual TLS), a `tool` of a configured `upstream` (an MCP tool speaking the same
//! contract), or a `builtin` group of detectors (`secrets`, `pii`, `injection`) with an `action`.
//! An external guard has a `timeout` (2 s), a `concurrency` limit (16) and `on_error` (`deny`).

use super::file::{HeaderSource, TlsSection};
use super::{ConfigError, Locator, UpstreamTls};
use crate::policy::guards::Point;
use crate::policy::secrets::{Action, Detector, Group, group};
use http::{HeaderName, HeaderValue};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use toml::Spanned;

/// `[[guard]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardSection {
    pub name: Spanned<String>,
    #[serde(default)]
    pub points: Vec<Spanned<String>>,
    #[serde(default)]
    pub tools: Vec<String>,
    pub webhook: Option<Spanned<String>>,
    pub upstream: Option<Spanned<String>>,
    pub tool: Option<Spanned<String>>,
    pub builtin: Option<Spanned<String>>,
    #[serde(default)]
    pub detectors: Vec<Spanned<String>>,
    pub action: Option<Spanned<String>>,
    pub timeout: Option<Spanned<String>>,
    pub concurrency: Option<usize>,
    pub on_error: Option<Spanned<String>>,
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderSource>,
    pub tls: Option<TlsSection>,
}

/// What a guard is.
#[derive(Debug, Clone)]
pub enum GuardKind {
    Webhook {
        url: http::Uri,
        headers: Vec<(HeaderName, HeaderValue)>,
        tls: Option<UpstreamTls>,
    },
    /// A tool of a configured upstream, by the upstream's own name for it.
    Tool {
        upstream: String,
        tool: String,
    },
    Builtin {
        detectors: Vec<Detector>,
    },
}

/// One guard.
#[derive(Debug, Clone)]
pub struct GuardConfig {
    pub name: String,
    pub points: Vec<Point>,
    /// Globs on catalogue names and URIs; empty: every item.
    pub tools: Vec<String>,
    pub kind: GuardKind,
    pub timeout: Duration,
    pub concurrency: usize,
    /// Whether a call goes on when the guard fails (times out, is unreachable, breaks the contract).
    pub allow_on_error: bool,
}

impl GuardConfig {
    /// Whether the guard runs at `point` for the item named `name`.
    pub fn guards(&self, point: Point, name: &str) -> bool {
        self.points.contains(&point) && (self.tools.is_empty() || self.tools.iter().any(|g| crate::policy::glob::matches(g, name)))
    }
}

/// The guards that read definitions when the catalogue is built: the `catalogue` ones, then the
/// `[secrets]` detectors (which read everything an upstream says, its definitions included).
pub fn catalogue(guards: &[GuardConfig], secrets: &[Detector]) -> Vec<GuardConfig> {
    let mut out: Vec<GuardConfig> = guards.iter().filter(|g| g.points.contains(&Point::Catalogue)).cloned().collect();
    if !secrets.is_empty() {
        out.push(GuardConfig {
            name: "secrets".into(),
            points: vec![Point::Catalogue],
            tools: Vec::new(),
            kind: GuardKind::Builtin { detectors: secrets.to_vec() },
            timeout: Duration::from_secs(2),
            concurrency: 1,
            allow_on_error: false,
        });
    }
    out
}

/// A guard's name: letters (either case), digits, `-` and `_`, at most 64 of them. It names the
/// guard in the audit (`guard`), in metric labels (any text is a valid label value) and in
/// refusals, all of which carry these characters as they are.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

pub(super) fn resolve(
    at: &Locator,
    sections: Vec<GuardSection>,
    upstreams: &[super::UpstreamConfig],
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<GuardConfig>, ConfigError> {
    let mut guards: Vec<GuardConfig> = Vec::new();
    for s in sections {
        let name = s.name.get_ref().clone();
        if !valid_name(&name) {
            return Err(at.err(&s.name, "guard.name", format!("{name:?} is not a valid name"), "use letters, digits, '-' and '_'"));
        }
        if guards.iter().any(|g| g.name == name) {
            return Err(at.err(&s.name, "guard.name", format!("a second guard named {name:?}"), "give each guard its own name"));
        }
        let mut points = Vec::new();
        for p in &s.points {
            let point = Point::parse(p.get_ref()).ok_or_else(|| {
                at.err(p, "guard.points", format!("{:?} is not a point", p.get_ref()), "use request, result, input or catalogue")
            })?;
            if !points.contains(&point) {
                points.push(point);
            }
        }
        if points.is_empty() {
            return Err(at.err(
                &s.name,
                "guard.points",
                format!("guard {name:?} runs nowhere"),
                "add points = [\"request\", \"result\"] (or input, catalogue)",
            ));
        }
        let kind = kind(at, &s, &name, upstreams, base, env)?;
        let external = !matches!(kind, GuardKind::Builtin { .. });
        for (set, key) in [(s.timeout.is_some(), "timeout"), (s.concurrency.is_some(), "concurrency"), (s.on_error.is_some(), "on_error")] {
            if set && !external {
                return Err(at.err(
                    &s.name,
                    &format!("guard.{key}"),
                    format!("guard {name:?} is built in: {key} applies to webhook and tool guards"),
                    &format!("remove {key}"),
                ));
            }
        }
        let timeout = at.duration(s.timeout.as_ref(), "guard.timeout", Duration::from_secs(2))?;
        let concurrency = s.concurrency.unwrap_or(16);
        if concurrency == 0 {
            return Err(at.err(&s.name, "guard.concurrency", "0 would never run the guard".into(), "use a positive number (default 16)"));
        }
        let allow_on_error = at.one_of(s.on_error.as_ref(), "guard.on_error", &["deny", "allow"], "allow or deny")? == "allow";
        guards.push(GuardConfig { name, points, tools: s.tools, kind, timeout, concurrency, allow_on_error });
    }
    Ok(guards)
}

fn kind(
    at: &Locator,
    s: &GuardSection,
    name: &str,
    upstreams: &[super::UpstreamConfig],
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<GuardKind, ConfigError> {
    let only = |key: &str| at.err(&s.name, key, format!("guard {name:?} is not a webhook"), &format!("remove {key}"));
    match (&s.webhook, &s.tool, &s.builtin) {
        (Some(url), None, None) => {
            let uri: http::Uri =
                url.get_ref().parse().map_err(|_| at.err(url, "guard.webhook", "not a URL".into(), "give an http(s) URL"))?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                return Err(at.err(url, "guard.webhook", "not an http(s) URL".into(), "give an http(s) URL"));
            }
            let mut headers = Vec::new();
            for (h, src) in &s.headers {
                headers.push(super::headers::header(at, &format!("guard:{name}"), h, src, base, env)?);
            }
            let tls = super::tls::upstream(at, s.tls.as_ref(), base)?;
            Ok(GuardKind::Webhook { url: uri, headers, tls })
        }
        (None, Some(tool), None) => {
            if !s.headers.is_empty() {
                return Err(only("guard.headers"));
            }
            let Some(up) = &s.upstream else {
                return Err(at.err(
                    tool,
                    "guard.upstream",
                    format!("guard {name:?} names a tool but no upstream"),
                    "add upstream = \"<id of the [[upstream]] serving the tool>\"",
                ));
            };
            if !upstreams.iter().any(|u| &u.id == up.get_ref()) {
                return Err(at.err(up, "guard.upstream", format!("no upstream {:?}", up.get_ref()), "name a configured [[upstream]]"));
            }
            Ok(GuardKind::Tool { upstream: up.get_ref().clone(), tool: tool.get_ref().clone() })
        }
        (None, None, Some(b)) => {
            if !s.headers.is_empty() || s.tls.is_some() {
                return Err(only(if s.tls.is_some() { "guard.tls" } else { "guard.headers" }));
            }
            let g = match b.get_ref().as_str() {
                "secrets" => Group::Secrets,
                "pii" => Group::Pii,
                "injection" => Group::Injection,
                other => {
                    return Err(at.err(b, "guard.builtin", format!("{other:?} is not a built-in group"), "use secrets, pii or injection"));
                }
            };
            let action = match at.one_of(s.action.as_ref(), "guard.action", &["flag", "redact", "block"], "an action")? {
                "redact" => Action::Redact,
                "block" => Action::Block,
                _ => Action::Flag,
            };
            let names: Vec<&str> = s.detectors.iter().map(|d| d.get_ref().as_str()).collect();
            if let Some(bad) = s.detectors.iter().find(|d| !g.shapes().iter().any(|(n, _, _)| n == d.get_ref())) {
                let known: Vec<&str> = g.shapes().iter().map(|(n, _, _)| *n).collect();
                return Err(at.err(
                    bad,
                    "guard.detectors",
                    format!("{:?} is not a detector of {}", bad.get_ref(), b.get_ref()),
                    &format!("use some of {}", known.join(", ")),
                ));
            }
            Ok(GuardKind::Builtin { detectors: group(g, &names, action) })
        }
        _ => Err(at.err(
            &s.name,
            "guard",
            format!("guard {name:?} must be exactly one of webhook, tool or builtin"),
            "give webhook = \"https://…\", or upstream + tool, or builtin = \"secrets\"|\"pii\"|\"injection\"",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    fn load(guards: &str) -> Result<Config, ConfigError> {
        let text = format!("[[upstream]]\nid = \"g\"\nurl = \"http://127.0.0.1:9/mcp\"\n\n{guards}");
        Config::parse(&text, std::path::Path::new("gateway.toml"), None, &|_| Some("token".into()))
    }

    /// What docs/configuration.md says a guard's name may hold is what loads: letters of either
    /// case, digits, `-` and `_`; nothing else.
    #[test]
    fn a_guard_name_holds_letters_digits_dashes_and_underscores() {
        let guard = |name: &str| format!("[[guard]]\nname = {name:?}\npoints = [\"result\"]\nbuiltin = \"pii\"\n");
        for name in ["inj_result", "Inj1", "dlp-2", "a"] {
            let cfg = load(&guard(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(cfg.guards[0].name, name);
        }
        for name in ["", "has space", "dots.in.it", "slash/", "é", &"x".repeat(65)] {
            let e = load(&guard(name)).err().unwrap_or_else(|| panic!("{name:?} was accepted")).0;
            assert!(e.contains("guard.name") && e.contains("use letters, digits, '-' and '_'"), "{e}");
        }
    }

    #[test]
    fn guards_are_checked_at_load() {
        let ok = load(
            "[[guard]]\nname = \"dlp\"\npoints = [\"request\", \"result\"]\nwebhook = \"https://dlp.example/check\"\n\
             headers = { Authorization = { env = \"T\", prefix = \"Bearer \" } }\n\n\
             [[guard]]\nname = \"t\"\npoints = [\"input\"]\nupstream = \"g\"\ntool = \"check\"\non_error = \"allow\"\n\n\
             [[guard]]\nname = \"pii\"\npoints = [\"result\", \"catalogue\"]\nbuiltin = \"pii\"\ndetectors = [\"card\"]\naction = \"redact\"\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let g = &ok.guards;
        assert_eq!(g.len(), 3);
        assert_eq!((g[0].timeout, g[0].concurrency, g[0].allow_on_error), (Duration::from_secs(2), 16, false));
        assert!(g[1].allow_on_error);
        assert!(matches!(&g[2].kind, GuardKind::Builtin { detectors } if detectors.len() == 1 && detectors[0].name == "card"));
        assert!(g[2].guards(Point::Result, "x__y") && !g[2].guards(Point::Request, "x__y"));
        for (bad, says) in [
            ("[[guard]]\nname = \"a\"\nwebhook = \"https://x\"\n", "runs nowhere"),
            ("[[guard]]\nname = \"a\"\npoints = [\"before\"]\nwebhook = \"https://x\"\n", "is not a point"),
            ("[[guard]]\nname = \"a\"\npoints = [\"result\"]\n", "exactly one of"),
            ("[[guard]]\nname = \"a\"\npoints = [\"result\"]\nwebhook = \"https://x\"\nbuiltin = \"pii\"\n", "exactly one of"),
            ("[[guard]]\nname = \"a\"\npoints = [\"result\"]\nwebhook = \"ftp://x\"\n", "http(s)"),
            ("[[guard]]\nname = \"a\"\npoints = [\"result\"]\nupstream = \"nope\"\ntool = \"c\"\n", "no upstream"),
            ("[[guard]]\nname = \"a\"\npoints = [\"result\"]\ntool = \"c\"\n", "no upstream"),
            ("[[guard]]\nname = \"a\"\npoints = [\"result\"]\nbuiltin = \"dlp\"\n", "not a built-in group"),
            ("[[guard]]\nname = \"a\"\npoints = [\"result\"]\nbuiltin = \"pii\"\ndetectors = [\"ssn\"]\n", "not a detector of pii"),
            ("[[guard]]\nname = \"a\"\npoints = [\"result\"]\nbuiltin = \"pii\"\ntimeout = \"1s\"\n", "built in"),
            ("[[guard]]\nname = \"a\"\npoints = [\"result\"]\nwebhook = \"https://x\"\non_error = \"maybe\"\n", "not allow or deny"),
            ("[[guard]]\nname = \"a\"\npoints = [\"result\"]\nwebhook = \"https://x\"\nconcurrency = 0\n", "never run"),
            (
                "[[guard]]\nname = \"a\"\npoints = [\"result\"]\nbuiltin = \"pii\"\naction = \"drop\"\n",
                "use flag, redact or block (default flag)",
            ),
            (
                "[[guard]]\nname = \"a\"\npoints = [\"result\"]\nwebhook = \"https://x\"\n\n[[guard]]\nname = \"a\"\npoints = [\"result\"]\nwebhook = \"https://y\"\n",
                "a second guard",
            ),
            ("[[guard]]\nname = \"a\"\npoints = [\"result\"]\nwebhook = \"https://x\"\nheaders = { A = \"literal\" }\n", ""),
        ] {
            match load(bad) {
                Ok(_) => panic!("accepted: {bad}"),
                Err(e) => assert!(e.0.contains(says), "{bad}: {e}"),
            }
        }
    }
}
