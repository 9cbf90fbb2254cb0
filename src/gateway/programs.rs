//! Code mode's programs on this replica: the places to run one (at most `[code_mode] programs` at
//! once, and `programs_per_caller` of one caller's), each held by a [`Slot`] that gives its place
//! back when dropped, and the programs paused for a person's answer ([`Paused`]), kept until their
//! retry takes them (once) or their timer drops them after the input timeout, which kills their
//! process. A full replica refuses a new program at once rather than queueing it: a program is
//! cheap to send and costly to run, so queueing would let one caller hold others' requests.

use crate::upstream::program::Program;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The programs of this replica.
#[derive(Default)]
pub struct Programs {
    /// Running or paused programs, by caller id (absent: none).
    held: Mutex<HashMap<String, usize>>,
    /// Paused programs, by the one-time key their retry presents.
    paused: Mutex<HashMap<String, Paused>>,
}

/// Why a program cannot start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Busy {
    #[error("{0} programs are already running on this gateway")]
    Replica(usize),
    #[error("{0} of your programs are already running")]
    Caller(usize),
}

/// A program's place: given back when dropped.
pub struct Slot {
    programs: Arc<Programs>,
    caller: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = mcpgate_protocol::sync::lock(&self.programs.held);
        if let Some(n) = held.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.caller);
            }
        }
    }
}

/// What a paused program's retry needs: its process (blocked on the answer to `call`), its place,
/// what it did so far, and who may take it.
pub struct Paused {
    pub program: Program,
    pub slot: Slot,
    /// The program's id (audit records, the result's `_meta`).
    pub id: Arc<str>,
    /// The inner calls made so far: the tool as the program named it, and how each ended.
    pub calls: Vec<(String, String)>,
    /// The inner call waiting for the person: its id on the pipe, the tool and its arguments.
    pub call: (u64, String, serde_json::Value),
    /// The inner call's own `requestState` (the question's), sent back on the retry.
    pub state: Option<serde_json::Value>,
    /// Time the program has run so far (its wall clock, paused while a person answers).
    pub ran: Duration,
    /// How many times it has paused.
    pub rounds: u32,
    /// Who may take it: the caller's id, its rules and the endpoint (checked besides the sealed
    /// state its retry presents).
    pub owner: (String, Vec<String>, Option<Arc<str>>),
}

impl Programs {
    /// A place for a program of `caller`, within `max` on the replica and `per_caller` of its own.
    pub fn enter(self: &Arc<Self>, caller: &str, max: usize, per_caller: usize) -> Result<Slot, Busy> {
        let mut held = mcpgate_protocol::sync::lock(&self.held);
        let total: usize = held.values().sum();
        if total >= max {
            return Err(Busy::Replica(total));
        }
        let mine = held.get(caller).copied().unwrap_or(0);
        if mine >= per_caller {
            return Err(Busy::Caller(mine));
        }
        held.insert(caller.to_string(), mine + 1);
        Ok(Slot { programs: Arc::clone(self), caller: caller.to_string() })
    }

    /// Keeps a paused program under `key` (its retry's one-time key); a key in use already is
    /// refused (the program comes back), never overwritten.
    pub fn pause(&self, key: String, paused: Paused) -> Result<(), Box<Paused>> {
        match mcpgate_protocol::sync::lock(&self.paused).entry(key) {
            std::collections::hash_map::Entry::Occupied(_) => Err(Box::new(paused)),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(paused);
                Ok(())
            }
        }
    }

    /// Takes the paused program under `key`, once, when `may` says its asker may (else it stays).
    pub fn resume(&self, key: &str, may: impl FnOnce(&Paused) -> bool) -> Option<Paused> {
        let mut paused = mcpgate_protocol::sync::lock(&self.paused);
        if !paused.get(key).is_some_and(may) {
            return None;
        }
        paused.remove(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_per_replica_and_per_caller_and_given_back() {
        let p = Arc::new(Programs::default());
        let a1 = p.enter("alice", 3, 2);
        let a2 = p.enter("alice", 3, 2);
        assert!(a1.is_ok() && a2.is_ok());
        assert_eq!(p.enter("alice", 3, 2).err(), Some(Busy::Caller(2)));
        let b1 = p.enter("bob", 3, 2);
        assert!(b1.is_ok());
        assert_eq!(p.enter("carol", 3, 2).err(), Some(Busy::Replica(3)));
        drop(a1);
        assert!(p.enter("alice", 3, 2).is_ok(), "a dropped slot gives its place back");
        drop((a2, b1));
        assert!(mcpgate_protocol::sync::lock(&p.held).is_empty());
    }
}
