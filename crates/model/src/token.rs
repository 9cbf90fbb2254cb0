//! Opaque tokens the gateway hands out and later gets back (legacy session ids now; cursors and
//! wrapped request state later): a JSON payload sealed with AES-256-GCM under a key every replica
//! shares, bound to its purpose through the AEAD's associated data, with an issue time checked
//! against a maximum age. A token that was forged, altered, sealed for another purpose, sealed
//! with another key or is too old does not open. Several keys may be configured for rotation:
//! the first seals, every one opens.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

pub const KEY_ENV: &str = "MCPGATE_TOKEN_KEY";
const MIN_KEY_BYTES: usize = 32;

/// Where the key came from, for the startup log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    Env,
    File,
    Random,
}

pub struct Sealer {
    /// The first key seals; each is tried in turn to open.
    keys: Vec<LessSafeKey>,
    rng: SystemRandom,
    pub source: KeySource,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").field("source", &self.source).finish_non_exhaustive()
    }
}

/// Why the token key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the key is neither hex nor Base64")]
    Encoding,
    #[error("the key has {0} bytes; at least {MIN_KEY_BYTES} are needed (e.g. `openssl rand -hex 32`)")]
    TooShort(usize),
    /// A key after the first of a list (numbered from 1).
    #[error("key {index}: {source}")]
    Nth { index: usize, source: Box<KeyError> },
    #[error("no key found")]
    Missing,
    #[error("cannot build the token key")]
    Unusable,
    #[error("the system RNG failed")]
    Rng,
    /// Where the keys came from (the variable or the file), and what is wrong with them.
    #[error("{origin}: {source}")]
    In { origin: String, source: Box<KeyError> },
    #[error("token key file {}: {source}", path.display())]
    Unreadable { path: std::path::PathBuf, source: std::io::Error },
}

/// Why a token could not be sealed.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("the payload cannot be encoded: {0}")]
    Encoding(#[from] serde_json::Error),
    #[error("the system RNG failed")]
    Rng,
    #[error("sealing failed")]
    Crypto,
}

/// Parses key material given as hex or Base64 (standard or URL-safe), at least 32 bytes.
pub fn parse_key(text: &str) -> Result<Vec<u8>, KeyError> {
    let t = text.trim();
    let bytes = if t.len().is_multiple_of(2) && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        (0..t.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&t[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| KeyError::Encoding)?
    } else {
        STANDARD.decode(t).or_else(|_| URL_SAFE_NO_PAD.decode(t.trim_end_matches('='))).map_err(|_| KeyError::Encoding)?
    };
    if bytes.len() < MIN_KEY_BYTES {
        return Err(KeyError::TooShort(bytes.len()));
    }
    Ok(bytes)
}

/// Parses one or more keys: separated by commas, spaces or lines; lines starting with `#` are
/// comments. The first key is the one that seals.
pub fn parse_keys(text: &str) -> Result<Vec<Vec<u8>>, KeyError> {
    let keys: Vec<Vec<u8>> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.split(|c: char| c == ',' || c.is_whitespace()))
        .filter(|k| !k.is_empty())
        .enumerate()
        .map(|(i, k)| parse_key(k).map_err(|e| if i == 0 { e } else { KeyError::Nth { index: i + 1, source: Box::new(e) } }))
        .collect::<Result<_, _>>()?;
    if keys.is_empty() {
        return Err(KeyError::Missing);
    }
    Ok(keys)
}

impl Sealer {
    pub fn from_material(material: &[u8], source: KeySource) -> Result<Sealer, KeyError> {
        Self::from_keys(&[material.to_vec()], source)
    }

    /// A sealer with several keys: the first seals, all open.
    pub fn from_keys(materials: &[Vec<u8>], source: KeySource) -> Result<Sealer, KeyError> {
        let keys = materials
            .iter()
            .map(|m| {
                let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, m);
                UnboundKey::new(&AES_256_GCM, digest.as_ref()).map(LessSafeKey::new).map_err(|_| KeyError::Unusable)
            })
            .collect::<Result<Vec<_>, _>>()?;
        if keys.is_empty() {
            return Err(KeyError::Missing);
        }
        Ok(Sealer { keys, rng: SystemRandom::new(), source })
    }

    /// How many keys open tokens (more than one while a rotation is under way).
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// A fresh random key: tokens will not survive a restart or work across replicas.
    pub fn random() -> Result<Sealer, KeyError> {
        let mut material = [0u8; 32];
        SystemRandom::new().fill(&mut material).map_err(|_| KeyError::Rng)?;
        Self::from_material(&material, KeySource::Random)
    }

    /// The keys from `MCPGATE_TOKEN_KEY` (comma-separated, the first seals), else from `files`
    /// in order (each may hold several, one per line), else a random one.
    pub fn load(env_value: Option<String>, files: &[std::path::PathBuf]) -> Result<Sealer, KeyError> {
        let within = |origin: String| move |e: KeyError| KeyError::In { origin, source: Box::new(e) };
        if let Some(v) = env_value.filter(|v| !v.trim().is_empty()) {
            let keys = parse_keys(&v).map_err(within(KEY_ENV.to_string()))?;
            return Self::from_keys(&keys, KeySource::Env);
        }
        if !files.is_empty() {
            let mut keys = Vec::new();
            for path in files {
                let text = std::fs::read_to_string(path).map_err(|source| KeyError::Unreadable { path: path.clone(), source })?;
                keys.extend(parse_keys(&text).map_err(within(format!("token key file {}", path.display())))?);
            }
            return Self::from_keys(&keys, KeySource::File);
        }
        Self::random()
    }

    pub fn random_id(&self) -> String {
        crate::toolbox::random_hex(16)
    }

    pub fn seal<T: Serialize>(&self, purpose: &str, payload: &T) -> Result<String, SealError> {
        let body = serde_json::to_vec(&Envelope { iat: now_secs(), p: payload })?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| SealError::Rng)?;
        let mut buf = body;
        self.keys[0]
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(purpose.as_bytes()), &mut buf)
            .map_err(|_| SealError::Crypto)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&buf);
        Ok(URL_SAFE_NO_PAD.encode(out))
    }

    /// Opens a token sealed for `purpose` no longer than `max_age` ago.
    pub fn open<T: DeserializeOwned>(&self, purpose: &str, token: &str, max_age: Duration) -> Option<T> {
        let (payload, age) = self.open_aged(purpose, token)?;
        (age <= max_age).then_some(payload)
    }

    /// Opens a token sealed for `purpose`, whatever its age; the payload and its age.
    pub fn open_aged<T: DeserializeOwned>(&self, purpose: &str, token: &str) -> Option<(T, Duration)> {
        let raw = URL_SAFE_NO_PAD.decode(token.trim()).ok()?;
        if raw.len() < NONCE_LEN + 16 {
            return None;
        }
        let (nonce, sealed) = raw.split_at(NONCE_LEN);
        let env: OwnedEnvelope<T> = self.keys.iter().find_map(|key| {
            let mut buf = sealed.to_vec();
            let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
            let plain = key.open_in_place(nonce, Aad::from(purpose.as_bytes()), &mut buf).ok()?;
            serde_json::from_slice(plain).ok()
        })?;
        Some((env.p, Duration::from_secs(now_secs().saturating_sub(env.iat))))
    }
}

#[derive(Serialize)]
struct Envelope<'a, T> {
    iat: u64,
    p: &'a T,
}

#[derive(serde::Deserialize)]
struct OwnedEnvelope<T> {
    iat: u64,
    p: T,
}

fn now_secs() -> u64 {
    crate::toolbox::unix_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86400);

    #[test]
    fn round_trips_and_rejects_tampering() {
        let s = Sealer::from_material(&[7u8; 32], KeySource::Env).unwrap();
        let t = s.seal("session", &vec!["a", "b"]).unwrap();
        assert_eq!(s.open::<Vec<String>>("session", &t, DAY).unwrap(), vec!["a", "b"]);
        assert!(s.open::<Vec<String>>("cursor", &t, DAY).is_none(), "bound to its purpose");
        let other = Sealer::from_material(&[8u8; 32], KeySource::Env).unwrap();
        assert!(other.open::<Vec<String>>("session", &t, DAY).is_none(), "bound to its key");
        let mut bytes = URL_SAFE_NO_PAD.decode(&t).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(s.open::<Vec<String>>("session", &URL_SAFE_NO_PAD.encode(bytes), DAY).is_none());
        assert!(s.open::<Vec<String>>("session", "garbage", DAY).is_none());
        assert!(s.open::<Vec<String>>("session", "", DAY).is_none());
    }

    #[test]
    fn parses_hex_and_base64_keys() {
        assert_eq!(parse_key(&"ab".repeat(32)).unwrap().len(), 32);
        assert_eq!(parse_key(&STANDARD.encode([1u8; 40])).unwrap().len(), 40);
        assert!(parse_key("abcd").unwrap_err().to_string().contains("at least 32"));
        assert!(parse_key("not a key!").is_err());
    }

    #[test]
    fn same_key_means_same_tokens_across_instances() {
        let a = Sealer::load(Some("cd".repeat(32)), &[]).unwrap();
        let b = Sealer::load(Some("cd".repeat(32)), &[]).unwrap();
        let t = a.seal("session", &42u32).unwrap();
        assert_eq!(b.open::<u32>("session", &t, DAY), Some(42));
        assert_eq!(Sealer::random().unwrap().source, KeySource::Random);
    }

    #[test]
    fn rotation_seals_with_the_first_key_and_opens_with_any() {
        let (old, new) = ("01".repeat(32), "02".repeat(32));
        let before = Sealer::load(Some(old.clone()), &[]).unwrap();
        let during = Sealer::load(Some(format!("{new},{old}")), &[]).unwrap();
        let after = Sealer::load(Some(new.clone()), &[]).unwrap();
        assert_eq!(during.key_count(), 2);
        let old_token = before.seal("session", &1u8).unwrap();
        assert_eq!(during.open::<u8>("session", &old_token, DAY), Some(1), "old tokens open while both keys are configured");
        assert_eq!(after.open::<u8>("session", &old_token, DAY), None, "and not once the old key is removed");
        let new_token = during.seal("session", &2u8).unwrap();
        assert_eq!(after.open::<u8>("session", &new_token, DAY), Some(2), "new tokens are sealed with the first key");
        assert_eq!(before.open::<u8>("session", &new_token, DAY), None);
        assert!(parse_keys("# rotated 2026-12\n0202020202020202020202020202020202020202020202020202020202020202\n").is_ok());
        assert!(parse_keys("").unwrap_err().to_string().contains("no key"));
        assert!(parse_keys(&format!("{new}, abcd")).unwrap_err().to_string().starts_with("key 2"));
    }
}
