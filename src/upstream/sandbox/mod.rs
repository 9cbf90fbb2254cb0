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

use crate::config::sandbox::{Network, SandboxConfig};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
    pub fn for_start(cfg: &SandboxConfig, command: &[String], cwd: Option<&Path>, private: &Path) -> Result<Policy, String> {
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
                return Err(format!(
                    "the sandbox would show {} (it holds the gateway's {}): move the server or its files out of that folder",
                    p.display(),
                    h.display()
                ));
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

mod apply;
pub(in crate::upstream) use apply::pids_root;
pub use apply::{Enforcement, enforcement, exec};

/// The descriptor number the policy is passed on (to `mcpgate supervise`, then `sandbox-exec`).
pub const POLICY_FD: i32 = 3;
/// The largest policy read (a few hundred paths).
const POLICY_MAX: usize = 1 << 20;

/// `mcpgate sandbox-exec --policy-fd N -- COMMAND...`: returns (126) only when the sandbox or the
/// command could not be started, the reason on stderr, which the gateway logs.
pub fn run(policy_fd: i32, command: &[String]) -> u8 {
    let policy = read_policy_fd(policy_fd);
    // SAFETY: closes the policy descriptor, which the server must not inherit.
    unsafe { libc::close(policy_fd) };
    let policy = match policy {
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

/// The policy as a sealed in-memory file (`memfd`, close-on-exec: the child that needs it gets
/// it as [`POLICY_FD`]), so that it is on no command line and in no environment.
pub fn policy_file(json: &str) -> Result<std::os::fd::OwnedFd, String> {
    use std::io::Write;
    use std::os::fd::{FromRawFd, OwnedFd};
    let name = c"mcpgate-sandbox-policy";
    // SAFETY: memfd_create reads the name we pass and returns a new descriptor we own.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(format!("the sandbox policy's memory file: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh descriptor nothing else owns.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(json.as_bytes()).map_err(|e| format!("writing the sandbox policy: {e}"))?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: adds seals to a descriptor we own; no pointers.
    if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, seals) } != 0 {
        return Err(format!("sealing the sandbox policy: {}", std::io::Error::last_os_error()));
    }
    Ok(file.into())
}

/// The policy on descriptor `fd`, read from its start (its offset is left alone: the supervisor
/// and the sandbox each read it).
pub fn read_policy_fd(fd: i32) -> Result<Policy, String> {
    let mut buf = vec![0u8; POLICY_MAX];
    let mut len = 0;
    while len < buf.len() {
        // SAFETY: reads into the part of our buffer that is left; the descriptor is only read.
        let n = unsafe { libc::pread(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len, len as libc::off_t) };
        match n {
            0 => break,
            n if n > 0 => len += n.unsigned_abs(),
            _ => return Err(format!("descriptor {fd}: {}", std::io::Error::last_os_error())),
        }
    }
    serde_json::from_slice(&buf[..len]).map_err(|e| e.to_string())
}

/// Gets a start ready: the private folder made (0700), the policy worked out and written as the
/// JSON `sandbox-exec` reads. The process cgroup is named after this gateway and the upstream.
pub fn prepare(cfg: &SandboxConfig, id: &str, command: &[String], cwd: Option<&Path>) -> Result<(String, PathBuf), super::UpstreamError> {
    use std::os::unix::fs::DirBuilderExt;
    let fail = |e: String| super::UpstreamError::Unreachable(format!("upstream '{id}': {e}"));
    let private = cfg.private.clone();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&private)
        .map_err(|e| fail(format!("its sandbox folder {}: {e}", private.display())))?;
    let mut policy = Policy::for_start(cfg, command, cwd, &private).map_err(fail)?;
    // One group per process folder: a caller's own process is bounded (and ended) apart from the
    // others, so two folders never share one (128 bits of the digest).
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, private.as_os_str().as_encoded_bytes());
    let tag = crate::toolbox::hex(&digest.as_ref()[..16]);
    policy.cgroup = Some(format!("mcpgate-{}-{}-{tag}", std::process::id(), id.replace('/', "_")));
    let json = serde_json::to_string(&policy).map_err(|e| fail(e.to_string()))?;
    Ok((json, private))
}

/// The command that runs the server in a container (`image`): the runtime's `run`, stdio over its
/// stdin and stdout, the sandbox's limits as the runtime's flags (no network or the default one,
/// memory, processes, open files, CPU time; read-only root, no capabilities, no new privileges),
/// the private folder, `cwd` and `write` paths mounted writable and `read` paths read-only, at the
/// same paths as on the host, and each variable of `env` passed by name (its value comes from the
/// runtime's environment, so no secret is on a command line). Returns the runtime and its arguments.
pub fn container_command(
    cfg: &SandboxConfig,
    image: &str,
    runtime: Option<&str>,
    command: &[String],
    env: &std::collections::BTreeMap<String, String>,
    cwd: Option<&Path>,
    private: &Path,
) -> Result<(PathBuf, Vec<String>), String> {
    let runtime = match runtime {
        Some(r) => which(r).ok_or_else(|| format!("the container runtime {r:?} is not on PATH"))?,
        None => which("docker").or_else(|| which("podman")).ok_or("no container runtime (docker or podman) is on PATH")?,
    };
    let mut a: Vec<String> = ["run", "-i", "--rm", "--init", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        .into_iter()
        .map(String::from)
        .collect();
    match &cfg.network {
        Network::None => a.extend(["--network".into(), "none".into()]),
        Network::Open => {}
        Network::Ports(_) => return Err("a container's connections cannot be limited to ports: use network = \"none\" or \"open\"".into()),
    }
    a.push(format!("--memory={}", cfg.memory_bytes));
    // Swap included: without it the runtime allows as much swap again.
    a.push(format!("--memory-swap={}", cfg.memory_bytes));
    a.push(format!("--pids-limit={}", cfg.processes));
    a.push(format!("--ulimit=nofile={0}:{0}", cfg.open_files));
    if let Some(cpu) = cfg.cpu_seconds {
        a.push(format!("--ulimit=cpu={cpu}:{cpu}"));
    }
    a.extend(["--tmpfs".into(), "/tmp".into()]);
    let p = private.display().to_string();
    a.extend(["-v".into(), format!("{p}:{p}:rw"), "-w".into(), p.clone(), "-e".into(), format!("HOME={p}")]);
    for w in cwd.into_iter().map(Path::to_path_buf).chain(cfg.write.iter().cloned()) {
        let w = w.display().to_string();
        a.extend(["-v".into(), format!("{w}:{w}:rw")]);
    }
    for r in &cfg.read {
        let r = r.display().to_string();
        a.extend(["-v".into(), format!("{r}:{r}:ro")]);
    }
    for name in env.keys() {
        a.extend(["-e".into(), name.clone()]);
    }
    // The end of the runtime's options: an image is never read as a flag (`--privileged`), even
    // where the configuration's own check (an image may not start with '-') was bypassed.
    a.push("--".into());
    a.push(image.to_string());
    a.extend(command.iter().cloned());
    Ok((runtime, a))
}

#[cfg(test)]
mod tests {
    use super::install_tree;
    use std::path::{Path, PathBuf};

    /// The image and the command follow `--`: nothing after it is read as the runtime's own flag.
    #[test]
    fn the_image_follows_the_end_of_the_runtimes_options() {
        let cfg = crate::config::sandbox::SandboxConfig {
            read: Vec::new(),
            write: Vec::new(),
            network: crate::config::sandbox::Network::None,
            memory_bytes: 1 << 30,
            cpu_seconds: None,
            processes: 64,
            open_files: 1024,
            private: PathBuf::from("/srv/private"),
            hidden: Vec::new(),
            container: None,
        };
        let command = vec!["serve".to_string(), "--stdio".to_string()];
        let (_, args) =
            super::container_command(&cfg, "--privileged", Some("sh"), &command, &Default::default(), None, Path::new("/srv/private"))
                .expect("a command");
        let end = args.iter().position(|a| a == "--").expect("the options end");
        assert_eq!(&args[end + 1..], ["--privileged", "serve", "--stdio"], "{args:?}");
        assert!(!args[..end].iter().any(|a| a == "--privileged"), "{args:?}");
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
}
