//! What checking arguments against a schema costs, counted before anything runs it. A validator
//! applies each subschema to the part of the arguments it is about; `$ref` and the in-place
//! applicators (`anyOf`, `oneOf`, `allOf`, `not`, `if`/`then`/`else`, `dependentSchemas`) apply
//! more subschemas to the same value, so a schema whose `$defs` each refer twice to the next
//! expands to 2^depth applications (22 levels took a minute of a worker). Two counts bound it:
//! the schema's own expansion (every `$ref` followed, every subschema once, a reference back into
//! itself not followed), checked when the catalogue is built, and the applications one check would
//! make on the arguments actually sent (a recursive schema's expansion grows with the nesting of
//! the arguments), checked before the validator runs. Both counts stop at their budget, so
//! counting is cheap whatever the schema. The count is an upper bound of the validator's work:
//! an application to a string counts with the string's length, and the subschemas beside an
//! `unevaluated*` keyword count twice (the validator evaluates them again for it).

use serde_json::Value;
use std::collections::HashMap;

/// The most subschemas a tool's schema may expand to (every `$ref` followed). The schemas tools
/// publish expand to tens or hundreds.
pub const SCHEMA_BUDGET: usize = 10_000;
/// The most (subschema, value) applications one check of a call's arguments may make: about
/// 100 ms of one core for the validator at worst (measured: about 1 µs per application for an
/// `anyOf` whose branches all fail).
pub const CHECK_BUDGET: usize = 100_000;
/// Checks counted above this run on the blocking pool, not on a thread that serves requests.
pub const INLINE_WORK: usize = 1_000;
/// Applying a subschema to a string counts one more application per this many bytes of it (a
/// pattern or a length reads the whole string).
const STRING_UNIT: usize = 256;

/// The keywords that apply their subschemas to the same value.
const IN_PLACE_ONE: [&str; 4] = ["not", "if", "then", "else"];
const IN_PLACE_LIST: [&str; 3] = ["allOf", "anyOf", "oneOf"];
const IN_PLACE_MAP: [&str; 2] = ["dependentSchemas", "dependencies"];
const REFS: [&str; 3] = ["$ref", "$dynamicRef", "$recursiveRef"];
/// The keywords that apply their subschema to every member or item.
const EVERY_MEMBER: [&str; 2] = ["additionalProperties", "unevaluatedProperties"];
const EVERY_ITEM: [&str; 4] = ["items", "additionalItems", "contains", "unevaluatedItems"];

/// Stands for a value the count does not need to see into (a property name).
static LEAF: Value = Value::Null;

struct Walk<'a> {
    root: &'a Value,
    /// `$anchor`, `$dynamicAnchor` and `$id` values, to the subschema that declares them:
    /// collected at the first reference (a schema without references never needs them).
    named: Option<HashMap<&'a str, &'a Value>>,
    used: usize,
    budget: usize,
    /// The subschemas (and values) on the current path, to stop at a reference back into it.
    path: Vec<(*const Value, *const Value)>,
}

/// How many subschemas `schema` expands to, or `Err(n)` past `budget` (counting stopped at `n`).
pub fn schema_size(schema: &Value, budget: usize) -> Result<usize, usize> {
    let mut walk = Walk::new(schema, budget);
    walk.visit(schema, None);
    walk.result()
}

/// How many applications checking `args` against `schema` may make, or `Err(n)` past `budget`.
pub fn check_work(schema: &Value, args: &Value, budget: usize) -> Result<usize, usize> {
    let mut walk = Walk::new(schema, budget);
    walk.visit(schema, Some(args));
    walk.result()
}

fn collect_names<'a>(v: &'a Value, named: &mut HashMap<&'a str, &'a Value>, depth: usize) {
    if depth > 256 {
        return;
    }
    match v {
        Value::Object(m) => {
            for key in ["$anchor", "$dynamicAnchor", "$recursiveAnchor", "$id", "id"] {
                if let Some(Value::String(name)) = m.get(key) {
                    named.entry(name.as_str()).or_insert(v);
                }
            }
            m.values().for_each(|c| collect_names(c, named, depth + 1));
        }
        Value::Array(a) => a.iter().for_each(|c| collect_names(c, named, depth + 1)),
        _ => {}
    }
}

impl<'a> Walk<'a> {
    fn new(root: &'a Value, budget: usize) -> Self {
        Walk { root, named: None, used: 0, budget, path: Vec::new() }
    }

    fn named(&mut self) -> &HashMap<&'a str, &'a Value> {
        let root = self.root;
        self.named.get_or_insert_with(|| {
            let mut named = HashMap::new();
            collect_names(root, &mut named, 0);
            named
        })
    }

    fn result(&self) -> Result<usize, usize> {
        if self.used > self.budget { Err(self.used) } else { Ok(self.used) }
    }

    /// The subschema a reference points at; one this count cannot place is taken as the whole
    /// schema (the most it could cost).
    fn resolve(&mut self, reference: &str) -> &'a Value {
        let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let start = if base.is_empty() { Some(self.root) } else { self.named().get(base).copied() };
        let Some(start) = start else { return self.root };
        if fragment.is_empty() {
            return start;
        }
        if fragment.starts_with('/') {
            let decoded = crate::toolbox::percent_decode(fragment);
            return start.pointer(&decoded).unwrap_or(self.root);
        }
        let root = self.root;
        self.named().get(fragment).copied().unwrap_or(root)
    }

    /// Counts `schema` applied to `value` (`None`: to any value, for the schema's own size).
    fn visit(&mut self, schema: &'a Value, value: Option<&'a Value>) {
        if self.used > self.budget {
            return;
        }
        // Reading a string (a pattern, a length) costs with its length.
        self.used += 1 + value.and_then(Value::as_str).map_or(0, |t| t.len() / STRING_UNIT);
        let Value::Object(m) = schema else { return };
        let here = (schema as *const Value, value.map_or(std::ptr::null(), |v| v as *const Value));
        if self.path.contains(&here) {
            // A reference back into itself on the same value: the validator does not go round
            // again either (or it could never end), and the schema's size counts it once.
            return;
        }
        self.path.push(here);
        // `unevaluatedProperties`/`unevaluatedItems` evaluate the subschemas beside them again to
        // learn what they evaluated: counted twice.
        let rounds = if m.contains_key("unevaluatedProperties") || m.contains_key("unevaluatedItems") { 2 } else { 1 };
        for _ in 0..rounds {
            self.in_place(m, value);
        }
        self.descend(m, value);
        self.path.pop();
    }

    /// The keywords that apply their subschemas to `value` itself.
    fn in_place(&mut self, m: &'a serde_json::Map<String, Value>, value: Option<&'a Value>) {
        for key in REFS {
            if let Some(Value::String(r)) = m.get(key) {
                let target = self.resolve(r);
                self.visit(target, value);
            }
        }
        for key in IN_PLACE_ONE {
            if let Some(s) = m.get(key) {
                self.visit(s, value);
            }
        }
        for key in IN_PLACE_LIST {
            if let Some(Value::Array(list)) = m.get(key) {
                list.iter().for_each(|s| self.visit(s, value));
            }
        }
        for key in IN_PLACE_MAP {
            if let Some(Value::Object(map)) = m.get(key) {
                map.values().filter(|s| s.is_object() || s.is_boolean()).for_each(|s| self.visit(s, value));
            }
        }
    }

    /// The keywords that apply to the members or items of `value`.
    fn descend(&mut self, m: &'a serde_json::Map<String, Value>, value: Option<&'a Value>) {
        let object = value.and_then(Value::as_object);
        let array = value.and_then(Value::as_array);
        if let Some(Value::Object(props)) = m.get("properties") {
            for (name, s) in props {
                match (value, object.and_then(|o| o.get(name))) {
                    (None, _) => self.visit(s, None),
                    (Some(_), Some(member)) => self.visit(s, Some(member)),
                    (Some(_), None) => {}
                }
            }
        }
        let mut every_member: Vec<&'a Value> = EVERY_MEMBER.iter().filter_map(|k| m.get(*k)).collect();
        if let Some(Value::Object(patterns)) = m.get("patternProperties") {
            every_member.extend(patterns.values());
        }
        let mut every_item: Vec<&'a Value> = EVERY_ITEM.iter().filter_map(|k| m.get(*k)).filter(|s| !s.is_array()).collect();
        let mut by_index: Vec<&'a Value> = Vec::new();
        for key in ["prefixItems", "items"] {
            if let Some(Value::Array(list)) = m.get(key) {
                by_index.extend(list);
            }
        }
        let names = m.get("propertyNames");
        if value.is_none() {
            every_member.extend(names);
            every_member.append(&mut every_item);
            every_member.extend(by_index);
            every_member.into_iter().for_each(|s| self.visit(s, None));
            return;
        }
        if let Some(o) = object {
            for s in every_member {
                o.values().for_each(|member| self.visit(s, Some(member)));
            }
            // `propertyNames` applies to each name, a string with nothing inside.
            if let Some(s) = names {
                o.keys().for_each(|_| self.visit(s, Some(&LEAF)));
            }
        }
        if let Some(a) = array {
            for s in every_item {
                a.iter().for_each(|item| self.visit(s, Some(item)));
            }
            for (s, item) in by_index.into_iter().zip(a) {
                self.visit(s, Some(item));
            }
        }
    }
}

#[cfg(test)]
mod tests;
