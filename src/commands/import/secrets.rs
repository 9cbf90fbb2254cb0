//! What `mcpgate import` treats as a secret. One decision, [`is_secret`], on a value and the name
//! it is found under (an environment variable, a header, a query parameter, a flag); [`find`] takes
//! a text apart (URLs, `--flag=value`, `KEY=VALUE`, `Header: value`, JSON objects, words) and asks
//! [`is_secret`] about each piece, so that only the secret part of an argument is replaced.

use std::ops::Range;

/// A secret inside a larger text. `name` is what it was found under ("" when nothing names it)
/// and `place` says where, for the notes; neither ever contains the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Found {
    pub range: Range<usize>,
    pub name: String,
    pub place: String,
}

/// Words that make a name secret, as a whole word or a word's end (`APIKEY`, `ACCESSTOKEN`, `OAUTH`).
const SECRET_WORDS: [&str; 15] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "KEY",
    "AUTH",
    "AUTHORIZATION",
    "CREDENTIAL",
    "COOKIE",
    "PRIVATE",
    "SESSION",
    "SIGNATURE",
    "BEARER",
    "JWT",
];
/// Words that make a name secret only as a whole word (`PAT`, but not `COMPAT`).
const SECRET_WHOLE_WORDS: [&str; 3] = ["PAT", "PASS", "SIG"];
/// A last word that makes the value a location or a label rather than the secret itself
/// (`GITHUB_TOKEN_FILE`, `--ssh-key-path`).
const NOT_THE_SECRET: [&str; 5] = ["FILE", "PATH", "DIR", "NAME", "ENV"];
/// Well-known credential prefixes: OpenAI/Anthropic/Zapier (`sk-`, `sk-ant-`, `sk-ak-`), Stripe,
/// GitHub, Slack, GitLab, Google, Linear, Sentry, JWTs. AWS access key ids (`AKIA`, `ASIA`) are
/// told by their whole shape (see [`has_key_prefix`]).
const KEY_PREFIXES: [&str; 20] = [
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "ghr_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxs-",
    "xapp-",
    "glpat-",
    "AIza",
    "lin_api_",
    "sntrys_",
    "eyJ",
];

/// The one decision: is `value`, found under `name` ("" for none), a credential? By its name
/// (`GITHUB_TOKEN`, `api_key`, `X-Api-Key`, `--token`: however short the value), by an
/// authorization scheme (`Bearer …`), by a well-known key prefix (`sk-`, `ghp_`, `xoxb-`, `AKIA`…)
/// or by looking random (long, mixing digits and letters like a hash, a UUID or base64). Empty
/// values and references to variables (`${VAR}`, `${env:VAR}`, `${input:id}`) are not secrets.
pub(super) fn is_secret(name: &str, value: &str) -> bool {
    let (scheme, rest) = super::split_scheme(value.trim());
    let rest = rest.trim();
    if rest.is_empty() || super::reference(rest).is_some() {
        return false;
    }
    is_secret_name(name) || scheme.is_some() || has_key_prefix(rest) || random_looking(rest)
}

/// A name that says its value is a secret: one of its words (split at anything not a letter or
/// digit, and at camelCase humps) is or ends with TOKEN, SECRET, PASSWORD, KEY, AUTH… — unless its
/// last word says the value is only where the secret is (`*_FILE`, `*_PATH`).
pub(super) fn is_secret_name(name: &str) -> bool {
    let words = words(name);
    if words.last().is_some_and(|w| NOT_THE_SECRET.contains(&w.as_str())) {
        return false;
    }
    words.iter().any(|word| {
        let singular = word.strip_suffix('S').filter(|w| w.len() >= 3).unwrap_or(word);
        [word.as_str(), singular].iter().any(|w| SECRET_WORDS.iter().any(|s| w.ends_with(s)) || SECRET_WHOLE_WORDS.contains(w))
    })
}

/// `X-Api-Key` → [X, API, KEY]; `apiKey` → [API, KEY]; `GITHUB_TOKEN` → [GITHUB, TOKEN].
pub(super) fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if (!c.is_ascii_alphanumeric() || (c.is_ascii_uppercase() && prev_lower)) && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_uppercase());
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// A known prefix followed by at least 8 characters of letters, digits and `-_.`, or an AWS
/// access key id (`AKIA`/`ASIA` and 16 more capitals or digits).
fn has_key_prefix(value: &str) -> bool {
    let known = KEY_PREFIXES.iter().any(|p| {
        value.strip_prefix(p).is_some_and(|rest| rest.len() >= 8 && rest.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
    });
    let aws = (value.starts_with("AKIA") || value.starts_with("ASIA"))
        && value.len() == 20
        && value.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    known || aws
}

/// Long, of the characters tokens are made of, and switching between digits, upper and lower case
/// as often as random text does (hashes, UUIDs, base64), unlike words and dates
/// (`claude-3-5-sonnet-20241022`, `GITHUB_PERSONAL_ACCESS_TOKEN`).
fn random_looking(value: &str) -> bool {
    let token_chars = value.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_+=~/".contains(&b));
    if value.len() < 20 || !token_chars || value.starts_with(['/', '~']) || value.contains("//") {
        return false;
    }
    let alnum: Vec<u8> = value.bytes().filter(u8::is_ascii_alphanumeric).collect();
    let class = |b: u8| {
        if b.is_ascii_digit() {
            0
        } else if b.is_ascii_uppercase() {
            1
        } else {
            2
        }
    };
    let changes = alnum.windows(2).filter(|w| class(w[0]) != class(w[1])).count();
    let per_ten = if alnum.iter().any(u8::is_ascii_digit) { 3 } else { 5 };
    alnum.len() >= 16 && changes * 10 >= alnum.len() * per_ten
}

/// The secrets in `text`, found under `name` ("" for none).
pub(super) fn find(name: &str, text: &str) -> Vec<Found> {
    let mut out = Vec::new();
    scan(name, text, 0, "value", &mut out);
    tidy(text, out)
}

/// The secrets in a command line's arguments, each found under the flag before it (`--api-key
/// VALUE`) when there is one: one list per argument.
pub(super) fn find_in_args(args: &[String]) -> Vec<Vec<Found>> {
    let words: Vec<(usize, &str)> = args.iter().map(|a| (0, a.as_str())).collect();
    sequence(&words).into_iter().zip(args).map(|((_, found), arg)| tidy(arg, found)).collect()
}

/// In order and apart, each on character boundaries of `text`: else `text` is the secret whole.
fn tidy(text: &str, mut found: Vec<Found>) -> Vec<Found> {
    found.sort_by_key(|f| (f.range.start, f.range.end));
    let mut out: Vec<Found> = Vec::new();
    for f in found {
        if f.range.start >= f.range.end || text.get(f.range.clone()).is_none() {
            return vec![Found { range: 0..text.len(), name: String::new(), place: "value".into() }];
        }
        if out.last().is_none_or(|last| last.range.end <= f.range.start) {
            out.push(f);
        }
    }
    out
}

/// Each word with the secrets in it, a word that follows a bare flag being found under the flag.
fn sequence(words: &[(usize, &str)]) -> Vec<(usize, Vec<Found>)> {
    let mut out = Vec::new();
    let mut flag: Option<&str> = None;
    for &(at, word) in words {
        let mut found = Vec::new();
        match flag.filter(|_| !word.starts_with('-')) {
            Some(f) => scan(f.trim_start_matches('-'), word, at, &format!("value of {f}"), &mut found),
            None => scan("", word, at, "value", &mut found),
        }
        flag = (word.starts_with('-') && !word.contains('=') && !word.trim_start_matches('-').is_empty()).then_some(word);
        out.push((at, found));
    }
    out
}

fn push(name: &str, text: &str, at: usize, place: &str, out: &mut Vec<Found>) {
    if !is_secret(name, text) {
        return;
    }
    let (scheme, rest) = super::split_scheme(text);
    let skip = scheme.map_or(0, str::len);
    let start = at + skip + (rest.len() - rest.trim_start().len());
    let end = at + text.trim_end().len();
    out.push(Found { range: start..end, name: name.to_string(), place: place.to_string() });
}

fn scan(name: &str, text: &str, at: usize, place: &str, out: &mut Vec<Found>) {
    if text.trim().is_empty() || super::reference(text).is_some() {
        return;
    }
    // Under a secret name, or after an authorization scheme, the value is the secret as a whole.
    if is_secret_name(name) || super::split_scheme(text).0.is_some() {
        return push(name, text, at, place, out);
    }
    if scan_url(text, at, out) || scan_json(text, at, place, out) {
        return;
    }
    // What would name the rest is itself a secret (`sk-live-…:x`): the whole text is.
    if text.split([':', '=']).next().is_some_and(|left| is_secret("", left.trim_start_matches('-'))) {
        out.push(Found { range: at..at + text.len(), name: String::new(), place: place.to_string() });
        return;
    }
    let ident = |k: &str| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if let Some((flag, value)) = text.split_once('=').filter(|(f, _)| f.starts_with('-') && ident(f.trim_start_matches('-'))) {
        return scan(flag.trim_start_matches('-'), value, at + text.len() - value.len(), &format!("value of {flag}"), out);
    }
    if let Some((header, value)) = text.split_once(':').filter(|(h, v)| ident(h) && !v.starts_with("//")) {
        let value = value.trim_start();
        return scan(header, value, at + text.len() - value.len(), &format!("header {header}"), out);
    }
    if let Some((key, value)) = text.split_once('=').filter(|(k, _)| ident(k)) {
        return scan(key, value, at + text.len() - value.len(), &format!("value of {key}"), out);
    }
    if text.trim().contains(char::is_whitespace) {
        let mut words = Vec::new();
        let mut offset = 0;
        for word in text.split(char::is_whitespace) {
            if !word.is_empty() {
                words.push((at + offset, word));
            }
            offset += word.len() + 1;
        }
        for (_, found) in sequence(&words) {
            out.extend(found);
        }
        return;
    }
    push(name, text, at, place, out)
}

/// A URL's credentials: the password (or a user name that is a token) of its userinfo, path
/// segments that are keys, query and fragment parameters. False when `text` is not a URL.
fn scan_url(text: &str, at: usize, out: &mut Vec<Found>) -> bool {
    let Some((scheme, rest)) = text.split_once("://") else { return false };
    if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c)) {
        return false;
    }
    let base = at + scheme.len() + 3;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some((userinfo, _)) = rest[..authority_end].rsplit_once('@') {
        match userinfo.split_once(':') {
            Some((user, password)) => push("password", password, base + user.len() + 1, "URL password", out),
            None => push("", userinfo, base, "URL user name", out),
        }
    }
    let path_end = rest.find(['?', '#']).unwrap_or(rest.len());
    let mut offset = authority_end;
    for segment in rest[authority_end..path_end].split('/') {
        push("", segment, base + offset, "URL path", out);
        offset += segment.len() + 1;
    }
    let mut offset = path_end;
    for part in rest[path_end..].split(['?', '#', '&', ';']) {
        let start = base + offset;
        offset += part.len() + 1;
        match part.split_once('=') {
            Some((key, value)) if !is_secret("", key) => {
                push(key, value, start + key.len() + 1, &format!("query parameter {key}"), out);
            }
            // A parameter named by a secret is a secret whole.
            Some(_) => out.push(Found { range: start..start + part.len(), name: String::new(), place: "URL query".into() }),
            None => push("", part, start, "URL query", out),
        }
    }
    true
}

/// A JSON object (`--config '{"apiKey": "…"}'`): its string values, each under its key. A secret
/// whose text cannot be located in the argument (escaped) makes the whole argument the secret.
fn scan_json(text: &str, at: usize, place: &str, out: &mut Vec<Found>) -> bool {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(text.trim()) else { return false };
    let mut values = Vec::new();
    let mut keys = Vec::new();
    flatten("", &serde_json::Value::Object(map), &mut values, &mut keys);
    if keys.iter().any(|k| is_secret("", k)) {
        out.push(Found { range: at..at + text.len(), name: String::new(), place: place.to_string() });
        return true;
    }
    for (key, value) in values {
        if find(&key, &value).is_empty() {
            continue;
        }
        // The value's literal, where it is a value (not followed by ':' like a key).
        let literal = super::quote(&value);
        let start = text.match_indices(&literal).map(|(i, _)| i).find(|&i| !text[i + literal.len()..].trim_start().starts_with(':'));
        match start {
            Some(i) if literal.len() >= 2 => {
                let range = at + i + 1..at + i + literal.len() - 1;
                if !out.iter().any(|f| f.range == range) {
                    out.push(Found { range, name: key.clone(), place: format!("JSON field {key}") });
                }
            }
            _ => {
                out.retain(|f| f.range.end <= at);
                out.push(Found { range: at..at + text.len(), name: String::new(), place: place.to_string() });
                return true;
            }
        }
    }
    true
}

fn flatten(key: &str, value: &serde_json::Value, values: &mut Vec<(String, String)>, keys: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => values.push((key.to_string(), s.clone())),
        serde_json::Value::Object(map) => map.iter().for_each(|(k, v)| {
            keys.push(k.clone());
            flatten(k, v, values, keys);
        }),
        serde_json::Value::Array(items) => items.iter().for_each(|v| flatten(key, v, values, keys)),
        _ => {}
    }
}
