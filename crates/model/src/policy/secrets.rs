//! Detectors over what flows through (`[secrets]` and the built-in guards, docs/security.md): the
//! shapes of `policy::shapes` (credentials, personal data, hidden instructions) and the operator's
//! own patterns, each with an action: `redact` replaces what matched with `[REDACTED:<name>]`,
//! `block` withholds the whole message, `flag` only reports it. One walker ([`scrub`]) applies them
//! to every string a message carries to a client or its model (results, errors, notifications,
//! questions, definitions), but the protocol's opaque identifiers; a message it cannot read is
//! withheld, never passed ([`Withheld`] says under which name). Each string is read as written, as
//! it reads (`policy::unhide::visible`: invisible characters removed, NFKC, Cyrillic and Greek
//! look-alikes read as Latin letters), and with its base64 and hex runs decoded (bounded); the
//! texts of one content array are also read joined, so a token cut in two blocks is found, and
//! every string of a message is read joined for the injection group's detectors that block or flag,
//! so an instruction split between two strings is found. A finding is reported by its detector's
//! name, never by what matched.

use super::shapes::{INJECTION, PII, SECRETS, Shape};
use super::unhide;
use regex::Regex;
use serde_json::Value;

/// What a detector does when it finds something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Redact,
    Block,
    /// Report the finding, change nothing.
    Flag,
}

/// One detector.
#[derive(Debug, Clone)]
pub struct Detector {
    pub name: String,
    pub pattern: Regex,
    pub action: Action,
    /// The check a match must pass too (check digits).
    pub verify: Option<fn(&str) -> bool>,
    /// Whether it also reads every string of a message joined ([`phrases`]): for the words of an
    /// instruction, which mean the same split between two strings. Not for shapes (a key, a card
    /// number), which two neighbouring values would make up by chance.
    pub phrases: bool,
}

impl Detector {
    pub fn new(name: impl Into<String>, pattern: Regex, action: Action) -> Detector {
        Detector { name: name.into(), pattern, action, verify: None, phrases: false }
    }

    fn counts(&self, found: &str) -> bool {
        self.verify.is_none_or(|v| v(found))
    }

    /// Whether it finds something in `text`.
    pub fn finds(&self, text: &str) -> bool {
        match self.verify {
            None => self.pattern.is_match(text),
            Some(_) => self.pattern.find_iter(text).any(|m| self.counts(m.as_str())),
        }
    }

    /// `text` with what it finds replaced by its marker.
    fn redact(&self, text: &str) -> String {
        let marker = format!("[REDACTED:{}]", self.name);
        self.pattern
            .replace_all(text, |c: &regex::Captures<'_>| if self.counts(&c[0]) { marker.clone() } else { c[0].to_string() })
            .into_owned()
    }
}

/// The groups of built-in detectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    Secrets,
    Pii,
    Injection,
}

impl Group {
    pub fn shapes(self) -> &'static [Shape] {
        match self {
            Group::Secrets => SECRETS,
            Group::Pii => PII,
            Group::Injection => INJECTION,
        }
    }
}

/// The built-in detectors of `group` named in `names` (all of them when empty), with `action`.
pub fn group(group: Group, names: &[&str], action: Action) -> Vec<Detector> {
    group
        .shapes()
        .iter()
        .filter(|(name, _, _)| names.is_empty() || names.contains(name))
        .filter_map(|(name, p, verify)| {
            let phrases = group == Group::Injection;
            Regex::new(p).ok().map(|pattern| Detector { name: (*name).to_string(), pattern, action, verify: *verify, phrases })
        })
        .collect()
}

/// The built-in credential detectors with `action` (`[secrets] builtin`).
pub fn built_in(action: Action) -> Vec<Detector> {
    group(Group::Secrets, &[], action)
}

/// What the detectors did to a message.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// The detectors that redacted something (each once).
    pub redacted: Vec<String>,
    /// The first detector whose finding withholds the message ([`UNREADABLE`] for a message the
    /// walker cannot read).
    pub blocked: Option<String>,
    /// The flagging detectors that found something (each once).
    pub flagged: Vec<String>,
}

impl Findings {
    fn record(&mut self, d: &Detector) {
        let list = match d.action {
            Action::Block => {
                self.blocked.get_or_insert_with(|| d.name.clone());
                return;
            }
            Action::Redact => &mut self.redacted,
            Action::Flag => &mut self.flagged,
        };
        if !list.contains(&d.name) {
            list.push(d.name.clone());
        }
    }
}

/// The name a message is withheld under when it cannot be read (`protocol::read`: not JSON, a
/// lone surrogate, a number beyond a 64-bit float, nested deeper than [`MAX_DEPTH`] levels, a key
/// twice in one object) or is larger than [`MAX_BYTES`]. What cannot be read cannot be shown clean.
pub const UNREADABLE: &str = "unreadable";

/// The deepest nesting a message may have to be read.
pub use crate::protocol::read::MAX_DEPTH;

/// The largest message the walker reads (an upstream message is 16 MiB at most by default).
pub const MAX_BYTES: usize = 64 * 1024 * 1024;

/// Members that name or identify rather than say something: the protocol's own identifiers and
/// opaque values (a URI, a MIME type, base64 data, task ids, request states, cursors, progress
/// tokens), left as they are wherever the protocol puts them. Inside free-form values (below)
/// every member is read.
const OPAQUE: &[&str] = &["uri", "mimeType", "blob", "taskId", "requestState", "progressToken", "nextCursor", "cursor"];

/// Members whose whole value is free-form data an upstream chose (structured output, the data
/// of an error or a log message, a schema shown to a person): every key and string in them is
/// read, whatever its name.
const FREE_FORM: &[&str] = &["structuredContent", "data", "requestedSchema", "inputSchema", "outputSchema"];

/// Applies `detectors` to every string of a message that reaches a client or its model: every
/// string value and every object key (a result's text, names, descriptions and titles of content
/// blocks and resource links, completion values, error messages and data, log and progress
/// messages, the questions an upstream asks), but the [`OPAQUE`] members outside free-form values.
/// The walk is iterative, so its cost is linear in the message whatever its depth, and it stops
/// at the first finding that blocks.
pub fn scrub(message: &mut Value, detectors: &[Detector]) -> Findings {
    let mut found = Findings::default();
    if detectors.is_empty() {
        return found;
    }
    let mut budget = unhide::MAX_RUNS;
    let mut stack: Vec<(&mut Value, bool)> = vec![(message, false)];
    while let Some((v, free)) = stack.pop() {
        match v {
            Value::String(s) => check(s, detectors, &mut found, &mut budget),
            Value::Array(items) => {
                across(items, detectors, &mut found);
                stack.extend(items.iter_mut().map(|i| (i, free)));
            }
            Value::Object(map) => {
                rename_keys(map, detectors, &mut found, &mut budget);
                named_values(map, detectors, &mut found);
                for (k, item) in map.iter_mut() {
                    if free || !OPAQUE.contains(&k.as_str()) {
                        stack.push((item, free || FREE_FORM.contains(&k.as_str())));
                    }
                }
            }
            _ => {}
        }
        if found.blocked.is_some() {
            break;
        }
    }
    if found.blocked.is_none() {
        phrases(message, detectors, &mut found);
    }
    found
}

/// Every string of a message a reader reads, in order and as it reads, joined by spaces: what a
/// blocking or flagging detector of words (`Detector::phrases`: the injection group) finds only
/// across two or more of them (an instruction split
/// between a tool's description and a parameter's, or over two content blocks) is recorded. It
/// cannot be redacted in place, so detectors that redact read it in one content array only
/// (`across`). One more pass of those detectors, linear in the message.
fn phrases(message: &Value, detectors: &[Detector], found: &mut Findings) {
    let deciding: Vec<&Detector> = detectors.iter().filter(|d| d.phrases && d.action != Action::Redact).collect();
    if deciding.is_empty() {
        return;
    }
    let (mut joined, mut bounds) = (String::new(), Vec::new());
    let mut stack: Vec<(&Value, bool)> = vec![(message, false)];
    while let Some((v, free)) = stack.pop() {
        match v {
            Value::String(s) => {
                let seen = unhide::visible(s);
                let text = seen.as_deref().unwrap_or(s);
                if !joined.is_empty() {
                    joined.push(' ');
                }
                bounds.push((joined.len(), joined.len() + text.len()));
                joined.push_str(text);
            }
            Value::Array(items) => stack.extend(items.iter().rev().map(|i| (i, free))),
            Value::Object(map) => {
                // A member's `type` names a kind of block or schema: not words of the text.
                let members = map.iter().filter(|(k, _)| k.as_str() != "type" && (free || !OPAQUE.contains(&k.as_str())));
                let members: Vec<_> = members.map(|(k, item)| (item, free || FREE_FORM.contains(&k.as_str()))).collect();
                stack.extend(members.into_iter().rev());
            }
            _ => {}
        }
    }
    if bounds.len() < 2 {
        return;
    }
    for d in deciding {
        let spans = |m: &regex::Match<'_>| {
            let first = bounds.partition_point(|(_, e)| *e <= m.start());
            bounds.get(first).is_some_and(|(_, e)| *e < m.end()) && d.counts(m.as_str())
        };
        if d.pattern.find_iter(&joined).any(|m| spans(&m)) {
            found.record(d);
            if found.blocked.is_some() {
                return;
            }
        }
    }
}

/// Why a message is withheld; shown as the name it is withheld under (a detector's, or
/// [`UNREADABLE`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Withheld {
    /// A blocking detector found something (its name).
    #[error("{0}")]
    Blocked(String),
    /// The message cannot be read, or is larger than [`MAX_BYTES`].
    #[error("{UNREADABLE}")]
    Unreadable,
}

impl Withheld {
    /// Withheld under `name`: a detector's, or [`UNREADABLE`] (a pattern may be named so, and is
    /// then reported as the unreadable message it names).
    pub fn named(name: String) -> Withheld {
        if name == UNREADABLE { Withheld::Unreadable } else { Withheld::Blocked(name) }
    }
}

/// Reads one message (JSON text), scrubs it, and writes it again when something was redacted:
/// `Ok(None)` when nothing was found, `Ok(Some(text))` redacted, `Err` withheld (by a
/// detector, or unreadable). Every redacting detector is in `redacted`.
pub fn scrub_json(text: &str, detectors: &[Detector], redacted: &mut Vec<String>) -> Result<Option<String>, Withheld> {
    if detectors.is_empty() {
        return Ok(None);
    }
    if text.len() > MAX_BYTES {
        return Err(Withheld::Unreadable);
    }
    let mut v = crate::protocol::read::text_value(text).map_err(|_| Withheld::Unreadable)?;
    let found = scrub(&mut v, detectors);
    if let Some(name) = found.blocked {
        return Err(Withheld::named(name));
    }
    if found.redacted.is_empty() {
        return Ok(None);
    }
    for name in found.redacted {
        if !redacted.contains(&name) {
            redacted.push(name);
        }
    }
    serde_json::to_string(&v).map(Some).map_err(|_| Withheld::Unreadable)
}

/// Object keys are strings a client shows too: a key that holds a secret is redacted (renamed)
/// or blocks the message.
fn rename_keys(map: &mut serde_json::Map<String, Value>, detectors: &[Detector], found: &mut Findings, budget: &mut usize) {
    // Keys are nearly always short ASCII names: those are read as written only.
    let suspect = |k: &str| !k.is_ascii() || k.len() >= 16 || detectors.iter().any(|d| d.finds(k));
    let keys: Vec<String> = map.keys().filter(|k| suspect(k)).cloned().collect();
    for key in keys {
        let mut renamed = key.clone();
        check(&mut renamed, detectors, found, budget);
        if renamed != key
            && let Some(v) = map.remove(&key)
        {
            map.insert(renamed, v);
        }
    }
}

/// Keys the protocol itself writes, whose name says nothing about the value.
const PLAIN_KEYS: &[&str] = &["text", "type", "name", "title", "description", "message", "uri", "mimeType", "data", "blob"];

/// A string value read beside its key (`key=value`), as a person reads a JSON member: a detector
/// that knows a secret by the name it is written beside (`aws_secret_access_key`) finds it in
/// structured data too. Only a match that spans the key and the value counts (one inside the
/// value is the value's own); the whole value is its marker when redacted.
fn named_values(map: &mut serde_json::Map<String, Value>, detectors: &[Detector], found: &mut Findings) {
    for (k, v) in map.iter_mut() {
        let Value::String(s) = v else { continue };
        if k.len() < 3 || s.len() < 8 || PLAIN_KEYS.contains(&k.as_str()) {
            continue;
        }
        let joined = format!("{k}={s}");
        for d in detectors {
            let spans = |m: &regex::Match<'_>| m.start() < k.len() && m.end() > k.len() + 1 && d.counts(m.as_str());
            if d.pattern.find_iter(&joined).any(|m| spans(&m)) {
                found.record(d);
                if d.action == Action::Redact {
                    *s = format!("[REDACTED:{}]", d.name);
                    break;
                }
            }
        }
    }
}

/// One string, read as written, as it reads, and with its base64 runs decoded.
fn check(s: &mut String, detectors: &[Detector], found: &mut Findings, budget: &mut usize) {
    for d in detectors {
        if d.finds(s) {
            found.record(d);
            if d.action == Action::Redact {
                *s = d.redact(s);
            }
        }
    }
    if let Some(mut seen) = unhide::visible(s) {
        let mut changed = false;
        for d in detectors {
            if !d.finds(&seen) {
                continue;
            }
            found.record(d);
            if d.action == Action::Redact {
                seen = d.redact(&seen);
                changed = true;
            }
        }
        // What was hidden is redacted in the text as it reads.
        if changed {
            *s = seen;
        }
    }
    let mut edits = Vec::new();
    let mut runs = unhide::base64_runs(s, budget);
    runs.extend(unhide::hex_runs(s, budget));
    runs.sort_by_key(|(range, _)| range.start);
    runs.dedup_by(|b, a| b.0.start < a.0.end);
    for (range, decoded) in runs {
        for d in detectors.iter().filter(|d| d.finds(&decoded)) {
            found.record(d);
            if d.action == Action::Redact {
                edits.push((range.clone(), format!("[REDACTED:{}]", d.name)));
                break;
            }
        }
    }
    for (range, marker) in edits.into_iter().rev() {
        s.replace_range(range, &marker);
    }
}

/// The texts of an array's content blocks read as one text: a finding that spans two or more
/// blocks (one inside a block is the block's own) is recorded, and redacted in each block it
/// touches (the marker in the first, the rest of it removed from the others). One more pass of
/// each detector over the texts, linear in their size whatever the number of blocks.
fn across(items: &mut [Value], detectors: &[Detector], found: &mut Findings) {
    if items.iter().filter(|i| i.get("text").is_some_and(Value::is_string)).take(2).count() < 2 {
        return;
    }
    let mut joined = String::new();
    let mut bounds = Vec::new();
    let mut stale = true;
    for d in detectors {
        if stale {
            (joined, bounds) = (String::new(), Vec::new());
            for (i, item) in items.iter().enumerate() {
                if let Some(t) = item.get("text").and_then(Value::as_str) {
                    bounds.push((i, joined.len(), joined.len() + t.len()));
                    joined.push_str(t);
                }
            }
        }
        let mut edits: Vec<(usize, std::ops::Range<usize>, String)> = Vec::new();
        for m in d.pattern.find_iter(&joined).filter(|m| d.counts(m.as_str())) {
            // The blocks it touches (bounds are in order: a binary search finds the first).
            let first = bounds.partition_point(|(_, _, e)| *e <= m.start());
            let touched: Vec<&(usize, usize, usize)> = bounds[first..].iter().take_while(|(_, s, _)| *s < m.end()).collect();
            if touched.len() < 2 {
                continue;
            }
            found.record(d);
            if d.action != Action::Redact {
                continue;
            }
            for (n, (i, s, e)) in touched.into_iter().enumerate() {
                let local = m.start().max(*s) - s..m.end().min(*e) - s;
                edits.push((*i, local, if n == 0 { format!("[REDACTED:{}]", d.name) } else { String::new() }));
            }
        }
        stale = !edits.is_empty();
        for (i, range, marker) in edits.into_iter().rev() {
            if let Some(Value::String(t)) = items.get_mut(i).and_then(|item| item.get_mut("text")) {
                t.replace_range(range, &marker);
            }
        }
    }
}

#[cfg(test)]
mod evasions;
#[cfg(test)]
mod tests;
