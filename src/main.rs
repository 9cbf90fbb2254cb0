//! The `mcpgate` command line: run the gateway, check a config, print the merged catalogue, or
//! run the built-in demo upstream. Everything else lives in the library.

use anyhow::Context;
use clap::{Parser, Subcommand};
use mcpgate::config::Config;
use mcpgate::config::auth::AuthMode;
use mcpgate::demo::{Demo, Profile};
use mcpgate::dispatch::Service;
use mcpgate::edge::era::legacy::LegacyState;
use mcpgate::gateway::Gateway;
use mcpgate::token::{KeySource, Sealer};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "mcpgate", version, about = "An MCP gateway: one endpoint in front of many MCP servers.", after_help = EXAMPLES)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value = "text", env = "MCPGATE_LOG_FORMAT")]
    log_format: LogFormat,
    /// Threads serving HTTP clients, each with its own runtime, listening socket and upstream
    /// connections (default: one per CPU core). The gateway's own work runs on one more thread.
    #[arg(long, global = true, env = "MCPGATE_WORKER_THREADS", value_name = "N")]
    worker_threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

const EXAMPLES: &str = "Examples:
  mcpgate run                          serve the upstreams of ./gateway.toml on 127.0.0.1:8811/mcp
  mcpgate run -c /etc/mcpgate.toml     use another config (MCPGATE_LISTEN overrides server.listen)
  mcpgate stdio -c gateway.toml        serve one client over stdin/stdout (for desktop clients)
  mcpgate check                        probe every upstream and list what cannot be served
  mcpgate tools [--json]               print the merged tool catalogue (a table, or JSON)
  mcpgate import claude_desktop_config.json > gateway.toml
                                       turn a client's mcpServers into a gateway.toml
  mcpgate completions bash             shell completions (bash, zsh, fish, elvish, powershell)
  mcpgate hash-key --generate          a new API key and its key_sha256 for [[caller]]
  mcpgate health                       exit 0 when http://127.0.0.1:8811/healthz answers (HEALTHCHECK)
  mcpgate usage --since 24h            who used which tool, how often, with what error rate; quotas left
  mcpgate reload --pid-file F          reload a running gateway's configuration (run --pid-file F)
  mcpgate audit verify audit.jsonl*    check that the audit files were not edited, cut or reordered
  mcpgate demo-server --profile text   the built-in demo upstream on stdio
  mcpgate demo-server --http 127.0.0.1:3201

Logs go to stderr; set MCPGATE_LOG (e.g. debug, or mcpgate=debug) to change the level.";

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum AuditAction {
    /// Check that audit files hold together: each record follows the one before it, none is
    /// edited, removed or reordered, and each checkpoint's signature is good. Give a live file's
    /// rotations too (audit.jsonl.2 audit.jsonl.1 audit.jsonl, any order). Exit 1 at the first break.
    Verify {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The checkpoint key's public half, to check signatures against it rather than the key the
        /// checkpoints name: the raw 32-byte Ed25519 public key in standard base64 (44 characters).
        /// With it, files without a signed checkpoint fail.
        #[arg(long)]
        public_key: Option<String>,
    },
}

#[derive(Subcommand)]
enum TokensAction {
    /// Print the connected accounts (never a token).
    List {
        /// Read the state database of this configuration instead of asking a gateway (it needs
        /// the gateway's token key, MCPGATE_TOKEN_KEY or server.token_key_file, to open them).
        #[arg(short, long)]
        config: Option<PathBuf>,
    },
    /// Forget the tokens (of one upstream with --upstream): the caller consents again on its next call.
    Revoke {
        #[arg(long)]
        upstream: Option<String>,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway.
    Run {
        #[arg(short, long, default_value = "gateway.toml")]
        config: PathBuf,
        /// Listen address (overrides server.listen and MCPGATE_LISTEN).
        #[arg(long)]
        listen: Option<String>,
        /// Write the process id to this file (for `mcpgate reload --pid-file`); removed at exit.
        #[arg(long, env = "MCPGATE_PID_FILE")]
        pid_file: Option<PathBuf>,
        /// When the SQLite state database cannot be read, move it aside and begin with an empty
        /// one (quotas used, connected accounts and approvals are forgotten). Without it, such a
        /// database stops the start.
        #[arg(long)]
        fresh_state: bool,
    },
    /// Who used which tool, how often, with what error rate (from the usage store of the
    /// configuration: its state database, or the cluster's Redis), and what each caller has left of
    /// its quotas. The upstreams' secrets are not read.
    Usage {
        #[arg(short, long, default_value = "gateway.toml")]
        config: PathBuf,
        /// Only this caller.
        #[arg(long)]
        caller: Option<String>,
        /// Only the tools this glob matches (catalogue names, e.g. "github__*").
        #[arg(long)]
        tool: Option<String>,
        /// How far back (e.g. 1h, 24h, 7d, 30d).
        #[arg(long, default_value = "7d", value_parser = humantime::parse_duration)]
        since: std::time::Duration,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Ask the policy: `explain` one call's decision with each rule's part, or `test` a table of
    /// expected decisions (for CI). Only the configuration is read; no upstream is contacted.
    Policy {
        #[command(subcommand)]
        action: mcpgate::explain::Action,
    },
    /// Tell a running gateway to reload its configuration (sends SIGHUP; the gateway logs what
    /// changed, or why it kept the configuration in effect).
    Reload {
        /// The file `mcpgate run --pid-file` wrote.
        #[arg(long, env = "MCPGATE_PID_FILE", conflicts_with = "pid")]
        pid_file: Option<PathBuf>,
        /// The gateway's process id (the startup line prints it).
        #[arg(long)]
        pid: Option<i32>,
    },
    /// Validate the config, probe every upstream and print a status table (exit 1 if an upstream is
    /// down or a pool's endpoints disagree).
    Check {
        #[arg(short, long, default_value = "gateway.toml")]
        config: PathBuf,
    },
    /// Serve one MCP client over stdin/stdout (either era), for clients that launch servers as commands.
    Stdio {
        #[arg(short, long, default_value = "gateway.toml")]
        config: PathBuf,
        /// Serve the virtual server (`[[endpoint]]`) with this path instead of the whole catalogue.
        #[arg(long, value_name = "PATH")]
        endpoint: Option<String>,
    },
    /// Print the merged tool catalogue: a table, or with --json each tool exactly as tools/list serves it.
    Tools {
        #[arg(short, long, default_value = "gateway.toml")]
        config: PathBuf,
        /// Print the tools as a JSON array, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Read the MCP servers of a Claude Desktop, Claude Code (.mcp.json), Cursor or VS Code
    /// configuration and print an equivalent gateway.toml (secrets become environment variables).
    Import {
        /// The client's JSON file (e.g. claude_desktop_config.json, .mcp.json, .vscode/mcp.json).
        file: PathBuf,
        /// Write the result to this file instead of stdout (refuses to overwrite one).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the SHA-256 of an API key for `[[caller]] key_sha256` (reads the key from stdin when
    /// not given; --generate makes a new random key).
    HashKey {
        /// The key (prefer stdin, so it stays out of your shell history).
        key: Option<String>,
        /// Generate a new random key and print it with its hash.
        #[arg(long)]
        generate: bool,
    },
    /// Probe a running gateway (exit 0 when the URL answers 2xx): a container HEALTHCHECK that
    /// needs no shell or curl in the image.
    Health {
        #[arg(default_value = "http://127.0.0.1:8811/healthz")]
        url: String,
        /// Give up after this long.
        #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
    },
    /// Show how the tools the upstreams serve now differ from their pins (the lock file of
    /// `[pins]`), and with --approve write them as the new pins (all, or the named ones). Exits 1
    /// when something differs and nothing was approved. With --url, what the running gateway
    /// serves (an admin key in MCPGATE_API_KEY; without authentication, the console key the
    /// gateway logged); without, fresh copies of the upstreams started by this command, which may
    /// differ from what the running gateway's servers serve.
    Pin {
        #[arg(short, long, default_value = "gateway.toml")]
        config: PathBuf,
        /// Write what the upstreams serve now as the approved definitions.
        #[arg(long)]
        approve: bool,
        /// The running gateway's base URL (e.g. http://127.0.0.1:8811): compare with what it serves.
        #[arg(long)]
        url: Option<String>,
        /// Only these tools (`upstream/tool`, the upstream's own name, or the served name).
        tools: Vec<String>,
    },
    /// List or revoke the upstream accounts callers connected (per-user identity), on a running
    /// gateway: your own, or anyone's with an admin key. The key is read from MCPGATE_API_KEY.
    /// `tokens list -c FILE` reads the state database instead (with the gateway's token key).
    Tokens {
        #[command(subcommand)]
        action: TokensAction,
        /// The gateway's base URL.
        #[arg(long, global = true, default_value = "http://127.0.0.1:8811")]
        url: String,
        /// Another caller's accounts (admin callers only).
        #[arg(long, global = true)]
        caller: Option<String>,
    },
    /// Bring the state database up to date and carry over the JSON vault and usage files earlier
    /// releases kept (once; the files are kept; safe to run again).
    Migrate {
        #[arg(short, long, default_value = "gateway.toml")]
        config: PathBuf,
    },
    /// Run the built-in demo upstream (a small modern MCP server).
    DemoServer {
        #[arg(long, value_enum, default_value = "calc")]
        profile: Profile,
        /// Serve Streamable HTTP on this address instead of stdio.
        #[arg(long)]
        http: Option<String>,
        /// Tools per tools/list page (0: all in one page).
        #[arg(long, default_value_t = 0)]
        page_size: usize,
    },
    /// Internal: runs a stdio upstream's command and takes its whole process group down when the
    /// gateway goes (see `upstream::child`).
    #[command(hide = true)]
    Supervise {
        /// The descriptor holding the sandbox's policy, passed on to COMMAND.
        #[arg(long)]
        policy_fd: Option<i32>,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// The audit export's files.
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// Restricts itself as the policy (JSON, read from descriptor POLICY_FD) says, then becomes
    /// COMMAND: a sandboxed stdio upstream's last step (see `mcpgate_sandbox::sandbox`).
    #[command(hide = true)]
    SandboxExec {
        #[arg(long)]
        policy_fd: i32,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before any thread exists: the sandbox is applied to this one process, which then becomes
    // the server.
    if let Command::SandboxExec { policy_fd, command } = &cli.command {
        return ExitCode::from(mcpgate_sandbox::sandbox::run(*policy_fd, command));
    }
    // The supervisor runs single-threaded too: it waits for signals with sigtimedwait.
    if let Command::Supervise { policy_fd, command } = &cli.command {
        return ExitCode::from(mcpgate_sandbox::supervise::run(*policy_fd, command));
    }
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    // The control runtime: startup, upstream probes and children, reloads, background work and
    // the one-connection commands. HTTP clients are served by the workers (`edge::listen::workers`).
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Log lines are written by their own thread (see `telemetry::logwriter`); the guard flushes
    // them at exit.
    let (writer, log_guard) = mcpgate::telemetry::logwriter::start(std::io::stderr());
    let telemetry = mcpgate::telemetry::init::init_logging(matches!(cli.log_format, LogFormat::Json), runtime.handle(), writer);
    mcpgate::boot::raise_open_files_limit();
    let result = runtime.block_on(run(cli.command, cli.worker_threads.unwrap_or_else(mcpgate::edge::listen::workers::default_workers)));
    #[cfg(feature = "otlp")]
    if let Some(export) = telemetry {
        export.shutdown();
    }
    #[cfg(not(feature = "otlp"))]
    let _ = telemetry;
    // The queued log lines come before the final error, as they happened.
    drop(log_guard);
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(command: Command, workers: usize) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run { config, listen, pid_file, fresh_state } => {
            let mut cfg = mcpgate::boot::load(&config, listen.as_deref())?;
            cfg.state.fresh = fresh_state;
            let _pid = pid_file.map(mcpgate::cli::PidFile::write).transpose()?;
            serve_gateway(cfg, mcpgate::boot::Source { path: config, listen }, workers).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Usage { config, caller, tool, since, json } => {
            // A report of stored counts needs none of the upstreams' secrets.
            let cfg = Config::load_for_reports(&config)?;
            mcpgate::cli::usage(&cfg, mcpgate::usage::query::Query { caller, tool, since }, json).await
        }
        Command::Policy { action } => action.run(),
        Command::Reload { pid_file, pid } => mcpgate::cli::reload(pid_file.as_deref(), pid),
        Command::Stdio { config, endpoint } => {
            let cfg = mcpgate::boot::load(&config, None)?;
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
            mcpgate::edge::stdio::serve_as(svc, caller, tokio::io::stdin(), tokio::io::stdout()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Health { url, timeout } => mcpgate::cli::health(&url, timeout).await,
        Command::Check { config } => {
            let gw = Gateway::new(mcpgate::boot::load(&config, None)?)?;
            Ok(if mcpgate::cli::check(&gw).await { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Tools { config, json } => {
            let gw = Gateway::new(mcpgate::boot::load(&config, None)?)?;
            mcpgate::cli::probe_all(&gw).await;
            if json {
                println!("{}", mcpgate::check::tools_json(&gw));
            } else {
                print!("{}", mcpgate::check::tools_table(&gw));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Import { file, output } => mcpgate::cli::import(&file, output.as_deref()),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "mcpgate", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Pin { config, approve, tools, url } => {
            let cfg = mcpgate::boot::load(&config, None)?;
            match url {
                Some(url) => {
                    let key = std::env::var("MCPGATE_API_KEY").ok().filter(|k| !k.is_empty());
                    let served = mcpgate::cli::served_by(&url, key.as_deref()).await?;
                    mcpgate::cli::pin(&cfg, &served, &format!("what the running gateway at {url} serves"), approve, &tools)
                }
                None => {
                    let gw = Gateway::new(cfg.clone())?;
                    mcpgate::cli::probe_all(&gw).await;
                    let source = "fresh copies of the upstreams started by this command (NOT the running gateway: a stdio \
                                  server edited since the gateway started it serves the old code there; --url compares with it)";
                    mcpgate::cli::pin(&cfg, &gw.served_pins(), source, approve, &tools)
                }
            }
        }
        Command::Migrate { config } => mcpgate::cli::offline::migrate(&Config::load_for_reports(&config)?),
        Command::Tokens { action, url, caller } => {
            let key = std::env::var("MCPGATE_API_KEY").ok().filter(|k| !k.is_empty());
            match action {
                TokensAction::List { config: Some(config) } => {
                    mcpgate::cli::offline::tokens_list(&Config::load_for_reports(&config)?, caller.as_deref())
                }
                TokensAction::List { config: None } => mcpgate::cli::tokens_list(&url, key.as_deref(), caller.as_deref()).await,
                TokensAction::Revoke { upstream } => {
                    mcpgate::cli::tokens_revoke(&url, key.as_deref(), caller.as_deref(), upstream.as_deref()).await
                }
            }
        }
        Command::HashKey { key, generate } => {
            if generate {
                let key = Sealer::random()?.random_id() + &Sealer::random()?.random_id();
                println!("key:        {key}\nkey_sha256: {}", mcpgate::auth::hash_key(&key));
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
            println!("{}", mcpgate::auth::hash_key(&key));
            Ok(ExitCode::SUCCESS)
        }
        Command::Supervise { policy_fd, command } => Ok(ExitCode::from(mcpgate_sandbox::supervise::run(policy_fd, &command))),
        Command::Audit { action: AuditAction::Verify { files, public_key } } => {
            let files = mcpgate::audit::chain::in_order(&files);
            let public_key = public_key.as_deref().map(mcpgate::audit::chain::pinned_key).transpose().map_err(anyhow::Error::msg)?;
            match mcpgate::audit::chain::verify(&files, public_key.as_deref()) {
                Ok(v) => {
                    println!(
                        "ok: {} ({} to {}), {}{}",
                        mcpgate::text::count(v.records, "record", "records"),
                        v.first_seq,
                        v.last_seq,
                        mcpgate::text::count(v.checkpoints, "signed checkpoint", "signed checkpoints"),
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
        Command::SandboxExec { policy_fd, command } => Ok(ExitCode::from(mcpgate_sandbox::sandbox::run(policy_fd, &command))),
        Command::DemoServer { profile, http, page_size } => {
            let svc: Arc<dyn Service> = Arc::new(Demo::new(profile).with_page_size(page_size));
            match http {
                Some(addr) => {
                    let listener = tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
                    let mut server = Config::parse("", std::path::Path::new("demo"), None, &|_| None)?.server;
                    server.listen = listener.local_addr()?;
                    tracing::info!("demo server ({}) listening on http://{}{}", profile.name(), server.listen, server.path);
                    let legacy = Arc::new(LegacyState::new(Arc::new(Sealer::random()?), server.session_ttl));
                    let mount = mcpgate::edge::shared::Mount { svc, console: None, legacy, auth: None };
                    mcpgate::edge::listen::serve(listener, mount, server, mcpgate::boot::shutdown_signal()).await?;
                }
                None => mcpgate::edge::stdio::serve(svc, tokio::io::stdin(), tokio::io::stdout()).await?,
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn serve_gateway(mut cfg: Config, source: mcpgate::boot::Source, workers: usize) -> anyhow::Result<()> {
    mcpgate::boot::fit_connections(&mut cfg);
    // The token key is checked before anything starts, so a bad key fails fast.
    let gw = Gateway::new(cfg)?;
    let cfg = gw.config();
    if gw.sealer.source == KeySource::Random && cfg.identity.is_some() {
        tracing::warn!(
            "no token key configured: the token vault is sealed with a key that dies with this process, so every caller \
                consents again after a restart (set {} or server.token_key_file)",
            mcpgate::token::KEY_ENV
        );
    } else if gw.sealer.source == KeySource::Random {
        tracing::warn!(
            "no token key configured: legacy sessions and other tokens will not survive a restart or work across replicas (set \
                {} or server.token_key_file)",
            mcpgate::token::KEY_ENV
        );
    }
    let listening = mcpgate::edge::listen::workers::bind(cfg.server.listen, workers)
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
    let audit_logs = mcpgate::cli::export_audit_logs(&gw, cfg.audit.otlp);
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
            Arc::new(move |sid: &str| mcpgate::dispatch::Service::session_ended(&*gw, sid))
        };
        gw.tasks.spawn(legacy.clone().follow_endings(gw.tasks.token(), ended));
    }
    let auth = Some(gw.auth());
    mcpgate::boot::reload_on_signal_or_change(gw.clone(), source);
    let tasks = gw.tasks.clone();
    let closing = gw.closing.clone();
    let console = Some(gw.clone());
    let audit = gw.audit.clone();
    let svc: Arc<dyn Service> = gw;
    let shutdown = async move {
        mcpgate::boot::shutdown_signal().await;
        // Listen and GET streams end now, with their final message, so connections can drain.
        closing.cancel();
    };
    let mount = mcpgate::edge::shared::Mount { svc, console, legacy, auth };
    let workers = mcpgate::edge::listen::workers::serve(listening, mount, server_cfg, shutdown).await?;
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
