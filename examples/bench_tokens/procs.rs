//! The processes of the measurement: the test dependencies that scripts/install-test-deps.sh puts
//! under `.work/` (found through the same variables as the tests), the synthetic domain servers
//! (tests/py/domain_server.py over HTTP), and the gateway itself (the mcpgate binary built next to
//! this example) on a generated configuration. Every process is killed when its handle drops.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process, killed and reaped when dropped.
pub struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The repository (the working directory bench/tokens runs in).
fn repo() -> anyhow::Result<PathBuf> {
    Ok(std::env::current_dir()?)
}

/// A test dependency: `$var` when set, else its default place under the repository; missing
/// means an error that says how to install it.
fn dependency(var: &str, default: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or(repo()?.join(default));
    anyhow::ensure!(
        path.exists(),
        "{var}: {} is missing: run scripts/install-test-deps.sh (scripts/test runs it) to install the test dependencies",
        path.display()
    );
    Ok(path)
}

/// The paths of what the measurement starts.
pub struct Deps {
    /// The venv Python with the official `mcp` SDK.
    pub python: PathBuf,
    /// `.work/servers/node_modules/.bin`: server-filesystem, -memory, -sequential-thinking.
    pub servers_bin: PathBuf,
    /// server-everything's entry point.
    pub everything_js: PathBuf,
    /// The mcpgate binary of the same build as this example.
    pub mcpgate: PathBuf,
}

impl Deps {
    pub fn find() -> anyhow::Result<Deps> {
        let servers_bin = dependency("MCPGATE_SERVERS_BIN", ".work/servers/node_modules/.bin")?;
        for name in ["mcp-server-filesystem", "mcp-server-memory", "mcp-server-sequential-thinking"] {
            anyhow::ensure!(
                servers_bin.join(name).exists(),
                "{} is missing: run scripts/install-test-deps.sh to install the test dependencies",
                servers_bin.join(name).display()
            );
        }
        anyhow::ensure!(
            Command::new("node").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success()),
            "node is not on PATH: the installed MCP servers need Node.js (scripts/install-test-deps.sh says which)"
        );
        let exe = std::env::current_exe()?;
        let profile_dir = exe.parent().and_then(Path::parent).ok_or_else(|| anyhow::anyhow!("no build folder above {}", exe.display()))?;
        let mcpgate = profile_dir.join("mcpgate");
        anyhow::ensure!(mcpgate.exists(), "{} is missing: bench/tokens builds it with the example", mcpgate.display());
        Ok(Deps {
            python: dependency("MCPGATE_VENV_PYTHON", ".work/venv/bin/python")?,
            servers_bin,
            everything_js: dependency(
                "MCPGATE_EVERYTHING_JS",
                ".work/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            )?,
            mcpgate,
        })
    }

    /// tests/py/domain_server.py for `domain` over HTTP on an ephemeral port: its MCP URL.
    pub fn domain_server(&self, domain: &str) -> anyhow::Result<(Proc, String)> {
        let mut child = Command::new(&self.python)
            .arg(repo()?.join("tests/py/domain_server.py"))
            .args(["--domain", domain, "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let proc = Proc(child);
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let port: u16 = line
            .trim()
            .strip_prefix("LISTENING ")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("domain_server.py --domain {domain} said {line:?}"))?;
        Ok((proc, format!("http://127.0.0.1:{port}/mcp")))
    }

    /// The TOML of a stdio upstream running the installed server `bin` with `args`.
    pub fn server_command(&self, bin: &str, args: &[&Path]) -> String {
        let mut parts = vec![format!("{:?}", self.servers_bin.join(bin).display().to_string())];
        parts.extend(args.iter().map(|a| format!("{:?}", a.display().to_string())));
        format!("[{}]", parts.join(", "))
    }

    /// The gateway on `config` (its `[server]` listen is written here) in `dir`, once `/readyz`
    /// answers 200: the process and its base URL.
    pub fn gateway(&self, dir: &Path, name: &str, config: &str) -> anyhow::Result<(Proc, String)> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, format!("[server]\nlisten = \"127.0.0.1:{port}\"\n\n{config}"))?;
        let log_path = dir.join(format!("{name}.log"));
        let child = Command::new(&self.mcpgate)
            .args(["run", "-c"])
            .arg(&path)
            .current_dir(dir)
            .env_remove("MCPGATE_TOKEN_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path)?)
            .spawn()?;
        let mut proc = Proc(child);
        let until = Instant::now() + Duration::from_secs(90);
        while Instant::now() < until {
            if ready(port) {
                return Ok((proc, format!("http://127.0.0.1:{port}")));
            }
            if let Ok(Some(status)) = proc.0.try_wait() {
                anyhow::bail!("the gateway ({name}) exited ({status}):\n{}", tail(&log_path));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        anyhow::bail!("the gateway ({name}) was not ready after 90 s:\n{}", tail(&log_path))
    }
}

/// Whether `/readyz` on `port` answers 200.
fn ready(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut status = String::new();
    BufReader::new(s).read_line(&mut status).is_ok() && status.split_whitespace().nth(1) == Some("200")
}

/// The last lines of a log file.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
