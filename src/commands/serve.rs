//! The commands that serve: `mcpgate run` (the gateway on the worker threads of the data path,
//! with its reload, its background work and an orderly stop), `mcpgate stdio` (the gateway to one
//! client on stdin/stdout) and `mcpgate demo-server` (the built-in demo upstream, on stdio or
//! HTTP).

use crate::demo::{Demo, Profile};
use crate::dispatch::Service;
use crate::edge::era::legacy::LegacyState;
use crate::gateway::Gateway;
use anyhow::Context;
use mcpgate_config::Config;
use mcpgate_config::auth::AuthMode;
use mcpgate_model::token::{KeySource, Sealer};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// `mcpgate run`: the gateway on `config` (`listen` in place of `server.listen`), its pid in
/// `pid_file` while it runs, on `workers` worker threads.
pub async fn run(
    config: PathBuf,
    listen: Option<String>,
    pid_file: Option<PathBuf>,
    fresh_state: bool,
    workers: usize,
) -> anyhow::Result<ExitCode> {
    let mut cfg = crate::commands::boot::load(&config, listen.as_deref())?;
    cfg.state.fresh = fresh_state;
    let _pid = pid_file.map(crate::commands::admin::PidFile::write).transpose()?;
    serve_gateway(cfg, crate::commands::boot::Source { path: config, listen }, workers).await?;
    Ok(ExitCode::SUCCESS)
}

/// `mcpgate stdio`: the gateway to the one client on stdin/stdout, as the anonymous caller (at
/// `endpoint`, a virtual server's path, when given).
pub async fn stdio(config: &Path, endpoint: Option<String>) -> anyhow::Result<ExitCode> {
    let cfg = crate::commands::boot::load(config, None)?;
    if let Some(path) = &endpoint
        && !cfg.endpoints.iter().any(|e| &e.path == path)
    {
        let known: Vec<&str> = cfg.endpoints.iter().map(|e| e.path.as_str()).collect();
        anyhow::bail!(
            "{}: no [[endpoint]] has path '{path}' (configured: {})",
            config.display(),
            if known.is_empty() { "none".to_string() } else { known.join(", ") }
        );
    }
    let gw = Gateway::new(cfg)?;
    gw.refresh_all().await;
    gw.spawn_maintenance();
    let caller = gw.auth().anonymous().at(endpoint.as_deref());
    let svc: Arc<dyn Service> = gw;
    crate::edge::stdio::serve_as(svc, caller, tokio::io::stdin(), tokio::io::stdout()).await?;
    Ok(ExitCode::SUCCESS)
}

/// `mcpgate demo-server`: the demo upstream of `profile` on stdio, or Streamable HTTP on `http`.
pub async fn demo_server(profile: Profile, http: Option<&str>, page_size: usize) -> anyhow::Result<ExitCode> {
    let svc: Arc<dyn Service> = Arc::new(Demo::new(profile).with_page_size(page_size));
    match http {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
            let mut server = Config::parse("", std::path::Path::new("demo"), None, &|_| None)?.server;
            server.listen = listener.local_addr()?;
            tracing::info!("demo server ({}) listening on http://{}{}", profile.name(), server.listen, server.path);
            let legacy = Arc::new(LegacyState::new(Arc::new(Sealer::random()?), server.session_ttl));
            let mount = crate::edge::shared::Mount { svc, console: None, legacy, auth: None };
            crate::edge::listen::serve(listener, mount, server, crate::commands::boot::shutdown_signal()).await?;
        }
        None => crate::edge::stdio::serve(svc, tokio::io::stdin(), tokio::io::stdout()).await?,
    }
    Ok(ExitCode::SUCCESS)
}

async fn serve_gateway(mut cfg: Config, source: crate::commands::boot::Source, workers: usize) -> anyhow::Result<()> {
    crate::commands::boot::fit_connections(&mut cfg);
    // The token key is checked before anything starts, so a bad key fails fast.
    let gw = Gateway::new(cfg)?;
    let cfg = gw.config();
    if gw.sealer.source == KeySource::Random && cfg.identity.is_some() {
        tracing::warn!(
            "no token key configured: the token vault is sealed with a key that dies with this process, so every caller \
                consents again after a restart (set {} or server.token_key_file)",
            mcpgate_model::token::KEY_ENV
        );
    } else if gw.sealer.source == KeySource::Random {
        tracing::warn!(
            "no token key configured: legacy sessions and other tokens will not survive a restart or work across replicas (set \
                {} or server.token_key_file)",
            mcpgate_model::token::KEY_ENV
        );
    }
    let listening = crate::edge::listen::workers::bind(cfg.server.listen, workers)
        .with_context(|| format!("cannot listen on {}", cfg.server.listen))?;
    let addr = listening.local_addr();
    let server_cfg = cfg.server.clone();
    if !addr.ip().is_loopback() && cfg.auth.mode == AuthMode::None {
        tracing::warn!(%addr, "!!! LISTENING ON A NON-LOOPBACK ADDRESS WITHOUT AUTHENTICATION: anyone who can reach it can use \
            every upstream !!!");
    }
    gw.start_auth().await?;
    let scheme = if server_cfg.tls.is_some() { "https" } else { "http" };
    // The address ends the line (scripts read it from there); the process id is for `kill -HUP`.
    tracing::info!(
        "mcpgate {} (pid {}, {} worker{}) listening on {scheme}://{addr}{}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        workers.max(1),
        if workers > 1 { "s" } else { "" },
        server_cfg.path
    );
    if cfg.console && cfg.auth.mode == AuthMode::None {
        // Without authentication, the console's administrator is whoever holds this link (its
        // key is new at each start): a process that merely runs on this machine is not.
        tracing::info!("console: {scheme}://{addr}/console#key={} (open it to administer; the key is new at each start)", gw.console_key);
    }
    gw.usage.spawn_flush(&gw.tasks);
    let audit_logs = crate::commands::admin::export_audit_logs(&gw, cfg.audit.otlp);
    let refresher = gw.clone();
    gw.tasks.spawn(async move {
        refresher.refresh_all().await;
        let cat = refresher.catalog();
        tracing::info!(tools = cat.tools().len(), problems = cat.problems.len(), "catalogue ready");
        refresher.spawn_maintenance();
    });
    let legacy = Arc::new(LegacyState::new(gw.sealer.clone(), server_cfg.session_ttl).with_cluster(gw.cluster.clone()));
    if let Some(cluster) = gw.cluster.clone() {
        tracing::info!(
            redis = %cluster.config().redacted_url(),
            limits = cluster.config().on_redis_error.as_str(),
            sessions = cluster.config().sessions_on_redis_error.as_str(),
            "cluster: rate limits and session endings are shared through Redis (on Redis errors: limits fail {}, sessions fail {})",
            cluster.config().on_redis_error.as_str(),
            cluster.config().sessions_on_redis_error.as_str()
        );
        gw.tasks.spawn(async move {
            let _ = cluster.ping().await;
        });
        let ended: Arc<dyn Fn(&str) + Send + Sync> = {
            let gw = gw.clone();
            Arc::new(move |sid: &str| crate::dispatch::Service::session_ended(&*gw, sid))
        };
        gw.tasks.spawn(legacy.clone().follow_endings(gw.tasks.token(), ended));
    }
    let auth = Some(gw.auth());
    crate::commands::boot::reload_on_signal_or_change(gw.clone(), source);
    let tasks = gw.tasks.clone();
    let closing = gw.closing.clone();
    let console = Some(gw.clone());
    let audit = gw.audit.clone();
    let svc: Arc<dyn Service> = gw;
    let shutdown = async move {
        crate::commands::boot::shutdown_signal().await;
        // Listen and GET streams end now, with their final message, so connections can drain.
        closing.cancel();
    };
    let mount = crate::edge::shared::Mount { svc, console, legacy, auth };
    let workers = crate::edge::listen::workers::serve(listening, mount, server_cfg, shutdown).await?;
    // Background loops end (and stdio children with them) before the process exits; some run
    // on the workers (started by a request), which keep running until then.
    if !tasks.shutdown(std::time::Duration::from_secs(5)).await {
        tracing::warn!("some background tasks did not stop within 5 s");
    }
    workers.stop();
    if !audit.close(std::time::Duration::from_secs(5)) {
        tracing::warn!("the audit file writer did not finish within 5 s");
    }
    #[cfg(feature = "otlp")]
    if let Some(x) = audit_logs {
        x.shutdown();
    }
    #[cfg(not(feature = "otlp"))]
    let _ = audit_logs;
    tracing::info!("stopped");
    Ok(())
}
