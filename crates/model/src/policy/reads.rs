//! What a condition reads, and how much of it: the variables it names ([`Reads`], found when it is
//! compiled) and the bounds of the free-form JSON it may read (a call's arguments, the tool's
//! definition, the client's info, a token's claims: [`MAX_ARG_NODES`] values, [`MAX_ARG_DEPTH`]
//! levels), with the walks that check a value against them without converting it. The
//! interpreter's conversion (`facts`) and the fast path (`fast`) hold the same bounds.

use serde_json::Value as Json;

/// The most JSON values (objects, arrays and scalars, counted together) of a call's arguments
/// a condition may read; larger arguments fail every condition that reads them.
pub const MAX_ARG_NODES: usize = 10_000;
/// The deepest nesting of arguments a condition may read.
pub const MAX_ARG_DEPTH: usize = 64;

/// Which of the declared variables a condition reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Reads {
    pub caller: bool,
    pub request: bool,
    pub tool: bool,
    pub args: bool,
    pub now: bool,
}

impl Reads {
    /// Whether the condition can only be decided with the call itself (not when listing).
    pub fn needs_call(&self) -> bool {
        self.request || self.args || self.now
    }
}

/// Whether a JSON value nests no deeper than a rule may read ([`MAX_ARG_DEPTH`]), whatever its
/// size (a token's claims are bounded by the token's size, not by the arguments' budget).
pub(super) fn readable_depth(v: &Json) -> bool {
    fn walk(v: &Json, depth: usize) -> bool {
        depth <= MAX_ARG_DEPTH
            && match v {
                Json::Array(a) => a.iter().all(|x| walk(x, depth + 1)),
                Json::Object(m) => m.values().all(|x| walk(x, depth + 1)),
                _ => true,
            }
    }
    walk(v, 0)
}

/// Whether a JSON value is within what a condition may read (the limits the interpreter's
/// conversion enforces).
pub(super) fn fits(v: &Json) -> bool {
    fn walk(v: &Json, budget: &mut usize, depth: usize) -> bool {
        if *budget == 0 || depth > MAX_ARG_DEPTH {
            return false;
        }
        *budget -= 1;
        match v {
            Json::Array(a) => a.iter().all(|x| walk(x, budget, depth + 1)),
            Json::Object(m) => m.values().all(|x| walk(x, budget, depth + 1)),
            _ => true,
        }
    }
    walk(v, &mut MAX_ARG_NODES.clone(), 0)
}
