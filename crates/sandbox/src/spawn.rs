//! What the gateway's stdio child does between fork and exec, as one safe call: a session of its
//! own (so also a process group the supervisor stops whole, and no controlling terminal: nothing
//! the server does reaches the terminal the gateway was started from), a parent-death signal, and
//! the sandbox's policy moved to [`crate::exec::POLICY_FD`] without close-on-exec.

use nix::sys::signal::Signal;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

/// Sets `cmd` up so that its process, once spawned, starts a session of its own, gets `death`
/// when its parent (this gateway) dies, even by SIGKILL, and inherits `policy` (when there is one)
/// as [`crate::exec::POLICY_FD`]. `cmd` holds `policy` until it is dropped, so the descriptor is
/// open whenever the process is spawned.
pub fn detach(cmd: &mut std::process::Command, death: Signal, policy: Option<OwnedFd>) {
    let target = crate::exec::POLICY_FD;
    // SAFETY: the closure runs in the forked child before exec and only calls setsid(2),
    // prctl(2), dup2(2) and fcntl(2), which are async-signal-safe; it allocates nothing and takes
    // no lock. The descriptor it moves is owned by the closure (so open until `cmd` is dropped).
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            nix::sys::prctl::set_pdeathsig(death).map_err(std::io::Error::from)?;
            let moved = match policy.as_ref().map(AsRawFd::as_raw_fd) {
                None => 0,
                Some(fd) if fd == target => libc::fcntl(fd, libc::F_SETFD, 0),
                Some(fd) => libc::dup2(fd, target).min(0),
            };
            if moved < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
