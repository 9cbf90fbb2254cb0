//! A rule's condition (`[[rule]] when`): a CEL expression, parsed and checked once, when the
//! configuration is loaded, against the variables the gateway declares (`caller`, `request`,
//! `tool`, `args`, `now`): an unknown variable, an unknown field of a declared one, an unknown
//! function, a nested comprehension or a comparison between values of two known types (see `types`)
//! is an error with its position, never a surprise at call time. Evaluation is bounded: CEL has no
//! loops but its comprehensions, which may not nest (so a condition runs in time linear in what it
//! reads), and arguments larger than [`MAX_ARG_NODES`] values are not converted (the condition
//! fails with an [`EvalError`], which counts against the call). What a condition reads ([`Reads`])
//! says when it can be decided: with the caller alone, with the item, or only with the call itself.

use super::facts::{Facts, FactsError};
use super::fast::{Node, Scope};
pub use super::reads::{MAX_ARG_DEPTH, MAX_ARG_NODES, Reads};
use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::{Context, Env, Program, Value};
use std::sync::{Arc, OnceLock};

/// The longest condition accepted.
pub const MAX_SOURCE: usize = 4096;

/// The variables a condition may read, and the fields it may select on the ones with a fixed
/// shape (`args`, `caller.claims`, `tool` and `request.client` are free-form JSON).
const VARIABLES: &[(&str, Option<&[&str]>)] = &[
    ("caller", Some(&["id", "rules", "claims", "groups", "scopes"])),
    ("request", Some(&["method", "name", "tool", "upstream", "endpoint", "uri", "era", "client"])),
    ("tool", None),
    ("args", None),
    ("now", Some(&["unix", "year", "month", "day", "hour", "minute", "second", "weekday"])),
];

/// The functions (and operators) a condition may call: CEL's standard library and its strings
/// extension.
const FUNCTIONS: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "join",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "split",
    "substring",
    "reverse",
    "max",
    "min",
];

/// Why a condition was refused: the message, at a 1-based line and column of its text, and how
/// to fix it when the check knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckError {
    pub line: usize,
    pub column: usize,
    pub message: String,
    pub fix: Option<String>,
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {}:{} of the expression: {}", self.line, self.column, self.message)
    }
}

/// Why a condition could not be evaluated (it then counts against the call).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// A variable it reads is not known here, or is too large or deep to read.
    #[error(transparent)]
    Facts(#[from] FactsError),
    /// CEL's own error (a missing key, a value of the wrong type).
    #[error(transparent)]
    Cel(#[from] cel::ExecutionError),
    /// What it gave instead of a boolean.
    #[error("the expression gave {:?}, not true or false", .0.type_of())]
    NotBoolean(Value),
}

/// A checked condition.
pub struct Condition {
    source: String,
    program: Program,
    reads: Reads,
    /// The fast form, when every part of the expression has one.
    fast: Option<Node>,
}

impl std::fmt::Debug for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condition").field("source", &self.source).finish()
    }
}

/// The one CEL environment: the standard library and the strings extension.
fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Registering a library the crate ships on a fresh environment cannot conflict; if it
        // ever did, the functions would be missing and checked conditions naming them fail.
        let _ = env.add_extension(cel::extensions::strings);
        Arc::new(env)
    })
}

impl Condition {
    pub fn compile(source: &str) -> Result<Condition, CheckError> {
        if source.len() > MAX_SOURCE {
            return Err(CheckError { line: 1, column: 1, message: format!("longer than {MAX_SOURCE} bytes"), fix: None });
        }
        if source.trim().is_empty() {
            return Err(CheckError { line: 1, column: 1, message: "an empty expression".into(), fix: None });
        }
        let program = env().compile(source).map_err(|errors| {
            let first = errors.errors.first();
            let (line, column) = first.map_or((1, 1), |e| (e.pos.0.max(1) as usize, e.pos.1.max(0) as usize + 1));
            CheckError { line, column, message: first.map_or_else(|| "cannot be parsed".to_string(), |e| e.msg.clone()), fix: None }
        })?;
        let mut checker = Checker { program: &program, reads: Reads::default(), scope: Vec::new(), depth: 0 };
        checker.walk(program.expression())?;
        if let Expr::Literal(l) = &program.expression().expr
            && !matches!(l, cel::common::ast::LiteralValue::Boolean(_))
        {
            return Err(checker.error(program.expression(), "the expression must be true or false".into()));
        }
        let reads = checker.reads;
        let fast = Node::compile(program.expression());
        Ok(Condition { source: source.to_string(), program, reads, fast })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn reads(&self) -> Reads {
        self.reads
    }

    /// The condition's value over `facts`: `Err` when it cannot be evaluated (a missing
    /// argument, a value of the wrong type, arguments too large) or is not a boolean.
    pub fn eval(&self, facts: &Facts<'_>) -> Result<bool, EvalError> {
        if let Some(b) = self.eval_fast(&Scope::new(facts)) {
            return Ok(b);
        }
        let mut ctx = Context::with_env(env().clone());
        facts.bind(&mut ctx, self.reads)?;
        self.eval_in(&ctx)
    }

    /// The condition's value from the fast path, when it is certain of it (see `fast.rs`).
    pub(super) fn eval_fast(&self, scope: &Scope<'_>) -> Option<bool> {
        scope.eval(self.fast.as_ref()?)
    }

    /// Whether the expression has a fast form (for tests and benchmarks).
    pub fn is_fast(&self) -> bool {
        self.fast.is_some()
    }

    /// The condition's value by the interpreter alone (for the differential test).
    pub fn eval_interpreted(&self, facts: &Facts<'_>) -> Result<bool, EvalError> {
        self.eval_in(&Condition::context(facts, self.reads)?)
    }

    /// The condition's value in a context already holding the variables it reads.
    pub fn eval_in(&self, ctx: &Context<'_, '_>) -> Result<bool, EvalError> {
        match self.program.execute(ctx)? {
            Value::Bool(b) => Ok(b),
            other => Err(EvalError::NotBoolean(other)),
        }
    }

    /// A context for evaluating conditions over `facts`, with the variables `reads` names.
    pub fn context<'f>(facts: &Facts<'f>, reads: Reads) -> Result<Context<'static, 'static>, FactsError> {
        let mut ctx = Context::with_env(env().clone());
        facts.bind(&mut ctx, reads)?;
        Ok(ctx)
    }
}

impl PartialEq for Condition {
    fn eq(&self, other: &Condition) -> bool {
        self.source == other.source
    }
}

impl Eq for Condition {}

impl std::hash::Hash for Condition {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.source.hash(state);
    }
}

/// Walks the parsed expression: every identifier is a declared variable (or one a
/// comprehension binds), every selected field of a fixed-shape variable exists, every function
/// is known, and comprehensions do not nest.
struct Checker<'p> {
    program: &'p Program,
    reads: Reads,
    /// Variables bound by the comprehensions being walked.
    scope: Vec<String>,
    depth: usize,
}

impl Checker<'_> {
    fn error(&self, at: &IdedExpr, message: String) -> CheckError {
        let info = self.program.source_info();
        let (line, column) = info.offset_for(at.id).map_or((1, 1), |(start, _)| line_column(&info.source, start as usize));
        CheckError { line, column, message, fix: None }
    }

    fn walk(&mut self, e: &IdedExpr) -> Result<(), CheckError> {
        match &e.expr {
            Expr::Ident(name) => self.variable(e, e, name, None),
            Expr::Select(select) => {
                if let Expr::Ident(root) = &select.operand.expr {
                    return self.variable(&select.operand, e, root, Some(&select.field));
                }
                self.walk(&select.operand)
            }
            Expr::Call(call) => {
                let operator = call.func_name.starts_with('_') || call.func_name.starts_with('@') || call.func_name.starts_with('!');
                if !operator && !FUNCTIONS.contains(&call.func_name.as_str()) {
                    return Err(self.error(e, format!("unknown function '{}'", call.func_name)));
                }
                if let Err(m) = types::check(&call.func_name, &call.args, &self.scope) {
                    return Err(CheckError { fix: Some(m.fix), ..self.error(e, m.message) });
                }
                if let Some(target) = &call.target {
                    self.walk(target)?;
                }
                call.args.iter().try_for_each(|a| self.walk(a))
            }
            Expr::Comprehension(c) => {
                if self.depth >= 1 {
                    return Err(self.error(
                        e,
                        "comprehensions (all, exists, map, filter) may not nest: a condition must run in time linear in what it reads"
                            .into(),
                    ));
                }
                self.walk(&c.iter_range)?;
                self.walk(&c.accu_init)?;
                self.depth += 1;
                let bound = self.scope.len();
                self.scope.push(c.iter_var.clone());
                self.scope.extend(c.iter_var2.clone());
                self.scope.push(c.accu_var.clone());
                let walked = [&c.loop_cond, &c.loop_step, &c.result].into_iter().try_for_each(|x| self.walk(x));
                self.scope.truncate(bound);
                self.depth -= 1;
                walked
            }
            Expr::List(l) => l.elements.iter().try_for_each(|x| self.walk(x)),
            Expr::Map(m) => m.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => self.walk(&me.key).and_then(|_| self.walk(&me.value)),
                EntryExpr::StructField(f) => self.walk(&f.value),
            }),
            Expr::Struct(_) => Err(self.error(e, "message literals are not available".into())),
            Expr::Literal(_) | Expr::Unspecified => Ok(()),
        }
    }

    /// The variable `name` (at `at`), and the `field` selected on it (at `select`).
    fn variable(&mut self, at: &IdedExpr, select: &IdedExpr, name: &str, field: Option<&str>) -> Result<(), CheckError> {
        if self.scope.iter().any(|s| s == name) {
            return Ok(());
        }
        let Some((_, fields)) = VARIABLES.iter().find(|(v, _)| *v == name) else {
            let known: Vec<&str> = VARIABLES.iter().map(|(v, _)| *v).collect();
            return Err(self.error(at, format!("unknown variable '{name}' (the variables are {})", known.join(", "))));
        };
        if let (Some(field), Some(fields)) = (field, fields)
            && !fields.contains(&field)
        {
            return Err(self.error(select, format!("'{name}' has no field '{field}' (its fields are {})", fields.join(", "))));
        }
        let r = &mut self.reads;
        match name {
            "caller" => r.caller = true,
            "request" => r.request = true,
            "tool" => r.tool = true,
            "args" => r.args = true,
            _ => r.now = true,
        }
        Ok(())
    }
}

/// The 1-based line and column of the `offset`-th character of `source`.
fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let (mut line, mut column) = (1, 1);
    for c in source.chars().take(offset) {
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

mod types;

#[cfg(test)]
mod tests;
