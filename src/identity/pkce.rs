//! PKCE (RFC 7636) with the only method the MCP authorization spec allows, `S256`: a fresh
//! high-entropy verifier per authorization request, and its challenge.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// A PKCE pair: the verifier (kept by the gateway until the code is exchanged) and its challenge
/// (sent in the authorization request).
#[derive(Clone, PartialEq, Eq)]
pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkce").field("verifier", &"<redacted>").field("challenge", &self.challenge).finish()
    }
}

impl Pkce {
    /// A new pair: 32 random bytes, base64url-encoded, give a 43-character verifier from the
    /// unreserved set (the RFC's minimum length and recommended construction). `None` when the
    /// system's random generator fails, so no guessable verifier is ever used.
    pub fn new() -> Option<Pkce> {
        let mut bytes = [0u8; 32];
        aws_lc_rs::rand::fill(&mut bytes).ok()?;
        Some(Pkce::from_verifier(URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// The pair for a given verifier.
    pub fn from_verifier(verifier: String) -> Pkce {
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, verifier.as_bytes());
        Pkce { challenge: URL_SAFE_NO_PAD.encode(digest.as_ref()), verifier }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_the_rfc_7636_s256_of_the_verifier() {
        // RFC 7636, appendix B.
        let p = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into());
        assert_eq!(p.challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    }

    #[test]
    fn verifiers_are_fresh_and_well_formed() {
        let (a, b) = (Pkce::new().expect("rng"), Pkce::new().expect("rng"));
        assert_ne!(a.verifier, b.verifier);
        assert_eq!(a.verifier.len(), 43);
        assert!(a.verifier.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
    }
}
