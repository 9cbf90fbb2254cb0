//! `mcpgate policy explain` and `mcpgate policy test`: the policy's decision on one call, asked
//! of the configuration alone (no upstream is contacted), with each rule's part in it; and a
//! table of expected decisions run against it, for a team's CI. Both build the caller exactly as
//! a request would be authenticated (an API key's `[[caller]]` entry, or a token's claims) and
//! decide with the gateway's own engine (`policy::Grants`), so what they print is what the
//! gateway does.

use crate::auth::{Authenticator, Principal};
use crate::dispatch::decide::parse_time;
use mcpgate_config::Config;
use mcpgate_config::auth::AuthMode;
use mcpgate_model::catalog::Kind;
use mcpgate_model::policy::facts::{Facts, RequestFacts};
use mcpgate_model::policy::rules::{Effect, Holds, Source, Step};
use mcpgate_model::policy::{Item, allows};
use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt::Write as _;

/// One call to decide on, as `policy explain` takes it and `policy test` reads it.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// A name for the case (`policy test`).
    #[serde(default)]
    pub name: Option<String>,
    /// The caller: a `[[caller]]` id (API keys) or a token's subject (JWT).
    pub caller: String,
    /// The token's claims (JWT callers); its subject is `caller` unless they name one.
    #[serde(default)]
    pub claims: Option<Value>,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub resource: Option<String>,
    /// The owning upstream (default: the name's prefix, or the URI's).
    #[serde(default)]
    pub upstream: Option<String>,
    #[serde(default)]
    pub args: Option<Value>,
    /// The item's annotations, as its upstream lists them.
    #[serde(default)]
    pub annotations: Option<Value>,
    /// The endpoint path the call comes through (default: the root).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The time of the call (RFC 3339 or seconds since the epoch; default: now).
    #[serde(default)]
    pub now: Option<String>,
    /// The protocol version the client speaks.
    #[serde(default)]
    pub era: Option<String>,
    /// `policy test`: the decision expected (`allow`, `confirm`, `deny` or `hidden`).
    #[serde(default)]
    pub expect: Option<String>,
}

/// The decision: `hidden` (not listed, and called like a missing item), `deny` (listed, but
/// this call is refused), `confirm` (allowed once a person confirms), or `allow`.
#[derive(Debug, Clone)]
pub struct Decision {
    pub outcome: &'static str,
    /// The rule that decided, when one did.
    pub rule: Option<String>,
    pub steps: Vec<Step>,
}

/// Why a case cannot be decided.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("claims must be a JSON object")]
    ClaimsNotAnObject,
    /// The claims were refused as a token's would be (the authenticator's reason).
    #[error("{0}")]
    Claims(String),
    #[error("no [[caller]] has id {0:?}")]
    NoCaller(String),
    #[error("name exactly one of tool, prompt and resource")]
    NotOneName,
    #[error("{0:?} is not a time (write RFC 3339, e.g. 2026-12-03T10:00:00Z)")]
    NotATime(String),
}

/// The caller of `case`, authenticated as a request would be.
fn principal(auth: &Authenticator, cfg: &Config, case: &Case) -> Result<Principal, CaseError> {
    if case.claims.is_some() || cfg.auth.mode == AuthMode::Jwt {
        let subject_claim = cfg.auth.jwt.as_ref().map_or("sub", |j| j.subject_claim.as_str());
        let mut claims = case.claims.clone().unwrap_or_else(|| json!({}));
        let Value::Object(map) = &mut claims else { return Err(CaseError::ClaimsNotAnObject) };
        map.entry(subject_claim.to_string()).or_insert_with(|| Value::String(case.caller.clone()));
        return auth.from_claims(&claims, subject_claim).map_err(|e| CaseError::Claims(format!("{e:?}")));
    }
    if cfg.auth.mode == AuthMode::None {
        return Ok((*auth.anonymous()).clone());
    }
    auth.as_entry(&case.caller).ok_or_else(|| CaseError::NoCaller(case.caller.clone()))
}

/// Decides on `case` with the rules of `cfg`.
pub fn decide(cfg: &Config, auth: &Authenticator, case: &Case) -> Result<Decision, CaseError> {
    let (kind, name) = match (&case.tool, &case.prompt, &case.resource) {
        (Some(t), None, None) => (Kind::Tool, t.as_str()),
        (None, Some(p), None) => (Kind::Prompt, p.as_str()),
        (None, None, Some(r)) => (Kind::Resource, r.as_str()),
        _ => return Err(CaseError::NotOneName),
    };
    let separator = &cfg.catalog.names.separator;
    let upstream = match &case.upstream {
        Some(u) => u.clone(),
        None if kind == Kind::Resource => {
            name.split_once("://").map_or("", |(scheme, _)| scheme.split('+').next().unwrap_or("")).to_string()
        }
        None => name.split_once(separator.as_str()).map_or("", |(prefix, _)| prefix).to_string(),
    };
    let principal = principal(auth, cfg, case)?;
    let endpoint = case.endpoint.as_deref().filter(|e| *e != cfg.server.path);
    let grants = principal.grants.at(endpoint);
    let definition = json!({ "name": name, "annotations": case.annotations.clone().unwrap_or_else(|| json!({})) }).to_string();
    let item = Item { kind, name, upstream: &upstream, json: Some(&definition) };
    if !allows(&grants, &item) {
        let steps = trace(&grants, &item, &Facts::listing(grants.caller(), item.json));
        let rule =
            steps.iter().find(|s| s.effect == Effect::Deny && matches!(s.holds, Holds::Yes | Holds::Failed(_))).map(|s| s.rule.clone());
        return Ok(Decision { outcome: "hidden", rule, steps });
    }
    let now = match &case.now {
        Some(t) => parse_time(t).ok_or_else(|| CaseError::NotATime(t.clone()))?,
        None => crate::dispatch::decide::now(),
    };
    let method = match kind {
        Kind::Tool => "tools/call",
        Kind::Prompt => "prompts/get",
        _ => "resources/read",
    };
    let era = case.era.as_deref().unwrap_or(mcpgate_protocol::MODERN_VERSION);
    let request = RequestFacts {
        method,
        name,
        upstream: &upstream,
        endpoint: case.endpoint.as_deref().unwrap_or(&cfg.server.path),
        era,
        client: None,
    };
    let args = case.args.clone().unwrap_or_else(|| json!({}));
    let facts = Facts { caller: grants.caller(), request: Some(&request), item: item.json, args: Some(&args), now: Some(now) };
    let mut steps = Vec::new();
    let verdict = grants.decide(&item, &facts, Some(&mut steps));
    let (outcome, rule) = match (verdict.allowed, verdict.denied_by, verdict.confirm_by) {
        (false, Some(rule), _) => ("deny", Some(rule)),
        (false, None, _) => ("deny", (!verdict.unmet.is_empty()).then(|| verdict.unmet.join(", "))),
        (true, _, Some(rule)) if kind == Kind::Tool => ("confirm", Some(rule)),
        (true, _, _) => ("allow", None),
    };
    Ok(Decision { outcome, rule, steps })
}

fn trace(grants: &mcpgate_model::policy::Grants, item: &Item, facts: &Facts<'_>) -> Vec<Step> {
    let mut steps = Vec::new();
    grants.decide(item, facts, Some(&mut steps));
    steps
}

/// The decision and each rule's part, for a person.
pub fn render(case: &Case, d: &Decision) -> String {
    let mut out = String::new();
    let item = case.tool.as_deref().or(case.prompt.as_deref()).or(case.resource.as_deref()).unwrap_or("");
    let _ = writeln!(out, "caller {} · {item}", case.caller);
    if d.steps.is_empty() {
        let _ = writeln!(out, "  no rule concerns this caller and item");
    }
    for s in &d.steps {
        let source = match s.source {
            Source::Rule => "[[rule]]",
            Source::Caller => "[[caller]]",
            Source::Scope => "[auth] scopes",
        };
        let holds = match &s.holds {
            Holds::Yes => "holds".to_string(),
            Holds::No => "does not hold".to_string(),
            Holds::Later => "decided when called".to_string(),
            Holds::Failed(why) => format!("cannot be evaluated ({why}): counts against the call"),
        };
        let when = s.condition.as_deref().map(|c| format!(" when {c}")).unwrap_or_default();
        let _ = writeln!(out, "  {:<7} {} {source}{when}: {holds}", s.effect.as_str(), s.rule);
    }
    let by = d.rule.as_deref().map(|r| format!(" (rule '{r}')")).unwrap_or_default();
    let _ = writeln!(out, "decision: {}{by}", d.outcome);
    out
}

/// `policy explain`: prints the decision; exits 0 when the call would go out (allow, confirm).
pub fn explain(cfg: &Config, case: &Case, json_out: bool) -> anyhow::Result<std::process::ExitCode> {
    let auth = Authenticator::new(cfg, mcpgate_net::http::HttpClients::new().detached());
    let d = decide(cfg, &auth, case)?;
    if json_out {
        let steps: Vec<Value> =
            d.steps.iter().map(|s| json!({"rule": s.rule, "effect": s.effect.as_str(), "holds": format!("{:?}", s.holds)})).collect();
        println!("{}", json!({"decision": d.outcome, "rule": d.rule, "rules": steps}));
    } else {
        print!("{}", render(case, &d));
    }
    Ok(if matches!(d.outcome, "allow" | "confirm") { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::from(3) })
}

/// The cases file of `policy test`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cases {
    #[serde(rename = "case")]
    cases: Vec<Case>,
}

/// `policy test`: runs every case of `file` against `cfg`; exits 1 when one decides otherwise.
pub fn test(cfg: &Config, file: &std::path::Path) -> anyhow::Result<std::process::ExitCode> {
    let text = std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let cases: Cases = toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {}", file.display(), e.message()))?;
    let auth = Authenticator::new(cfg, mcpgate_net::http::HttpClients::new().detached());
    let mut failed = 0;
    for (i, case) in cases.cases.iter().enumerate() {
        let label = case.name.clone().unwrap_or_else(|| format!("case #{}", i + 1));
        let Some(expect) = case.expect.as_deref() else {
            anyhow::bail!("{}: {label}: say what is expected (expect = \"allow\", \"confirm\", \"deny\" or \"hidden\")", file.display());
        };
        if !["allow", "confirm", "deny", "hidden"].contains(&expect) {
            anyhow::bail!("{}: {label}: expect = {expect:?} is not a decision (allow, confirm, deny, hidden)", file.display());
        }
        match decide(cfg, &auth, case) {
            Ok(d) if d.outcome == expect => println!("ok    {label}: {expect}"),
            Ok(d) => {
                failed += 1;
                println!("FAIL  {label}: expected {expect}, decided {}", d.outcome);
                print!("{}", render(case, &d));
            }
            Err(e) => {
                failed += 1;
                println!("FAIL  {label}: {e}");
            }
        }
    }
    println!("{}, {failed} failed", mcpgate_protocol::text::count_of(cases.cases.len(), "case", "cases"));
    Ok(if failed == 0 { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE })
}

/// `mcpgate policy …`: the command line.
// Parsed once per process: the size of its largest variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand)]
pub enum Action {
    /// The decision on one call: allow, confirm, deny (listed, this call refused) or hidden
    /// (not listed); exits 0 for allow and confirm, 3 otherwise.
    Explain {
        #[arg(short, long, default_value = "gateway.toml")]
        config: std::path::PathBuf,
        /// A `[[caller]]` id (API keys) or a token's subject (JWT).
        #[arg(long)]
        caller: String,
        /// The token's claims, as JSON (JWT callers).
        #[arg(long, value_parser = json_arg)]
        claims: Option<serde_json::Value>,
        #[arg(long, group = "item")]
        tool: Option<String>,
        #[arg(long, group = "item")]
        prompt: Option<String>,
        #[arg(long, group = "item")]
        resource: Option<String>,
        /// The call's arguments, as JSON.
        #[arg(long, value_parser = json_arg)]
        args: Option<serde_json::Value>,
        /// The item's annotations as its upstream lists them, as JSON.
        #[arg(long, value_parser = json_arg)]
        annotations: Option<serde_json::Value>,
        /// The endpoint path the call comes through (default: the root).
        #[arg(long)]
        endpoint: Option<String>,
        /// The time of the call (RFC 3339; default: now).
        #[arg(long)]
        now: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Runs a TOML file of `[[case]]`s (each a call and `expect = "allow" | "confirm" | "deny" |
    /// "hidden"`); exits 1 when one decides otherwise.
    Test {
        #[arg(short, long, default_value = "gateway.toml")]
        config: std::path::PathBuf,
        cases: std::path::PathBuf,
    },
}

/// A command-line value that must be JSON.
#[derive(Debug, thiserror::Error)]
#[error("not JSON: {0}")]
pub struct NotJson(#[from] serde_json::Error);

pub fn json_arg(text: &str) -> Result<serde_json::Value, NotJson> {
    Ok(serde_json::from_str(text)?)
}

impl Action {
    /// Runs the command: loads the configuration, then explains or tests.
    pub fn run(self) -> anyhow::Result<std::process::ExitCode> {
        match self {
            Action::Explain { config, caller, claims, tool, prompt, resource, args, annotations, endpoint, now, json } => {
                let cfg = crate::commands::boot::load(&config, None)?;
                let case = Case { caller, claims, tool, prompt, resource, args, annotations, endpoint, now, ..Default::default() };
                explain(&cfg, &case, json)
            }
            Action::Test { config, cases } => {
                let cfg = crate::commands::boot::load(&config, None)?;
                test(&cfg, &cases)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rule whose condition reads only the caller is decided once per caller; `explain` still
    /// shows its condition, and the rule, whether it held for this caller or not.
    #[test]
    fn a_caller_only_rule_is_shown_with_its_condition_whether_it_holds_or_not() {
        let text = "[auth]\nmode = \"jwt\"\nissuer = \"https://issuer.test\"\nresource = \"https://gw.test/mcp\"\njwks_url = \"http://127.0.0.1:9/jwks\"\n\n\
                    [[rule]]\nname = \"oncall-restarts\"\neffect = \"allow\"\ntools = [\"ops__restart\"]\nwhen = '\"oncall\" in caller.groups'\n";
        let cfg = Config::parse(text, std::path::Path::new("gateway.toml"), None, &|_| None).unwrap_or_else(|e| panic!("{e}"));
        let auth = Authenticator::new(&cfg, mcpgate_net::http::HttpClients::new().detached());
        for (groups, holds, outcome) in [(&["oncall"][..], "holds", "allow"), (&["staff"][..], "does not hold", "hidden")] {
            let case = Case {
                caller: "dana".into(),
                claims: Some(json!({ "groups": groups })),
                tool: Some("ops__restart".into()),
                ..Default::default()
            };
            let d = decide(&cfg, &auth, &case).unwrap_or_else(|e| panic!("{e}"));
            let out = render(&case, &d);
            assert!(out.contains(&format!("oncall-restarts [[rule]] when \"oncall\" in caller.groups: {holds}")), "{out}");
            assert!(out.contains(&format!("decision: {outcome}")), "{out}");
        }
    }
}
