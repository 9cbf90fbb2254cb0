//! The policy's descriptor: the gateway writes the policy into a sealed in-memory file (`memfd`),
//! the supervisor and `sandbox-exec` inherit it as [`super::POLICY_FD`] and read it from its start,
//! and `sandbox-exec` (or a process that confines itself, `confine_self`) closes it before anything
//! runs inside. So the policy is on no command line and in no environment.

use super::Policy;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};

/// The largest policy read (a few hundred paths).
const POLICY_MAX: usize = 1 << 20;

/// Why the policy's memory file cannot be made or read.
#[derive(Debug, thiserror::Error)]
pub enum PolicyFdError {
    #[error("the sandbox policy's memory file: {0}")]
    Create(#[source] std::io::Error),
    #[error("writing the sandbox policy: {0}")]
    Write(#[source] std::io::Error),
    #[error("sealing the sandbox policy: {0}")]
    Seal(#[source] std::io::Error),
    #[error("descriptor {fd}: {source}")]
    Read {
        fd: i32,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Parse(#[from] serde_json::Error),
}

/// The policy as a sealed in-memory file (`memfd`, close-on-exec: the child that needs it gets
/// it as [`super::POLICY_FD`]), so that it is on no command line and in no environment.
pub fn policy_file(json: &str) -> Result<OwnedFd, PolicyFdError> {
    let name = c"mcpgate-sandbox-policy";
    // SAFETY: memfd_create reads the NUL-terminated name we pass and returns a new descriptor.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(PolicyFdError::Create(std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh, open descriptor nothing else owns.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(json.as_bytes()).map_err(PolicyFdError::Write)?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: adds seals to a descriptor we own (`file` holds it open); no pointers.
    if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, seals) } != 0 {
        return Err(PolicyFdError::Seal(std::io::Error::last_os_error()));
    }
    Ok(file.into())
}

/// The policy on descriptor `fd`, read from its start (its offset is left alone: the supervisor
/// and the sandbox each read it).
pub fn read_policy_fd(fd: i32) -> Result<Policy, PolicyFdError> {
    let mut buf = vec![0u8; POLICY_MAX];
    let mut len = 0;
    while len < buf.len() {
        let left = &mut buf[len..];
        // SAFETY: pread writes at most `left.len()` bytes into `left`, which we own and borrow
        // mutably for the call; the descriptor is only read (a bad one fails with EBADF).
        let n = unsafe { libc::pread(fd, left.as_mut_ptr().cast(), left.len(), len as libc::off_t) };
        match n {
            0 => break,
            n if n > 0 => len += n.unsigned_abs(),
            _ => return Err(PolicyFdError::Read { fd, source: std::io::Error::last_os_error() }),
        }
    }
    Ok(serde_json::from_slice(&buf[..len])?)
}

/// The policy on descriptor `fd`, which is then closed whether it could be read or not: the
/// descriptor was passed on for the sandbox alone, and what runs inside must not inherit it.
pub(super) fn take_policy_fd(fd: i32) -> Result<Policy, PolicyFdError> {
    let policy = read_policy_fd(fd);
    // SAFETY: close(2) takes a plain number. `fd` is the policy's descriptor, passed on for this
    // program alone (`--policy-fd`): nothing in this process owns it or uses it after this, and
    // what runs inside the sandbox must not inherit it (a bad number fails with EBADF, ignored).
    unsafe { libc::close(fd) };
    policy
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// The file holds the policy, which reads back from its start however often it is read, and
    /// cannot be written once sealed.
    #[test]
    fn the_policy_reads_back_from_its_sealed_file() {
        let policy = Policy {
            read: vec!["/usr".into()],
            write: vec!["/tmp/p".into()],
            ports: Some(vec![443]),
            open: false,
            memory: 1 << 30,
            cpu: Some(5),
            processes: 8,
            files: 64,
            cgroup: Some("mcpgate-1-a-00".into()),
            gateway: 1,
            strict: false,
        };
        let fd = policy_file(&serde_json::to_string(&policy).expect("json")).expect("a memory file");
        for _ in 0..2 {
            assert_eq!(read_policy_fd(fd.as_raw_fd()).expect("read back"), policy);
        }
        let mut file = std::fs::File::from(fd);
        assert!(file.write_all(b"x").is_err(), "sealed against writes");
        assert_eq!(read_policy_fd(-1).expect_err("no such descriptor").to_string(), "descriptor -1: Bad file descriptor (os error 9)");
    }
}
