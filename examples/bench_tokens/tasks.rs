//! The three scripted multi-step tasks over the real servers (server-filesystem on a temporary
//! folder of notes, server-memory), each done twice: the plain way, one `tools/call` per step
//! through the endpoint that lists every tool (what a model does turn by turn), and the code-mode
//! way, one `search_tools` and one `run_code` whose JavaScript does the same steps. Every piece of
//! text that enters or leaves the model is kept in a [`Transcript`], in order, so the caller can
//! count it; each run is checked to have done the work (the entity stored, the file written, the
//! right line counts).

use crate::mcp::{Endpoint, text};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Who produced a piece of the context.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The model: a tool call it writes (`{name, arguments}`), which ends one of its turns.
    Writes,
    /// What the model reads: the tools it is given, every result.
    Reads,
}

/// Everything that passed through the model's context in one run of a task, in order.
#[derive(Default)]
pub struct Transcript {
    pub pieces: Vec<(Side, String)>,
}

impl Transcript {
    fn reads(&mut self, text: String) {
        self.pieces.push((Side::Reads, text));
    }

    /// Model turns: one per call it writes, and the last one, where it answers.
    pub fn turns(&self) -> usize {
        self.pieces.iter().filter(|(side, _)| *side == Side::Writes).count() + 1
    }

    /// Calls `name` with `arguments` on `ep` as the model would: the call is written, its text
    /// content read.
    async fn call(&mut self, ep: &Endpoint, name: &str, arguments: Value) -> anyhow::Result<Value> {
        self.pieces.push((Side::Writes, json!({ "name": name, "arguments": arguments }).to_string()));
        let result = ep.call(name, &arguments).await?;
        self.reads(text(&result));
        Ok(result)
    }
}

/// One task done both ways.
pub struct Done {
    pub name: &'static str,
    pub plain: Transcript,
    /// `None` without code mode (`--plain-only`).
    pub code: Option<Transcript>,
    /// The tools its `search_tools` answer was expected to show but did not.
    pub not_found: Vec<String>,
}

/// The notes folder the tasks read, with each file's line count.
const NOTES: [(&str, &str); 3] = [
    (
        "meeting.md",
        "# Weekly sync, 3 December\nAttendees: Dana, Lee, Priya.\nThe billing cutover moves to the second week of January.\n\
         Lee drafts the rollback plan by Friday.\nOpen question: who holds the on-call rota over the holidays?\n\n## Actions\n\
         - Dana: confirm the new date with finance.\n- Lee: rollback plan.\n- Priya: update the status page template.\n",
    ),
    (
        "plan.md",
        "# Billing cutover plan\n\n1. Freeze schema changes on the old ledger.\n2. Copy the last 90 days of invoices.\n\
         3. Replay payments in the new ledger and compare totals.\n4. Switch reads to the new ledger behind a flag.\n\
         5. Switch writes; keep the old ledger read-only for 30 days.\n\n## Risks\n- Totals differ by rounding: compare in cents.\n\
         - Webhooks fire twice during the switch: deduplicate by event id.\n- Finance closes the month on the 5th: avoid that week.\n\n\
         ## Rollback\nFlip the flag back; the old ledger stays authoritative until writes switch.\n",
    ),
    (
        "todo.txt",
        "renew the TLS certificate for status.example.com\nanswer the auditors about access reviews\nbook the room for the January offsite\n\
         review Priya's status page template\nclose the stale incident tickets\n",
    ),
];

/// What the tasks work on.
pub struct Workspace {
    /// The folder server-filesystem serves.
    pub root: PathBuf,
    /// server-memory's file.
    pub memory_file: PathBuf,
}

impl Workspace {
    /// The notes and an empty output folder under `dir`.
    pub fn new(dir: &Path) -> anyhow::Result<Workspace> {
        std::fs::create_dir_all(dir.join("files/notes"))?;
        std::fs::create_dir_all(dir.join("files/out"))?;
        // server-filesystem resolves symbolic links in its roots; so do the paths given to it.
        let root = dir.join("files").canonicalize()?;
        for (name, body) in NOTES {
            std::fs::write(root.join("notes").join(name), body)?;
        }
        Ok(Workspace { root, memory_file: dir.join("memory.jsonl") })
    }

    fn path(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }

    /// The knowledge graph task 2 searches, made before any task (not counted).
    pub async fn seed(&self, plain: &Endpoint) -> anyhow::Result<()> {
        let entities = json!([
            { "name": "project-atlas", "entityType": "project",
              "observations": ["Moves billing to the new ledger", "Owner: Dana", "Cutover in the second week of January"] },
            { "name": "project-borealis", "entityType": "project",
              "observations": ["Replaces the status page", "Owner: Priya", "Template review pending"] },
            { "name": "vendor-acme", "entityType": "vendor", "observations": ["Supplies the card terminals", "Contract renews in March"] },
        ]);
        plain.call("memory__create_entities", &json!({ "entities": entities })).await?;
        Ok(())
    }
}

/// The summary a model writes of a note: its title, its size and its first two sentences (the
/// program of task 1 computes the same).
fn summary(note: &str) -> String {
    let lines: Vec<&str> = note.lines().filter(|l| !l.trim().is_empty()).collect();
    let title = lines.first().map_or("", |l| l.trim_start_matches('#').trim());
    format!("{title} ({} lines): {}", lines.len(), lines.iter().skip(1).take(2).copied().collect::<Vec<_>>().join(" "))
}

/// A JavaScript string literal of `s`.
fn js(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// What programs share: the text of a call's result, with or without `structuredContent`.
const TEXT_OF: &str = "const textOf = (r) => (typeof r.content === \"string\" ? r.content : r.text);\n";

/// Runs a task the code-mode way: the surface is read, one search (are the `wanted` tools in
/// it?), one program; its transcript, the program's value and the wanted tools not found.
async fn by_code(
    code: &Endpoint,
    surface: &str,
    query: &str,
    program: String,
    wanted: &[&str],
) -> anyhow::Result<(Transcript, Value, Vec<String>)> {
    let mut t = Transcript::default();
    t.reads(surface.to_string());
    let found = t.call(code, "search_tools", json!({ "query": query, "limit": 10 })).await?;
    let names: Vec<&str> =
        found["structuredContent"]["tools"].as_array().into_iter().flatten().filter_map(|tool| tool["name"].as_str()).collect();
    let not_found = wanted.iter().filter(|w| !names.contains(w)).map(|w| w.to_string()).collect();
    let ran = t.call(code, "run_code", json!({ "code": program })).await?;
    let value = match ran.get("structuredContent") {
        Some(v) if v.is_object() => v.clone(),
        _ => serde_json::from_str(&text(&ran)).unwrap_or(Value::Null),
    };
    Ok((t, value, not_found))
}

/// The line count of a text, as `str::lines` counts it.
fn line_count(s: &str) -> usize {
    s.lines().count()
}

/// Runs the three tasks both ways. `listing` is the plain endpoint's tools (JSON), `surface` the
/// code-mode endpoint's, `code` that endpoint (`None`: plain only).
pub async fn run(ws: &Workspace, plain: &Endpoint, listing: &str, code: Option<(&Endpoint, &str)>) -> anyhow::Result<Vec<Done>> {
    let mut done = Vec::new();

    // 1. Read a note, keep a summary of it in memory.
    let note = ws.path("notes/meeting.md");
    let mut t = Transcript::default();
    t.reads(listing.to_string());
    let read = t.call(plain, "fs__read_text_file", json!({ "path": note })).await?;
    let entity = json!({ "name": "meeting-notes-plain", "entityType": "document", "observations": [summary(&text(&read))] });
    t.call(plain, "memory__create_entities", json!({ "entities": [entity] })).await?;
    let mut task = Done { name: "read a file, store a summary in memory", plain: t, code: None, not_found: vec![] };
    if let Some((ep, surface)) = code {
        let program = format!(
            "{TEXT_OF}const text = textOf(await tools.fs__read_text_file({{ path: {} }}));\n\
             const lines = text.split(\"\\n\").filter((l) => l.trim() !== \"\");\n\
             const summary = `${{lines[0].replace(/^#+/, \"\").trim()}} (${{lines.length}} lines): ${{lines.slice(1, 3).join(\" \")}}`;\n\
             await tools.memory__create_entities({{ entities: [{{ name: \"meeting-notes-code\", entityType: \"document\", observations: [summary] }}] }});\n\
             return {{ entity: \"meeting-notes-code\", summary }};",
            js(&note)
        );
        let wanted = ["fs__read_text_file", "memory__create_entities"];
        let (t, value, not_found) =
            by_code(ep, surface, "read a text file and create an entity in the memory graph", program, &wanted).await?;
        anyhow::ensure!(value["summary"] == summary(NOTES[0].1).as_str(), "task 1 by code returned {value}");
        task.code = Some(t);
        task.not_found = not_found;
    }
    let stored = std::fs::read_to_string(&ws.memory_file).unwrap_or_default();
    anyhow::ensure!(stored.contains("meeting-notes-plain"), "task 1: the plain way stored no entity: {stored}");
    anyhow::ensure!(code.is_none() || stored.contains("meeting-notes-code"), "task 1: the program stored no entity: {stored}");
    done.push(task);

    // 2. Search memory, write what was found to a file.
    let mut t = Transcript::default();
    t.reads(listing.to_string());
    let found = t.call(plain, "memory__search_nodes", json!({ "query": "project" })).await?;
    let graph: Value = serde_json::from_str(&text(&found))?;
    let mut content = String::from("# Projects\n\n");
    for e in graph["entities"].as_array().into_iter().flatten() {
        let observations: Vec<&str> = e["observations"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        content.push_str(&format!(
            "- {} ({}): {}\n",
            e["name"].as_str().unwrap_or(""),
            e["entityType"].as_str().unwrap_or(""),
            observations.join("; ")
        ));
    }
    let out_plain = ws.path("out/projects-plain.md");
    t.call(plain, "fs__write_file", json!({ "path": out_plain, "content": content })).await?;
    let mut task = Done { name: "search memory, write a summary file", plain: t, code: None, not_found: vec![] };
    let out_code = ws.path("out/projects-code.md");
    if let Some((ep, surface)) = code {
        let program = format!(
            "const found = await tools.memory__search_nodes({{ query: \"project\" }});\n\
             const lines = found.entities.map((e) => `- ${{e.name}} (${{e.entityType}}): ${{e.observations.join(\"; \")}}`);\n\
             await tools.fs__write_file({{ path: {}, content: `# Projects\\n\\n${{lines.join(\"\\n\")}}\\n` }});\n\
             return {{ written: {}, entities: found.entities.length }};",
            js(&out_code),
            js(&out_code)
        );
        let wanted = ["memory__search_nodes", "fs__write_file"];
        let (t, value, not_found) = by_code(ep, surface, "search the memory graph and write a file", program, &wanted).await?;
        anyhow::ensure!(value["entities"].as_u64().is_some_and(|n| n >= 2), "task 2 by code returned {value}");
        task.code = Some(t);
        task.not_found = not_found;
    }
    for (way, path) in [("the plain way", Some(&out_plain)), ("the program", code.map(|_| &out_code))] {
        let Some(path) = path else { continue };
        let written = std::fs::read_to_string(path).unwrap_or_default();
        anyhow::ensure!(
            written.contains("project-atlas") && written.contains("project-borealis"),
            "task 2: {way} wrote {written:?} to {path}"
        );
    }
    done.push(task);

    // 3. List the notes, read each, answer their line counts.
    let expected: Value =
        NOTES.iter().map(|(name, body)| (name.to_string(), json!(line_count(body)))).collect::<serde_json::Map<_, _>>().into();
    let folder = ws.path("notes");
    let mut t = Transcript::default();
    t.reads(listing.to_string());
    let listed = t.call(plain, "fs__list_directory", json!({ "path": folder })).await?;
    let mut counts = serde_json::Map::new();
    for name in text(&listed).lines().filter_map(|l| l.strip_prefix("[FILE] ")) {
        let read = t.call(plain, "fs__read_text_file", json!({ "path": format!("{folder}/{name}") })).await?;
        counts.insert(name.to_string(), json!(line_count(&text(&read))));
    }
    anyhow::ensure!(Value::Object(counts.clone()) == expected, "task 3: the plain way counted {counts:?}, not {expected}");
    let mut task = Done { name: "list a folder, read 3 files, answer their line counts", plain: t, code: None, not_found: vec![] };
    if let Some((ep, surface)) = code {
        let program = format!(
            "{TEXT_OF}const dir = {};\n\
             const names = textOf(await tools.fs__list_directory({{ path: dir }})).split(\"\\n\")\n\
             \x20 .filter((l) => l.startsWith(\"[FILE] \")).map((l) => l.slice(7));\n\
             const counts = {{}};\n\
             for (const name of names) {{\n\
             \x20 const text = textOf(await tools.fs__read_text_file({{ path: `${{dir}}/${{name}}` }}));\n\
             \x20 counts[name] = text.split(\"\\n\").length - (text.endsWith(\"\\n\") ? 1 : 0);\n\
             }}\n\
             return counts;",
            js(&folder)
        );
        let wanted = ["fs__list_directory", "fs__read_text_file"];
        let (t, value, not_found) = by_code(ep, surface, "list a directory and read text files", program, &wanted).await?;
        anyhow::ensure!(value == expected, "task 3 by code returned {value}, not {expected}");
        task.code = Some(t);
        task.not_found = not_found;
    }
    done.push(task);
    Ok(done)
}
