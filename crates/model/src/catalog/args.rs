//! A tool call's arguments checked against the tool's `inputSchema` before the call leaves the
//! gateway (MCP basic/index "JSON Schema usage"): JSON Schema 2020-12 unless the schema names
//! another dialect with `$schema`; `$ref` only within the schema (the validator is built without
//! any resolver, so an upstream's schema cannot make the gateway fetch a URL or read a file, and a
//! schema whose `$ref` points outside itself is refused rather than treated as permissive);
//! `format` is an annotation, not checked; `pattern` runs on a linear-time engine. A top-level
//! argument sent as `null` that the schema does not require is taken as left out (clients send
//! `null` for "not given", and the MCP `x-mcp-header` rules treat it so), everything else is
//! checked as sent. The validator is compiled on first use and kept with the catalogue entry, so
//! each snapshot compiles each tool's schema at most once and later calls only run it. What a check
//! costs is bounded (see `cost`): a schema that expands past [`cost::SCHEMA_BUDGET`] subschemas is
//! not served (the catalogue reports it, [`TooExpansive`]), and a call whose check would make more
//! than [`cost::CHECK_BUDGET`] applications is refused before the validator runs.

use crate::protocol::json::Json;
use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// The most problems one refusal lists.
const MAX_PROBLEMS: usize = 8;

/// One way the arguments do not fit the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// JSON Pointer into the arguments (`""` for the arguments object itself).
    pub path: String,
    pub message: String,
}

/// Why arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// They do not fit the schema.
    Invalid(Vec<Problem>),
    /// The schema itself cannot be used (an external `$ref`, an unsupported dialect, a broken
    /// pattern): nothing can be checked against it.
    Unusable(String),
    /// Checking these arguments against the schema would cost more than a check may.
    TooCostly(String),
}

/// Why a tool is not served: its `inputSchema` expands past [`cost::SCHEMA_BUDGET`] subschemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the inputSchema expands to more than {budget} subschemas once its $refs are followed (references inside anyOf, \
     oneOf or allOf nest too deep), so checking arguments against it could hold the gateway for minutes; \
     the tool is held until the upstream serves a simpler schema (or set validate_arguments = false on this upstream)",
    budget = cost::SCHEMA_BUDGET
)]
pub struct TooExpansive;

enum Compiled {
    Ready(Box<jsonschema::Validator>, Value),
    /// The tool declares no schema: nothing to check.
    Open,
    Unusable(String),
}

/// A tool's argument check: its definition, and the validator compiled from it on first use.
#[derive(Clone)]
pub struct ArgCheck {
    definition: Json,
    compiled: Arc<OnceLock<Compiled>>,
}

impl std::fmt::Debug for ArgCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ArgCheck")
    }
}

impl ArgCheck {
    /// The check for the tool `definition` (its JSON as the upstream listed it).
    pub fn new(definition: Json) -> Self {
        ArgCheck { definition, compiled: Arc::default() }
    }

    /// Whether the tool's schema is cheap enough to check calls against (its expansion within
    /// [`cost::SCHEMA_BUDGET`]), or why not. Counting reads the schema only when it could
    /// expand (it has a reference, or escapes that could spell one).
    pub fn affordable(&self) -> Result<(), TooExpansive> {
        let text = self.definition.get();
        if !(text.contains("ref") || text.contains("Ref") || text.contains("\\u")) {
            return Ok(());
        }
        // A definition that cannot be read is refused when a call is checked (`compile`).
        let Ok(tool) = crate::protocol::read::text_value(text) else { return Ok(()) };
        let Some(schema) = tool.get("inputSchema") else { return Ok(()) };
        cost::schema_size(schema, cost::SCHEMA_BUDGET).map(|_| ()).map_err(|_| TooExpansive)
    }

    /// How many schema applications checking `args` may take (an upper bound), or a refusal
    /// when that is more than [`cost::CHECK_BUDGET`]. Counting stops at the budget.
    pub fn work(&self, args: &Value) -> Result<usize, Refusal> {
        match self.compiled() {
            Compiled::Ready(_, schema) => cost::check_work(schema, args, cost::CHECK_BUDGET).map_err(|_| {
                Refusal::TooCostly(format!(
                    "checking them against the tool's inputSchema would take more than {} steps (its references nest as \
                     deep as the arguments do)",
                    cost::CHECK_BUDGET
                ))
            }),
            _ => Ok(1),
        }
    }

    fn compiled(&self) -> &Compiled {
        self.compiled.get_or_init(|| compile(&self.definition))
    }

    /// Whether `args` fit the tool's input schema (refused unchecked when [`Self::work`] is over
    /// budget).
    pub fn check(&self, args: &Value) -> Result<(), Refusal> {
        self.work(args)?;
        self.check_counted(args)
    }

    /// [`Self::check`], for arguments whose [`Self::work`] the caller has counted (and found
    /// within budget): they are not counted again.
    pub fn check_counted(&self, args: &Value) -> Result<(), Refusal> {
        match self.compiled() {
            Compiled::Open => Ok(()),
            Compiled::Unusable(why) => Err(Refusal::Unusable(why.clone())),
            Compiled::Ready(v, _) => {
                let without_nulls;
                let args = match args.as_object() {
                    Some(m) if m.values().any(Value::is_null) => {
                        without_nulls =
                            Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect());
                        &without_nulls
                    }
                    _ => args,
                };
                let problems: Vec<Problem> = v
                    .iter_errors(args)
                    .take(MAX_PROBLEMS)
                    .map(|e| Problem { path: e.instance_path().to_string(), message: e.to_string() })
                    .collect();
                if problems.is_empty() { Ok(()) } else { Err(Refusal::Invalid(problems)) }
            }
        }
    }
}

fn compile(definition: &Json) -> Compiled {
    let tool = match crate::protocol::read::text_value(definition.get()) {
        Ok(tool) => tool,
        Err(why) => return Compiled::Unusable(format!("the tool's definition cannot be read: {why}")),
    };
    let Some(schema) = tool.get("inputSchema").filter(|s| s.is_object()) else { return Compiled::Open };
    let linear = jsonschema::options().with_pattern_options(jsonschema::PatternOptions::regex()).build(schema);
    match linear {
        Ok(v) => Compiled::Ready(Box::new(v), schema.clone()),
        // Patterns the linear engine cannot take (lookaround, backreferences) get a backtracking
        // engine with a small step budget.
        Err(first) => {
            let bounded =
                jsonschema::options().with_pattern_options(jsonschema::PatternOptions::fancy_regex().backtrack_limit(10_000)).build(schema);
            match bounded {
                Ok(v) => Compiled::Ready(Box::new(v), schema.clone()),
                Err(_) => Compiled::Unusable(first.to_string()),
            }
        }
    }
}

pub mod cost;

#[cfg(test)]
mod tests;
