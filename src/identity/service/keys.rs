//! Each caller's own API key for an upstream (`[upstream.user_auth] kind = "api_key"`;
//! docs/security.md, "A caller's own API key"). The key is asked for through the same consent
//! link as an OAuth connection (sealed, bound to one caller and one upstream, single use, opened
//! only by a browser that proved to be that caller), typed on a gateway page, and kept in the
//! vault like a token: sealed under (caller, upstream, [`API_KEY_ISSUER`]), never shown again,
//! listed and revoked like any connection. It is sent only to its upstream, in the header the
//! configuration names. An upstream that answers 401 to it makes the gateway forget it and ask
//! again; any other refusal leaves it.

use super::super::client::IdentityError;
use super::super::dpop::Access;
use super::super::vault::{TokenSet, VaultKey, now};
use super::{Identity, Refusal};

/// The vault's issuer slot for API keys (no authorization server issued them).
pub const API_KEY_ISSUER: &str = "api-key";

/// The longest key accepted.
const MAX_KEY: usize = 4096;

impl Identity {
    /// Whether the upstream takes each caller's own API key.
    pub fn takes_api_key(&self, upstream: &str) -> bool {
        self.protected.get(upstream).is_some_and(|p| p.api_key.is_some())
    }

    /// The line the configuration shows on the key page, if any.
    pub fn api_key_help(&self, upstream: &str) -> Option<String> {
        self.protected.get(upstream).and_then(|p| p.api_key.as_ref()).and_then(|k| k.help.clone())
    }

    /// For an API-key upstream: the caller's key, as the header it goes in (`Some(None)`: the
    /// caller has none yet). `None` for any other upstream.
    pub(super) fn api_key_access(&self, caller: &str, upstream: &str) -> Option<Option<Access>> {
        let shape = self.protected.get(upstream)?.api_key.as_ref()?;
        let held = self.vault.get(&key_slot(caller, upstream));
        Some(held.map(|t| Access { token: t.access_token, dpop: None, header: Some((shape.header.clone(), shape.prefix.clone())) }))
    }

    /// For an API-key upstream: what its refusal of a caller's key leads to. A 401 says the key is
    /// wrong or was revoked there: it is forgotten and the caller asked again. `None` for any
    /// other upstream.
    pub(super) fn api_key_refused(&self, caller: &str, upstream: &str, status: u16) -> Option<Refusal> {
        self.protected.get(upstream)?.api_key.as_ref()?;
        if status != 401 {
            return Some(Refusal::GiveUp);
        }
        tracing::info!(%caller, %upstream, "the upstream refused a caller's API key; it is forgotten and asked for again");
        let _ = self.vault.remove(&key_slot(caller, upstream));
        Some(Refusal::Consent)
    }

    /// Keeps the key a person typed on the page consent link `grant` led to (the edge has checked
    /// that the person is the link's caller): the link is spent, the key sealed in the vault. The
    /// caller and upstream it is for.
    pub async fn store_api_key(&self, grant: &str, key: &str) -> Result<(String, String), IdentityError> {
        let g = self.open_grant(grant).ok_or(IdentityError::NotFound("this consent link".into()))?;
        if !self.takes_api_key(&g.u) {
            return Err(IdentityError::NotFound(format!("{}'s key page", g.u)));
        }
        let key = key.trim();
        if key.is_empty() || key.len() > MAX_KEY || key.bytes().any(|b| !(0x21..0x7f).contains(&b)) {
            return Err(IdentityError::Fetch {
                url: g.u.clone(),
                reason: format!("an API key is 1 to {MAX_KEY} printable characters without spaces"),
            });
        }
        self.spend(&g.i).await?;
        let tokens = TokenSet {
            access_token: key.into(),
            refresh_token: None,
            expires_at: None,
            scope: None,
            issued_at: now(),
            client: None,
            dpop: None,
        };
        self.vault
            .put(&key_slot(&g.c, &g.u), &tokens)
            .map_err(|e| IdentityError::Fetch { url: "the vault".into(), reason: e.to_string() })?;
        Ok((g.c, g.u))
    }
}

fn key_slot(caller: &str, upstream: &str) -> VaultKey {
    VaultKey { caller: caller.into(), upstream: upstream.into(), issuer: API_KEY_ISSUER.into() }
}
