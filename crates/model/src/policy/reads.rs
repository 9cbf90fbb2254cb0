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

/// The bound a value passes first: more than [`MAX_ARG_NODES`] values, or nesting deeper than
/// [`MAX_ARG_DEPTH`] levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Beyond {
    Values,
    Depth,
}

/// Whether a JSON value is within what a condition may read: `Err` names the first bound a
/// depth-first walk meets (one walk for the interpreter's conversion and the fast path).
pub(super) fn within(v: &Json) -> Result<(), Beyond> {
    fn walk(v: &Json, budget: &mut usize, depth: usize) -> Result<(), Beyond> {
        if *budget == 0 {
            return Err(Beyond::Values);
        }
        if depth > MAX_ARG_DEPTH {
            return Err(Beyond::Depth);
        }
        *budget -= 1;
        match v {
            Json::Array(a) => a.iter().try_for_each(|x| walk(x, budget, depth + 1)),
            Json::Object(m) => m.values().try_for_each(|x| walk(x, budget, depth + 1)),
            _ => Ok(()),
        }
    }
    walk(v, &mut MAX_ARG_NODES.clone(), 0)
}

/// Whether a JSON value is within what a condition may read.
pub(super) fn fits(v: &Json) -> bool {
    within(v).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_bound_passed_is_named() {
        assert_eq!(within(&json!({ "a": [1, 2, { "b": null }] })), Ok(()));
        let mut deep = json!(1);
        for _ in 0..=MAX_ARG_DEPTH {
            deep = json!([deep]);
        }
        assert_eq!(within(&deep), Err(Beyond::Depth));
        assert!(readable_depth(&json!([[1]])) && !readable_depth(&deep));
        let wide = Json::Array(vec![json!(0); MAX_ARG_NODES]);
        assert_eq!(within(&wide), Err(Beyond::Values), "the array itself is one value too");
        assert_eq!(within(&Json::Array(vec![json!(0); MAX_ARG_NODES - 1])), Ok(()));
        assert!(!fits(&wide) && !fits(&deep));
    }
}
