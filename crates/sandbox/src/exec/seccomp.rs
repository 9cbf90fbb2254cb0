//! The system-call filter of a sandbox (seccomp, compiled by `seccompiler`): what no MCP server
//! needs is refused, and on kernels whose Landlock cannot scope signals, so are signals toward
//! the gateway and the supervisor; a strict policy (untrusted code) refuses every signal it would send, new programs,
//! processes and sockets as well. Built before it is installed (`apply`), so a failure to build
//! it fails the start with the reason.

use super::Policy;
#[cfg(target_arch = "x86_64")]
use seccompiler::sock_filter;
use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// Why the filter cannot be built or installed.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("seccomp: {0}")]
    Build(#[from] BackendError),
    #[error("seccomp: {0}")]
    Install(#[from] seccompiler::Error),
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
/// A strict policy (untrusted code, `confine`) also refuses starting a program (`execve`,
/// `execveat`), a process (`fork`, `vfork`, `clone` without `CLONE_THREAD`: threads still start)
/// and every socket, Unix ones and pairs included.
pub(super) fn seccomp(policy: &Policy, abi: u32) -> Result<[BpfProgram; 2], SeccompError> {
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
        Ok(SeccompCondition::new(arg, len, op, value).and_then(|c| SeccompRule::new(vec![c]))?)
    };
    let mut new_namespace = Vec::new();
    for flag in NAMESPACE_FLAGS {
        new_namespace.push(when(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(flag), flag)?);
    }
    if policy.strict {
        // A clone without CLONE_THREAD is a new process (the C library's fork is one).
        let thread = libc::CLONE_THREAD as u64;
        new_namespace.push(when(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(thread), 0)?);
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
        let family = |f: i32| SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, f as u64);
        let others = vec![family(libc::AF_UNIX)?, family(libc::AF_INET)?, family(libc::AF_INET6)?, family(libc::AF_NETLINK)?];
        rules.insert(libc::SYS_socket, vec![SeccompRule::new(others)?]);
    }
    if policy.strict {
        // Pathname Unix sockets are out of Landlock's reach, so none at all (no rule: always refused).
        for call in [libc::SYS_socket, libc::SYS_socketpair, libc::SYS_execve, libc::SYS_execveat] {
            rules.insert(call, Vec::new());
        }
        #[cfg(target_arch = "x86_64")]
        for call in [libc::SYS_fork, libc::SYS_vfork] {
            rules.insert(call, Vec::new());
        }
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
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let refuse = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)?;
    let mut program: BpfProgram = refuse.try_into()?;
    #[cfg(target_arch = "x86_64")]
    program.splice(0..0, x32_refused());
    if abi < 3 {
        unknown.insert(libc::SYS_openat2, Vec::new());
    }
    let unknown = SeccompFilter::new(unknown, SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32), arch)?;
    let unknown: BpfProgram = unknown.try_into()?;
    // Installed in this order: the ENOSYS answers, then the refusals.
    Ok([unknown, program])
}

/// `fcntl` and `ioctl` numbers the libc crate does not name (Linux, every architecture).
const F_SETOWN_EX: u64 = 15;
const FIOSETOWN: u64 = 0x8901;
const SIOCSPGRP: u64 = 0x8902;

type When<'a> = &'a dyn Fn(u8, SeccompCmpArgLen, SeccompCmpOp, u64) -> Result<SeccompRule, SeccompError>;

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
) -> Result<(), SeccompError> {
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
    let to = |arg: u8| -> Result<Vec<SeccompRule>, SeccompError> {
        // pid_t is 32 bits: compared as the low word, so -1 is 0xffff_ffff.
        pids.iter().map(|p| when(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, u64::from(*p as u32))).collect()
    };
    for call in [libc::SYS_kill, libc::SYS_tgkill, libc::SYS_rt_sigqueueinfo, libc::SYS_rt_tgsigqueueinfo] {
        rules.insert(call, to(0)?);
    }
    if policy.strict {
        // Untrusted code (a program of code mode) signals nothing, itself included, whatever the
        // kernel's Landlock scopes: no other program, server or process of the gateway's user.
        for call in [libc::SYS_kill, libc::SYS_tgkill, libc::SYS_tkill, libc::SYS_rt_sigqueueinfo, libc::SYS_rt_tgsigqueueinfo] {
            rules.insert(call, Vec::new());
        }
        unknown.insert(libc::SYS_pidfd_send_signal, Vec::new());
    }
    if abi < 6 {
        rules.insert(libc::SYS_tkill, Vec::new());
        unknown.insert(libc::SYS_pidfd_send_signal, Vec::new());
        let mut fcntl: Vec<SeccompRule> = Vec::new();
        for p in &pids {
            let owner = SeccompCondition::new(2, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, u64::from(*p as u32));
            let cmd = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::F_SETOWN as u64);
            let both = cmd.and_then(|c| owner.map(|o| vec![c, o])).and_then(SeccompRule::new)?;
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
            strict: false,
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
