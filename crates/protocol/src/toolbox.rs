//! The small helpers every layer needs, each written once in the lowest crate so that no layer
//! reaches up or sideways for one: the clock ([`unix_secs`], [`unix_ms`]: a clock before 1970
//! reads 0), lowercase hex ([`hex`]) and the SHA-256 of some bytes as hex ([`sha256_hex`]),
//! and random values: a token of 256 bits in base64url ([`random_token`]: consent links, sign-in
//! states, assertion ids) and ids in hex ([`random_hex`]: the console key, input request keys,
//! request id prefixes); and percent-decoding ([`percent_decode`]: URIs and JSON Pointer
//! fragments; [`form_decode`]: query values, where `+` is a space), one strict reading: an escape
//! is `%` and two hex digits, anything else is kept as written.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch.
pub fn unix_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// `bytes` as lowercase hex, two digits each.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    out
}

/// The SHA-256 of `bytes`, as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes).as_ref())
}

/// `bytes` random bytes from the system's random source, as lowercase hex (ids nobody can guess).
pub fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    let _ = aws_lc_rs::rand::fill(&mut b);
    hex(&b)
}

/// A 256-bit random value, base64url without padding; `None` if the system's random source fails.
pub fn random_token() -> Option<String> {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).ok()?;
    Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// `s` with its `%XX` escapes decoded (two hex digits, either case; a broken escape such as `%`,
/// `%4` or `%zz` is kept as it is), read as UTF-8 (a byte that is not valid UTF-8 becomes U+FFFD).
pub fn percent_decode(s: &str) -> String {
    decode(s, false)
}

/// A query value (`application/x-www-form-urlencoded`): `+` is a space, then as [`percent_decode`]
/// (`%2B` stays a `+`).
pub fn form_decode(s: &str) -> String {
    decode(s, true)
}

fn decode(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let digit = |i: usize| bytes.get(i).and_then(|b| (*b as char).to_digit(16));
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], digit(i + 1), digit(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
            (b'+', _, _) if plus_is_space => out.push(b' '),
            (b, _, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_digests_and_tokens() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let (a, b) = (random_token().expect("random"), random_token().expect("random"));
        assert_eq!(a.len(), 43);
        assert_ne!(a, b);
        assert!(unix_ms() / 1000 >= unix_secs() - 1 && unix_secs() > 1_700_000_000);
    }
}
