//! The `mcpgate check` and `mcpgate tools` commands: probe every upstream once, then print a
//! status table (upstream, transport, era, status, tool count, latency) with every tool that
//! cannot be served and why, and what each virtual server (`[[endpoint]]`) exposes with what its
//! selection or overrides could not apply to; or the merged catalogue exactly as `tools/list`
//! would serve it. [`cards`] compares the Server Cards upstreams publish with what they answer.

pub mod cards;

use crate::gateway::Gateway;
use crate::upstream::Status;
use std::fmt::Write;

/// Renders the `check` report; the flag says whether every upstream is ready.
pub fn report(gw: &Gateway) -> (String, bool) {
    let cat = gw.catalog();
    let mut rows = vec![["UPSTREAM".to_string(), "TRANSPORT".into(), "ERA".into(), "STATUS".into(), "TOOLS".into(), "LATENCY".into()]];
    let mut all_ok = true;
    let mut notes = Vec::new();
    let mut warnings = Vec::new();
    for up in gw.live_upstreams().iter() {
        let st = up.state();
        let (status, era) = match &st.status {
            // Reached with each caller's own token: what a caller meets is reported apart.
            _ if gw.is_personal(up.index) => ("per caller".to_string(), "-".into()),
            Status::Ready => (
                "ready".to_string(),
                st.version
                    .as_deref()
                    .map(|v| format!("{} ({v})", if mcpgate_protocol::is_legacy_version(v) { "legacy" } else { "modern" }))
                    .unwrap_or_default(),
            ),
            Status::Pending => ("pending".to_string(), "-".into()),
            Status::Down(reason) => {
                all_ok = false;
                notes.push(format!("  {}: {reason}", up.id()));
                ("down".to_string(), "-".into())
            }
        };
        for p in &st.pool_problems {
            all_ok = false;
            warnings.push(format!("  {}: {p}", up.id()));
        }
        if let Some(w) = crate::upstream::runner::check_warning(&up.cfg.transport) {
            warnings.push(format!("  {}: {w}", up.id()));
        }
        if st.truncated {
            warnings.push(format!("  {}: a list was cut at max_pages = {}", up.id(), up.cfg.max_pages));
        }
        let latency = st.latency.map(|l| format!("{}ms", l.as_millis())).unwrap_or_else(|| "-".into());
        rows.push([
            up.id().to_string(),
            up.cfg.transport.kind().into(),
            era,
            status,
            cat.section(mcpgate_model::catalog::Kind::Tool).count_for(up.index).to_string(),
            latency,
        ]);
    }
    let widths: Vec<usize> = (0..6).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = r.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "\nUnavailable upstreams:");
        for n in notes {
            let _ = writeln!(out, "{n}");
        }
    }
    if !warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings:");
        for n in warnings {
            let _ = writeln!(out, "{n}");
        }
    }
    if !cat.problems.is_empty() {
        let _ = writeln!(out, "\nNot served:");
        for p in &cat.problems {
            let _ = writeln!(out, "  {} / {} {}: {}", p.upstream, p.kind.label(), p.item, p.reason);
        }
    }
    isolation(gw, &mut out);
    all_ok &= code_mode(gw, &mut out);
    openapi(gw, &mut out);
    let _ = writeln!(
        out,
        "\n{} served from {}.",
        mcpgate_protocol::text::count_of(cat.tools().len(), "tool", "tools"),
        mcpgate_protocol::text::count_of(gw.live_upstreams().len(), "upstream", "upstreams")
    );
    for ep in &gw.config().endpoints {
        let Some(view) = gw.view(&ep.path) else { continue };
        let counts: Vec<String> =
            mcpgate_model::catalog::Kind::ALL.iter().map(|k| format!("{} {}", view.section(*k).entries.len(), k.list_key())).collect();
        let _ = writeln!(out, "\nEndpoint {}: {}", ep.path, counts.join(", "));
        for t in view.tools() {
            let shown = if t.policy_name() == t.name { t.name.clone() } else { format!("{} (as {})", t.policy_name(), t.name) };
            let fixed = if t.fixed.is_empty() {
                String::new()
            } else {
                format!(", fixed: {}", t.fixed.keys().cloned().collect::<Vec<_>>().join(", "))
            };
            let _ = writeln!(out, "  {shown}{fixed}");
        }
        for p in &view.problems {
            let _ = writeln!(out, "  problem: {} / {} {}: {}", p.upstream, p.kind.label(), p.item, p.reason);
        }
    }
    (out, all_ok)
}

/// For each `openapi` upstream: how many operations became tools, where calls go, and why the
/// others did not.
fn openapi(gw: &Gateway, out: &mut String) {
    for up in gw.live_upstreams().iter() {
        let Some(l) = up.openapi() else { continue };
        let a = &l.api;
        let total = a.operations.len() + a.skipped.len();
        let are = if a.operations.len() == 1 { "is a tool" } else { "are tools" };
        let of = mcpgate_protocol::text::count_of(total, "operation", "operations");
        let _ = writeln!(out, "\nOpenAPI {}: {} of {of} {are}, calls go to {}", up.id(), a.operations.len(), l.base);
        // One line per reason, the operations it left out after it.
        let mut by_reason: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for s in &a.skipped {
            by_reason.entry(&s.reason).or_default().push(&s.operation);
        }
        for (reason, ops) in by_reason {
            let _ = writeln!(out, "  not tools ({reason}): {}", ops.join(", "));
        }
        for n in &a.notes {
            let _ = writeln!(out, "  note {n}");
        }
    }
}

/// What each stdio upstream's process can reach, and what this machine's kernel enforces of the
/// sandboxes (never silently weaker: what is not enforced is named).
fn isolation(gw: &Gateway, out: &mut String) {
    use mcpgate_config::TransportConfig;
    use mcpgate_config::sandbox::Network;
    let stdio: Vec<_> = gw
        .config()
        .upstreams
        .iter()
        .filter_map(|u| match &u.transport {
            TransportConfig::Stdio { sandbox, command, .. } => {
                Some((u.id.clone(), sandbox.clone(), u.instances.clone(), runtime_of(command)))
            }
            TransportConfig::Http { .. } | TransportConfig::OpenApi(_) => None,
        })
        .collect();
    if stdio.is_empty() {
        return;
    }
    let e = mcpgate_sandbox::exec::enforcement();
    let _ = writeln!(out, "\nIsolation:");
    for (id, sandbox, instances, runtime) in &stdio {
        let per = match instances {
            mcpgate_config::sandbox::Instances::PerCaller { .. } if gw.config().auth.mode == mcpgate_config::auth::AuthMode::None => {
                "; one process per caller, BUT [auth] mode = \"none\" makes every request the same anonymous caller: one process serves everyone".into()
            }
            mcpgate_config::sandbox::Instances::PerCaller { max, idle } => {
                format!("; one process per caller (at most {max}, stopped after {} idle)", humantime::format_duration(*idle))
            }
            mcpgate_config::sandbox::Instances::Shared => String::new(),
        };
        let Some(s) = sandbox else {
            let _ = match runtime {
                // What `mcpgate import` writes for a `docker run` command: the runtime isolates it
                // as its own flags say, and the runtime itself runs with the gateway's reach.
                Some(r) => writeln!(
                    out,
                    "  {id}: NOT sandboxed by mcpgate: {r} runs it as its command line's flags say, and {r} itself has the gateway's own files, network and user (give the image as [upstream.sandbox] image = \"…\" for mcpgate's limits){per}"
                ),
                None => writeln!(
                    out,
                    "  {id}: NOT sandboxed: runs with the gateway's own files, network and user (add [upstream.sandbox]){per}"
                ),
            };
            continue;
        };
        let network = match &s.network {
            Network::None => "no network".to_string(),
            Network::Open => "network open".to_string(),
            Network::Ports(p) => format!("TCP to ports {p:?} only; UDP is not limited (Landlock's network rules cover TCP only)"),
        };
        let target = match &s.container {
            Some(c) => format!("container {} ({})", c.image, c.runtime.as_deref().unwrap_or("docker or podman")),
            None => "sandboxed".into(),
        };
        let processes = mcpgate_protocol::text::count(s.processes, "process", "processes");
        let _ = writeln!(out, "  {id}: {target}; {network}; memory {} MiB; {processes}{per}", s.memory_bytes >> 20);
    }
    let yes = |b: bool| if b { "enforced" } else { "NOT enforced" };
    let files = e.files();
    let processes = match (e.pids_cgroup, e.root) {
        (true, _) => "enforced (pids cgroup)",
        (false, false) => "enforced, approximately (RLIMIT_NPROC counts all the user's tasks: those at start plus the bound)",
        (false, true) => "NOT enforced (the gateway runs as root and no pids cgroup can be made; RLIMIT_NPROC does not bind root)",
    };
    let signals = if e.scoped {
        "refused (Landlock ABI 6), abstract Unix sockets too"
    } else {
        "refused only toward the gateway and the supervisors (Landlock ABI < 6: other processes of the gateway's user can be signalled)"
    };
    let _ = writeln!(
        out,
        "  this machine: files {files}; TCP ports {}; signals to processes outside the sandbox {signals}; system-call filter {}; processes {processes}; memory, CPU time, open files enforced per process (rlimits)",
        if e.tcp_ports { "enforced" } else { "NOT enforced (Landlock ABI < 4: a sandbox with network = [ports] will not start)" },
        yes(e.seccomp)
    );
}

/// Where code mode is served, and whether this machine can run its programs (`false`: it is
/// served and cannot be: every program would be refused).
fn code_mode(gw: &Gateway, out: &mut String) -> bool {
    let cfg = gw.config();
    let mut served: Vec<&str> = cfg.endpoints.iter().filter(|e| e.code_mode).map(|e| e.path.as_str()).collect();
    if cfg.code_mode.enabled {
        served.insert(0, cfg.server.path.as_str());
    }
    if served.is_empty() {
        return true;
    }
    let _ = writeln!(out, "\nCode mode: served on {}", served.join(", "));
    match crate::upstream::program::unconfinable() {
        None => {
            let c = &cfg.code_mode;
            let _ = writeln!(
                out,
                "  programs run confined (no files, network or processes); {} at once ({} per caller), {} of CPU, {} in all, {} tool calls each",
                c.programs,
                c.programs_per_caller,
                humantime::format_duration(c.cpu),
                humantime::format_duration(c.wall_clock),
                c.calls
            );
            true
        }
        Some(why) => {
            let _ = writeln!(
                out,
                "  NO program can run here: {why}, so the sandbox code mode needs is not enforced (every run_code is refused)"
            );
            false
        }
    }
}

/// The container runtime a command runs (`docker`, `podman`), if it is one.
fn runtime_of(command: &[String]) -> Option<String> {
    let name = std::path::Path::new(command.first()?).file_name()?.to_str()?;
    matches!(name, "docker" | "podman").then(|| name.to_string())
}

/// The merged catalogue as a JSON array, as `tools/list` serves it.
/// Each tool is printed byte for byte as `tools/list` serves it, one per line.
/// The merged tools as a table: name, upstream, and the first line of the description.
pub fn tools_table(gw: &Gateway) -> String {
    let cat = gw.catalog();
    let mut rows = vec![("NAME".to_string(), "UPSTREAM".to_string(), "DESCRIPTION".to_string())];
    for t in cat.tools() {
        let item: serde_json::Value = serde_json::from_str(t.json.get()).unwrap_or_default();
        let description = item["description"].as_str().unwrap_or("").lines().next().unwrap_or("").to_string();
        let description =
            if description.chars().count() > 80 { description.chars().take(79).collect::<String>() + "…" } else { description };
        rows.push((t.name.clone(), gw.upstream_id(t.upstream).to_string(), description));
    }
    let (w0, w1) = rows.iter().fold((0, 0), |(a, b), r| (a.max(r.0.chars().count()), b.max(r.1.chars().count())));
    let mut out = String::new();
    for (n, u, d) in &rows {
        let _ = writeln!(out, "{}", format!("{n:<w0$}  {u:<w1$}  {d}").trim_end());
    }
    let _ = writeln!(out, "\n{}.", mcpgate_protocol::text::count_of(cat.tools().len(), "tool", "tools"));
    let held = gw.held_tools();
    if !held.is_empty() {
        let _ = writeln!(out, "\nHeld until approved ([pins] enforce), not served:");
        for h in &held {
            let what = h["changes"].as_array().and_then(|c| c.first()).and_then(|c| c.as_str()).unwrap_or("differs from its pin");
            let _ = writeln!(out, "  {}/{}: {what}", h["upstream"].as_str().unwrap_or("?"), h["tool"].as_str().unwrap_or("?"));
        }
        let _ = writeln!(out, "mcpgate pin shows each definition in full (--url: as the running gateway serves it).");
    }
    out
}

pub fn tools_json(gw: &Gateway) -> String {
    let cat = gw.catalog();
    let lines: Vec<&str> = cat.tools().iter().map(|t| t.json.get()).collect();
    if lines.is_empty() { "[]".into() } else { format!("[\n  {}\n]", lines.join(",\n  ")) }
}
