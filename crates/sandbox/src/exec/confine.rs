//! A process that confines itself before it runs untrusted code (code mode's child, `mcpgate
//! code-run`): `confine_self` reads the policy from its descriptor, closes it and every other
//! descriptor above the standard streams, and applies the policy to the process (the same steps as
//! `sandbox-exec`), and `Policy::for_program` makes the strict policy such a process runs under: no
//! file, no network and no socket at all, no other program or process (threads still start), a few
//! descriptors, a lower priority, and the memory and CPU backstops the caller works out. What the
//! running kernel cannot enforce fails the confinement, so untrusted code never runs unconfined.

use super::apply::restrict;
use super::fd::take_policy_fd;
use super::{ExecError, Policy};

/// The descriptors a confined program may hold: its three standard streams and a few more.
pub const PROGRAM_FILES: u64 = 16;

impl Policy {
    /// The strict policy of a process that runs untrusted code. Landlock gets no rule but the
    /// harmless devices (`/dev/null`, `/dev/zero`, `/dev/full`), so every other path is refused,
    /// while the pipes it inherited still work; no network, no socket, one process, its
    /// threads, [`PROGRAM_FILES`] descriptors. `memory` (bytes of address space) and `cpu`
    /// (seconds) are backstops: the interpreter's own limits come first, so the caller leaves
    /// room above them (the binary's own mappings count toward the address space).
    pub fn for_program(memory: u64, cpu: u64) -> Policy {
        Policy {
            read: Vec::new(),
            write: Vec::new(),
            ports: None,
            open: false,
            memory,
            cpu: Some(cpu),
            processes: 1,
            files: PROGRAM_FILES,
            cgroup: None,
            gateway: std::process::id(),
            strict: true,
        }
    }
}

/// Reads the policy on `policy_fd`, closes the descriptor (whether it could be read or not) and
/// every other one above the standard streams, and
/// applies the policy to this process: limits, capabilities, no new privileges, Landlock, seccomp
/// (and, when strict, the lower priority). Landlock and seccomp hold for the calling thread and
/// what it starts after, so this must run before any thread starts: a process that already runs
/// more than one is refused. Returns the policy that now holds.
pub fn confine_self(policy_fd: i32) -> Result<Policy, ExecError> {
    let policy = take_policy_fd(policy_fd)?;
    match threads()? {
        1 => {}
        n => return Err(ExecError::Threaded(n)),
    }
    close_inherited()?;
    restrict(&policy)?;
    Ok(policy)
}

/// Closes every descriptor above the standard streams: whatever the gateway's own parent left
/// without close-on-exec (a job server's pipe, a supervisor's socket) must not reach the program.
fn close_inherited() -> Result<(), ExecError> {
    // SAFETY: close_range(2) takes plain numbers. Nothing in this process owns a descriptor above
    // 2 at this point (the policy's was read and closed, and no thread runs to hold one); the
    // standard streams stay.
    if unsafe { libc::close_range(3, libc::c_uint::MAX, 0) } != 0 {
        return Err(ExecError::Descriptors(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// The threads this process runs (`/proc/self/status`).
fn threads() -> Result<u64, ExecError> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(ExecError::Threads)?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| ExecError::Threads(std::io::Error::new(std::io::ErrorKind::InvalidData, "no Threads line in /proc/self/status")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{enforcement, policy_file};
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    /// What the confined child found, one bit each (its exit status): 0 is all held.
    const BITS: &str = "1 policy fd or another inherited one still open, 2 /etc/passwd not refused with EACCES, 4 a Unix socket or socket pair \
                        not refused with EPERM, 8 an IP socket not refused with EPERM, 16 execve not refused with EPERM, \
                        32 fork (libc, raw) or a process clone not refused with EPERM, 64 no thread, 128 nice below 10";

    /// The strict policy of code mode, applied by `confine_self` in a forked child of this test:
    /// files, sockets of every family, programs, processes and signals are refused, while a thread still
    /// starts and the pipe it inherited is still written. A kernel that enforces neither Landlock
    /// nor seccomp fails the test (code mode refuses to run there), rather than skipping it.
    #[test]
    fn a_confined_program_reaches_no_file_socket_program_or_process() {
        let e = enforcement();
        assert!(
            e.landlock_abi > 0 && e.seccomp,
            "this kernel does not enforce Landlock (ABI {}) or seccomp ({}): confinement cannot be shown here, and code mode refuses to run",
            e.landlock_abi,
            e.seccomp
        );
        // The forked child keeps this test process's mappings (every thread's stack and arena).
        let policy = Policy::for_program(16 << 30, 60);
        let policy_fd = policy_file(&serde_json::to_string(&policy).expect("json")).expect("a memory file");
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two new descriptors into the array we own.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0, "a pipe");
        // SAFETY: both are fresh descriptors nothing else owns.
        let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the child runs `confined` and ends with _exit; the parent only waits for it.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            confined(policy_fd.as_raw_fd(), writer.as_raw_fd());
        }
        drop(writer);
        let mut status = 0;
        // SAFETY: waits for the child we forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let mut said = String::new();
        std::fs::File::from(reader).read_to_string(&mut said).expect("the pipe");
        assert!(libc::WIFEXITED(status), "the child ended by a signal: {status} ({said})");
        assert_eq!(libc::WEXITSTATUS(status), 0, "{said}; bits: {BITS}");
        assert_eq!(said, "confined", "the inherited pipe is written");
    }

    /// The forked child: confines itself, tries, writes to the inherited pipe, and ends with a
    /// bit per failed expectation (or 100 and the reason, when it could not confine itself).
    fn confined(policy_fd: i32, inherited: i32) -> ! {
        // The pipe becomes stderr, the standard stream a confined process keeps; the descriptor
        // it came on is closed by `confine_self` with every other one above the standard streams.
        // SAFETY: dup2 takes plain numbers; both are this child's own.
        let pipe = unsafe { libc::dup2(inherited, 2) };
        let say = |text: &str| {
            // SAFETY: write reads `text.len()` bytes of `text`, which lives through the call.
            unsafe { libc::write(pipe, text.as_ptr().cast(), text.len()) };
        };
        if let Err(e) = confine_self(policy_fd) {
            say(&format!("confine_self: {e}"));
            // SAFETY: _exit ends this forked child at once.
            unsafe { libc::_exit(100) };
        }
        let mut code = 0;
        // SAFETY: system calls on plain values and on NUL-terminated literals; a process that is
        // started by mistake ends with _exit at once, and is waited for.
        unsafe {
            let errno = || *libc::__errno_location();
            let refused = |r: i64, e: i32| r == -1 && errno() == e;
            let started = |pid: i64| {
                if pid == 0 {
                    libc::_exit(0);
                }
                if pid > 0 {
                    libc::waitpid(pid as i32, std::ptr::null_mut(), 0);
                }
            };
            if libc::fcntl(policy_fd, libc::F_GETFD) != -1 || libc::fcntl(inherited, libc::F_GETFD) != -1 {
                code |= 1;
            }
            if !refused(libc::open(c"/etc/passwd".as_ptr(), libc::O_RDONLY).into(), libc::EACCES) {
                code |= 2;
            }
            let mut pair = [0; 2];
            if !refused(libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0).into(), libc::EPERM)
                || !refused(libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr()).into(), libc::EPERM)
            {
                code |= 4;
            }
            if !refused(libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0).into(), libc::EPERM)
                || !refused(libc::socket(libc::AF_INET6, libc::SOCK_DGRAM, 0).into(), libc::EPERM)
            {
                code |= 8;
            }
            let argv = [c"/bin/true".as_ptr(), std::ptr::null()];
            let envp = [std::ptr::null()];
            if !refused(libc::execve(c"/bin/true".as_ptr(), argv.as_ptr(), envp.as_ptr()).into(), libc::EPERM) {
                code |= 16;
            }
            // Each answer is read before the next call changes errno.
            let forked = i64::from(libc::fork());
            let fork_refused = refused(forked, libc::EPERM);
            started(forked);
            let cloned = libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0);
            let clone_refused = refused(cloned, libc::EPERM);
            started(cloned);
            #[cfg(target_arch = "x86_64")]
            let raw_refused = {
                let raw = libc::syscall(libc::SYS_fork);
                let refused = refused(raw, libc::EPERM);
                started(raw);
                refused
            };
            #[cfg(not(target_arch = "x86_64"))]
            let raw_refused = true;
            if !fork_refused || !clone_refused || !raw_refused {
                code |= 32;
            }
            if std::thread::Builder::new().spawn(|| 7).ok().and_then(|t| t.join().ok()) != Some(7) {
                code |= 64;
            }
            if libc::getpriority(libc::PRIO_PROCESS, 0) < crate::exec::apply::STRICT_NICE {
                code |= 128;
            }
            // No signal leaves it, to its parent or to itself (signal 0 only asks whether the
            // target exists): said on the pipe, the exit status has no bit left.
            if !refused(libc::kill(libc::getppid(), 0).into(), libc::EPERM)
                || !refused(libc::kill(libc::getpid(), 0).into(), libc::EPERM)
                || !refused(libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::gettid(), 0), libc::EPERM)
            {
                say("a signal was not refused with EPERM; ");
            }
        }
        say("confined");
        // SAFETY: _exit ends this forked child at once.
        unsafe { libc::_exit(code) }
    }
}
