//! Applying a [`Policy`] to this process, then becoming the server: `mcpgate sandbox-exec` (`run`). Runs
//! single-threaded, before any runtime starts, so each step may allocate. Every step that cannot
//! be applied fails the start with the reason (the supervisor logs it and the gateway backs off),
//! except where the kernel offers less than asked and the result is still stronger than nothing:
//! those are named by [`enforcement`] for `mcpgate check`.

use super::Policy;
use super::fd::{PolicyFdError, take_policy_fd};
use super::seccomp::{SeccompError, seccomp};
use landlock::{
    ABI, Access, AccessFs, AccessNet, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
    path_beneath_rules,
};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

/// Why the sandbox could not be applied (each step's own words: `sandbox-exec` writes them to
/// stderr, which the gateway logs).
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// An rlimit (`what`: "the memory limit", "the CPU-time limit", ...).
    #[error("{what}: {source}")]
    Limit {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the process cgroup {}: {source}", dir.display())]
    Cgroup {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("pids.max: {0}")]
    PidsMax(#[source] std::io::Error),
    #[error("joining {}: {source}", dir.display())]
    JoinCgroup {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("dropping capability {cap}: {source}")]
    DropCapability {
        cap: i32,
        #[source]
        source: std::io::Error,
    },
    #[error("dropping capabilities: {0}")]
    DropCapabilities(#[source] std::io::Error),
    #[error("no_new_privs: {0}")]
    NoNewPrivs(#[source] std::io::Error),
    /// A strict policy's lower priority (`setpriority`).
    #[error("lowering the priority: {0}")]
    Priority(#[source] std::io::Error),
    #[error("Landlock: {0}")]
    Landlock(#[source] RulesetError),
    #[error(
        "this kernel's Landlock cannot limit TCP to ports (ABI 4, Linux 6.7), so network = [ports] would be open: \
         use network = \"none\", or \"open\" to accept that"
    )]
    PortsNotEnforced,
    #[error(
        "this kernel does not enforce Landlock, so files cannot be restricted (mcpgate check says what it offers); \
         set enabled = false in [upstream.sandbox] to run the server without a sandbox"
    )]
    LandlockNotEnforced,
    #[error(transparent)]
    Seccomp(#[from] SeccompError),
}

/// Why `sandbox-exec` did not become the server, or a process could not confine itself
/// (`confine_self`).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("the sandbox could not be applied: {0}")]
    Apply(#[from] ApplyError),
    #[error("the policy is not readable: {0}")]
    Policy(#[from] PolicyFdError),
    /// Landlock, seccomp and the priority hold for the calling thread only: a thread started
    /// before would run unconfined.
    #[error("this process runs {0} threads and the sandbox would hold only one: confine it before any thread starts")]
    Threaded(u64),
    #[error("counting this process's threads: {0}")]
    Threads(#[source] std::io::Error),
    /// The descriptors it inherited beyond its standard streams could not be closed.
    #[error("closing the inherited descriptors: {0}")]
    Descriptors(#[source] std::io::Error),
    #[error("cannot start {program:?}: {source}")]
    Start {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// The Landlock ABI asked for (file rights up to truncate and ioctl, TCP ports).
const ABI_WANTED: ABI = ABI::V5;

/// What the running kernel enforces of a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enforcement {
    /// The Landlock ABI the kernel offers (0: none).
    pub landlock_abi: u32,
    /// TCP port rules (Landlock ABI 4).
    pub tcp_ports: bool,
    /// Signals and abstract Unix sockets scoped to the sandbox (Landlock ABI 6).
    pub scoped: bool,
    pub seccomp: bool,
    /// Processes bounded by a cgroup (`pids`), which holds for root too; else only `RLIMIT_NPROC`,
    /// which the kernel does not apply to root.
    pub pids_cgroup: bool,
    pub root: bool,
}

impl Enforcement {
    /// What the kernel's Landlock checks of files, and what it leaves (and what stands in for it).
    pub fn files(&self) -> String {
        match self.landlock_abi {
            0 => "NOT enforced (no Landlock: sandboxed servers will not start)".into(),
            abi => {
                let mut missing = Vec::new();
                if abi < 2 {
                    missing.push("moving or linking files between folders is refused outright (ABI 2)");
                }
                if abi < 3 {
                    missing.push(
                        "truncation is not checked: the system-call filter refuses truncate() and read-only O_TRUNC opens instead (ABI 3)",
                    );
                }
                if abi < 5 {
                    missing.push("ioctl on device files is not checked (ABI 5)");
                }
                if missing.is_empty() {
                    format!("enforced (Landlock ABI {abi})")
                } else {
                    format!("enforced (Landlock ABI {abi}; {})", missing.join("; "))
                }
            }
        }
    }
}

/// What this machine can enforce, probed without restricting anything.
pub fn enforcement() -> Enforcement {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only reports the ABI.
    let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    let abi = u32::try_from(abi).unwrap_or(0);
    // SAFETY: prctl(PR_GET_SECCOMP) only reads this process's seccomp mode.
    let seccomp = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } >= 0;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    Enforcement { landlock_abi: abi, tcp_ports: abi >= 4, scoped: abi >= 6, seccomp, pids_cgroup: root && pids_root().is_some(), root }
}

/// Where a `pids` cgroup can be made (`pub(crate)`: the supervisor removes it): the v2 root (if it
/// offers `pids` and hands it down to its children) or the v1 `pids` mount.
pub(crate) fn pids_root() -> Option<std::path::PathBuf> {
    let v2 = std::path::Path::new("/sys/fs/cgroup");
    // On v2 a child group has `pids.max` only where the root hands the controller down.
    let offers = |file: &str| std::fs::read_to_string(v2.join(file)).is_ok_and(|c| c.split_whitespace().any(|x| x == "pids"));
    if offers("cgroup.controllers") && offers("cgroup.subtree_control") {
        return Some(v2.to_path_buf());
    }
    let v1 = v2.join("pids");
    v1.join("cgroup.procs").exists().then_some(v1)
}

/// `mcpgate sandbox-exec --policy-fd N -- COMMAND...`: returns (126) only when the sandbox or the
/// command could not be started, the reason on stderr, which the gateway logs.
pub fn run(policy_fd: i32, command: &[String]) -> u8 {
    let policy = match take_policy_fd(policy_fd) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("mcpgate sandbox-exec: the policy is not readable: {e}");
            return 126;
        }
    };
    let Some((program, args)) = command.split_first() else { return 126 };
    eprintln!("mcpgate sandbox-exec: {}", exec(&policy, program, args));
    126
}

/// Restricts this process as `policy` says, then executes `program` with `args`. Returns only on
/// failure, with the reason.
pub fn exec(policy: &Policy, program: &str, args: &[String]) -> ExecError {
    if let Err(e) = restrict(policy) {
        return ExecError::Apply(e);
    }
    let source = std::process::Command::new(program).args(args).exec();
    ExecError::Start { program: program.to_string(), source }
}

/// Applies `policy` to this thread and whatever it starts after: limits, capabilities, no new
/// privileges, a strict policy's lower priority, Landlock, seccomp. Landlock and seccomp hold for
/// the calling thread only, so callers run single-threaded (`sandbox-exec`, `confine_self`).
pub(super) fn restrict(policy: &Policy) -> Result<(), ApplyError> {
    bound_processes(policy)?;
    let limit = |resource: libc::__rlimit_resource_t, n: u64, what: &'static str| -> Result<(), ApplyError> {
        let r = libc::rlimit { rlim_cur: n, rlim_max: n };
        // SAFETY: setrlimit reads the struct we pass; it has no other preconditions.
        if unsafe { libc::setrlimit(resource, &r) } != 0 {
            return Err(ApplyError::Limit { what, source: std::io::Error::last_os_error() });
        }
        Ok(())
    };
    limit(libc::RLIMIT_AS, policy.memory, "the memory limit")?;
    limit(libc::RLIMIT_NOFILE, policy.files, "the open-files limit")?;
    // No core file: it would hold the server's memory (its secrets) and can be as large as it.
    limit(libc::RLIMIT_CORE, 0, "the core-file limit")?;
    // RLIMIT_NPROC counts every task of the user, not this server's: bounding it at `processes`
    // would stop a server started by a desktop user with more tasks than that from starting a
    // thread. So: the user's tasks at this start, plus the bound (root is not bound by it at all).
    limit(libc::RLIMIT_NPROC, user_tasks().saturating_add(policy.processes), "the process limit")?;
    if let Some(cpu) = policy.cpu {
        // SIGXCPU at the limit (which the supervisor names in the log), SIGKILL a second later
        // for a process that catches it: soft and hard equal would be a bare SIGKILL.
        let r = libc::rlimit { rlim_cur: cpu, rlim_max: cpu.saturating_add(1) };
        // SAFETY: setrlimit reads the struct we pass; it has no other preconditions.
        if unsafe { libc::setrlimit(libc::RLIMIT_CPU, &r) } != 0 {
            return Err(ApplyError::Limit { what: "the CPU-time limit", source: std::io::Error::last_os_error() });
        }
    }
    drop_capabilities()?;
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) only sets a flag on this process.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(ApplyError::NoNewPrivs(std::io::Error::last_os_error()));
    }
    if policy.strict {
        lower_priority()?;
    }
    let abi = enforcement().landlock_abi;
    landlock(policy, abi)?;
    for filter in seccomp(policy, abi)? {
        seccompiler::apply_filter(&filter).map_err(SeccompError::from)?;
    }
    Ok(())
}

/// The nice value a strict policy runs at (at least): a runaway program yields to the gateway.
pub(super) const STRICT_NICE: i32 = 10;

/// This process at nice [`STRICT_NICE`], or left where it is if it already runs lower (raising
/// the priority back would need a capability, and is not the point).
fn lower_priority() -> Result<(), ApplyError> {
    // getpriority answers -1 both as a value and as a failure: errno, cleared first, tells them apart.
    nix::errno::Errno::clear();
    // SAFETY: getpriority only reads this process's nice value; no pointers.
    let now = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let errno = nix::errno::Errno::last_raw();
    if now == -1 && errno != 0 {
        return Err(ApplyError::Priority(std::io::Error::from_raw_os_error(errno)));
    }
    if now >= STRICT_NICE {
        return Ok(());
    }
    // SAFETY: setpriority only sets this process's (this thread's, on Linux) nice value.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, STRICT_NICE) } != 0 {
        return Err(ApplyError::Priority(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// The tasks (threads) that run under this process's real user now, as `RLIMIT_NPROC` counts them.
fn user_tasks() -> u64 {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() }.to_string();
    let mut tasks = 0u64;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if !entry.file_name().as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim_start);
        if field("Uid:").and_then(|u| u.split_whitespace().next()) == Some(uid.as_str()) {
            tasks += field("Threads:").and_then(|t| t.parse::<u64>().ok()).unwrap_or(1);
        }
    }
    tasks
}

/// A `pids` cgroup of `policy.processes`, joined by this process (root only: elsewhere
/// `RLIMIT_NPROC` holds, since the kernel applies it to every user but root).
fn bound_processes(policy: &Policy) -> Result<(), ApplyError> {
    let (Some(name), Some(root)) = (&policy.cgroup, pids_root()) else { return Ok(()) };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    // Groups of gateways that are gone (empty, so removable) go first.
    for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        let n = entry.file_name().to_string_lossy().to_string();
        let gone = n
            .strip_prefix("mcpgate-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
            .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists());
        if gone {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
    let dir = root.join(name);
    if let Err(source) = std::fs::create_dir_all(&dir) {
        return Err(ApplyError::Cgroup { dir, source });
    }
    std::fs::write(dir.join("pids.max"), policy.processes.to_string()).map_err(ApplyError::PidsMax)?;
    match std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()) {
        Ok(()) => Ok(()),
        Err(source) => Err(ApplyError::JoinCgroup { dir, source }),
    }
}

/// Every capability gone, for good (bounding, ambient, effective, permitted, inheritable): a
/// server started by a gateway that runs as root keeps uid 0 but none of root's powers, so it
/// cannot read another process's memory or environment through /proc, nor override file modes.
fn drop_capabilities() -> Result<(), ApplyError> {
    for cap in 0..64 {
        // SAFETY: PR_CAPBSET_DROP only removes a capability from this process's bounding set;
        // unknown numbers fail with EINVAL, which ends the known range.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINVAL) {
                break;
            }
            // Without CAP_SETPCAP (not root) there is nothing in the way to drop.
            if e.raw_os_error() == Some(libc::EPERM) {
                break;
            }
            return Err(ApplyError::DropCapability { cap, source: e });
        }
    }
    // SAFETY: clears this process's ambient capabilities; no pointers.
    unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header { version: VERSION_3, pid: 0 };
    let data = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: capset(2) reads the header and two data structs of version 3, which we own.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) } != 0 {
        return Err(ApplyError::DropCapabilities(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Device files that are written as well as read, harmlessly.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

fn landlock(policy: &Policy, abi_offered: u32) -> Result<(), ApplyError> {
    let err = ApplyError::Landlock;
    let abi = ABI_WANTED;
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(abi)).map_err(err)?;
    if !policy.open {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp).map_err(err)?;
    }
    // Signals (kill, tgkill, sigqueue, pidfd_send_signal, SIGIO owners) and connections to
    // abstract Unix sockets reach only processes of this sandbox: not the gateway, its supervisor,
    // another upstream or another caller's process. Below ABI 6 the system-call filter protects
    // the gateway and the supervisor instead (see `signals`).
    if abi_offered >= 6 {
        ruleset = ruleset.scope(Scope::from_all(ABI::V6)).map_err(err)?;
    }
    let existing = |paths: &[PathBuf]| paths.iter().filter(|p| p.exists()).cloned().collect::<Vec<_>>();
    let mut created = ruleset
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(existing(&policy.read), AccessFs::from_read(abi)))
        .map_err(err)?
        .add_rules(path_beneath_rules(existing(&policy.write), AccessFs::from_all(abi)))
        .map_err(err)?
        // The sinks and sources every program opens read-write (`> /dev/null`, a daemon's stdio,
        // Python's `subprocess.DEVNULL`).
        .add_rules(path_beneath_rules(
            existing(&DEVICES.iter().map(PathBuf::from).collect::<Vec<_>>()),
            AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::Truncate,
        ))
        .map_err(err)?;
    for port in policy.ports.iter().flatten() {
        created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp)).map_err(err)?;
    }
    if !policy.open && policy.ports.is_some() && abi_offered < 4 {
        return Err(ApplyError::PortsNotEnforced);
    }
    let status = created.restrict_self().map_err(err)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(ApplyError::LandlockNotEnforced);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Error;

    /// The reasons read as the log has always shown them (they were strings before).
    #[test]
    fn the_reasons_read_as_the_log_shows_them() {
        assert_eq!(
            ApplyError::PortsNotEnforced.to_string(),
            "this kernel's Landlock cannot limit TCP to ports (ABI 4, Linux 6.7), so network = [ports] would be open: \
             use network = \"none\", or \"open\" to accept that"
        );
        assert!(ApplyError::PortsNotEnforced.to_string().contains("would be open: use network"));
        assert!(ApplyError::LandlockNotEnforced.to_string().contains("(mcpgate check says what it offers); set enabled = false"));
        let limit = ApplyError::Limit { what: "the memory limit", source: Error::from_raw_os_error(libc::EPERM) };
        assert_eq!(
            ExecError::from(limit).to_string(),
            "the sandbox could not be applied: the memory limit: Operation not permitted (os error 1)"
        );
        let start = ExecError::Start { program: "srv".into(), source: Error::from_raw_os_error(libc::ENOENT) };
        assert_eq!(start.to_string(), "cannot start \"srv\": No such file or directory (os error 2)");
        let cap = ApplyError::DropCapability { cap: 7, source: Error::from_raw_os_error(libc::EIO) };
        assert_eq!(cap.to_string(), "dropping capability 7: Input/output error (os error 5)");
    }
}
