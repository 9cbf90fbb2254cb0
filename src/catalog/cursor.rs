//! The gateway's own pagination cursors for merged lists: an opaque Base64url token holding the
//! offset into the snapshot. A cursor that does not decode is answered with -32602.

use crate::protocol::errors::RpcError;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub fn encode(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("o:{offset}"))
}

pub fn decode(cursor: &str) -> Result<usize, RpcError> {
    let bad = || RpcError::invalid_params(format!("Invalid cursor: {}", crate::protocol::headers::describe(cursor)));
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    text.strip_prefix("o:").and_then(|n| n.parse().ok()).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        assert_eq!(decode(&encode(1234)).unwrap(), 1234);
        assert!(decode("nope!").is_err());
        assert!(decode("").is_err());
        assert!(decode(&URL_SAFE_NO_PAD.encode("x:1")).is_err());
    }
}
