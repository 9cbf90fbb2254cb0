//! Package runners (`npx`, `uvx`, `pnpm dlx`, `bunx`, `pipx run`, ...): a stdio upstream whose
//! command is one downloads its package when it first starts, so a sandbox without the network
//! keeps it from ever starting, and a cold download can outlast the upstream's `timeout`. This
//! module recognizes such a command line and words the advice that goes with a start that did not
//! answer in time (the reason an upstream is down says it) and with `mcpgate check`'s warning.
//! Pure functions over the configuration.

use mcpgate_config::TransportConfig;
use mcpgate_config::sandbox::Network;
use std::time::Duration;

/// The package runner a command line starts (`"npx"`, `"pnpm dlx"`), if it starts one.
pub fn runner_of(command: &[String]) -> Option<String> {
    let program = std::path::Path::new(command.first()?).file_name()?.to_str()?;
    let next = command.get(1).map(String::as_str);
    let two = |word: &str| Some(format!("{program} {word}"));
    match (program, next) {
        ("npx" | "uvx" | "bunx" | "pnpx", _) => Some(program.to_string()),
        ("pnpm" | "yarn", Some("dlx")) => two("dlx"),
        ("pipx", Some("run")) => two("run"),
        ("npm", Some("exec")) => two("exec"),
        ("bun", Some("x")) => two("x"),
        ("uv", Some("tool")) if command.get(2).map(String::as_str) == Some("run") => Some("uv tool run".into()),
        _ => None,
    }
}

/// Why a sandbox keeps a package download from happening, if it does: no network, or TCP ports
/// that leave out 443, where package registries answer.
fn blocked(network: &Network) -> Option<String> {
    match network {
        Network::None => Some("its sandbox has network = \"none\"".into()),
        Network::Ports(p) if !p.contains(&443) => Some(format!("its sandbox allows TCP to ports {p:?} only, not 443")),
        Network::Ports(_) | Network::Open => None,
    }
}

/// The runner and the sandbox's reason it cannot download, for a stdio transport whose runner
/// cannot reach a registry.
fn runner_and_block(transport: &TransportConfig) -> Option<(String, Option<String>)> {
    let TransportConfig::Stdio { command, sandbox, .. } = transport else { return None };
    let runner = runner_of(command)?;
    Some((runner, sandbox.as_ref().and_then(|s| blocked(&s.network))))
}

/// `mcpgate check`'s warning for a package runner its sandbox keeps off the network.
pub fn check_warning(transport: &TransportConfig) -> Option<String> {
    let (runner, block) = runner_and_block(transport)?;
    let why = block?;
    Some(format!(
        "{runner} downloads its package when it starts, but {why}: unless the package is already in {runner}'s cache \
         inside the sandbox, it cannot start. Install the package and run it directly (give its cache or install \
         folder as [upstream.sandbox] read), or allow the registry (network = \"open\", or network = [443])"
    ))
}

/// The advice that goes with a start of `transport` that did not answer within `timeout`: when
/// its command is a package runner whose sandbox blocks the download, or at its first start
/// (`first`: it has never answered), when the download may simply be slow.
pub fn timeout_hint(transport: &TransportConfig, timeout: Duration, first: bool) -> Option<String> {
    let (runner, block) = runner_and_block(transport)?;
    let after = humantime::format_duration(timeout);
    match block {
        Some(why) => Some(format!(
            "{runner} downloads its package when it starts, and {why}, which blocks the download: allow the registry \
             (network = \"open\", or network = [443]) or install the package and run it directly"
        )),
        None if first => Some(format!(
            "{runner} downloads its package on its first start, which can take longer than the upstream's timeout \
             ({after}): raise timeout (e.g. \"120s\") or install the package ahead of time"
        )),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgate_config::sandbox::SandboxConfig;

    fn stdio(command: &[&str], network: Option<Network>) -> TransportConfig {
        let sandbox = network.map(|network| {
            Box::new(SandboxConfig {
                read: Vec::new(),
                write: Vec::new(),
                network,
                memory_bytes: 1 << 30,
                cpu_seconds: None,
                processes: 64,
                open_files: 256,
                private: "/tmp/x".into(),
                hidden: Vec::new(),
                container: None,
            })
        });
        TransportConfig::Stdio { command: command.iter().map(|s| s.to_string()).collect(), env: Default::default(), cwd: None, sandbox }
    }

    #[test]
    fn package_runners_are_recognized_by_their_command_line() {
        let r = |c: &[&str]| runner_of(&c.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(r(&["npx", "-y", "@modelcontextprotocol/server-memory"]).as_deref(), Some("npx"));
        assert_eq!(r(&["/usr/local/bin/uvx", "mcp-server-fetch"]).as_deref(), Some("uvx"));
        assert_eq!(r(&["pnpm", "dlx", "pkg"]).as_deref(), Some("pnpm dlx"));
        assert_eq!(r(&["bunx", "pkg"]).as_deref(), Some("bunx"));
        assert_eq!(r(&["pipx", "run", "pkg"]).as_deref(), Some("pipx run"));
        assert_eq!(r(&["uv", "tool", "run", "pkg"]).as_deref(), Some("uv tool run"));
        assert_eq!(r(&["pnpm", "install"]), None);
        assert_eq!(r(&["pipx", "install", "pkg"]), None);
        assert_eq!(r(&["node", "server.js"]), None);
        assert_eq!(r(&[]), None);
    }

    #[test]
    fn the_hint_says_what_blocks_the_download_or_that_it_may_be_slow() {
        let t = Duration::from_secs(30);
        let npx = |n| stdio(&["npx", "-y", "pkg"], n);
        // No network: said at every timeout, first start or not.
        for first in [true, false] {
            let h = timeout_hint(&npx(Some(Network::None)), t, first).unwrap_or_default();
            assert!(h.contains("network = \"none\"") && h.contains("npx"), "{h}");
        }
        let h = timeout_hint(&npx(Some(Network::Ports(vec![80]))), t, false).unwrap_or_default();
        assert!(h.contains("not 443"), "{h}");
        // Network allowed: a slow first download, only at the first start.
        let h = timeout_hint(&npx(Some(Network::Open)), t, true).unwrap_or_default();
        assert!(h.contains("first start") && h.contains("30s") && h.contains("raise timeout"), "{h}");
        assert!(timeout_hint(&npx(None), t, true).is_some_and(|h| h.contains("first start")), "no sandbox: the network is open");
        assert_eq!(timeout_hint(&npx(Some(Network::Ports(vec![443]))), t, false), None);
        assert_eq!(timeout_hint(&npx(None), t, false), None, "it answered before: a download is not the reason");
        assert_eq!(timeout_hint(&stdio(&["node", "s.js"], Some(Network::None)), t, true), None, "not a package runner");
    }

    #[test]
    fn check_warns_only_for_a_runner_its_sandbox_keeps_off_the_network() {
        assert!(check_warning(&stdio(&["uvx", "pkg"], Some(Network::None))).is_some_and(|w| w.contains("uvx")));
        assert!(check_warning(&stdio(&["uvx", "pkg"], Some(Network::Open))).is_none());
        assert!(check_warning(&stdio(&["uvx", "pkg"], None)).is_none());
        assert!(check_warning(&stdio(&["python", "s.py"], Some(Network::None))).is_none());
    }
}
