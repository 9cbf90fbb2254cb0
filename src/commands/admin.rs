//! The bodies of the small `mcpgate` commands that are not the gateway itself: `health` (a
//! container HEALTHCHECK without curl), `check` (probe every upstream, with progress on a
//! terminal and coloured status, and compare the Server Cards they publish with their answers), `tools`, `import`, `tokens` (the connected upstream
//! accounts of a running gateway), `usage` (the usage store's report) and `reload` (SIGHUP to a
//! running gateway, found by its pid file). Exit codes: 0 fine, 1 something is down
//! or unhealthy, 2 a startup error (returned as `Err` to `main`).

use crate::gateway::Gateway;
use crate::gateway::pins::ServedPins;
use anyhow::Context;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// `mcpgate health URL`: 0 when the URL answers 2xx within `timeout`.
pub async fn health(url: &str, timeout: Duration) -> anyhow::Result<ExitCode> {
    let req =
        http::Request::get(url).body(http_body_util::Full::new(bytes::Bytes::new())).with_context(|| format!("'{url}' is not a URL"))?;
    let client = mcpgate_net::http::new_http_client();
    Ok(match tokio::time::timeout(timeout, client.request(req)).await {
        Ok(Ok(resp)) if resp.status().is_success() => {
            println!("{url}: {}", resp.status());
            ExitCode::SUCCESS
        }
        Ok(Ok(resp)) => {
            eprintln!("{url}: {}", resp.status());
            ExitCode::FAILURE
        }
        Ok(Err(e)) => {
            eprintln!("{url}: {e}");
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!("{url}: no answer within {timeout:?}");
            ExitCode::FAILURE
        }
    })
}

/// `mcpgate check`: every upstream of `config` probed, and how each `user_auth` upstream's
/// sign-in would go; fails when one is down.
pub async fn check_config(config: &Path) -> anyhow::Result<ExitCode> {
    let gw = Gateway::new(crate::commands::boot::load(config, None)?)?;
    Ok(if check(&gw).await { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `mcpgate tools`: the merged catalogue of `config`'s upstreams, as a table or JSON.
pub async fn tools(config: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let gw = Gateway::new(crate::commands::boot::load(config, None)?)?;
    probe_all(&gw).await;
    if json {
        println!("{}", crate::commands::check::tools_json(&gw));
    } else {
        print!("{}", crate::commands::check::tools_table(&gw));
    }
    Ok(ExitCode::SUCCESS)
}

/// `mcpgate pin`: the pins of `config` against what the running gateway at `url` serves, or
/// against fresh copies of the upstreams; `approve` writes the `tools` named (all: empty).
pub async fn pin_command(config: &Path, approve: bool, tools: &[String], url: Option<&str>) -> anyhow::Result<ExitCode> {
    let cfg = crate::commands::boot::load(config, None)?;
    match url {
        Some(url) => {
            let key = std::env::var("MCPGATE_API_KEY").ok().filter(|k| !k.is_empty());
            let served = served_by(url, key.as_deref()).await?;
            pin(&cfg, &served, &format!("what the running gateway at {url} serves"), approve, tools)
        }
        None => {
            let gw = Gateway::new(cfg.clone())?;
            probe_all(&gw).await;
            let source = "fresh copies of the upstreams started by this command (NOT the running gateway: a stdio \
                          server edited since the gateway started it serves the old code there; --url compares with it)";
            pin(&cfg, &gw.served_pins(), source, approve, tools)
        }
    }
}

/// Probes every upstream once, showing progress on stderr when it is a terminal.
pub async fn probe_all(gw: &Gateway) {
    let total = gw.live_upstreams().len();
    if !std::io::stderr().is_terminal() || total < 2 {
        gw.refresh_all().await;
        return;
    }
    let refresh = gw.refresh_all();
    tokio::pin!(refresh);
    let mut tick = tokio::time::interval(Duration::from_millis(150));
    loop {
        tokio::select! {
            _ = &mut refresh => break,
            _ = tick.tick() => {
                let done = gw.live_upstreams().iter().filter(|u| u.state().status != crate::upstream::Status::Pending).count();
                eprint!("\rprobing upstreams: {done}/{total}");
                let _ = std::io::stderr().flush();
            }
        }
    }
    eprint!("\r\x1b[2K");
}

/// `mcpgate check`: the report (coloured on a terminal unless `NO_COLOR` is set), and whether
/// everything is healthy, Redis included with `[cluster]`.
pub async fn check(gw: &Gateway) -> bool {
    probe_all(gw).await;
    let (text, mut ok) = crate::commands::check::report(gw);
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    print!("{}", if colour { paint(&text) } else { text });
    let cards = crate::commands::check::cards::verify(gw).await;
    if !cards.is_empty() {
        println!("\nServer cards (advisory: what each upstream answers is what the gateway uses):");
        for line in cards {
            println!("  {line}");
        }
    }
    if !user_auth(gw).await {
        ok = false;
    }
    if let Some(cluster) = &gw.cluster {
        match cluster.ping().await {
            Ok(()) => println!("cluster: Redis {} answers", cluster.config().redacted_url()),
            Err(e) => {
                println!("cluster: Redis {} does not answer: {e}", cluster.config().redacted_url());
                ok = false;
            }
        }
    }
    ok
}

/// For each upstream reached with each caller's own authorization: the discovery a caller's
/// first call runs, and what that caller will meet; `false` when discovery fails.
async fn user_auth(gw: &Gateway) -> bool {
    let Some(p) = &gw.personal else { return true };
    let mut ok = true;
    for up in gw.live_upstreams().iter().filter(|u| gw.is_personal(u.index)) {
        match p.identity.explain(up.id()).await {
            Ok(lines) => {
                println!("\n{} (each caller's own authorization):", up.id());
                for l in lines {
                    println!("  {l}");
                }
            }
            Err(e) => {
                println!("\n{} (each caller's own authorization): callers cannot sign in: {e}", up.id());
                ok = false;
            }
        }
    }
    ok
}

/// Colours the status words of the report's table: ready green, down red, pending yellow.
fn paint(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut in_table = true;
    for line in text.lines() {
        if line.is_empty() {
            in_table = false;
        }
        let painted = if in_table {
            line.replacen("  ready  ", "  \x1b[32mready\x1b[0m  ", 1).replacen("  down  ", "  \x1b[31mdown\x1b[0m  ", 1).replacen(
                "  pending  ",
                "  \x1b[33mpending\x1b[0m  ",
                1,
            )
        } else if line.ends_with(':') {
            format!("\x1b[1m{line}\x1b[0m")
        } else {
            line.to_string()
        };
        out.push_str(&painted);
        out.push('\n');
    }
    out
}

/// Where `mcpgate import` reads the servers from.
pub enum ImportFrom {
    /// A client's configuration file.
    File(std::path::PathBuf),
    /// A domain's AI Catalog (`--discover`).
    Discover(String),
    /// An MCP registry (`--registry`).
    Registry(String),
}

/// `mcpgate import FILE | --discover URL | --registry URL [-o OUT]`.
pub async fn import(from: ImportFrom, output: Option<&Path>) -> anyhow::Result<ExitCode> {
    use crate::commands::import;
    let (imported, shown) = match &from {
        ImportFrom::File(file) => {
            let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
            let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| file.display().to_string());
            (import::import(&text, &name)?, file.display().to_string())
        }
        ImportFrom::Discover(url) => (import::discover(url).await?, format!("the AI Catalog of {url}")),
        ImportFrom::Registry(url) => (import::registry(url).await?, format!("the registry {url}")),
    };
    match output {
        Some(path) => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .with_context(|| format!("cannot create {} (an existing file is never overwritten)", path.display()))?;
            f.write_all(imported.toml.as_bytes()).with_context(|| format!("cannot write {}", path.display()))?;
        }
        None => print!("{}", imported.toml),
    }
    eprintln!("imported {} from {shown}", mcpgate_protocol::text::count_of(imported.servers, "server", "servers"));
    for w in &imported.warnings {
        eprintln!("note: {}", import::plain(w));
    }
    if !imported.variables.is_empty() {
        let vars: Vec<&str> = imported.variables.iter().map(|(v, _)| v.as_str()).collect();
        eprintln!("export before running: {}", vars.join(" "));
    }
    Ok(ExitCode::SUCCESS)
}

/// `mcpgate pin`: what differs between the tools and skills `served` (by the running gateway, or
/// by fresh copies of the upstreams this command started: `source` says which) and their pins;
/// with `approve`, the pins are rewritten from what is served (all of them, or those `only`
/// names: a tool by its name, a skill by its URI, upstream's or gateway's). A tool or skill not
/// pinned yet is shown whole, so nobody approves a definition they have not seen.
pub fn pin(
    config: &mcpgate_config::Config,
    served: &[ServedPins],
    source: &str,
    approve: bool,
    only: &[String],
) -> anyhow::Result<ExitCode> {
    use mcpgate_model::catalog::pins::{self, PinFile};
    let path = &config.pins.file;
    let old = crate::gateway::pins::read(path)?.unwrap_or_default();
    let mut next = PinFile { version: 1, upstreams: old.upstreams.clone() };
    let mut differs = 0;
    println!("comparing {} with {source}", path.display());
    for up in served {
        let id = up.upstream.as_str();
        if !up.ready {
            println!("  {id}: not reachable now; its pins are left as they are");
            continue;
        }
        let Some(cfg) = config.upstreams.iter().find(|u| u.id == id) else {
            println!("  {id}: not in this configuration; its pins are left as they are");
            continue;
        };
        let items: Vec<(&str, &pins::Pin)> = up.items.iter().map(|p| (pins::pinned_name(&p.definition).unwrap_or("?"), p)).collect();
        let pinned = old.upstreams.get(id);
        let chosen = |tool: &str| {
            only.is_empty()
                || only.iter().any(|o| {
                    o == tool
                        || *o == format!("{id}/{tool}")
                        || *o == config.catalog.names.gateway_name(&cfg.prefix, tool, None)
                        || *o == mcpgate_model::catalog::uris::to_gateway(&cfg.prefix, tool)
                })
        };
        let entry = next.upstreams.entry(id.to_string()).or_default();
        for (tool, current) in &items {
            let line = match pinned.and_then(|p| p.get(*tool)) {
                Some(p) if p.sha256 == current.sha256 => continue,
                Some(p) => format!(
                    "~ {id}/{tool}\n{}",
                    pins::diff(&p.definition, &current.definition).iter().map(|l| format!("    {l}\n")).collect::<String>()
                ),
                None => format!("+ {id}/{tool} (new, fingerprint {})\n{}", current.sha256, indented(&current.definition)),
            };
            print!("{line}");
            differs += 1;
            if approve && chosen(tool) {
                entry.insert(tool.to_string(), (*current).clone());
            }
        }
        for tool in pinned.map(|p| p.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
            if !items.iter().any(|(t, _)| *t == tool) {
                println!("- {id}/{tool} (no longer served)");
                differs += 1;
                if approve && chosen(&tool) {
                    entry.remove(&tool);
                }
            }
        }
    }
    next.upstreams.retain(|_, tools| !tools.is_empty());
    if !approve {
        println!(
            "{differs} difference(s) from {}{}",
            path.display(),
            if differs > 0 { "; mcpgate pin --approve approves them" } else { "" }
        );
        return Ok(if differs > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS });
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, next.render()).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    println!("approved; {} written (a running gateway applies it within a second)", path.display());
    Ok(ExitCode::SUCCESS)
}

/// A definition as `mcpgate pin` shows a new one: pretty JSON, indented under its line.
fn indented(definition: &serde_json::Value) -> String {
    let pretty = serde_json::to_string_pretty(definition).unwrap_or_else(|_| definition.to_string());
    pretty.lines().map(|l| format!("    {l}\n")).collect()
}

/// What a running gateway serves, as pins (`GET /console/api/pins`, an admin's key).
pub async fn served_by(url: &str, key: Option<&str>) -> anyhow::Result<Vec<ServedPins>> {
    let v = admin_api(url, key, "/console/api/pins", None).await?;
    serde_json::from_value(v["upstreams"].clone()).with_context(|| format!("{url}: the answer is not a list of served pins"))
}

/// One request to a running gateway's admin API (`/oauth/tokens`, `/console/api/*`): its JSON
/// body, or an error with the status and the gateway's reason.
async fn admin_api(url: &str, key: Option<&str>, path: &str, body: Option<serde_json::Value>) -> anyhow::Result<serde_json::Value> {
    let target = format!("{}{path}", url.trim_end_matches('/'));
    let mut req = http::Request::builder().uri(&target).header("accept", "application/json");
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let req = match &body {
        Some(b) => {
            req.method("POST").header("content-type", "application/json").body(http_body_util::Full::new(bytes::Bytes::from(b.to_string())))
        }
        None => req.method("GET").body(http_body_util::Full::new(bytes::Bytes::new())),
    }
    .with_context(|| format!("'{target}' is not a URL"))?;
    let client = mcpgate_net::http::new_http_client();
    let resp = tokio::time::timeout(Duration::from_secs(10), client.request(req))
        .await
        .with_context(|| format!("{target}: no answer within 10 s"))?
        .with_context(|| format!("{target}: unreachable"))?;
    let status = resp.status();
    let bytes =
        http_body_util::BodyExt::collect(resp.into_body()).await.with_context(|| format!("{target}: reading the answer"))?.to_bytes();
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).unwrap_or_else(|_| serde_json::json!({ "error": String::from_utf8_lossy(&bytes) }));
    if !status.is_success() {
        let why = v["error"].as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
        anyhow::bail!("{target}: HTTP {status}: {why}{}", if key.is_none() { " (set MCPGATE_API_KEY to your key)" } else { "" });
    }
    Ok(v)
}

/// `mcpgate tokens list`: the connected accounts, as a table.
pub async fn tokens_list(url: &str, key: Option<&str>, caller: Option<&str>) -> anyhow::Result<ExitCode> {
    let q: String = caller
        .map(|c| form_urlencoded::Serializer::new(String::new()).append_pair("caller", c).finish())
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let v = admin_api(url, key, &format!("/oauth/tokens{q}"), None).await?;
    print_tokens(v["tokens"].as_array().map(Vec::as_slice).unwrap_or_default());
    Ok(ExitCode::SUCCESS)
}

/// Connected accounts as a table (never a token).
pub(super) fn print_tokens(rows: &[serde_json::Value]) {
    if rows.is_empty() {
        println!("no connected accounts");
        return;
    }
    let now = crate::identity::vault::now();
    println!("{:<20} {:<16} {:<36} {:<24} {:<12} REFRESHES", "CALLER", "UPSTREAM", "ISSUER", "SCOPE", "EXPIRES");
    for r in rows {
        let expires = match r["expiresAt"].as_u64() {
            None => "-".to_string(),
            Some(at) if at <= now => "expired".to_string(),
            Some(at) => humantime::format_duration(Duration::from_secs(at - now)).to_string().split(' ').next().unwrap_or("").to_string(),
        };
        println!(
            "{:<20} {:<16} {:<36} {:<24} {:<12} {}",
            r["caller"].as_str().unwrap_or(""),
            r["upstream"].as_str().unwrap_or(""),
            r["issuer"].as_str().unwrap_or(""),
            r["scope"].as_str().unwrap_or("-"),
            expires,
            if r["refreshable"].as_bool() == Some(true) { "yes" } else { "no" }
        );
    }
}

/// `mcpgate tokens revoke`: forgets the tokens; the caller consents again on its next call.
pub async fn tokens_revoke(url: &str, key: Option<&str>, caller: Option<&str>, upstream: Option<&str>) -> anyhow::Result<ExitCode> {
    let body = serde_json::json!({ "caller": caller, "upstream": upstream });
    let v = admin_api(url, key, "/oauth/tokens/revoke", Some(body)).await?;
    println!("revoked {} account(s)", v["revoked"].as_u64().unwrap_or(0));
    Ok(ExitCode::SUCCESS)
}

/// The state database of a configuration, to read offline: PostgreSQL when configured, else the
/// SQLite file when it exists and `[cluster]` does not keep the state in Redis instead.
pub fn state_db(cfg: &mcpgate_config::Config, cluster: bool) -> anyhow::Result<Option<std::sync::Arc<mcpgate_store::Db>>> {
    let open = || mcpgate_store::Db::open(&cfg.state).map(std::sync::Arc::new).map_err(|e| anyhow::anyhow!("{e}"));
    match (&cfg.state.postgres, cluster) {
        (Some(_), _) => open().map(Some),
        (None, false) if cfg.state.path.exists() => open().map(Some),
        _ => Ok(None),
    }
}

/// `mcpgate usage`: the report of the configuration's usage store, as a table or JSON.
pub async fn usage(cfg: &mcpgate_config::Config, q: crate::usage::query::Query, json: bool) -> anyhow::Result<ExitCode> {
    if !cfg.usage.enabled && cfg.quotas.is_empty() {
        eprintln!("note: [usage] enabled = false in {}: no calls are counted", cfg.source.display());
    }
    let cluster = cfg.cluster.as_ref().map(mcpgate_net::cluster::Cluster::connect).transpose()?;
    let db = state_db(cfg, cluster.is_some())?;
    // Only where the JSON store of earlier releases is what is read: the state database, once
    // there, holds the counts (and carries that file over).
    if cluster.is_none() && db.is_none() && !cfg.usage.store.exists() {
        eprintln!(
            "note: no usage counted yet: there is no state database at {} (a gateway creates it when it starts) and no usage \
             store of an earlier release at {}",
            cfg.state.path.display(),
            cfg.usage.store.display()
        );
    }
    let usage = crate::usage::Usage::read(&cfg.usage, cluster, db).map_err(anyhow::Error::msg)?;
    let known: Vec<String> = cfg.callers.iter().map(|c| c.id.clone()).collect();
    let report = usage.report(&q, &cfg.quotas, &known).await.map_err(anyhow::Error::msg)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", crate::usage::query::table(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// The file `mcpgate run --pid-file` keeps: written at start, removed at exit.
pub struct PidFile(std::path::PathBuf);

impl PidFile {
    pub fn write(path: std::path::PathBuf) -> anyhow::Result<PidFile> {
        std::fs::write(&path, format!("{}\n", std::process::id()))
            .with_context(|| format!("cannot write the pid file {}", path.display()))?;
        Ok(PidFile(path))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        // Only our own: another gateway may have taken the file over since.
        if std::fs::read_to_string(&self.0).is_ok_and(|s| s.trim() == std::process::id().to_string()) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// `mcpgate reload`: SIGHUP to the gateway of `pid_file` (or `pid`), after checking that the
/// process is an mcpgate (a stale pid file must not signal whatever took the number over).
pub fn reload(pid_file: Option<&Path>, pid: Option<i32>) -> anyhow::Result<ExitCode> {
    let pid = match (pid, pid_file) {
        (Some(p), _) => p,
        (None, Some(f)) => {
            let text = std::fs::read_to_string(f).with_context(|| format!("cannot read the pid file {}", f.display()))?;
            text.trim().parse().with_context(|| format!("{}: '{}' is not a process id", f.display(), text.trim()))?
        }
        (None, None) => anyhow::bail!(
            "which gateway? Pass --pid-file (the file `mcpgate run --pid-file` writes, or MCPGATE_PID_FILE) or --pid (the \
             startup line prints it)"
        ),
    };
    #[cfg(target_os = "linux")]
    {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).with_context(|| format!("no process {pid} is running"))?;
        if !comm.trim().starts_with("mcpgate") {
            anyhow::bail!("process {pid} is '{}', not mcpgate: the pid file is stale", comm.trim());
        }
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGHUP)
        .with_context(|| format!("cannot signal process {pid}"))?;
    println!("sent SIGHUP to mcpgate (pid {pid}): its log says what the reload changed, or why it kept the configuration in effect");
    Ok(ExitCode::SUCCESS)
}

/// Audit records as OTLP logs too, when `[audit] otlp` asks and the build and environment allow.
#[cfg(feature = "otlp")]
pub fn export_audit_logs(gw: &Gateway, wanted: bool) -> Option<crate::telemetry::otlp::LogsExport> {
    if !wanted {
        return None;
    }
    match crate::telemetry::otlp::start_logs(tokio::runtime::Handle::current()) {
        Ok(Some((export, sink))) => {
            gw.audit.send_logs(sink);
            Some(export)
        }
        Ok(None) => {
            tracing::warn!(
                "[audit] otlp = true, but no OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_LOGS_ENDPOINT)"
            );
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "audit records are not exported as OTLP logs");
            None
        }
    }
}

#[cfg(not(feature = "otlp"))]
pub fn export_audit_logs(_gw: &Gateway, wanted: bool) -> Option<()> {
    if wanted {
        tracing::warn!("[audit] otlp = true needs a build with --features otlp: audit records go to the log (and [audit] file) only");
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_table_statuses_and_headings_are_painted() {
        let report = "UPSTREAM  STATUS  TOOLS\ncalc      ready  4\ngone      down  0\n\nUnavailable upstreams:\n  gone: ready  down\n";
        let p = super::paint(report);
        assert!(p.contains("\x1b[32mready\x1b[0m") && p.contains("\x1b[31mdown\x1b[0m"));
        assert!(p.contains("\x1b[1mUnavailable upstreams:\x1b[0m"));
        assert!(p.contains("  gone: ready  down\n"), "text after the table stays plain: {p:?}");
    }
}
