//! DPoP (RFC 9449): proof-of-possession for the upstream tokens the gateway holds. A [`DpopKey`]
//! is a P-256 key made for one vault entry (one caller, one upstream, one authorization server)
//! when its tokens are first asked for, and kept beside them, sealed, so a token that leaks from
//! the vault's store is useless without its key, and one caller's key never proves another's
//! token. Each request that carries such a token carries a fresh proof: a JWT (`typ` `dpop+jwt`,
//! ES256, the public key in the header) over the method, the URL without query or fragment, the
//! time, a unique id, the token's hash (`ath`, on resource requests) and the server's nonce when it
//! asked for one. The private key never leaves this module but as its sealed PKCS#8.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;

/// The one algorithm the gateway signs proofs with.
pub const ALG: &str = "ES256";

/// A proof key.
#[derive(Clone)]
pub struct DpopKey {
    pair: std::sync::Arc<EcdsaKeyPair>,
    pkcs8: Vec<u8>,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DpopKey({})", self.thumbprint())
    }
}

impl PartialEq for DpopKey {
    fn eq(&self, other: &Self) -> bool {
        self.pkcs8 == other.pkcs8
    }
}
impl Eq for DpopKey {}

impl DpopKey {
    /// A new key; `None` only when the system has no randomness.
    pub fn generate() -> Option<Self> {
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new()).ok()?;
        Self::from_pkcs8(doc.as_ref())
    }

    pub fn from_pkcs8(pkcs8: &[u8]) -> Option<Self> {
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8).ok()?;
        Some(DpopKey { pair: std::sync::Arc::new(pair), pkcs8: pkcs8.to_vec() })
    }

    /// The key as kept in the (sealed) vault: base64url PKCS#8.
    pub fn export(&self) -> String {
        B64.encode(&self.pkcs8)
    }

    pub fn import(text: &str) -> Option<Self> {
        Self::from_pkcs8(&B64.decode(text.as_bytes()).ok()?)
    }

    /// The public key as a JWK (RFC 7518 §6.2), members in the RFC 7638 order.
    pub fn jwk(&self) -> serde_json::Value {
        let point = self.pair.public_key().as_ref();
        // Uncompressed SEC1: 0x04 || x || y.
        let (x, y) = point.get(1..).map(|xy| xy.split_at(xy.len() / 2)).unwrap_or((&[], &[]));
        serde_json::json!({ "crv": "P-256", "kty": "EC", "x": B64.encode(x), "y": B64.encode(y) })
    }

    /// The RFC 7638 thumbprint of the public key (what a bound token's `cnf.jkt` names).
    pub fn thumbprint(&self) -> String {
        let jwk = self.jwk();
        let canonical =
            format!(r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#, jwk["x"].as_str().unwrap_or(""), jwk["y"].as_str().unwrap_or(""));
        B64.encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, canonical.as_bytes()))
    }

    /// A proof for one request: `method` to `url` (its query and fragment left out), bound to
    /// `access_token` when one is presented, with the server's `nonce` when it gave one.
    pub fn proof(&self, method: &str, url: &str, access_token: Option<&str>, nonce: Option<&str>) -> Option<String> {
        let header = serde_json::json!({ "typ": "dpop+jwt", "alg": ALG, "jwk": self.jwk() });
        let mut claims = serde_json::json!({
            "jti": mcpgate_protocol::toolbox::random_token()?,
            "htm": method,
            "htu": htu(url),
            "iat": super::vault::now(),
        });
        if let Some(token) = access_token {
            claims["ath"] = B64.encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes())).into();
        }
        if let Some(n) = nonce {
            claims["nonce"] = n.into();
        }
        let input = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
        let sig = self.pair.sign(&SystemRandom::new(), input.as_bytes()).ok()?;
        Some(format!("{input}.{}", B64.encode(sig.as_ref())))
    }
}

/// A caller's access token for an upstream and, when the server bound it, the key every request
/// carrying it proves possession of.
#[derive(Clone, PartialEq, Eq)]
pub struct Access {
    pub token: String,
    pub dpop: Option<DpopKey>,
    /// A caller's own API key goes in this header (lower-cased name, and the text before the key)
    /// instead of `Authorization: Bearer`.
    pub header: Option<(String, String)>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access").field("token", &"<redacted>").field("dpop", &self.dpop).finish()
    }
}

impl Access {
    /// The access a vault entry gives: its token, with its key when the token is bound.
    pub fn of(tokens: &super::vault::TokenSet) -> Self {
        Access { token: tokens.access_token.clone(), dpop: tokens.dpop.as_deref().and_then(DpopKey::import), header: None }
    }
}

/// The `htu` of a request: its URL without query and fragment (RFC 9449 §4.2).
pub fn htu(url: &str) -> &str {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    &url[..end]
}

/// Whether an authorization server signs proofs the gateway can make: its metadata lists ES256 in
/// `dpop_signing_alg_values_supported`.
pub fn offered(algs: Option<&[String]>) -> bool {
    algs.is_some_and(|a| a.iter().any(|x| x == ALG))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    fn part(jwt: &str, i: usize) -> Vec<u8> {
        B64.decode(jwt.split('.').nth(i).expect("a part")).expect("base64url")
    }

    #[test]
    fn proofs_are_signed_by_the_key_in_their_header_and_bind_what_they_say() {
        let key = DpopKey::generate().expect("a key");
        let proof = key.proof("POST", "https://rs.example.com/mcp?x=1#f", Some("tok"), Some("n-1")).expect("a proof");
        let header: serde_json::Value = serde_json::from_slice(&part(&proof, 0)).expect("header");
        let claims: serde_json::Value = serde_json::from_slice(&part(&proof, 1)).expect("claims");
        assert_eq!((header["typ"].as_str(), header["alg"].as_str()), (Some("dpop+jwt"), Some("ES256")));
        assert!(header["jwk"].get("d").is_none(), "no private part in the header");
        assert_eq!(claims["htu"], "https://rs.example.com/mcp");
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["nonce"], "n-1");
        let ath = B64.encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, b"tok"));
        assert_eq!(claims["ath"], ath.as_str());
        assert!(claims["iat"].as_u64().is_some_and(|t| t.abs_diff(super::super::vault::now()) < 5));
        // Verified with the public key the header carries.
        let x = B64.decode(header["jwk"]["x"].as_str().unwrap_or("")).expect("x");
        let y = B64.decode(header["jwk"]["y"].as_str().unwrap_or("")).expect("y");
        let point = [&[4u8][..], &x, &y].concat();
        let input = proof.rsplit_once('.').map(|x| x.0).expect("signed part");
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point).verify(input.as_bytes(), &part(&proof, 2)).expect("a valid signature");
        // Each proof is unique; a token request carries no ath.
        let again = key.proof("POST", "https://as.example.com/token", None, None).expect("a proof");
        let c2: serde_json::Value = serde_json::from_slice(&part(&again, 1)).expect("claims");
        assert!(c2.get("ath").is_none() && c2.get("nonce").is_none() && c2["jti"] != claims["jti"]);
    }

    #[test]
    fn keys_survive_the_vault_and_have_a_stable_thumbprint() {
        let key = DpopKey::generate().expect("a key");
        let back = DpopKey::import(&key.export()).expect("imported");
        assert_eq!(back, key);
        assert_eq!(back.thumbprint(), key.thumbprint());
        assert_eq!(key.thumbprint().len(), 43);
        assert_ne!(DpopKey::generate().expect("another").thumbprint(), key.thumbprint());
        assert!(DpopKey::import("not a key").is_none());
        assert_eq!(key.clone(), key);
        assert!(offered(Some(&["RS256".into(), "ES256".into()])) && !offered(Some(&["RS256".into()])) && !offered(None));
        assert_eq!(htu("https://a.example/p#x"), "https://a.example/p");
    }
}
