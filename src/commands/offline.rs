//! The commands that read the state database without a running gateway: `mcpgate migrate`
//! (brings the database's schema up to date and carries over the JSON vault and usage files
//! earlier releases kept, once; safe to run again) and `mcpgate tokens list -c` (the connected
//! accounts as the database holds them, never a token).

use anyhow::Context;
use mcpgate_config::Config;
use mcpgate_model::token::Sealer;
use std::process::ExitCode;
use std::sync::Arc;

fn sealer(cfg: &Config) -> anyhow::Result<Arc<mcpgate_model::token::Sealer>> {
    let env = std::env::var(mcpgate_model::token::KEY_ENV).ok();
    Ok(Arc::new(mcpgate_model::token::Sealer::load(env, &cfg.server.token_key_file)?))
}

fn open(cfg: &Config) -> anyhow::Result<Arc<mcpgate_store::Db>> {
    mcpgate_store::Db::open(&cfg.state).map(Arc::new).map_err(|e| anyhow::anyhow!("{e}"))
}

/// `mcpgate migrate`: the schema up to date, the old files carried over (each once; the files
/// are kept), and what the database holds now.
pub fn migrate(cfg: &Config) -> anyhow::Result<ExitCode> {
    let db = open(cfg)?;
    println!("state database: {} ({}), schema up to date", db.place(), db.kind());
    if let Some(ic) = &cfg.identity {
        let earlier = db.meta("vault_migrated")?;
        let vault = crate::identity::vault::Vault::in_db(sealer(cfg)?, db.clone(), &ic.vault)?;
        let note = carried_over(earlier, db.meta("vault_migrated")?);
        println!("token vault: {} connected account(s) held; {note}", vault.kept(None));
    }
    if cfg.usage.enabled {
        let earlier = db.meta("usage_migrated")?;
        let usage = crate::usage::Usage::read(&cfg.usage, None, Some(db.clone())).map_err(anyhow::Error::msg)?;
        drop(usage);
        println!("usage counts: {}", carried_over(earlier, db.meta("usage_migrated")?));
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
    let sealer = sealer(cfg)?;
    let random = sealer.source == mcpgate_model::token::KeySource::Random;
    let vault = crate::identity::vault::Vault::in_db(sealer, open(cfg)?, &ic.vault)?;
    let (kept, held) = (vault.kept(caller), vault.list(caller));
    match unreadable(kept, held.len(), random) {
        Err(why) => anyhow::bail!("{why}"),
        Ok(Some(note)) => eprintln!("{note}"),
        Ok(None) => {}
    }
    let rows: Vec<serde_json::Value> = held
        .into_iter()
        .map(|h| {
            serde_json::json!({
                "caller": h.caller, "upstream": h.upstream, "issuer": h.issuer, "scope": h.scope,
                "expiresAt": h.expires_at, "refreshable": h.refreshable,
            })
        })
        .collect();
    super::admin::print_tokens(&rows);
    Ok(ExitCode::SUCCESS)
}

/// What this run carried over, from the database's record of the carry-over before it (`earlier`)
/// `mcpgate hash-key`: the SHA-256 an `[[caller]]` entry keeps of an API key (read from stdin),
/// or a new random key and its hash.
pub fn hash_key(key: Option<String>, generate: bool) -> anyhow::Result<ExitCode> {
    if generate {
        let key = Sealer::random()?.random_id() + &Sealer::random()?.random_id();
        println!("key:        {key}\nkey_sha256: {}", crate::auth::hash_key(&key));
        return Ok(ExitCode::SUCCESS);
    }
    let key = match key {
        Some(k) => k,
        None => {
            let mut k = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut k).context("reading the key from stdin")?;
            k
        }
    };
    if key.trim().is_empty() {
        anyhow::bail!("no key given: pass it on stdin (echo -n KEY | mcpgate hash-key) or use --generate");
    }
    println!("{}", crate::auth::hash_key(&key));
    Ok(ExitCode::SUCCESS)
}

/// `mcpgate audit verify`: the hash chain of the audit files, and their signed checkpoints
/// (against `public_key` when given).
pub fn audit_verify(files: &[std::path::PathBuf], public_key: Option<&str>) -> anyhow::Result<ExitCode> {
    let files = crate::audit::chain::in_order(files);
    let public_key = public_key.map(crate::audit::chain::pinned_key).transpose().map_err(anyhow::Error::msg)?;
    match crate::audit::chain::verify(&files, public_key.as_deref()) {
        Ok(v) => {
            println!(
                "ok: {} ({} to {}), {}{}",
                mcpgate_protocol::text::count(v.records, "record", "records"),
                v.first_seq,
                v.last_seq,
                mcpgate_protocol::text::count(v.checkpoints, "signed checkpoint", "signed checkpoints"),
                if public_key.is_none() && v.checkpoints > 0 {
                    " (checked against the key they name; pass --public-key to pin it)"
                } else {
                    ""
                }
            );
            if v.unsigned > 0 && v.checkpoints > 0 {
                if v.unsigned == 1 {
                    println!("note: the last record follows the last checkpoint: no signature covers it yet");
                } else {
                    println!("note: the last {} records follow the last checkpoint: no signature covers them yet", v.unsigned);
                }
            }
            for at in &v.incomplete {
                println!("note: {at}: an incomplete line (a crash while writing?); the chain continues across it");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("broken: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// and after (`now`): nothing when an earlier run (or a gateway) had done it already.
fn carried_over(earlier: Option<String>, now: Option<String>) -> String {
    match (earlier, now) {
        (Some(done), _) => format!("nothing carried over this time (carried over once before: {done})"),
        (None, Some(note)) => format!("carried over: {note}"),
        (None, None) => "nothing carried over".into(),
    }
}

/// Why none of the accounts the vault keeps can be listed.
#[derive(Debug, PartialEq, thiserror::Error)]
enum Unlisted {
    #[error(
        "the token vault keeps {kept} connected account(s), sealed with the gateway's token key: set {key} (or \
         server.token_key_file) to that key to read them"
    )]
    RandomKey { kept: usize, key: &'static str },
    #[error(
        "none of the {kept} connected account(s) the token vault keeps opens with this token key ({key} or \
         server.token_key_file): give the key the gateway runs with"
    )]
    WrongKey { kept: usize, key: &'static str },
}

/// Whether the accounts the vault keeps can be listed: `kept` entries, `opened` of them opened
/// with the key, which is `random` when none was configured. `Err` when none of them can be read
/// (the listing would say "no connected accounts"), a note when some cannot (older than the
/// vault keeps an entry, or sealed with a key since rotated out).
fn unreadable(kept: usize, opened: usize, random: bool) -> Result<Option<String>, Unlisted> {
    let key = mcpgate_model::token::KEY_ENV;
    match (kept, opened, random) {
        (0, _, _) => Ok(None),
        (_, _, true) => Err(Unlisted::RandomKey { kept, key }),
        (_, 0, false) => Err(Unlisted::WrongKey { kept, key }),
        (k, o, false) if o < k => Ok(Some(format!(
            "note: {} of the {kept} connected account(s) the token vault keeps do not open with this token key (sealed \
             with a key rotated out since, or too old) and are not listed",
            k - o
        ))),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::{carried_over, unreadable};

    #[test]
    fn a_second_migration_says_it_carried_nothing_over() {
        assert_eq!(carried_over(None, Some("1 hours from u.json".into())), "carried over: 1 hours from u.json");
        let again = carried_over(Some("1 hours from u.json".into()), Some("1 hours from u.json".into()));
        assert!(again.starts_with("nothing carried over this time") && !again.contains("carried over: 1"), "{again}");
    }

    #[test]
    fn accounts_that_do_not_open_are_a_failure_that_names_the_key() {
        assert_eq!(unreadable(0, 0, true), Ok(None), "nothing kept, nothing to read");
        assert_eq!(unreadable(2, 2, false), Ok(None));
        assert!(
            unreadable(1, 0, true)
                .is_err_and(|w| w.to_string().contains("keeps 1 connected account(s)") && w.to_string().contains("MCPGATE_TOKEN_KEY"))
        );
        assert!(
            unreadable(2, 0, false).is_err_and(|w| w.to_string().contains("none of the 2") && w.to_string().contains("MCPGATE_TOKEN_KEY"))
        );
        assert!(unreadable(3, 1, false).is_ok_and(|w| w.is_some_and(|w| w.contains("2 of the 3"))));
    }
}
