//! Opaque tokens the gateway hands out and later gets back (legacy session ids now; cursors and
//! wrapped request state later): a JSON payload sealed with AES-256-GCM under a key every replica
//! shares, bound to its purpose through the AEAD's associated data, with an issue time checked
//! against a maximum age. A token that was forged, altered, sealed for another purpose, sealed
//! with another key or is too old does not open.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    key: LessSafeKey,
    rng: SystemRandom,
    pub source: KeySource,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").field("source", &self.source).finish_non_exhaustive()
    }
}

/// Parses key material given as hex or Base64 (standard or URL-safe), at least 32 bytes.
pub fn parse_key(text: &str) -> Result<Vec<u8>, String> {
    let t = text.trim();
    let bytes = if t.len().is_multiple_of(2) && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        (0..t.len()).step_by(2).map(|i| u8::from_str_radix(&t[i..i + 2], 16)).collect::<Result<Vec<u8>, _>>().map_err(|e| e.to_string())?
    } else {
        STANDARD
            .decode(t)
            .or_else(|_| URL_SAFE_NO_PAD.decode(t.trim_end_matches('=')))
            .map_err(|_| "the key is neither hex nor Base64".to_string())?
    };
    if bytes.len() < MIN_KEY_BYTES {
        return Err(format!("the key has {} bytes; at least {MIN_KEY_BYTES} are needed (e.g. `openssl rand -hex 32`)", bytes.len()));
    }
    Ok(bytes)
}

impl Sealer {
    pub fn from_material(material: &[u8], source: KeySource) -> Result<Sealer, String> {
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, material);
        let key = UnboundKey::new(&AES_256_GCM, digest.as_ref()).map_err(|_| "cannot build the token key".to_string())?;
        Ok(Sealer { key: LessSafeKey::new(key), rng: SystemRandom::new(), source })
    }

    /// A fresh random key: tokens will not survive a restart or work across replicas.
    pub fn random() -> Result<Sealer, String> {
        let mut material = [0u8; 32];
        SystemRandom::new().fill(&mut material).map_err(|_| "the system RNG failed".to_string())?;
        Self::from_material(&material, KeySource::Random)
    }

    /// The key from `MCPGATE_TOKEN_KEY`, else from `file`, else a random one.
    pub fn load(env_value: Option<String>, file: Option<&std::path::Path>) -> Result<Sealer, String> {
        if let Some(v) = env_value.filter(|v| !v.trim().is_empty()) {
            let key = parse_key(&v).map_err(|e| format!("{KEY_ENV}: {e}"))?;
            return Self::from_material(&key, KeySource::Env);
        }
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| format!("token key file {}: {e}", path.display()))?;
            let key = parse_key(&text).map_err(|e| format!("token key file {}: {e}", path.display()))?;
            return Self::from_material(&key, KeySource::File);
        }
        Self::random()
    }

    pub fn random_id(&self) -> String {
        let mut b = [0u8; 16];
        let _ = self.rng.fill(&mut b);
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    pub fn seal<T: Serialize>(&self, purpose: &str, payload: &T) -> Result<String, String> {
        let body = serde_json::to_vec(&Envelope { iat: now_secs(), p: payload }).map_err(|e| e.to_string())?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| "the system RNG failed".to_string())?;
        let mut buf = body;
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(purpose.as_bytes()), &mut buf)
            .map_err(|_| "sealing failed".to_string())?;
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
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = self.key.open_in_place(nonce, Aad::from(purpose.as_bytes()), &mut buf).ok()?;
        let env: OwnedEnvelope<T> = serde_json::from_slice(plain).ok()?;
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

/// `bytes` random bytes from the system RNG, as lowercase hex (ids nobody can guess).
pub fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    let _ = SystemRandom::new().fill(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
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
        assert!(parse_key("abcd").unwrap_err().contains("at least 32"));
        assert!(parse_key("not a key!").is_err());
    }

    #[test]
    fn same_key_means_same_tokens_across_instances() {
        let a = Sealer::load(Some("cd".repeat(32)), None).unwrap();
        let b = Sealer::load(Some("cd".repeat(32)), None).unwrap();
        let t = a.seal("session", &42u32).unwrap();
        assert_eq!(b.open::<u32>("session", &t, DAY), Some(42));
        assert_eq!(Sealer::random().unwrap().source, KeySource::Random);
    }
}
