//! `mcpgate supervise`: the small process between the gateway and one stdio server, which owns
//! the life of everything that server starts. It runs single-threaded (before any runtime), is a
//! child subreaper (`PR_SET_CHILD_SUBREAPER`: whatever the server starts and leaves, a
//! double-forked `setsid` daemon included, becomes its child instead of init's), and ends the
//! whole tree when the server exits, when the gateway stops the upstream (SIGTERM to this
//! process), or when the gateway dies (its parent-death signal): SIGTERM to its process group and
//! to every descendant, a grace period, then SIGKILL to every descendant and every process of the
//! sandbox's `pids` cgroup, until none is left; then the cgroup is removed. It exits with the
//! server's status (128 + the signal when a signal ended it, the shell's convention), having said
//! on stderr which signal it was.
//!
//! With `--policy-fd N`, N is the sandbox's policy (a sealed memfd the gateway passed, never a
//! command line): read here for the cgroup's name, inherited by `sandbox-exec`, closed here once
//! the server started.

use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// How long the tree may take to exit after SIGTERM.
const GRACE: Duration = Duration::from_secs(3);
/// How long SIGKILL is repeated (new children of a forking process) before giving up.
const KILL_FOR: Duration = Duration::from_secs(5);

/// Runs COMMAND under supervision; returns the exit code (see the module comment).
pub fn run(policy_fd: Option<i32>, command: &[String]) -> u8 {
    let Some((program, args)) = command.split_first() else { return 2 };
    let cgroup = policy_fd.and_then(cgroup_of);
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) only sets a flag on this process.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let mut wanted = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP, Signal::SIGCHLD] {
        wanted.add(s);
    }
    // Held pending, then taken with sigtimedwait.
    if let Err(e) = wanted.thread_block() {
        eprintln!("mcpgate supervise: blocking signals: {e}");
        return 2;
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    // The server starts with nothing blocked (a blocked SIGTERM would be inherited).
    // SAFETY: runs in the forked child before exec; pthread_sigmask is async-signal-safe and
    // nothing is allocated.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || SigSet::empty().thread_set_mask().map_err(std::io::Error::from));
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcpgate supervise: cannot start {program:?}: {e}");
            return 127;
        }
    };
    if let Some(fd) = policy_fd {
        // SAFETY: closes our copy of the policy descriptor, which nothing else here uses.
        unsafe { libc::close(fd) };
    }
    let main = Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
    let mut status = None;
    // Until the server exits or this process is told to stop.
    loop {
        match wait_signal(&wanted, None) {
            Some(libc::SIGCHLD) => {
                reap(main, &mut status);
                if status.is_some() {
                    break;
                }
            }
            Some(_) => break,
            None => {}
        }
    }
    end_tree(main, &mut status, cgroup.as_deref(), &wanted);
    match status {
        Some(WaitStatus::Exited(_, code)) => u8::try_from(code).unwrap_or(1),
        Some(WaitStatus::Signaled(_, sig, _)) => {
            eprintln!("mcpgate supervise: the server was ended by signal {} ({sig})", sig as i32);
            u8::try_from(128 + sig as i32).unwrap_or(1)
        }
        // Stopped before it ended on its own.
        _ => 143,
    }
}

/// The policy's cgroup, read from `fd` without moving its offset (the sandbox reads it next).
fn cgroup_of(fd: i32) -> Option<String> {
    let policy = crate::exec::read_policy_fd(fd).ok()?;
    policy.cgroup
}

/// Waits for one of `set` (at most `limit`); `None` on timeout or interruption.
fn wait_signal(set: &SigSet, limit: Option<Duration>) -> Option<i32> {
    let ts = limit.map(|d| libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(i32::try_from(d.subsec_nanos()).unwrap_or(0)),
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: the set and the timespec are ours and outlive the call; no siginfo is asked for.
    let sig = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), ts_ptr) };
    (sig > 0).then_some(sig)
}

/// Reaps every child that has exited; the server's status goes to `status`.
fn reap(main: Pid, status: &mut Option<WaitStatus>) {
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(s) => {
                if s.pid() == Some(main) && matches!(s, WaitStatus::Exited(..) | WaitStatus::Signaled(..)) {
                    *status = Some(s);
                }
            }
        }
    }
}

/// SIGTERM to the group and every descendant, a grace period, then SIGKILL until none is left;
/// the cgroup goes last.
fn end_tree(main: Pid, status: &mut Option<WaitStatus>, cgroup: Option<&str>, wanted: &SigSet) {
    let me = nix::unistd::getpid();
    // The group holds this process too: its SIGTERM stays pending (blocked), unread.
    let _ = nix::sys::signal::killpg(nix::unistd::getpgrp(), Signal::SIGTERM);
    for pid in descendants(me) {
        let _ = kill(pid, Signal::SIGTERM);
    }
    let until = Instant::now() + GRACE;
    while !descendants(me).is_empty() && Instant::now() < until {
        wait_signal(wanted, Some(until.saturating_duration_since(Instant::now()).min(Duration::from_millis(100))));
        reap(main, status);
    }
    let until = Instant::now() + KILL_FOR;
    loop {
        let left: Vec<Pid> = descendants(me).into_iter().chain(cgroup.map(members).unwrap_or_default()).collect();
        reap(main, status);
        if left.is_empty() || Instant::now() >= until {
            break;
        }
        if let Some(dir) = cgroup.and_then(cgroup_dir) {
            // cgroup v2 ends every member at once (the file is absent on v1).
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
        }
        for pid in left {
            let _ = kill(pid, Signal::SIGKILL);
        }
        wait_signal(wanted, Some(Duration::from_millis(50)));
    }
    reap(main, status);
    if let Some(dir) = cgroup.and_then(cgroup_dir) {
        // Emptied just now: the kernel may take a moment to let it go.
        for _ in 0..50 {
            if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn cgroup_dir(name: &str) -> Option<std::path::PathBuf> {
    let root = crate::exec::pids_root()?;
    let dir = root.join(name);
    dir.exists().then_some(dir)
}

/// The processes in the sandbox's cgroup (a process that left the tree is still there).
fn members(name: &str) -> Vec<Pid> {
    let Some(dir) = cgroup_dir(name) else { return Vec::new() };
    let me = std::process::id();
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
        .filter(|p| *p != me)
        .filter_map(|p| i32::try_from(p).ok().map(Pid::from_raw))
        .collect()
}

/// Every live process below `root`, from /proc's parent links.
fn descendants(root: Pid) -> Vec<Pid> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        if let Some((state, ppid)) = parse_stat(&stat)
            && state != "Z"
        {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let (mut out, mut seen, mut queue) = (Vec::new(), HashSet::new(), vec![root.as_raw()]);
    while let Some(p) = queue.pop() {
        for c in children.get(&p).into_iter().flatten() {
            if seen.insert(*c) {
                out.push(Pid::from_raw(*c));
                queue.push(*c);
            }
        }
    }
    out
}

/// The state and parent pid of a `/proc/<pid>/stat` line (the command, in parentheses, may hold
/// spaces and parentheses: the fields follow the last `)`).
fn parse_stat(stat: &str) -> Option<(&str, i32)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

#[cfg(test)]
mod tests {
    use super::parse_stat;

    #[test]
    fn a_stat_line_is_read_after_its_command() {
        assert_eq!(parse_stat("42 (python3) S 7 42 42 0 -1"), Some(("S", 7)));
        assert_eq!(parse_stat("42 (a) b) (c) Z 9 1"), Some(("Z", 9)));
        assert_eq!(parse_stat("42 (x"), None);
    }
}
