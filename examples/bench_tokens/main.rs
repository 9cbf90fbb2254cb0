//! Code mode, measured (`bench/tokens`; docs/performance.md "Code mode: tokens and round trips"):
//! how many tokens a model reads when it is given an endpoint's whole tool list, against code
//! mode's two tools plus one `search_tools` answer, and what three multi-step tasks cost both
//! ways in model turns and in text through the model's context. Counted with real tokenizers
//! (o200k_base and cl100k_base, embedded in `tiktoken-rs`, so offline) over the JSON and text the
//! gateway actually serves, from real processes on loopback: the mcpgate binary of this build,
//! tests/py/domain_server.py sliced to 10, 100 and 500 tools with `[[endpoint]] include`, and the
//! installed server-everything, -filesystem, -memory and -sequential-thinking. Accuracy (does a
//! model pick the right tools, write a working program) needs a model and is not measured here.
//!
//!     bench/tokens [--json PATH] [--plain-only]
//!
//! `--plain-only` leaves code mode out, for a gateway that does not serve it. Prints markdown
//! tables and writes every figure as JSON (bench/tokens-last-run.json unless --json PATH).

mod mcp;
mod procs;
mod tasks;

use mcp::Endpoint;
use serde_json::{Value, json};
use std::path::PathBuf;
use tasks::{Side, Transcript};
use tiktoken_rs::CoreBPE;

/// The synthetic domains (tests/py/domain_server.py), 100 tools each.
const DOMAINS: [&str; 5] = ["code", "calendar", "files", "payments", "crm"];
/// Ten of the payments domain's tools: `*_charge` (six) and `*_refund` (four).
const TEN: &str = "[\"payments__*_charge\", \"payments__*_refund\"]";
/// What a model asks `search_tools` for on each catalogue (limit 10).
const SYNTHETIC_QUERY: &str = "refund a customer's card charge";
const REAL_QUERY: &str = "read a text file";

/// Bytes and tokens of a text.
#[derive(Clone, Copy, Default)]
struct Size {
    bytes: usize,
    o200k: usize,
    cl100k: usize,
}

impl Size {
    fn plus(self, other: Size) -> Size {
        Size { bytes: self.bytes + other.bytes, o200k: self.o200k + other.o200k, cl100k: self.cl100k + other.cl100k }
    }

    fn json(self) -> Value {
        json!({ "bytes": self.bytes, "o200k": self.o200k, "cl100k": self.cl100k })
    }
}

struct Tokenizers {
    o200k: CoreBPE,
    cl100k: CoreBPE,
}

impl Tokenizers {
    fn new() -> anyhow::Result<Tokenizers> {
        Ok(Tokenizers { o200k: tiktoken_rs::o200k_base()?, cl100k: tiktoken_rs::cl100k_base()? })
    }

    fn size(&self, text: &str) -> Size {
        Size { bytes: text.len(), o200k: self.o200k.encode_ordinary(text).len(), cl100k: self.cl100k.encode_ordinary(text).len() }
    }
}

/// One catalogue measured: the plain listing, and code mode's surface and search answer.
struct Catalogue {
    name: String,
    tools: usize,
    plain: Size,
    /// Code mode's `tools/list` and one `search_tools` answer (`None`: plain only).
    code: Option<(Size, Size)>,
}

/// The `tools` JSON of `plain` (which must list `expect` tools when given), and of `code` with
/// one `search_tools` answer for `query`.
async fn catalogue(
    tok: &Tokenizers,
    name: &str,
    plain: &Endpoint,
    code: Option<&Endpoint>,
    query: &str,
    expect: Option<usize>,
) -> anyhow::Result<Catalogue> {
    let (listing, count) = plain.tools_json().await?;
    if let Some(n) = expect {
        anyhow::ensure!(count == n, "{name}: {} lists {count} tools, not {n}", plain.url);
    }
    let code = match code {
        None => None,
        Some(ep) => {
            let (surface, two) = ep.tools_json().await?;
            anyhow::ensure!(two == 2, "{name}: the code-mode endpoint {} lists {two} tools: {surface}", ep.url);
            let found = ep.call("search_tools", &json!({ "query": query, "limit": 10 })).await?;
            Some((tok.size(&surface), tok.size(&mcp::text(&found))))
        }
    };
    Ok(Catalogue { name: name.to_string(), tools: count, plain: tok.size(&listing), code })
}

/// A task's figures one way: turns, calls, what the model wrote and read, and the context summed
/// over its turns (each turn's prompt holds everything before it).
fn transcript_json(tok: &Tokenizers, t: &Transcript) -> Value {
    let (mut writes, mut reads, mut context, mut over_turns) = (Size::default(), Size::default(), Size::default(), Size::default());
    for (side, text) in &t.pieces {
        let size = tok.size(text);
        match side {
            Side::Writes => {
                over_turns = over_turns.plus(context);
                writes = writes.plus(size);
            }
            Side::Reads => reads = reads.plus(size),
        }
        context = context.plus(size);
    }
    over_turns = over_turns.plus(context);
    json!({
        "round_trips": t.turns(),
        "calls": t.turns() - 1,
        "writes": writes.json(),
        "reads": reads.json(),
        "total": context.json(),
        "context_over_turns": over_turns.json(),
    })
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// Today (UTC) as YYYY-MM-DD.
fn today() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().chars().take(10).collect()
}

/// The machine: CPU model, cores, kernel, and which build ran.
fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| c.lines().find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())))
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    let exe = std::env::current_exe().unwrap_or_default();
    let build =
        exe.parent().and_then(|p| p.parent()).and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    json!({ "cpu": cpu, "cores": std::thread::available_parallelism().map_or(0, |n| n.get()), "kernel": kernel, "build": build })
}

fn with_commas(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let json_path = PathBuf::from(arg("--json").unwrap_or_else(|| "bench/tokens-last-run.json".into()));
    let code_mode = !std::env::args().any(|a| a == "--plain-only");
    let deps = procs::Deps::find()?;
    let tok = Tokenizers::new()?;
    let dir = tempfile::tempdir()?;
    let mut catalogues = Vec::new();

    // Synthetic: five domain servers, one gateway; the root lists 500 tools, endpoints 100 and 10.
    let servers = DOMAINS.iter().map(|d| deps.domain_server(d)).collect::<anyhow::Result<Vec<_>>>()?;
    let mut config: String =
        DOMAINS.iter().zip(&servers).map(|(d, (_, url))| format!("[[upstream]]\nid = \"{d}\"\nurl = \"{url}\"\n\n")).collect();
    config.push_str(&format!(
        "[[endpoint]]\npath = \"/plain100\"\ninclude = [\"upstream:payments\"]\n\n[[endpoint]]\npath = \"/plain10\"\ninclude = {TEN}\n\n"
    ));
    if code_mode {
        for (path, include) in [("/code500", "[\"*\"]"), ("/code100", "[\"upstream:payments\"]"), ("/code10", TEN)] {
            config.push_str(&format!("[[endpoint]]\npath = \"{path}\"\ninclude = {include}\ncode_mode = true\n\n"));
        }
    }
    let (gw, base) = deps.gateway(dir.path(), "synthetic", &config)?;
    for (n, plain, code) in [(10, "/plain10", "/code10"), (100, "/plain100", "/code100"), (500, "/mcp", "/code500")] {
        let code = code_mode.then(|| Endpoint::new(&base, code));
        let name = format!("synthetic, {n} tools");
        catalogues.push(catalogue(&tok, &name, &Endpoint::new(&base, plain), code.as_ref(), SYNTHETIC_QUERY, Some(n)).await?);
    }
    drop(gw);
    drop(servers);

    // Real: the installed servers as stdio upstreams; the tasks run on them.
    let ws = tasks::Workspace::new(dir.path())?;
    let mut config = format!(
        "[[upstream]]\nid = \"everything\"\ncommand = [\"node\", {:?}, \"stdio\"]\ntimeout = \"30s\"\n\n\
         [[upstream]]\nid = \"fs\"\ncommand = {}\ntimeout = \"30s\"\n\n\
         [[upstream]]\nid = \"memory\"\ncommand = {}\ntimeout = \"30s\"\n[upstream.env]\nMEMORY_FILE_PATH = {:?}\n\n\
         [[upstream]]\nid = \"thinking\"\ncommand = {}\ntimeout = \"30s\"\n\n",
        deps.everything_js.display().to_string(),
        deps.server_command("mcp-server-filesystem", &[&ws.root]),
        deps.server_command("mcp-server-memory", &[]),
        ws.memory_file.display().to_string(),
        deps.server_command("mcp-server-sequential-thinking", &[]),
    );
    if code_mode {
        config.push_str("[[endpoint]]\npath = \"/code\"\ninclude = [\"*\"]\ncode_mode = true\n");
    }
    let (gw, base) = deps.gateway(dir.path(), "real", &config)?;
    let plain = Endpoint::new(&base, "/mcp");
    let code = code_mode.then(|| Endpoint::new(&base, "/code"));
    let real = "real: everything, filesystem, memory, sequential-thinking";
    catalogues.push(catalogue(&tok, real, &plain, code.as_ref(), REAL_QUERY, None).await?);
    ws.seed(&plain).await?;
    let (listing, _) = plain.tools_json().await?;
    let surface = match &code {
        Some(ep) => Some(ep.tools_json().await?.0),
        None => None,
    };
    let done = tasks::run(&ws, &plain, &listing, code.as_ref().zip(surface.as_deref())).await?;
    drop(gw);

    let date = today();
    let machine = machine();
    println!(
        "Code mode: tokens and round trips ({date}; {}, {} cores, {} build)\n",
        machine["cpu"].as_str().unwrap_or(""),
        machine["cores"],
        machine["build"].as_str().unwrap_or("")
    );
    println!(
        "| Catalogue | Tools | Plain list: bytes | o200k | cl100k | Code mode (list + one search): bytes | o200k | cl100k | o200k, code ÷ plain |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    let mut report_catalogues = Vec::new();
    for c in &catalogues {
        let mut row = json!({ "name": c.name, "tools": c.tools, "plain": c.plain.json() });
        let (bytes, o200k, cl100k, ratio) = match c.code {
            Some((surface, search)) => {
                let total = surface.plus(search);
                row["code"] = json!({ "surface": surface.json(), "search": search.json(), "total": total.json() });
                (
                    with_commas(total.bytes),
                    format!("{} ({} + {})", with_commas(total.o200k), with_commas(surface.o200k), with_commas(search.o200k)),
                    with_commas(total.cl100k),
                    format!("{:.2}", total.o200k as f64 / c.plain.o200k.max(1) as f64),
                )
            }
            None => ("not run".into(), "not run".into(), "not run".into(), "-".into()),
        };
        println!(
            "| {} | {} | {} | {} | {} | {bytes} | {o200k} | {cl100k} | {ratio} |",
            c.name,
            c.tools,
            with_commas(c.plain.bytes),
            with_commas(c.plain.o200k),
            with_commas(c.plain.cl100k)
        );
        report_catalogues.push(row);
    }
    println!(
        "\n| Task | Way | Round trips | Calls the model writes | Model writes: bytes / o200k | Model reads: bytes / o200k | Total o200k | Total cl100k | Context summed over turns, o200k |"
    );
    println!("|---|---|--:|--:|--:|--:|--:|--:|--:|");
    let mut report_tasks = Vec::new();
    for task in &done {
        let plain = transcript_json(&tok, &task.plain);
        let code = task.code.as_ref().map(|t| transcript_json(&tok, t));
        for (way, figures) in [("plain", Some(&plain)), ("code mode", code.as_ref())] {
            let Some(f) = figures else {
                println!("| {} | {way} | not run | | | | | | |", task.name);
                continue;
            };
            let n = |k: &str, unit: &str| with_commas(f[k][unit].as_u64().unwrap_or(0) as usize);
            println!(
                "| {} | {way} | {} | {} | {} / {} | {} / {} | {} | {} | {} |",
                task.name,
                f["round_trips"],
                f["calls"],
                n("writes", "bytes"),
                n("writes", "o200k"),
                n("reads", "bytes"),
                n("reads", "o200k"),
                n("total", "o200k"),
                n("total", "cl100k"),
                n("context_over_turns", "o200k")
            );
        }
        if !task.not_found.is_empty() {
            println!("|   | (its search did not show {}) | | | | | | | |", task.not_found.join(", "));
        }
        report_tasks.push(json!({ "name": task.name, "plain": plain, "code": code, "search_missed": task.not_found }));
    }
    let report = json!({
        "date": date,
        "machine": machine,
        "tokenizers": ["o200k_base", "cl100k_base"],
        "code_mode": code_mode,
        "queries": { "synthetic": SYNTHETIC_QUERY, "real": REAL_QUERY },
        "catalogues": report_catalogues,
        "tasks": report_tasks,
    });
    if let Some(parent) = json_path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&json_path, serde_json::to_string_pretty(&report)?)?;
    println!("\nfigures written to {}", json_path.display());
    Ok(())
}
