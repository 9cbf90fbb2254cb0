//! The `mcpgate` command line and nothing else: the subcommands and their flags (clap), the
//! process set-up every command shares (the sandbox, the supervisor and code mode's child before any thread, the
//! TLS provider, the control runtime, logging), and one call per subcommand into
//! `mcpgate::commands`, where each command's body lives.

use clap::{Parser, Subcommand};
use mcpgate::demo::Profile;
use mcpgate_config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

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
        action: mcpgate::commands::explain::Action,
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
    /// configuration, of a domain's AI Catalog (--discover) or of an MCP registry (--registry),
    /// and print an equivalent gateway.toml (secrets become environment variables).
    Import {
        /// The client's JSON file (e.g. claude_desktop_config.json, .mcp.json, .vscode/mcp.json).
        #[arg(required_unless_present_any = ["discover", "registry"], conflicts_with_all = ["discover", "registry"])]
        file: Option<PathBuf>,
        /// The servers of this domain's AI Catalog (/.well-known/ai-catalog.json) and the Server
        /// Cards it lists; or a catalog's own URL.
        #[arg(long, value_name = "URL", conflicts_with = "registry")]
        discover: Option<String>,
        /// The servers an MCP registry lists (GET <URL>/v0.1/servers).
        #[arg(long, value_name = "URL")]
        registry: Option<String>,
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
    /// COMMAND: a sandboxed stdio upstream's last step (see `mcpgate_sandbox::exec`).
    #[command(hide = true)]
    SandboxExec {
        #[arg(long)]
        policy_fd: i32,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Confines itself as the policy (JSON, read from descriptor POLICY_FD) says, then runs the
    /// one program its stdin starts, a line per inner call out and a line per answer in: code
    /// mode's child (see `mcpgate_coderun::child` and `upstream::program`).
    #[command(hide = true)]
    CodeRun {
        #[arg(long)]
        policy_fd: i32,
    },
}

/// `mcpgate code-run`: confined first, so program code never runs unconfined; a process that
/// already runs threads (called from the runtime) is refused by `confine_self`.
fn code_run(policy_fd: i32) -> ExitCode {
    if let Err(e) = mcpgate_sandbox::exec::confine_self(policy_fd) {
        eprintln!("error: code-run cannot confine itself: {e}");
        return ExitCode::from(mcpgate_coderun::child::EXIT_CONFINE);
    }
    ExitCode::from(mcpgate_coderun::child::run(std::io::stdin().lock(), std::io::stdout().lock()))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before any thread exists: the sandbox is applied to this one process, which then becomes
    // the server.
    if let Command::SandboxExec { policy_fd, command } = &cli.command {
        return ExitCode::from(mcpgate_sandbox::exec::run(*policy_fd, command));
    }
    if let Command::CodeRun { policy_fd } = &cli.command {
        return code_run(*policy_fd);
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
    mcpgate::commands::boot::raise_open_files_limit();
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
            mcpgate::commands::serve::run(config, listen, pid_file, fresh_state, workers).await
        }
        Command::Usage { config, caller, tool, since, json } => {
            // A report of stored counts needs none of the upstreams' secrets.
            let cfg = Config::load_for_reports(&config)?;
            mcpgate::commands::admin::usage(&cfg, mcpgate::usage::query::Query { caller, tool, since }, json).await
        }
        Command::Policy { action } => action.run(),
        Command::Reload { pid_file, pid } => mcpgate::commands::admin::reload(pid_file.as_deref(), pid),
        Command::Stdio { config, endpoint } => mcpgate::commands::serve::stdio(&config, endpoint).await,
        Command::Health { url, timeout } => mcpgate::commands::admin::health(&url, timeout).await,
        Command::Check { config } => mcpgate::commands::admin::check_config(&config).await,
        Command::Tools { config, json } => mcpgate::commands::admin::tools(&config, json).await,
        Command::Import { file, discover, registry, output } => {
            use mcpgate::commands::admin::ImportFrom;
            let from = match (file, discover, registry) {
                (_, Some(url), _) => ImportFrom::Discover(url),
                (_, None, Some(url)) => ImportFrom::Registry(url),
                (Some(file), None, None) => ImportFrom::File(file),
                (None, None, None) => anyhow::bail!("name a client's file, --discover URL or --registry URL"),
            };
            mcpgate::commands::admin::import(from, output.as_deref()).await
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "mcpgate", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Pin { config, approve, tools, url } => {
            mcpgate::commands::admin::pin_command(&config, approve, &tools, url.as_deref()).await
        }
        Command::Migrate { config } => mcpgate::commands::offline::migrate(&Config::load_for_reports(&config)?),
        Command::Tokens { action, url, caller } => {
            let key = std::env::var("MCPGATE_API_KEY").ok().filter(|k| !k.is_empty());
            match action {
                TokensAction::List { config: Some(config) } => {
                    mcpgate::commands::offline::tokens_list(&Config::load_for_reports(&config)?, caller.as_deref())
                }
                TokensAction::List { config: None } => mcpgate::commands::admin::tokens_list(&url, key.as_deref(), caller.as_deref()).await,
                TokensAction::Revoke { upstream } => {
                    mcpgate::commands::admin::tokens_revoke(&url, key.as_deref(), caller.as_deref(), upstream.as_deref()).await
                }
            }
        }
        Command::HashKey { key, generate } => mcpgate::commands::offline::hash_key(key, generate),
        Command::Supervise { policy_fd, command } => Ok(ExitCode::from(mcpgate_sandbox::supervise::run(policy_fd, &command))),
        Command::Audit { action: AuditAction::Verify { files, public_key } } => {
            mcpgate::commands::offline::audit_verify(&files, public_key.as_deref())
        }
        Command::SandboxExec { policy_fd, command } => Ok(ExitCode::from(mcpgate_sandbox::exec::run(policy_fd, &command))),
        Command::CodeRun { policy_fd } => Ok(code_run(policy_fd)),
        Command::DemoServer { profile, http, page_size } => {
            mcpgate::commands::serve::demo_server(profile, http.as_deref(), page_size).await
        }
    }
}
