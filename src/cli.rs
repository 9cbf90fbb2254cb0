//! The bodies of the small `mcpgate` commands that are not the gateway itself: `health` (a
//! container HEALTHCHECK without curl), `check` (probe every upstream, with progress on a
//! terminal and coloured status), `tools` and `import`. Exit codes: 0 fine, 1 something is down
//! or unhealthy, 2 a startup error (returned as `Err` to `main`).

use crate::gateway::Gateway;
use anyhow::Context;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// `mcpgate health URL`: 0 when the URL answers 2xx within `timeout`.
pub async fn health(url: &str, timeout: Duration) -> anyhow::Result<ExitCode> {
    let req =
        http::Request::get(url).body(http_body_util::Full::new(bytes::Bytes::new())).with_context(|| format!("'{url}' is not a URL"))?;
    let client = crate::net::new_http_client();
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
    let (text, mut ok) = crate::check::report(gw);
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    print!("{}", if colour { paint(&text) } else { text });
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

/// `mcpgate import FILE [-o OUT]`.
pub fn import(file: &Path, output: Option<&Path>) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| file.display().to_string());
    let imported = crate::import::import(&text, &name).map_err(anyhow::Error::msg)?;
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
    eprintln!("imported {} servers from {}", imported.servers, file.display());
    for w in &imported.warnings {
        eprintln!("note: {w}");
    }
    if !imported.variables.is_empty() {
        let vars: Vec<&str> = imported.variables.iter().map(|(v, _)| v.as_str()).collect();
        eprintln!("export before running: {}", vars.join(" "));
    }
    Ok(ExitCode::SUCCESS)
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
