//! What a command needs before it serves: the configuration loaded (with `--listen` replacing
//! its address, refused beyond loopback without authentication), and the process fitted to it
//! (the open-files limit raised to the hard one, `server.max_connections` kept below it), and,
//! once it serves, the configuration read again on SIGHUP or when its file changes, and the
//! signals that stop it.

use anyhow::Context;
use mcpgate_config::Config;
use mcpgate_config::auth::AuthMode;

/// The open-files limit in effect (0: unknown).
static OPEN_FILES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Keeps `server.max_connections` below the open-files limit, with room for upstream
/// connections, children's pipes and files, so the listener never fails to accept.
pub fn fit_connections(cfg: &mut Config) {
    let limit = OPEN_FILES.load(std::sync::atomic::Ordering::Relaxed);
    if limit == 0 {
        return;
    }
    let room = usize::try_from(limit.saturating_sub(128)).unwrap_or(usize::MAX).max(16);
    if cfg.server.max_connections > room {
        tracing::info!(
            configured = cfg.server.max_connections,
            max = room,
            open_files = limit,
            "max_connections lowered to fit the open-files limit"
        );
        cfg.server.max_connections = room;
    }
}

/// Every client stream and upstream connection is a file descriptor: raise the soft limit to the
/// hard one, as most servers do (a 1,024 soft limit would cap a gateway at about a thousand clients).
pub fn raise_open_files_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::warn!(soft, hard, error = %e, "cannot raise the open-files limit");
            } else {
                tracing::debug!(from = soft, to = hard, "raised the open-files limit");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot read the open-files limit"),
    }
    if let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NOFILE) {
        OPEN_FILES.store(soft, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Reads and validates `path`; `--listen` (`listen`) replaces its address, refusing one beyond
/// loopback without authentication.
pub fn load(path: &std::path::Path, listen: Option<&str>) -> anyhow::Result<Config> {
    if let Some(l) = listen {
        // SAFETY-free alternative to set_var: parse the file, then replace the address.
        let mut cfg = Config::load(path)?;
        cfg.server.listen = l.parse().with_context(|| format!("--listen {l}: not a socket address; use e.g. 127.0.0.1:8811"))?;
        if !cfg.server.listen.ip().is_loopback() && cfg.auth.mode == AuthMode::None && !cfg.auth.allow_unauthenticated_public {
            anyhow::bail!(
                "--listen {l}: the gateway would listen beyond loopback without authentication. Configure [auth] mode = \
                    \"api_key\" or \"jwt\", or set [auth] allow_unauthenticated_public = true if a trusted proxy authenticates callers."
            );
        }
        return Ok(cfg);
    }
    Ok(Config::load(path)?)
}

/// Where the configuration comes from, to read it again on reload.
pub struct Source {
    pub path: std::path::PathBuf,
    pub listen: Option<String>,
}

/// Reloads the configuration on SIGHUP, and when the file changes if `server.watch_config` is
/// set. A configuration that does not load or apply is refused with a log line; the previous
/// one keeps serving.
pub fn reload_on_signal_or_change(gw: std::sync::Arc<crate::gateway::Gateway>, source: Source) {
    let tasks = gw.tasks.clone();
    tasks.spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
        let fingerprint = || std::fs::read(&source.path).ok();
        let mut seen = fingerprint();
        loop {
            let why = tokio::select! {
                _ = hup.recv() => "SIGHUP",
                _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {
                    if !gw.config().server.watch_config {
                        continue;
                    }
                    let now = fingerprint();
                    if now == seen || now.is_none() {
                        continue;
                    }
                    "the configuration file changed"
                }
            };
            seen = fingerprint();
            tracing::info!(trigger = why, path = %source.path.display(), "reloading the configuration");
            let loaded = load(&source.path, source.listen.as_deref()).map_err(|e| format!("{e:#}"));
            let applied = match loaded {
                Ok(mut cfg) => {
                    fit_connections(&mut cfg);
                    gw.reload(cfg).await.map_err(|e| e.to_string())
                }
                Err(e) => Err(e),
            };
            if let Err(e) = applied {
                tracing::warn!(error = %e, "reload refused; the previous configuration keeps serving");
            }
        }
    });
}

/// Resolves at Ctrl-C or SIGTERM (the gateway then stops); SIGHUP, whose default action would
/// kill the process, is taken and ignored here (`run` reloads on it).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    let hup = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            while s.recv().await.is_some() {}
        }
        std::future::pending::<()>().await
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
        _ = hup => {},
    }
    tracing::info!("shutting down");
}
