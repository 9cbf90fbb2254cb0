//! Applying a [`Policy`] to this process, then becoming the server: `mcpgate sandbox-exec`. Runs
//! single-threaded, before any runtime starts, so each step may allocate. Every step that cannot
//! be applied fails the start with the reason (the supervisor logs it and the gateway backs off),
//! except where the kernel offers less than asked and the result is still stronger than nothing:
//! those are named by [`enforcement`] for `mcpgate check`.

use super::Policy;
use landlock::{
    ABI, Access, AccessFs, AccessNet, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch, sock_filter,
};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;

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

/// Where a `pids` cgroup can be made (`pub(in crate::upstream)`: the supervisor removes it): the v2 root (if it offers `pids` and hands it down to its
/// children) or the v1 `pids` mount.
pub(in crate::upstream) fn pids_root() -> Option<std::path::PathBuf> {
    let v2 = std::path::Path::new("/sys/fs/cgroup");
    // On v2 a child group has `pids.max` only where the root hands the controller down.
    let offers = |file: &str| std::fs::read_to_string(v2.join(file)).is_ok_and(|c| c.split_whitespace().any(|x| x == "pids"));
    if offers("cgroup.controllers") && offers("cgroup.subtree_control") {
        return Some(v2.to_path_buf());
    }
    let v1 = v2.join("pids");
    v1.join("cgroup.procs").exists().then_some(v1)
}

/// Restricts this process as `policy` says, then executes `program` with `args`. Returns only on
/// failure, with the reason.
pub fn exec(policy: &Policy, program: &str, args: &[String]) -> String {
    if let Err(e) = restrict(policy) {
        return format!("the sandbox could not be applied: {e}");
    }
    let err = std::process::Command::new(program).args(args).exec();
    format!("cannot start {program:?}: {err}")
}

fn restrict(policy: &Policy) -> Result<(), String> {
    bound_processes(policy)?;
    let limit = |what: libc::__rlimit_resource_t, n: u64, name: &str| -> Result<(), String> {
        let r = libc::rlimit { rlim_cur: n, rlim_max: n };
        // SAFETY: setrlimit reads the struct we pass; it has no other preconditions.
        if unsafe { libc::setrlimit(what, &r) } != 0 {
            return Err(format!("{name}: {}", std::io::Error::last_os_error()));
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
            return Err(format!("the CPU-time limit: {}", std::io::Error::last_os_error()));
        }
    }
    drop_capabilities()?;
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) only sets a flag on this process.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!("no_new_privs: {}", std::io::Error::last_os_error()));
    }
    let abi = enforcement().landlock_abi;
    landlock(policy, abi)?;
    for filter in seccomp(policy, abi)? {
        seccompiler::apply_filter(&filter).map_err(|e| format!("seccomp: {e}"))?;
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
fn bound_processes(policy: &Policy) -> Result<(), String> {
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
    std::fs::create_dir_all(&dir).map_err(|e| format!("the process cgroup {}: {e}", dir.display()))?;
    std::fs::write(dir.join("pids.max"), policy.processes.to_string()).map_err(|e| format!("pids.max: {e}"))?;
    std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()).map_err(|e| format!("joining {}: {e}", dir.display()))
}

/// Every capability gone, for good (bounding, ambient, effective, permitted, inheritable): a
/// server started by a gateway that runs as root keeps uid 0 but none of root's powers, so it
/// cannot read another process's memory or environment through /proc, nor override file modes.
fn drop_capabilities() -> Result<(), String> {
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
            return Err(format!("dropping capability {cap}: {e}"));
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
        return Err(format!("dropping capabilities: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Device files that are written as well as read, harmlessly.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

fn landlock(policy: &Policy, abi_offered: u32) -> Result<(), String> {
    let err = |e: landlock::RulesetError| format!("Landlock: {e}");
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
    let existing = |paths: &[std::path::PathBuf]| paths.iter().filter(|p| p.exists()).cloned().collect::<Vec<_>>();
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
            existing(&DEVICES.iter().map(std::path::PathBuf::from).collect::<Vec<_>>()),
            AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::Truncate,
        ))
        .map_err(err)?;
    for port in policy.ports.iter().flatten() {
        created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp)).map_err(err)?;
    }
    if !policy.open && policy.ports.is_some() && abi_offered < 4 {
        return Err("this kernel's Landlock cannot limit TCP to ports (ABI 4, Linux 6.7), so network = [ports] would be open: \
                    use network = \"none\", or \"open\" to accept that"
            .into());
    }
    let status = created.restrict_self().map_err(err)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("this kernel does not enforce Landlock, so files cannot be restricted (mcpgate check says what it offers); \
                    set enabled = false in [upstream.sandbox] to run the server without a sandbox"
            .into());
    }
    Ok(())
}

/// System calls no MCP server needs, refused with EPERM: changing what is mounted or loaded,
/// reading other processes, new namespaces (`unshare`, `setns`, and `clone` with any `CLONE_NEW*`
/// flag: the user namespace is the usual first step of a kernel exploit), keyrings, BPF, the
/// clock, rebooting; io_uring (its operations pass around this filter); pushing keystrokes into a
/// terminal (`TIOCSTI`, `TIOCLINUX`). `clone3` answers ENOSYS, its flags being out of the filter's
/// reach (in memory), so C libraries fall back to `clone`. Without network, every socket but a
/// Unix one. On a kernel whose Landlock cannot check truncation (ABI < 3), truncating by path and
/// opening read-only with `O_TRUNC` are refused too. On x86-64, x32 system call numbers are
/// refused before anything else (their arch tag is x86-64's, so the table would not see them).
fn seccomp(policy: &Policy, abi: u32) -> Result<[BpfProgram; 2], String> {
    let fail = |e: &dyn std::fmt::Display| format!("seccomp: {e}");
    let mut denied: Vec<i64> = vec![
        libc::SYS_ptrace,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_reboot,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_mount_setattr,
        libc::SYS_pidfd_getfd,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_open_by_handle_at,
        libc::SYS_userfaultfd,
        libc::SYS_acct,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_quotactl,
        libc::SYS_syslog,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ];
    #[cfg(target_arch = "x86_64")]
    denied.extend([libc::SYS_iopl, libc::SYS_ioperm, libc::SYS_modify_ldt]);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = denied.into_iter().map(|s| (s, Vec::new())).collect();
    // One rule per flag: a rule's conditions all hold, any rule matching refuses.
    let when = |arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, len, op, value).and_then(|c| SeccompRule::new(vec![c])).map_err(|e| fail(&e))
    };
    let mut new_namespace = Vec::new();
    for flag in NAMESPACE_FLAGS {
        new_namespace.push(when(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(flag), flag)?);
    }
    rules.insert(libc::SYS_clone, new_namespace);
    rules.insert(
        libc::SYS_ioctl,
        vec![
            when(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::TIOCSTI)?,
            when(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::TIOCLINUX)?,
        ],
    );
    if policy.ports.is_none() {
        rules.insert(libc::SYS_socket, vec![when(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?]);
    } else if !policy.open {
        // Ports: Unix, IP (TCP by Landlock's rules; UDP passes, for names to resolve) and netlink
        // (interface lists); no packet, vsock, Bluetooth or crypto sockets.
        let family = |f: i32| SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, f as u64).map_err(|e| fail(&e));
        let others = vec![family(libc::AF_UNIX)?, family(libc::AF_INET)?, family(libc::AF_INET6)?, family(libc::AF_NETLINK)?];
        rules.insert(libc::SYS_socket, vec![SeccompRule::new(others).map_err(|e| fail(&e))?]);
    }
    let mut unknown: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    signals(policy, abi, &mut rules, &mut unknown, &when)?;
    if abi < 3 {
        // The access mode and O_TRUNC: read-only (0) with O_TRUNC truncates unseen by Landlock < 3.
        let mask = (libc::O_ACCMODE | libc::O_TRUNC) as u64;
        let read_only_trunc = |arg| when(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(mask), libc::O_TRUNC as u64);
        rules.insert(libc::SYS_truncate, Vec::new());
        rules.insert(libc::SYS_openat, vec![read_only_trunc(2)?]);
        #[cfg(target_arch = "x86_64")]
        rules.insert(libc::SYS_open, vec![read_only_trunc(1)?]);
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| fail(&e))?;
    let refuse = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch).map_err(|e| fail(&e))?;
    let mut program: BpfProgram = refuse.try_into().map_err(|e: seccompiler::BackendError| fail(&e))?;
    #[cfg(target_arch = "x86_64")]
    program.splice(0..0, x32_refused());
    if abi < 3 {
        unknown.insert(libc::SYS_openat2, Vec::new());
    }
    let unknown =
        SeccompFilter::new(unknown, SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32), arch).map_err(|e| fail(&e))?;
    let unknown: BpfProgram = unknown.try_into().map_err(|e: seccompiler::BackendError| fail(&e))?;
    // Installed in this order: the ENOSYS answers, then the refusals.
    Ok([unknown, program])
}

/// `fcntl` and `ioctl` numbers the libc crate does not name (Linux, every architecture).
const F_SETOWN_EX: u64 = 15;
const FIOSETOWN: u64 = 0x8901;
const SIOCSPGRP: u64 = 0x8902;

type When<'a> = &'a dyn Fn(u8, SeccompCmpArgLen, SeccompCmpOp, u64) -> Result<SeccompRule, String>;

/// Signals toward the processes a sandboxed server must never stop: on every kernel, the gateway
/// (its pid and its process group), the supervisor (this process's parent) and every process at
/// once (`kill(-1)`) are refused by the filter. Below Landlock ABI 6, which scopes every signal to
/// the sandbox, the filter also refuses what it cannot check by pid: `tkill` (a thread id of the
/// gateway's), `kill(0)` and the sandbox's own group (which holds the supervisor), `SIGIO`
/// owners (`F_SETOWN` toward those pids, `F_SETOWN_EX`, `FIOSETOWN`, `SIOCSPGRP`), and
/// `pidfd_send_signal` answers ENOSYS (a pidfd can be a `/proc/<pid>` folder). Other processes
/// of the gateway's user (other upstreams, other callers' processes) stay reachable there.
fn signals(
    policy: &Policy,
    abi: u32,
    rules: &mut BTreeMap<i64, Vec<SeccompRule>>,
    unknown: &mut BTreeMap<i64, Vec<SeccompRule>>,
    when: When,
) -> Result<(), String> {
    // SAFETY: getppid has no preconditions.
    let supervisor = unsafe { libc::getppid() };
    let gateway = i32::try_from(policy.gateway).unwrap_or(0);
    // SAFETY: getpgid only reads another process's group id.
    let gateway_group = if gateway > 0 { unsafe { libc::getpgid(gateway) } } else { -1 };
    let mut pids: Vec<i32> = vec![-1, supervisor];
    if gateway > 0 {
        pids.push(gateway);
    }
    if gateway_group > 0 {
        pids.push(-gateway_group);
    }
    if abi < 6 {
        pids.extend([0, -supervisor]);
    }
    pids.sort_unstable();
    pids.dedup();
    let to = |arg: u8| -> Result<Vec<SeccompRule>, String> {
        // pid_t is 32 bits: compared as the low word, so -1 is 0xffff_ffff.
        pids.iter().map(|p| when(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, u64::from(*p as u32))).collect()
    };
    for call in [libc::SYS_kill, libc::SYS_tgkill, libc::SYS_rt_sigqueueinfo, libc::SYS_rt_tgsigqueueinfo] {
        rules.insert(call, to(0)?);
    }
    if abi < 6 {
        rules.insert(libc::SYS_tkill, Vec::new());
        unknown.insert(libc::SYS_pidfd_send_signal, Vec::new());
        let mut fcntl: Vec<SeccompRule> = Vec::new();
        for p in &pids {
            let owner = SeccompCondition::new(2, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, u64::from(*p as u32));
            let cmd = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::F_SETOWN as u64);
            let both = cmd.and_then(|c| owner.map(|o| vec![c, o])).and_then(SeccompRule::new).map_err(|e| format!("seccomp: {e}"))?;
            fcntl.push(both);
        }
        fcntl.push(when(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, F_SETOWN_EX)?);
        rules.insert(libc::SYS_fcntl, fcntl);
        if let Some(ioctl) = rules.get_mut(&libc::SYS_ioctl) {
            ioctl.push(when(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, FIOSETOWN)?);
            ioctl.push(when(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, SIOCSPGRP)?);
        }
    }
    Ok(())
}

/// The `CLONE_NEW*` flags `clone` takes (`CLONE_NEWTIME` only through `clone3` and `unshare`).
const NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// Load the system call number; at or above the x32 bit, refuse (EPERM); else go on.
#[cfg(target_arch = "x86_64")]
fn x32_refused() -> Vec<sock_filter> {
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    vec![
        sock_filter { code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, jt: 0, jf: 0, k: 0 },
        sock_filter { code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16, jt: 0, jf: 1, k: X32_SYSCALL_BIT },
        sock_filter { code: (libc::BPF_RET | libc::BPF_K) as u16, jt: 0, jf: 0, k: RET_ERRNO | libc::EPERM as u32 },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter of a kernel without Landlock's signal scoping (ABI < 6), applied in a forked
    /// child of this test: signals to the gateway (here: this test process), to every process at
    /// once and by thread id are refused with EPERM, `pidfd_send_signal` answers ENOSYS, and a
    /// signal to itself still works.
    #[test]
    fn below_abi_6_the_filter_keeps_signals_off_the_gateway() {
        let policy = Policy {
            read: Vec::new(),
            write: Vec::new(),
            ports: None,
            open: false,
            memory: 1 << 30,
            cpu: None,
            processes: 8,
            files: 64,
            cgroup: None,
            gateway: std::process::id(),
        };
        // Built before the fork: the child only installs and tries.
        let filters = seccomp(&policy, 5).expect("filters");
        // SAFETY: the child calls only prctl, seccomp, kill, syscall and _exit before exiting.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            // SAFETY: system calls on plain values; the child ends with _exit.
            unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                let mut code = 0;
                for f in &filters {
                    if seccompiler::apply_filter(f).is_err() {
                        libc::_exit(100);
                    }
                }
                let errno = || *libc::__errno_location();
                let gateway = libc::getppid();
                if libc::kill(gateway, 0) == 0 || errno() != libc::EPERM {
                    code |= 1;
                }
                if libc::kill(-1, 0) == 0 || errno() != libc::EPERM {
                    code |= 2;
                }
                if libc::syscall(libc::SYS_tkill, gateway, 0) == 0 || errno() != libc::EPERM {
                    code |= 4;
                }
                if libc::syscall(libc::SYS_pidfd_send_signal, 0, 0, 0, 0) == 0 || errno() != libc::ENOSYS {
                    code |= 8;
                }
                if libc::kill(libc::getpid(), 0) != 0 {
                    code |= 16;
                }
                libc::_exit(code);
            }
        }
        let mut status = 0;
        // SAFETY: waits for the child we forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "the child ended by a signal: {status}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "bits: 1 gateway, 2 kill(-1), 4 tkill, 8 pidfd_send_signal, 16 itself");
    }
}
