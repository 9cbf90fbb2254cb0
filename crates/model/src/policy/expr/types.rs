//! The types a condition's comparisons can be checked against when the rule is loaded: the
//! fields whose type the gateway knows (`now.*` numbers; `caller.id` a string, `caller.rules`,
//! `groups` and `scopes` lists of strings; `request.*` strings and `request.client` a map;
//! `tool.name`, `title`, `description` strings and `tool.annotations.*` booleans, its `title` a
//! string, per the MCP schema), literals, and the functions whose result is fixed. Comparing
//! one of them with a value of another type (`now.hour == "eight"`, `"admin" in caller.id`) is
//! an error at load: CEL's equality between two types is false, so such a rule would silently
//! never hold. What only the call knows (`args.*`, `caller.claims.*`, the rest of `tool`) is
//! not checked.

use cel::common::ast::{Expr, IdedExpr, LiteralValue};

/// What is known of a value's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ty {
    Unknown,
    Num,
    Str,
    Bool,
    Null,
    Bytes,
    Map,
    List(Box<Ty>),
}

impl Ty {
    fn name(&self) -> &'static str {
        match self {
            Ty::Unknown => "a value",
            Ty::Num => "a number",
            Ty::Str => "a string",
            Ty::Bool => "a boolean",
            Ty::Null => "null",
            Ty::Bytes => "bytes",
            Ty::Map => "a map",
            Ty::List(e) if **e == Ty::Str => "a list of strings",
            Ty::List(_) => "a list",
        }
    }

    /// The type's name for several values ("the items are strings").
    fn plural(&self) -> String {
        match self {
            Ty::Null => "null".into(),
            Ty::Bytes => "bytes".into(),
            Ty::List(_) => "lists".into(),
            Ty::Map => "maps".into(),
            other => format!("{}s", other.name().trim_start_matches("a ").trim_start_matches("an ")),
        }
    }

    /// Whether values of the two types can ever be equal.
    fn meets(&self, other: &Ty) -> bool {
        match (self, other) {
            (Ty::Unknown, _) | (_, Ty::Unknown) => true,
            (Ty::List(a), Ty::List(b)) => a.meets(b),
            (a, b) => a == b,
        }
    }

    /// An example of a literal of this type, for the fix.
    fn example(&self) -> &'static str {
        match self {
            Ty::Num => "a number such as 8 (no quotes)",
            Ty::Str => "a string such as \"text\" (quoted)",
            Ty::Bool => "true or false (no quotes)",
            Ty::List(_) => "a list such as [\"a\", \"b\"]",
            Ty::Map => "a key with 'in' or a field with '.'",
            _ => "a value of the same type",
        }
    }
}

/// A comparison that can never hold: the message and its fix.
pub(super) struct Mismatch {
    pub message: String,
    pub fix: String,
}

/// The type of `e`, as far as it is known without a call; `bound` names the variables a
/// comprehension binds (which shadow the declared ones).
pub(super) fn type_of(e: &IdedExpr, bound: &[String]) -> (Ty, bool) {
    match &e.expr {
        Expr::Literal(l) => (
            match l {
                LiteralValue::Int(_) | LiteralValue::UInt(_) | LiteralValue::Double(_) => Ty::Num,
                LiteralValue::String(_) => Ty::Str,
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Null => Ty::Null,
                LiteralValue::Bytes(_) => Ty::Bytes,
            },
            false,
        ),
        Expr::List(l) => {
            let elements: Vec<Ty> = l.elements.iter().map(|x| type_of(x, bound).0).collect();
            let first = elements.first().cloned().unwrap_or(Ty::Unknown);
            let element = if elements.iter().all(|t| *t == first) { first } else { Ty::Unknown };
            (Ty::List(Box::new(element)), false)
        }
        Expr::Map(_) => (Ty::Map, false),
        Expr::Select(s) if s.test => (Ty::Bool, false),
        Expr::Select(_) => field(&path(e, bound)),
        Expr::Call(call) => (
            match (call.func_name.as_str(), call.target.is_some()) {
                ("size" | "int" | "uint" | "double" | "indexOf" | "lastIndexOf", _) => Ty::Num,
                ("string" | "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt" | "join", _) => Ty::Str,
                ("startsWith" | "endsWith" | "contains" | "matches" | "bool", _) => Ty::Bool,
                ("_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" | "@in" | "_&&_" | "_||_" | "!_", false) => Ty::Bool,
                ("split", true) => Ty::List(Box::new(Ty::Str)),
                _ => Ty::Unknown,
            },
            false,
        ),
        _ => (Ty::Unknown, false),
    }
}

/// The dotted path of a field selected on a declared variable (`now.hour`), if `e` is one.
fn path(e: &IdedExpr, bound: &[String]) -> Vec<String> {
    let mut parts = Vec::new();
    let mut at = e;
    loop {
        match &at.expr {
            Expr::Select(s) if !s.test => {
                parts.push(s.field.clone());
                at = &s.operand;
            }
            Expr::Ident(root) if !bound.contains(root) => {
                parts.push(root.clone());
                parts.reverse();
                return parts;
            }
            _ => return Vec::new(),
        }
    }
}

/// The type of a declared field, and whether it may hold `null` (read from JSON).
fn field(path: &[String]) -> (Ty, bool) {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match p.as_slice() {
        ["now", _] => (Ty::Num, false),
        ["caller", "id"] => (Ty::Str, false),
        ["caller", "rules" | "groups" | "scopes"] => (Ty::List(Box::new(Ty::Str)), false),
        ["request", "client"] => (Ty::Map, true),
        ["request", _] => (Ty::Str, false),
        ["tool", "name" | "title" | "description"] => (Ty::Str, true),
        ["tool", "annotations"] => (Ty::Map, true),
        ["tool", "annotations", "title"] => (Ty::Str, true),
        ["tool", "annotations", "readOnlyHint" | "destructiveHint" | "idempotentHint" | "openWorldHint"] => (Ty::Bool, true),
        _ => (Ty::Unknown, true),
    }
}

/// How an operand reads in a message: its dotted path, its literal text, or its type.
fn describe(e: &IdedExpr, bound: &[String], ty: &Ty) -> String {
    let p = path(e, bound);
    if !p.is_empty() {
        return p.join(".");
    }
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => format!("{:?}", s.inner()),
        Expr::Literal(LiteralValue::Int(i)) => i.inner().to_string(),
        Expr::Literal(LiteralValue::UInt(u)) => format!("{}u", u.inner()),
        Expr::Literal(LiteralValue::Double(d)) => d.inner().to_string(),
        Expr::Literal(LiteralValue::Boolean(b)) => b.inner().to_string(),
        Expr::Literal(LiteralValue::Null) => "null".into(),
        _ => format!("the value ({})", ty.name()),
    }
}

/// Checks one comparison (`func` with `args`): `Err` when it can never hold (or, ordering,
/// never be evaluated) for the types known.
pub(super) fn check(func: &str, args: &[IdedExpr], bound: &[String]) -> Result<(), Mismatch> {
    let [left, right] = args else { return Ok(()) };
    let ((lt, lnull), (rt, rnull)) = (type_of(left, bound), type_of(right, bound));
    let (l, r) = (describe(left, bound, &lt), describe(right, bound, &rt));
    match func {
        "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
            let null_ok = (lt == Ty::Null && rnull) || (rt == Ty::Null && lnull);
            if !lt.meets(&rt) && !null_ok {
                // The fix names the field whose type is known (the left one when both are).
                let (name, ty) = if !path(left, bound).is_empty() && lt != Ty::Unknown { (&l, &lt) } else { (&r, &rt) };
                let never = if func == "_!=_" { "always holds" } else { "never holds" };
                return Err(Mismatch {
                    message: format!("{l} is {}, {r} is {}: the comparison {never}", lt.name(), rt.name()),
                    fix: format!("compare {name} with {}", ty.example()),
                });
            }
            let ordering = !matches!(func, "_==_" | "_!=_");
            if ordering && [&lt, &rt].iter().any(|t| matches!(t, Ty::List(_) | Ty::Map | Ty::Null)) {
                return Err(Mismatch {
                    message: format!("{l} ({}) and {r} ({}) cannot be ordered", lt.name(), rt.name()),
                    fix: "order numbers, strings or booleans; for a list use 'in' or size()".into(),
                });
            }
        }
        "@in" => match &rt {
            Ty::List(element) if !lt.meets(element) => {
                return Err(Mismatch {
                    message: format!("{l} is {}, the items of {r} are {}: 'in' never holds", lt.name(), element.plural()),
                    fix: format!("look for {} in {r}", element.example()),
                });
            }
            Ty::Map if !lt.meets(&Ty::Str) => {
                return Err(Mismatch {
                    message: format!("{l} is {}, the keys of {r} are strings: 'in' never holds", lt.name()),
                    fix: format!("look for a key such as \"name\" in {r}"),
                });
            }
            Ty::Num | Ty::Str | Ty::Bool | Ty::Null | Ty::Bytes => {
                let hint =
                    if rt == Ty::Str { format!("for text inside a string, write {r}.contains({l})") } else { "use a list or a map".into() };
                return Err(Mismatch { message: format!("{r} is {}: 'in' needs a list or a map", rt.name()), fix: hint });
            }
            _ => {}
        },
        _ => {}
    }
    Ok(())
}
