//! The stdio upstream's child process and its supervision, on the gateway's side. A child starts
//! with a clean environment: a short allowlist of the gateway's variables (what the official SDKs
//! pass) plus the upstream's own `env`, so no gateway secret (the token key, other upstreams'
//! credentials) reaches it. It runs in a session of its own under `mcpgate supervise`
//! (`mcpgate_sandbox::supervise`), a small process that gets SIGTERM when the gateway stops the
//! upstream or dies, even by SIGKILL (`PR_SET_PDEATHSIG`), and then ends everything the server
//! started, daemons included, so nothing of it (`npx`, `uvx`, `sh -c`, a double-forked daemon)
//! outlives the upstream. A sandbox's policy reaches the supervisor and `sandbox-exec` as an
//! inherited memory file, never on a command line. What the child does between fork and exec (its
//! session, its death signal, the policy's descriptor) is one safe call, `mcpgate_sandbox::spawn`.
//! A child that keeps dying soon after it starts is restarted with exponential backoff and
//! jitter. Its stderr is read as bytes, each line capped, and logged at a bounded rate.

use super::error::UpstreamError;
use super::lines::{Line, LineReader};
use mcpgate_protocol::tasks::{Background, Backoff};
use mcpgate_sandbox::exec;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

/// The gateway's environment variables a child may see.
pub const ENV_ALLOWLIST: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"];
/// How long a child may take to exit after SIGTERM.
const GRACE: Duration = Duration::from_secs(3);
/// A child that lived shorter than this counts as crashing.
const STABLE_AFTER: Duration = Duration::from_secs(10);
/// The longest stderr line logged, and how many lines a second at most.
const STDERR_LINE: usize = 4096;
const STDERR_PER_SECOND: u32 = 50;

/// What to start.
pub struct Spec<'a> {
    pub id: &'a str,
    pub program: &'a PathBuf,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    pub cwd: Option<&'a PathBuf>,
    /// The sandbox to start it in (`mcpgate_sandbox::exec`), as JSON, and its private folder (its
    /// `HOME` and `TMPDIR`, and its working folder when it has no `cwd`).
    pub sandbox: Option<(String, &'a PathBuf)>,
}

/// The child's process group: dropping it stops the child and all it started.
pub struct Group {
    pid: Option<i32>,
    /// Under `mcpgate supervise`, which ends the whole tree itself when told (SIGTERM).
    supervised: bool,
}

impl Group {
    /// Supervised: SIGTERM to the supervisor, which ends the tree (its grace, then SIGKILL); the
    /// group gets SIGKILL only if the supervisor is still there well after that. Otherwise:
    /// SIGTERM to the group now, SIGKILL after the grace period to what is left.
    pub fn stop(&mut self) {
        let Some(pid) = self.pid.take() else { return };
        let first = if self.supervised { kill(Pid::from_raw(pid), Signal::SIGTERM) } else { killpg(Pid::from_raw(pid), Signal::SIGTERM) };
        if first.is_err() {
            return; // already gone
        }
        let wait = if self.supervised { GRACE * 4 } else { GRACE };
        std::thread::spawn(move || {
            std::thread::sleep(wait);
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        });
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop();
    }
}

pub struct Started {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub group: Group,
}

/// Whether `program` can be started: a path that exists, or a name found on `PATH` (the child
/// gets the gateway's `PATH`), looked up from `cwd` when relative.
fn findable(program: &std::path::Path, cwd: Option<&PathBuf>) -> bool {
    if program.components().count() > 1 || program.is_absolute() {
        let full = match cwd {
            Some(dir) if program.is_relative() => dir.join(program),
            _ => program.to_path_buf(),
        };
        return full.exists();
    }
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Starts the child; its stderr goes to the log (see the module comment).
pub fn start(spec: &Spec, tasks: &Background) -> Result<Started, UpstreamError> {
    if !findable(spec.program, spec.cwd) {
        return Err(UpstreamError::Unreachable(format!(
            "cannot start {:?}: no such program{} (install it, or give its absolute path in `command`)",
            spec.program.display().to_string(),
            if spec.program.components().count() > 1 { "" } else { " on PATH" }
        )));
    }
    // The policy as a memory file the supervisor and the sandbox inherit as POLICY_FD.
    let policy = match &spec.sandbox {
        Some((json, _)) => Some(exec::policy_file(json).map_err(|e| UpstreamError::Unreachable(e.to_string()))?),
        None => None,
    };
    let fd_arg = exec::POLICY_FD.to_string();
    let (mut cmd, death) = match own_binary() {
        Some(me) => {
            let mut c = Command::new(&me);
            c.arg("supervise");
            if policy.is_some() {
                c.args(["--policy-fd", &fd_arg, "--"]).arg(&me).args(["sandbox-exec", "--policy-fd", &fd_arg]);
            }
            c.arg("--");
            c.arg(spec.program).args(spec.args);
            (c, Signal::SIGTERM)
        }
        None if spec.sandbox.is_some() => {
            return Err(UpstreamError::Unreachable("a sandboxed stdio upstream is started by the mcpgate binary itself".into()));
        }
        // Embedded in another program (a benchmark): the child itself dies with the gateway.
        None => {
            let mut c = Command::new(spec.program);
            c.args(spec.args);
            (c, Signal::SIGTERM)
        }
    };
    let supervised = own_binary().is_some();
    let death = if supervised { death } else { Signal::SIGKILL };
    cmd.env_clear();
    for key in ENV_ALLOWLIST {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    if let Some((_, private)) = &spec.sandbox {
        cmd.env("HOME", private).env("TMPDIR", private).current_dir(private);
    }
    cmd.envs(spec.env).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(cwd) = spec.cwd {
        cmd.current_dir(cwd);
    }
    // A session of its own (so also a process group the supervisor stops whole): no controlling
    // terminal, so nothing the server does reaches the terminal the gateway was started from
    // (TIOCSTI keystrokes, job-control signals). The policy descriptor, when there is one, is
    // moved to POLICY_FD without close-on-exec.
    mcpgate_sandbox::spawn::detach(cmd.as_std_mut(), death, policy);
    // Only the program is named: arguments may carry secrets (`--token ...`).
    let program = spec.program.display().to_string();
    let spawned = cmd.spawn();
    // This process's copy of the policy descriptor (held by `cmd`) is closed now.
    drop(cmd);
    let mut child = spawned.map_err(|e| UpstreamError::Unreachable(format!("cannot start {program:?}: {e}")))?;
    let group = Group { pid: child.id().and_then(|p| i32::try_from(p).ok()), supervised };
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
        return Err(UpstreamError::Unreachable("the child process has no stdio pipes".into()));
    };
    tracing::info!(upstream = %spec.id, pid = child.id().unwrap_or(0), %program, "started stdio upstream");
    tasks.spawn(log_stderr(stderr, spec.id.to_string()));
    Ok(Started { child, stdin, stdout, group })
}

/// Logs a child's stderr as `upstream = id`: each line capped, at most [`STDERR_PER_SECOND`]
/// lines a second (the rest counted), until the pipe closes.
pub(super) async fn log_stderr(stderr: ChildStderr, id: String) {
    let mut lines = LineReader::new(stderr, STDERR_LINE);
    let (mut window, mut logged, mut dropped) = (Instant::now(), 0u32, 0u64);
    while let Ok(Some(line)) = lines.next_line().await {
        if window.elapsed() >= Duration::from_secs(1) {
            if dropped > 0 {
                tracing::warn!(upstream = %id, dropped, "stderr lines not logged (too many)");
            }
            (window, logged, dropped) = (Instant::now(), 0, 0);
        }
        if logged >= STDERR_PER_SECOND {
            dropped += 1;
            continue;
        }
        logged += 1;
        match line {
            Line::Full(bytes) => tracing::info!(upstream = %id, "stderr: {}", String::from_utf8_lossy(&bytes)),
            Line::TooLong(n) => tracing::info!(upstream = %id, "stderr: (a line of {n} bytes, not shown)"),
        }
    }
}

/// This binary, when it is mcpgate (it then runs `mcpgate supervise`, and code mode's
/// `mcpgate code-run`).
pub(super) fn own_binary() -> Option<PathBuf> {
    static ME: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ME.get_or_init(|| {
        let me = std::env::current_exe().ok()?;
        me.file_name()?.to_str()?.starts_with("mcpgate").then_some(me)
    })
    .clone()
}

/// When a crashing child may be started again.
pub struct Restarts {
    backoff: Backoff,
    started: Option<Instant>,
    not_before: Option<Instant>,
    crashes: u32,
}

impl Default for Restarts {
    fn default() -> Self {
        Restarts { backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(60)), started: None, not_before: None, crashes: 0 }
    }
}

impl Restarts {
    /// `Err` with the wait left while the backoff holds.
    pub fn may_start(&self) -> Result<(), Duration> {
        match self.not_before {
            Some(t) if t > Instant::now() => Err(t - Instant::now()),
            _ => Ok(()),
        }
    }

    pub fn started(&mut self) {
        self.started = Some(Instant::now());
    }

    /// The child exited (or was unusable): a short life makes the next start wait.
    pub fn exited(&mut self) {
        if self.started.is_some_and(|s| s.elapsed() >= STABLE_AFTER) {
            self.backoff.reset();
            self.crashes = 0;
            self.not_before = None;
            return;
        }
        self.crashes += 1;
        self.not_before = Some(Instant::now() + self.backoff.next_wait());
    }

    pub fn crashes(&self) -> u32 {
        self.crashes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_crashing_child_waits_longer_each_time() {
        let mut r = Restarts::default();
        assert!(r.may_start().is_ok());
        r.started();
        r.exited();
        let first = r.may_start().unwrap_err();
        r.started();
        r.exited();
        r.started();
        r.exited();
        let third = r.may_start().unwrap_err();
        assert!(third > first / 2 && third <= Duration::from_secs(2), "{first:?} then {third:?}");
        assert_eq!(r.crashes(), 3);
    }
}
