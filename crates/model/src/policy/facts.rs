//! What a rule's condition sees: the declared variables and how their values are made. `caller`
//! is made once per authenticated request (id, the `[[caller]]` entries it matched, the token's
//! claims, groups and scopes); `request`, `tool`, `args` and `now` belong to one call and are
//! converted only when a condition reads them (a rule that does not read `args` costs no argument
//! parse). `now` is plain UTC fields; arguments past [`super::reads::MAX_ARG_NODES`] values or
//! [`super::reads::MAX_ARG_DEPTH`] levels are not converted; a variable that cannot be given is a
//! [`FactsError`].

use super::reads::{Beyond, MAX_ARG_DEPTH, MAX_ARG_NODES, Reads};
use crate::protocol::read;
use cel::objects::{Key, Map};
use cel::{Context, Value};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// Why a variable a condition reads cannot be given to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FactsError {
    #[error("the token's claims nest deeper than {MAX_ARG_DEPTH} levels: too deep for a rule to read")]
    ClaimsTooDeep,
    #[error("`request` is known only when a call is made")]
    NoRequest,
    #[error("the item's definition cannot be read: {0}")]
    Item(#[source] read::Unreadable),
    #[error("`args` is known only when a call is made and its arguments could be read")]
    NoArgs,
    #[error("`now` is known only when a call is made")]
    NoNow,
    /// Past [`MAX_ARG_NODES`] values (the item's definition or the arguments).
    #[error("the arguments hold more than {MAX_ARG_NODES} values: too large for a rule to read")]
    TooLarge,
    #[error("the arguments nest deeper than {MAX_ARG_DEPTH} levels: too deep for a rule to read")]
    TooDeep,
}

/// Who calls, as conditions see it.
#[derive(Debug, Default)]
pub struct CallerFacts {
    pub id: String,
    /// The ids of the `[[caller]]` entries it matched.
    pub rules: Vec<String>,
    /// The token's claims (`{}` for an API key).
    pub claims: serde_json::Value,
    pub scopes: Vec<String>,
    /// The claims' text, for equality and hashing.
    claims_text: String,
    /// The token's groups (see [`CallerFacts::groups`]).
    groups: Vec<String>,
    value: OnceLock<Value>,
}

impl CallerFacts {
    pub fn new(id: &str, rules: &[String], claims: serde_json::Value, scopes: &[String]) -> CallerFacts {
        let claims_text = claims.to_string();
        let groups = match claims.get("groups") {
            Some(serde_json::Value::Array(a)) => a.iter().filter_map(|g| g.as_str().map(str::to_string)).collect(),
            Some(serde_json::Value::String(s)) => vec![s.clone()],
            _ => Vec::new(),
        };
        CallerFacts {
            id: id.to_string(),
            rules: rules.to_vec(),
            claims,
            scopes: scopes.to_vec(),
            claims_text,
            groups,
            value: OnceLock::new(),
        }
    }

    /// The token's groups: its `groups` claim, when that is a list of strings (or one string).
    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    fn value(&self) -> Value {
        self.value
            .get_or_init(|| {
                let strings = |v: &[String]| Value::List(Arc::new(v.iter().map(|s| Value::String(Arc::new(s.clone()))).collect()));
                let mut m = HashMap::new();
                m.insert(key("id"), Value::String(Arc::new(self.id.clone())));
                m.insert(key("rules"), strings(&self.rules));
                m.insert(key("claims"), if super::reads::readable_depth(&self.claims) { cel_value(&self.claims) } else { Value::Null });
                m.insert(key("groups"), strings(&self.groups));
                m.insert(key("scopes"), strings(&self.scopes));
                Value::Map(Map { map: Arc::new(m) })
            })
            .clone()
    }
}

impl PartialEq for CallerFacts {
    fn eq(&self, other: &CallerFacts) -> bool {
        self.id == other.id && self.rules == other.rules && self.claims_text == other.claims_text && self.scopes == other.scopes
    }
}

impl Eq for CallerFacts {}

impl std::hash::Hash for CallerFacts {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.id, &self.rules, &self.claims_text, &self.scopes).hash(state);
    }
}

/// The call, as conditions see it.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestFacts<'a> {
    /// The MCP method (`tools/call`, `prompts/get`, `resources/read`, ...).
    pub method: &'a str,
    /// The item's gateway name (tools, prompts) or URI (resources).
    pub name: &'a str,
    /// The owning upstream's id.
    pub upstream: &'a str,
    /// The `[[endpoint]]` path the call came through (`""`: the root).
    pub endpoint: &'a str,
    /// The protocol version the client speaks.
    pub era: &'a str,
    /// The client's `clientInfo`, as it sent it.
    pub client: Option<&'a serde_json::Value>,
}

/// Everything a condition may read; what is `None` is not known here (a list knows no call).
#[derive(Clone, Copy)]
pub struct Facts<'a> {
    pub caller: &'a CallerFacts,
    pub request: Option<&'a RequestFacts<'a>>,
    /// The item's own JSON (a tool's definition with its annotations), when known.
    pub item: Option<&'a str>,
    pub args: Option<&'a serde_json::Value>,
    /// Seconds since the Unix epoch.
    pub now: Option<u64>,
}

impl<'a> Facts<'a> {
    /// The facts known without a call: who calls, and the item.
    pub fn listing(caller: &'a CallerFacts, item: Option<&'a str>) -> Facts<'a> {
        Facts { caller, request: None, item, args: None, now: None }
    }

    /// Adds the variables `reads` names to `ctx`.
    pub fn bind(&self, ctx: &mut Context<'_, '_>, reads: Reads) -> Result<(), FactsError> {
        if reads.caller {
            if !super::reads::readable_depth(&self.caller.claims) {
                return Err(FactsError::ClaimsTooDeep);
            }
            ctx.add_variable_from_value("caller", self.caller.value());
        }
        if reads.request {
            let r = self.request.ok_or(FactsError::NoRequest)?;
            ctx.add_variable_from_value("request", request_value(r));
        }
        if reads.tool {
            let item = match self.item {
                Some(text) => read::text_value(text).map_err(FactsError::Item)?,
                None => serde_json::Value::Object(Default::default()),
            };
            ctx.add_variable_from_value("tool", json(&item)?);
        }
        if reads.args {
            // The chain reads a call's arguments (strictly, once) whenever a rule may read them:
            // arguments not given are not known, never `{}`.
            let args = self.args.ok_or(FactsError::NoArgs)?;
            ctx.add_variable_from_value("args", json(args)?);
        }
        if reads.now {
            let now = self.now.ok_or(FactsError::NoNow)?;
            ctx.add_variable_from_value("now", now_value(now));
        }
        Ok(())
    }
}

fn key(k: &str) -> Key {
    Key::String(Arc::new(k.to_string()))
}

fn text(s: &str) -> Value {
    Value::String(Arc::new(s.to_string()))
}

fn request_value(r: &RequestFacts<'_>) -> Value {
    let mut m = HashMap::with_capacity(8);
    m.insert(key("method"), text(r.method));
    m.insert(key("name"), text(r.name));
    m.insert(key("tool"), text(if r.method == "tools/call" { r.name } else { "" }));
    m.insert(key("uri"), text(if r.method.starts_with("resources/") { r.name } else { "" }));
    m.insert(key("upstream"), text(r.upstream));
    m.insert(key("endpoint"), text(r.endpoint));
    m.insert(key("era"), text(r.era));
    let client = r.client.map_or(Ok(Value::Map(Map { map: Arc::new(HashMap::new()) })), json);
    m.insert(key("client"), client.unwrap_or(Value::Null));
    Value::Map(Map { map: Arc::new(m) })
}

/// A JSON value as a CEL value, when it is within what a condition may read.
fn json(v: &serde_json::Value) -> Result<Value, FactsError> {
    super::reads::within(v).map_err(|beyond| match beyond {
        Beyond::Values => FactsError::TooLarge,
        Beyond::Depth => FactsError::TooDeep,
    })?;
    Ok(cel_value(v))
}

/// A JSON value as a CEL value (bounded by [`json`]'s check).
fn cel_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::UInt(u),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(a) => Value::List(Arc::new(a.iter().map(cel_value).collect())),
        serde_json::Value::Object(o) => Value::Map(Map { map: Arc::new(o.iter().map(|(k, x)| (key(k), cel_value(x))).collect()) }),
    }
}

/// `now` as plain UTC fields.
fn now_value(unix: u64) -> Value {
    Value::Map(Map { map: Arc::new(now_fields(unix).into_iter().map(|(k, v)| (key(k), Value::Int(v))).collect()) })
}

/// The fields of `now`, by name.
pub(super) fn now_fields(unix: u64) -> [(&'static str, i64); 8] {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let (year, month, day) = civil(days);
    // 1970-01-01 was a Thursday (Sunday = 0).
    let weekday = (days + 4).rem_euclid(7);
    [
        ("unix", unix as i64),
        ("year", year),
        ("month", month),
        ("day", day),
        ("hour", (secs / 3600) as i64),
        ("minute", (secs % 3600 / 60) as i64),
        ("second", (secs % 60) as i64),
        ("weekday", weekday),
    ]
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::civil;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(20_790), (2026, 12, 3));
        assert_eq!(civil(11_016), (2000, 2, 29));
        assert_eq!(civil(-1), (1969, 12, 31));
    }
}
