//! The fast path for the conditions rules are usually written with: comparisons, `in`, `has`,
//! `size`, `startsWith`/`endsWith`/`contains`, `&&`, `||`, `!` and `?:` over the declared
//! variables, read in place (the call's arguments, the token's claims and the tool's definition
//! stay the JSON they are; nothing is converted or allocated). A condition compiles to this form
//! when every part of it has one ([`Node::compile`]); evaluating it answers `Some(value)` only
//! where the answer is certain under CEL's own semantics and `None` for everything else (a
//! missing key, values of two kinds, arguments past the size limits, claims nested too deep to
//! read), and the caller then runs the CEL interpreter, which gives the same value or the error
//! with its message. So the fast path changes how quickly a condition is decided, never what it
//! decides (the differential test in `expr/tests.rs` holds it to that).

use super::facts::Facts;
use super::reads::{fits, readable_depth};
use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use serde_json::Value as Json;
use std::cell::OnceCell;

/// A compiled condition, or a part of one.
#[derive(Debug)]
pub(super) enum Node {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Double(f64),
    Str(String),
    Root(Root),
    /// `operand.field`, or `has(operand.field)` when `test`.
    Select(Box<Node>, String, bool),
    List(Vec<Node>),
    Call(Op, Vec<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Root {
    Caller,
    Request,
    Tool,
    Args,
    Now,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    And,
    Or,
    Not,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Cond,
    Index,
    Size,
    StartsWith,
    EndsWith,
    Contains,
}

impl Node {
    /// The fast form of a checked expression, when every part of it has one.
    pub(super) fn compile(e: &IdedExpr) -> Option<Node> {
        Some(match &e.expr {
            Expr::Literal(l) => match l {
                LiteralValue::Null => Node::Null,
                LiteralValue::Boolean(b) => Node::Bool(*b.inner()),
                LiteralValue::Int(i) => Node::Int(*i.inner()),
                LiteralValue::UInt(u) => Node::UInt(*u.inner()),
                LiteralValue::Double(d) => Node::Double(*d.inner()),
                LiteralValue::String(s) => Node::Str(s.inner().to_string()),
                LiteralValue::Bytes(_) => return None,
            },
            Expr::Ident(name) => Node::Root(match name.as_str() {
                "caller" => Root::Caller,
                "request" => Root::Request,
                "tool" => Root::Tool,
                "args" => Root::Args,
                "now" => Root::Now,
                _ => return None,
            }),
            Expr::Select(s) => Node::Select(Box::new(Node::compile(&s.operand)?), s.field.clone(), s.test),
            Expr::List(l) if l.optional_indices.is_empty() => Node::List(l.elements.iter().map(Node::compile).collect::<Option<_>>()?),
            Expr::Call(call) => {
                let op = match (call.func_name.as_str(), call.target.is_some(), call.args.len()) {
                    ("_&&_", false, 2) => Op::And,
                    ("_||_", false, 2) => Op::Or,
                    ("!_", false, 1) => Op::Not,
                    ("_==_", false, 2) => Op::Eq,
                    ("_!=_", false, 2) => Op::Ne,
                    ("_<_", false, 2) => Op::Lt,
                    ("_<=_", false, 2) => Op::Le,
                    ("_>_", false, 2) => Op::Gt,
                    ("_>=_", false, 2) => Op::Ge,
                    ("@in", false, 2) => Op::In,
                    ("_?_:_", false, 3) => Op::Cond,
                    ("_[_]", false, 2) => Op::Index,
                    ("size", false, 1) | ("size", true, 0) => Op::Size,
                    ("startsWith", true, 1) => Op::StartsWith,
                    ("endsWith", true, 1) => Op::EndsWith,
                    ("contains", true, 1) => Op::Contains,
                    _ => return None,
                };
                let target = call.target.as_deref().map(Node::compile);
                let mut nodes = Vec::with_capacity(call.args.len() + 1);
                if let Some(t) = target {
                    nodes.push(t?);
                }
                for a in &call.args {
                    nodes.push(Node::compile(a)?);
                }
                Node::Call(op, nodes)
            }
            _ => return None,
        })
    }
}

/// What one call's conditions read, made once and shared by every rule's fast evaluation.
pub(super) struct Scope<'a> {
    facts: &'a Facts<'a>,
    tool: OnceCell<Option<Json>>,
    args_fit: OnceCell<bool>,
    /// Whether the token's claims are within the depth a rule may read.
    claims_fit: OnceCell<bool>,
}

impl<'a> Scope<'a> {
    pub(super) fn new(facts: &'a Facts<'a>) -> Scope<'a> {
        Scope { facts, tool: OnceCell::new(), args_fit: OnceCell::new(), claims_fit: OnceCell::new() }
    }

    /// The condition's value, when the fast path is certain of it.
    pub(super) fn eval(&self, node: &Node) -> Option<bool> {
        match self.value(node)? {
            V::Bool(b) => Some(b),
            _ => None,
        }
    }

    fn args(&self) -> Option<&Json> {
        let args = self.facts.args?;
        self.args_fit.get_or_init(|| fits(args)).then_some(args)
    }

    fn tool(&self) -> Option<&Json> {
        let parsed = self.tool.get_or_init(|| match self.facts.item {
            Some(text) => crate::protocol::read::text_value(text).ok().filter(fits),
            None => Some(Json::Object(Default::default())),
        });
        parsed.as_ref()
    }

    fn value<'n>(&'n self, node: &'n Node) -> Option<V<'n>> {
        Some(match node {
            Node::Null => V::Null,
            Node::Bool(b) => V::Bool(*b),
            Node::Int(i) => V::Int(*i),
            Node::UInt(u) => V::UInt(*u),
            Node::Double(d) => V::Double(*d),
            Node::Str(s) => V::Str(s),
            // Claims too deep to read fail every condition reading `caller` (the interpreter says why).
            Node::Root(Root::Caller) => {
                self.claims_fit.get_or_init(|| readable_depth(&self.facts.caller.claims)).then_some(())?;
                V::Caller
            }
            Node::Root(Root::Request) => {
                self.facts.request?;
                V::Request
            }
            Node::Root(Root::Now) => V::Now(self.facts.now?),
            Node::Root(Root::Args) => V::of(self.args()?),
            Node::Root(Root::Tool) => V::of(self.tool()?),
            Node::List(items) => V::List(items),
            Node::Select(of, field, test) => {
                let of = self.value(of)?;
                return if *test { of.has(field).map(V::Bool) } else { self.select(of, field) };
            }
            Node::Call(op, nodes) => return self.call(*op, nodes),
        })
    }

    fn select<'n>(&'n self, of: V<'n>, field: &str) -> Option<V<'n>> {
        match of {
            V::Json(Json::Object(m)) => m.get(field).map(V::of),
            V::Caller => {
                let c = self.facts.caller;
                Some(match field {
                    "id" => V::Str(&c.id),
                    "rules" => V::Strs(&c.rules),
                    "claims" => V::of(&c.claims),
                    "groups" => V::Strs(c.groups()),
                    "scopes" => V::Strs(&c.scopes),
                    _ => return None,
                })
            }
            V::Request => {
                let r = self.facts.request?;
                Some(V::Str(match field {
                    "method" => r.method,
                    "name" => r.name,
                    "tool" if r.method == "tools/call" => r.name,
                    "uri" if r.method.starts_with("resources/") => r.name,
                    "tool" | "uri" => "",
                    "upstream" => r.upstream,
                    "endpoint" => r.endpoint,
                    "era" => r.era,
                    // The interpreter reads a client description past the limits as `null`.
                    "client" => return r.client.map_or(empty_object().map(V::of), |c| fits(c).then(|| V::of(c))),
                    _ => return None,
                }))
            }
            V::Now(unix) => super::facts::now_fields(unix).into_iter().find(|(k, _)| *k == field).map(|(_, v)| V::Int(v)),
            _ => None,
        }
    }

    fn call<'n>(&'n self, op: Op, n: &'n [Node]) -> Option<V<'n>> {
        let arg = |i: usize| n.get(i).and_then(|x| self.value(x));
        let flag = |i: usize| match arg(i)? {
            V::Bool(b) => Some(b),
            _ => None,
        };
        Some(V::Bool(match op {
            // Left to right, stopping where CEL's answer cannot change; anything else (an
            // error on the left) is for the interpreter, whose `&&`/`||` are commutative.
            Op::And => flag(0)? && flag(1)?,
            Op::Or => flag(0)? || flag(1)?,
            Op::Not => !flag(0)?,
            Op::Eq => equal(arg(0)?, arg(1)?)?,
            Op::Ne => !equal(arg(0)?, arg(1)?)?,
            Op::Lt | Op::Le | Op::Gt | Op::Ge => {
                let o = order(arg(0)?, arg(1)?)?;
                match op {
                    Op::Lt => o.is_lt(),
                    Op::Le => o.is_le(),
                    Op::Gt => o.is_gt(),
                    _ => o.is_ge(),
                }
            }
            Op::In => self.contains(arg(1)?, arg(0)?)?,
            Op::Cond => return if flag(0)? { arg(1) } else { arg(2) },
            Op::Index => {
                return match (arg(0)?, arg(1)?) {
                    (V::Json(Json::Object(m)), V::Str(k)) => m.get(k).map(V::of),
                    (V::Json(Json::Array(a)), V::Int(i)) => usize::try_from(i).ok().and_then(|i| a.get(i)).map(V::of),
                    _ => None,
                };
            }
            Op::Size => {
                return Some(V::Int(match arg(0)? {
                    V::Str(s) => s.chars().count() as i64,
                    V::Json(Json::Array(a)) => a.len() as i64,
                    V::Json(Json::Object(m)) => m.len() as i64,
                    V::Strs(s) => s.len() as i64,
                    V::List(l) => l.len() as i64,
                    _ => return None,
                }));
            }
            Op::StartsWith | Op::EndsWith | Op::Contains => {
                let (V::Str(s), V::Str(p)) = (arg(0)?, arg(1)?) else { return None };
                match op {
                    Op::StartsWith => s.starts_with(p),
                    Op::EndsWith => s.ends_with(p),
                    _ => s.contains(p),
                }
            }
        }))
    }

    /// `needle in container`.
    fn contains(&self, container: V<'_>, needle: V<'_>) -> Option<bool> {
        let mut found = false;
        let mut each = |item: Option<V<'_>>| -> Option<()> {
            found = found || equal(needle, item?)?;
            Some(())
        };
        match container {
            V::Strs(list) => list.iter().try_for_each(|s| each(Some(V::Str(s))))?,
            V::Json(Json::Array(a)) => a.iter().try_for_each(|x| each(Some(V::of(x))))?,
            V::List(nodes) => nodes.iter().try_for_each(|x| each(self.value(x)))?,
            V::Json(Json::Object(m)) => match needle {
                V::Str(k) => return Some(m.contains_key(k)),
                _ => return None,
            },
            _ => return None,
        }
        Some(found)
    }
}

/// A value the fast path works with, borrowed from the facts or the condition.
#[derive(Debug, Clone, Copy)]
enum V<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Double(f64),
    Str(&'a str),
    /// A JSON array or object.
    Json(&'a Json),
    /// A list of strings (the caller's groups, scopes, matched entries).
    Strs(&'a [String]),
    /// A list literal of the condition.
    List(&'a [Node]),
    Caller,
    Request,
    /// `now`, in seconds since the epoch.
    Now(u64),
}

impl<'a> V<'a> {
    /// A JSON value, as the CEL conversion in `facts.rs` makes it.
    fn of(j: &'a Json) -> V<'a> {
        match j {
            Json::Null => V::Null,
            Json::Bool(b) => V::Bool(*b),
            Json::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => V::Int(i),
                (None, Some(u)) => V::UInt(u),
                _ => V::Double(n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::String(s) => V::Str(s),
            Json::Array(_) | Json::Object(_) => V::Json(j),
        }
    }

    /// `has(self.field)`.
    fn has(self, field: &str) -> Option<bool> {
        match self {
            V::Json(Json::Object(m)) => Some(m.contains_key(field)),
            // The checker admits only the declared fields of these.
            V::Caller | V::Request | V::Now(_) => Some(true),
            _ => None,
        }
    }
}

/// `a == b` for values of one kind; values of two kinds (or lists and maps) are the
/// interpreter's.
fn equal(a: V<'_>, b: V<'_>) -> Option<bool> {
    Some(match (a, b) {
        (V::Null, V::Null) => true,
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::Int(x), V::Int(y)) => x == y,
        (V::UInt(x), V::UInt(y)) => x == y,
        (V::Double(x), V::Double(y)) => x == y,
        (V::Str(x), V::Str(y)) => x == y,
        // `null` equals only itself (what `args.x != null` asks).
        (V::Null, V::Bool(_) | V::Int(_) | V::UInt(_) | V::Double(_) | V::Str(_) | V::Json(_))
        | (V::Bool(_) | V::Int(_) | V::UInt(_) | V::Double(_) | V::Str(_) | V::Json(_), V::Null) => false,
        _ => return None,
    })
}

fn order(a: V<'_>, b: V<'_>) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (V::Int(x), V::Int(y)) => Some(x.cmp(&y)),
        (V::UInt(x), V::UInt(y)) => Some(x.cmp(&y)),
        (V::Double(x), V::Double(y)) => x.partial_cmp(&y),
        (V::Str(x), V::Str(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

fn empty_object() -> Option<&'static Json> {
    static EMPTY: std::sync::LazyLock<Json> = std::sync::LazyLock::new(|| Json::Object(Default::default()));
    Some(&EMPTY)
}

#[cfg(test)]
mod tests;
