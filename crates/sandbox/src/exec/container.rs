//! The container command of a sandboxed stdio upstream (`image` in `[upstream.sandbox]`): the
//! runtime's `run` with the sandbox's limits as its flags. No `unsafe` here (the crate denies it).

use super::which;
use mcpgate_config::sandbox::{Network, SandboxConfig};
use std::path::{Path, PathBuf};

/// Why a container command cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error("the container runtime {runtime:?} is not on PATH")]
    RuntimeNotFound { runtime: String },
    #[error("no container runtime (docker or podman) is on PATH")]
    NoRuntime,
    #[error("a container's connections cannot be limited to ports: use network = \"none\" or \"open\"")]
    Ports,
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
) -> Result<(PathBuf, Vec<String>), ContainerError> {
    let runtime = match runtime {
        Some(r) => which(r).ok_or_else(|| ContainerError::RuntimeNotFound { runtime: r.to_string() })?,
        None => which("docker").or_else(|| which("podman")).ok_or(ContainerError::NoRuntime)?,
    };
    let mut a: Vec<String> = ["run", "-i", "--rm", "--init", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        .into_iter()
        .map(String::from)
        .collect();
    match &cfg.network {
        Network::None => a.extend(["--network".into(), "none".into()]),
        Network::Open => {}
        Network::Ports(_) => return Err(ContainerError::Ports),
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
    use mcpgate_config::sandbox::{Network, SandboxConfig};
    use std::path::{Path, PathBuf};

    /// A sandbox with the defaults' limits and the network `network`.
    fn config(network: Network) -> SandboxConfig {
        SandboxConfig {
            read: Vec::new(),
            write: Vec::new(),
            network,
            memory_bytes: 1 << 30,
            cpu_seconds: None,
            processes: 64,
            open_files: 1024,
            private: PathBuf::from("/srv/private"),
            hidden: Vec::new(),
            container: None,
        }
    }

    /// The image and the command follow `--`: nothing after it is read as the runtime's own flag.
    #[test]
    fn the_image_follows_the_end_of_the_runtimes_options() {
        let cfg = config(Network::None);
        let command = vec!["serve".to_string(), "--stdio".to_string()];
        let (_, args) =
            super::container_command(&cfg, "--privileged", Some("sh"), &command, &Default::default(), None, Path::new("/srv/private"))
                .expect("a command");
        let end = args.iter().position(|a| a == "--").expect("the options end");
        assert_eq!(&args[end + 1..], ["--privileged", "serve", "--stdio"], "{args:?}");
        assert!(!args[..end].iter().any(|a| a == "--privileged"), "{args:?}");
    }

    #[test]
    fn a_runtime_that_is_missing_or_a_ports_allowance_is_refused_with_the_reason() {
        let mut cfg = config(Network::Ports(vec![443]));
        let private = Path::new("/srv/private");
        let err = super::container_command(&cfg, "img", Some("sh"), &[], &Default::default(), None, private).expect_err("ports");
        assert_eq!(err.to_string(), "a container's connections cannot be limited to ports: use network = \"none\" or \"open\"");
        cfg.network = Network::None;
        let err = super::container_command(&cfg, "img", Some("no-such-runtime-here"), &[], &Default::default(), None, private)
            .expect_err("no runtime");
        assert_eq!(err.to_string(), "the container runtime \"no-such-runtime-here\" is not on PATH");
    }
}
