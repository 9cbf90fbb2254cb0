//! The local sandbox of a stdio upstream (docs/isolation.md), applied by `mcpgate sandbox-exec`,
//! a single-threaded step between the supervisor and the server: it restricts itself, then
//! becomes the server (exec), so everything the server and its children do is inside. In order:
//! a process bound (a `pids` cgroup where the gateway may make one, and `RLIMIT_NPROC`), the other
//! resource limits (address space, CPU time, open files), no new privileges, Landlock (files: the
//! system and the program's own tree read-only, the writable folders, nothing else; TCP: the
//! allowed ports only), and a seccomp filter that refuses the obviously dangerous system calls
//! (and, without network, every socket but a Unix one). What the running kernel cannot enforce is
//! reported (`enforcement`, shown by `mcpgate check`), never silently dropped: a Landlock that is
//! missing makes the start fail unless the configuration accepts less.
//!
//! Landlock and seccomp were chosen over bubblewrap: they are kernel features reached through
//! maintained crates, need no setuid helper, no user namespaces and no package on the host, work
//! the same for a gateway run as root or not, and cost a few hundred microseconds at start and
//! nothing per call; the price is that paths are refused rather than hidden, which the server sees
//! as "permission denied".
//!
//! This module works out the policy (`Policy::for_start`, `prepare`); `sandbox-exec` itself
//! (`run`) and applying the policy are `apply`, with the system-call filter in `seccomp`; a
//! process that confines itself to run untrusted code (`confine_self`, a strict policy made by
//! `Policy::for_program`) is `confine`; the policy's descriptor is `fd`, the container command
//! `container`. Only the modules that make system calls allow `unsafe`.

use mcpgate_config::sandbox::{Network, SandboxConfig};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[allow(unsafe_code)]
mod apply;
#[allow(unsafe_code)]
mod confine;
mod container;
#[allow(unsafe_code)]
mod fd;
#[allow(unsafe_code)]
mod seccomp;

pub(crate) use apply::pids_root;
pub use apply::{ApplyError, Enforcement, ExecError, enforcement, exec, run};
pub use confine::confine_self;
pub use container::{ContainerError, container_command};
pub use fd::{PolicyFdError, policy_file, read_policy_fd};
pub use seccomp::SeccompError;

/// The descriptor number the policy is passed on (to `mcpgate supervise`, then `sandbox-exec`).
pub const POLICY_FD: i32 = 3;

/// Why a start's policy cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("the sandbox would show {} (it holds the gateway's {}): move the server or its files out of that folder", shown.display(), hidden.display())]
    ShowsHidden { shown: PathBuf, hidden: PathBuf },
    #[error("its sandbox folder {}: {source}", path.display())]
    Folder {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// What `sandbox-exec` applies: the configuration plus the paths worked out for this start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Policy {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// `None`: no network; `Some([])`: open; else the TCP ports it may connect to.
    pub ports: Option<Vec<u16>>,
    pub open: bool,
    pub memory: u64,
    pub cpu: Option<u64>,
    pub processes: u64,
    pub files: u64,
    /// The cgroup the process is put in (made by `sandbox-exec` when it may).
    pub cgroup: Option<String>,
    /// The gateway's process id: the system-call filter refuses signals toward it.
    #[serde(default)]
    pub gateway: u32,
    /// For a process that confines itself to run untrusted code (code mode's child, `confine`):
    /// the system-call filter also refuses starting programs and processes (threads still start)
    /// and every socket, and the process runs at a lower priority. Left out of the JSON when off,
    /// so the policies of stdio servers read and write as they always have.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
}

/// The system's read-only part: where programs, libraries and their data live, and the few
/// files of `/etc` programs read (not `/etc` whole: a gateway's config often lives there).
const SYSTEM: &[&str] = &[
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/opt",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/alternatives",
    "/etc/os-release",
    "/etc/mime.types",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/proc",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/pts",
    "/dev/shm",
];

impl Policy {
    /// The policy for starting `command` (with `cwd`) under `cfg`, `private` being the process's
    /// own writable folder. The program's own tree is readable: the folder that holds it, widened
    /// to the install it belongs to (a `node_modules` tree, a Python environment), and the same
    /// for each argument that names an existing file.
    pub fn for_start(cfg: &SandboxConfig, command: &[String], cwd: Option<&Path>, private: &Path) -> Result<Policy, PolicyError> {
        let mut read: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).filter(|p| p.exists()).collect();
        for dir in std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default() {
            if dir.is_absolute() && dir.exists() {
                read.push(dir);
            }
        }
        for (i, arg) in command.iter().enumerate() {
            let path = match (i, cwd) {
                (0, _) if !arg.contains('/') => which(arg),
                (_, Some(dir)) if Path::new(arg).is_relative() => Some(dir.join(arg)),
                _ => Some(PathBuf::from(arg)),
            };
            for p in path.into_iter().filter(|p| p.is_file()) {
                read.extend(install_tree(&p));
                if let Ok(real) = p.canonicalize() {
                    read.extend(install_tree(&real));
                }
            }
        }
        read.extend(cfg.read.iter().cloned());
        let mut write = vec![private.to_path_buf()];
        write.extend(cwd.map(Path::to_path_buf));
        write.extend(cfg.write.iter().cloned());
        for p in read.iter().chain(&write) {
            if let Some(h) = cfg.hidden.iter().find(|h| h.starts_with(p)) {
                return Err(PolicyError::ShowsHidden { shown: p.clone(), hidden: h.clone() });
            }
        }
        read.sort();
        read.dedup();
        let (ports, open) = match &cfg.network {
            Network::None => (None, false),
            // No port at all is no network, sockets included (not TCP refused and UDP open).
            Network::Ports(p) if p.is_empty() => (None, false),
            Network::Ports(p) => (Some(p.clone()), false),
            Network::Open => (Some(Vec::new()), true),
        };
        Ok(Policy {
            read,
            write,
            ports,
            open,
            memory: cfg.memory_bytes,
            cpu: cfg.cpu_seconds,
            processes: cfg.processes,
            files: cfg.open_files,
            cgroup: None,
            gateway: std::process::id(),
            strict: false,
        })
    }
}

/// `name` found on PATH.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
}

/// The folders a program file needs to read: its own folder, or the install it is part of — the
/// folder above the outermost `node_modules`, or a Python environment (the folder with
/// `pyvenv.cfg`, or the prefix above `lib/pythonX.Y`).
fn install_tree(file: &Path) -> Vec<PathBuf> {
    let Some(dir) = file.parent() else { return Vec::new() };
    // A file straight in a home folder, `/tmp` or `/`: the file only, not everything beside it
    // (`--config ~/server.json` must not show `~/.ssh`).
    let mut out = vec![if too_broad(dir) { file.to_path_buf() } else { dir.to_path_buf() }];
    let ancestors: Vec<&Path> = dir.ancestors().collect();
    if let Some(nm) = ancestors.iter().rev().find(|a| a.file_name().is_some_and(|n| n == "node_modules")) {
        out.extend(nm.parent().map(Path::to_path_buf));
    }
    if let Some(venv) = ancestors.iter().find(|a| a.join("pyvenv.cfg").is_file()) {
        out.push(venv.to_path_buf());
    }
    // An interpreter's own installation (`<prefix>/bin/python3.11` with `<prefix>/lib/python3.11`,
    // or `<prefix>/bin/node` with `<prefix>/lib/node_modules`), not any folder that has a `bin`.
    if let Some(bin) = ancestors.first().filter(|a| a.file_name().is_some_and(|n| n == "bin"))
        && let Some(prefix) = bin.parent().filter(|p| p.parent().is_some())
        && std::fs::read_dir(prefix.join("lib"))
            .map(|entries| {
                entries.flatten().any(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("python") || n == "node_modules"))
            })
            .unwrap_or(false)
    {
        out.push(prefix.to_path_buf());
    }
    out.retain(|p| p.parent().is_some());
    out
}

/// A folder whose whole content is never shown because one file in it was named: the root, a
/// home folder (`$HOME`, `/root`, `/home/<user>`), `/home`, `/tmp`, `/etc`.
fn too_broad(dir: &Path) -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    dir.parent().is_none()
        || ["/home", "/root", "/tmp", "/etc", "/var/tmp"].iter().any(|d| dir == Path::new(d))
        || dir.parent() == Some(Path::new("/home"))
        || home.is_some_and(|h| h == dir)
}

/// Gets a start ready: the private folder made (0700), the policy worked out and written as the
/// JSON `sandbox-exec` reads. The process cgroup is named after this gateway and the upstream `id`.
pub fn prepare(cfg: &SandboxConfig, id: &str, command: &[String], cwd: Option<&Path>) -> Result<(String, PathBuf), PolicyError> {
    use std::os::unix::fs::DirBuilderExt;
    let private = cfg.private.clone();
    if let Err(source) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&private) {
        return Err(PolicyError::Folder { path: private, source });
    }
    let mut policy = Policy::for_start(cfg, command, cwd, &private)?;
    // One group per process folder: a caller's own process is bounded (and ended) apart from the
    // others, so two folders never share one (128 bits of the digest).
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, private.as_os_str().as_encoded_bytes());
    let tag = crate::toolbox::hex(&digest.as_ref()[..16]);
    policy.cgroup = Some(format!("mcpgate-{}-{}-{tag}", std::process::id(), id.replace('/', "_")));
    let json = serde_json::to_string(&policy)?;
    Ok((json, private))
}

#[cfg(test)]
mod tests {
    use super::install_tree;
    use std::path::{Path, PathBuf};

    /// A sandbox with the defaults' limits, reading `read` and hiding `hidden`.
    fn config(
        private: &std::path::Path,
        read: Vec<std::path::PathBuf>,
        hidden: Vec<std::path::PathBuf>,
    ) -> mcpgate_config::sandbox::SandboxConfig {
        mcpgate_config::sandbox::SandboxConfig {
            read,
            write: Vec::new(),
            network: mcpgate_config::sandbox::Network::None,
            memory_bytes: 1 << 30,
            cpu_seconds: None,
            processes: 64,
            open_files: 1024,
            private: private.to_path_buf(),
            hidden,
            container: None,
        }
    }

    #[test]
    fn a_file_named_in_a_broad_folder_shows_only_itself() {
        assert_eq!(install_tree(Path::new("/tmp/server.json")), [PathBuf::from("/tmp/server.json")]);
        assert_eq!(install_tree(Path::new("/home/ann/server.json")), [PathBuf::from("/home/ann/server.json")]);
        assert_eq!(install_tree(Path::new("/root/x.py")), [PathBuf::from("/root/x.py")]);
        // A project folder is the program's own tree.
        assert_eq!(install_tree(Path::new("/home/ann/proj/server.py")), [PathBuf::from("/home/ann/proj")]);
        assert_eq!(install_tree(Path::new("/tmp/proj/server.py")), [PathBuf::from("/tmp/proj")]);
        // The folder above the outermost node_modules.
        let tree = install_tree(Path::new("/srv/app/node_modules/pkg/dist/index.js"));
        assert!(tree.contains(&PathBuf::from("/srv/app")), "{tree:?}");
    }

    /// A stdio server's policy is never strict and writes exactly the JSON it always has; a policy
    /// written before `strict` existed reads back as not strict; a strict one says so and reads
    /// back strict.
    #[test]
    fn a_policy_without_strict_reads_and_writes_as_before() {
        let policy = super::Policy {
            read: vec!["/usr".into()],
            write: vec!["/tmp/p".into()],
            ports: None,
            open: false,
            memory: 1 << 30,
            cpu: Some(5),
            processes: 64,
            files: 1024,
            cgroup: Some("mcpgate-1-a-00".into()),
            gateway: 7,
            strict: false,
        };
        let before = r#"{"read":["/usr"],"write":["/tmp/p"],"ports":null,"open":false,"memory":1073741824,"cpu":5,"processes":64,"files":1024,"cgroup":"mcpgate-1-a-00","gateway":7}"#;
        assert_eq!(serde_json::to_string(&policy).expect("json"), before);
        assert_eq!(serde_json::from_str::<super::Policy>(before).expect("read"), policy);
        let strict = super::Policy { strict: true, ..policy };
        let json = serde_json::to_string(&strict).expect("json");
        assert!(json.ends_with(r#""gateway":7,"strict":true}"#), "{json}");
        assert_eq!(serde_json::from_str::<super::Policy>(&json).expect("read"), strict);

        let dir = tempfile::tempdir().expect("a folder");
        let private = dir.path().join("private");
        let cfg = config(&private, Vec::new(), Vec::new());
        let started = super::Policy::for_start(&cfg, &[], None, &private).expect("a policy");
        assert!(!started.strict);
        assert!(!serde_json::to_string(&started).expect("json").contains("strict"));
    }

    /// Code mode's policy: nothing to read or write, no network, one process, few descriptors,
    /// strict; the limits are the caller's.
    #[test]
    fn a_program_policy_is_strict_and_shows_nothing() {
        let p = super::Policy::for_program(3 << 30, 6);
        let expected = super::Policy {
            read: Vec::new(),
            write: Vec::new(),
            ports: None,
            open: false,
            memory: 3 << 30,
            cpu: Some(6),
            processes: 1,
            files: 16,
            cgroup: None,
            gateway: std::process::id(),
            strict: true,
        };
        assert_eq!(p, expected);
    }

    /// A path the gateway keeps hidden (its vault, its keys) inside what the server would see
    /// stops the start, with the message the log shows.
    #[test]
    fn a_hidden_file_inside_a_shown_folder_stops_the_start() {
        let dir = tempfile::tempdir().expect("a folder");
        let private = dir.path().join("private");
        let cfg = config(&private, vec![dir.path().to_path_buf()], vec![dir.path().join("vault.json")]);
        let err = super::Policy::for_start(&cfg, &[], None, &private).expect_err("refused");
        assert_eq!(
            err.to_string(),
            format!(
                "the sandbox would show {} (it holds the gateway's {}): move the server or its files out of that folder",
                dir.path().display(),
                dir.path().join("vault.json").display()
            )
        );
    }
}
