//! `[upstream.sandbox]`: what a stdio upstream's process may reach (docs/isolation.md). Files:
//! the system read-only, the program's own install tree read-only, its `cwd`, a private folder
//! and the declared `write` paths writable, the declared `read` paths readable, everything else
//! (the gateway's config folder, vault and keys, home) out of reach. Network: none, only some TCP
//! ports, or open. Limits: address space, CPU time, processes, open files. Plus no new privileges
//! and a filter of the obviously dangerous system calls. `image` runs the server in a container
//! instead, with the same limits given to the runtime. `instances = "per_caller"` gives each
//! caller a process (and private folder) of its own.

use super::{ConfigError, Locator};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// `[upstream.sandbox]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// Default `true` where the table is written.
    pub enabled: Option<bool>,
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
    /// `"none"` (default), `"open"`, or the TCP ports it may connect to.
    pub network: Option<Spanned<toml::Value>>,
    /// Address space, e.g. `"2GiB"` (default 8 GiB: runtimes reserve much more than they use).
    pub memory: Option<Spanned<String>>,
    /// CPU seconds before the process is stopped (default: no limit).
    pub cpu_seconds: Option<u64>,
    /// Processes and threads (default 256).
    pub processes: Option<u64>,
    /// Open files (default 1024).
    pub open_files: Option<u64>,
    /// A container image to run the server in (docker or podman) instead of the local sandbox.
    pub image: Option<Spanned<String>>,
    /// `docker` or `podman` (default: whichever is on PATH, docker first).
    pub runtime: Option<String>,
}

/// Where the process may connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    None,
    /// TCP connections to these ports only (any host); no other sockets but Unix ones and UDP.
    Ports(Vec<u16>),
    Open,
}

/// A stdio upstream's sandbox, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub network: Network,
    pub memory_bytes: u64,
    pub cpu_seconds: Option<u64>,
    pub processes: u64,
    pub open_files: u64,
    /// The upstream's private writable folder (its `HOME` and `TMPDIR`); per caller, a subfolder.
    pub private: PathBuf,
    /// What is never shown to the process, whatever `read` says: the config folder and the files
    /// the gateway keeps secrets in.
    pub hidden: Vec<PathBuf>,
    pub container: Option<Container>,
}

/// A container to run the server in.
#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    pub image: String,
    /// `None`: found on PATH when the server starts.
    pub runtime: Option<String>,
}

/// How many processes of a stdio upstream run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Instances {
    /// One process serves every caller.
    #[default]
    Shared,
    /// A process per caller, started on first use, at most `max` at once, stopped after `idle`.
    PerCaller { max: usize, idle: std::time::Duration },
}

const DEFAULT_MEMORY: u64 = 8 << 30;

/// `[upstream.sandbox]` of upstream `id`; `None` when it is absent or disabled.
pub(super) fn resolve(
    at: &Locator,
    id: &str,
    s: Option<&SandboxSection>,
    base: &Path,
    cwd: Option<&PathBuf>,
    hidden: Vec<PathBuf>,
) -> Result<Option<SandboxConfig>, ConfigError> {
    let Some(s) = s else { return Ok(None) };
    if s.enabled == Some(false) {
        return Ok(None);
    }
    // Absolute and resolved, so that no spelling (`.`, `..`, a link) hides a folder it contains.
    let full = |p: &Path| {
        let p = if p.as_os_str().is_empty() { Path::new(".") } else { p };
        p.canonicalize().or_else(|_| std::path::absolute(p)).unwrap_or_else(|_| p.to_path_buf())
    };
    let base = full(base);
    let hidden: Vec<PathBuf> = hidden.iter().map(|h| full(h)).collect();
    let abs = |p: &String| full(&if Path::new(p).is_absolute() { PathBuf::from(p) } else { base.join(p) });
    let read: Vec<PathBuf> = s.read.iter().map(abs).collect();
    let write: Vec<PathBuf> = s.write.iter().map(abs).collect();
    let cwd = cwd.map(|c| full(c));
    // A path that would show the gateway's own secrets to the server is refused outright: the
    // sandbox allows whole trees, so it cannot hide a folder inside one it shows.
    for p in read.iter().chain(&write).chain(cwd.as_ref()) {
        if let Some(h) = hidden.iter().find(|h| h.starts_with(p)) {
            return Err(ConfigError(format!(
                "{}: upstream '{id}' sandbox: {} would show the gateway's {} to the server. Fix: give a folder that does not contain it.",
                at.file,
                p.display(),
                h.display()
            )));
        }
    }
    let network = match s.network.as_ref().map(|n| (n, n.get_ref())) {
        None => Network::None,
        Some((_, toml::Value::String(v))) if v == "none" => Network::None,
        Some((_, toml::Value::String(v))) if v == "open" => Network::Open,
        Some((n, toml::Value::Array(ports))) => {
            let mut list = Vec::new();
            for p in ports {
                match p.as_integer().and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0) {
                    Some(p) => list.push(p),
                    None => {
                        return Err(at.err(n, "upstream.sandbox.network", format!("{p} is not a TCP port"), "list ports 1-65535"));
                    }
                }
            }
            Network::Ports(list)
        }
        Some((n, other)) => {
            return Err(at.err(
                n,
                "upstream.sandbox.network",
                format!("{other} is not a network setting"),
                "write \"none\", \"open\", or the TCP ports it may connect to, e.g. [5432]",
            ));
        }
    };
    let memory_bytes = match &s.memory {
        None => DEFAULT_MEMORY,
        Some(m) => super::usage::parse_size(m.get_ref()).filter(|b| *b >= 16 << 20).ok_or_else(|| {
            at.err(m, "upstream.sandbox.memory", format!("{:?} is not a size of at least 16MiB", m.get_ref()), "write e.g. \"2GiB\"")
        })?,
    };
    if let Some(image) = s.image.as_ref().filter(|i| i.get_ref().starts_with('-') || i.get_ref().trim().is_empty()) {
        return Err(at.err(
            image,
            "upstream.sandbox.image",
            format!("{:?} is not an image name (the runtime would read it as one of its own options)", image.get_ref()),
            "write the image's name, e.g. \"mcp/time:2026.1\"",
        ));
    }
    let container = s.image.as_ref().map(|image| Container { image: image.get_ref().clone(), runtime: s.runtime.clone() });
    if container.is_some() && matches!(network, Network::Ports(_)) {
        return Err(ConfigError(format!(
            "{}: upstream '{id}' sandbox: a container's connections cannot be limited to ports. Fix: network = \"none\" or \"open\".",
            at.file
        )));
    }
    if let Some(r) = &s.runtime
        && !matches!(r.as_str(), "docker" | "podman")
    {
        return Err(ConfigError(format!("{}: upstream '{id}' sandbox.runtime {r:?}: use docker or podman.", at.file)));
    }
    Ok(Some(SandboxConfig {
        read,
        write,
        network,
        memory_bytes,
        cpu_seconds: s.cpu_seconds,
        processes: s.processes.unwrap_or(256).max(1),
        open_files: s.open_files.unwrap_or(1024).max(16),
        private: base.join(".mcpgate-sandbox").join(id),
        hidden,
        container,
    }))
}

/// Adds `kept` (the gateway's secret and record files) to what every sandbox hides, and refuses a
/// sandbox that would show one of them.
pub(super) fn hide(at: &Locator, upstreams: &mut [super::UpstreamConfig], kept: &[PathBuf]) -> Result<(), ConfigError> {
    let full = |p: &Path| p.canonicalize().or_else(|_| std::path::absolute(p)).unwrap_or_else(|_| p.to_path_buf());
    let kept: Vec<PathBuf> = kept.iter().filter(|k| !k.as_os_str().is_empty()).map(|k| full(k)).collect();
    for u in upstreams.iter_mut() {
        let super::TransportConfig::Stdio { sandbox: Some(s), cwd, .. } = &mut u.transport else { continue };
        for p in s.read.iter().chain(&s.write).chain(cwd.iter()) {
            let p = full(p);
            if let Some(k) = kept.iter().find(|k| k.starts_with(&p)) {
                return Err(ConfigError(format!(
                    "{}: upstream '{}' sandbox: {} would show the gateway's {} to the server. Fix: give a folder that does not contain it.",
                    at.file,
                    u.id,
                    p.display(),
                    k.display()
                )));
            }
        }
        s.hidden.extend(kept.iter().cloned());
    }
    Ok(())
}

/// `instances` and its bounds.
pub(super) fn instances(
    at: &Locator,
    id: &str,
    kind: Option<&Spanned<String>>,
    max: Option<usize>,
    idle: Option<&Spanned<String>>,
) -> Result<Instances, ConfigError> {
    match kind.map(|k| (k, k.get_ref().as_str())) {
        None | Some((_, "shared")) => {
            if max.is_some() || idle.is_some() {
                return Err(ConfigError(format!(
                    "{}: upstream '{id}': max_instances and instance_idle bound instances = \"per_caller\". Fix: add it, or remove them.",
                    at.file
                )));
            }
            Ok(Instances::Shared)
        }
        Some((_, "per_caller")) => {
            let idle = match idle {
                None => std::time::Duration::from_secs(15 * 60),
                Some(i) => humantime::parse_duration(i.get_ref())
                    .map_err(|e| at.err(i, "upstream.instance_idle", format!("{:?}: {e}", i.get_ref()), "write e.g. \"15m\""))?,
            };
            Ok(Instances::PerCaller { max: max.unwrap_or(32).max(1), idle })
        }
        Some((k, other)) => {
            Err(at.err(k, "upstream.instances", format!("{other:?} is not a way to run instances"), "use shared or per_caller"))
        }
    }
}
