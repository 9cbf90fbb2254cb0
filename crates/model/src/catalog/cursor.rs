//! The gateway's own pagination cursors for merged lists: a token sealed with the token key (so
//! a client can neither forge nor read one, and any replica can open it) that holds the list it
//! belongs to, the offset into it, and the fingerprint of that list when the cursor was issued.
//! A cursor that does not open, belongs to another list, or was issued for a list that has
//! changed since is answered with -32602 and one message whatever the reason (a cursor tells a
//! prober nothing about other lists): the client starts again from the first page.

use super::Kind;
use crate::protocol::errors::RpcError;
use crate::token::Sealer;
use serde::{Deserialize, Serialize};

const PURPOSE: &str = "mcpgate/cursor/v1";

#[derive(Serialize, Deserialize)]
struct Position {
    /// The list (`tools`, `prompts`, ...).
    k: String,
    /// The offset of the next page.
    o: usize,
    /// The list's fingerprint (hex) when the cursor was issued.
    v: String,
}

pub fn encode(sealer: &Sealer, kind: Kind, offset: usize, fingerprint: u64) -> Result<String, crate::token::SealError> {
    sealer.seal(PURPOSE, &Position { k: kind.list_key().into(), o: offset, v: format!("{fingerprint:016x}") })
}

/// What the client is told of any cursor the gateway does not honour.
pub fn invalid() -> RpcError {
    RpcError::invalid_params("Invalid cursor: list again from the start")
}

/// The offset a cursor holds; `Err` says why it is refused (for the audit, not the client:
/// answer every refusal with [`invalid`]).
pub fn decode(sealer: &Sealer, kind: Kind, cursor: &str, fingerprint: u64) -> Result<usize, &'static str> {
    let (pos, _) = sealer.open_aged::<Position>(PURPOSE, cursor).ok_or("invalid_cursor/not_issued_here")?;
    if pos.k != kind.list_key() {
        return Err("invalid_cursor/another_list");
    }
    if pos.v != format!("{fingerprint:016x}") {
        return Err("invalid_cursor/list_changed");
    }
    Ok(pos.o)
}

/// A stable fingerprint of a list's names in order (FNV-1a, the same on every replica).
pub fn fingerprint<'a>(names: impl Iterator<Item = &'a str>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for name in names {
        for b in name.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_forged_foreign_and_stale_cursors() {
        let sealer = Sealer::random().unwrap();
        let v = fingerprint(["a", "b"].into_iter());
        let c = encode(&sealer, Kind::Tool, 1234, v).unwrap();
        assert_eq!(decode(&sealer, Kind::Tool, &c, v).unwrap(), 1234);
        assert!(decode(&sealer, Kind::Prompt, &c, v).is_err(), "another list's cursor");
        assert!(decode(&sealer, Kind::Tool, &c, fingerprint(["a", "c"].into_iter())).is_err(), "stale");
        assert!(decode(&sealer, Kind::Tool, "nope!", v).is_err());
        assert!(decode(&Sealer::random().unwrap(), Kind::Tool, &c, v).is_err(), "another key");
        assert_ne!(fingerprint(["ab", "c"].into_iter()), fingerprint(["a", "bc"].into_iter()));
    }
}
