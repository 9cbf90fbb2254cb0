//! The commands that read the state database without a running gateway: `mcpgate migrate`
//! (brings the database's schema up to date and carries over the JSON vault and usage files
//! earlier releases kept, once; safe to run again) and `mcpgate tokens list -c` (the connected
//! accounts as the database holds them, never a token).

use crate::config::Config;
use std::process::ExitCode;
use std::sync::Arc;

fn sealer(cfg: &Config) -> anyhow::Result<Arc<crate::token::Sealer>> {
    let env = std::env::var(crate::token::KEY_ENV).ok();
    Ok(Arc::new(crate::token::Sealer::load(env, &cfg.server.token_key_file)?))
}

fn open(cfg: &Config) -> anyhow::Result<Arc<crate::state::Db>> {
    crate::state::Db::open(&cfg.state).map(Arc::new).map_err(|e| anyhow::anyhow!("{e}"))
}

/// `mcpgate migrate`: the schema up to date, the old files carried over (each once; the files
/// are kept), and what the database holds now.
pub fn migrate(cfg: &Config) -> anyhow::Result<ExitCode> {
    let db = open(cfg)?;
    println!("state database: {} ({}), schema up to date", db.place(), db.kind());
    if let Some(ic) = &cfg.identity {
        let vault = crate::identity::vault::Vault::in_db(sealer(cfg)?, db.clone(), &ic.vault)?;
        let note = db.meta("vault_migrated")?.unwrap_or_default();
        println!("token vault: {} connected account(s) held; carried over: {note}", vault.list(None).len());
    }
    if cfg.usage.enabled {
        let usage = crate::usage::Usage::read(&cfg.usage, None, Some(db.clone())).map_err(anyhow::Error::msg)?;
        drop(usage);
        let note = db.meta("usage_migrated")?.unwrap_or_default();
        println!("usage counts: carried over: {note}");
    }
    if cfg.cluster.is_some() && cfg.state.postgres.is_none() {
        println!(
            "note: with [cluster] and no [state] postgres, the running gateways keep tokens and counts in Redis, not in this \
             database: add [state] postgres so a Redis restart loses neither"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `mcpgate tokens list -c gateway.toml`: the connected accounts in the state database.
pub fn tokens_list(cfg: &Config, caller: Option<&str>) -> anyhow::Result<ExitCode> {
    let Some(ic) = &cfg.identity else {
        anyhow::bail!("{} has no [identity]: no caller connects accounts", cfg.source.display());
    };
    if cfg.cluster.is_some() && cfg.state.postgres.is_none() {
        anyhow::bail!("with [cluster] and no [state] postgres the tokens are in Redis: ask a running gateway (--url)");
    }
    let vault = crate::identity::vault::Vault::in_db(sealer(cfg)?, open(cfg)?, &ic.vault)?;
    let rows: Vec<serde_json::Value> = vault
        .list(caller)
        .into_iter()
        .map(|h| {
            serde_json::json!({
                "caller": h.caller, "upstream": h.upstream, "issuer": h.issuer, "scope": h.scope,
                "expiresAt": h.expires_at, "refreshable": h.refreshable,
            })
        })
        .collect();
    super::print_tokens(&rows);
    Ok(ExitCode::SUCCESS)
}
