//! Servers people install, behind the gateway as stdio children, each in the default sandbox
//! (`[upstream.sandbox]` with only its working folder writable): `@modelcontextprotocol/
//! server-filesystem`, `server-memory` and `server-sequential-thinking` (2026.8.31, legacy-era
//! servers), driven by the official Python SDK client in both eras and by the MCP Inspector's CLI.
//! Round trips are checked where they land: a file written through the gateway is on disk and reads
//! back; an entity created is in the memory file and opens back; a thought is recorded.

use crate::harness::*;
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Each server in the default sandbox (`mcpgate_sandbox::exec`), given only the folder it works in.
fn config(root: &Path, memory_file: &Path) -> String {
    let memory_dir = memory_file.parent().unwrap_or(root);
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n\
         [[upstream]]\nid = \"fs\"\ncommand = [{:?}, {:?}]\ntimeout = \"30s\"\n[upstream.sandbox]\nwrite = [{:?}]\n\n\
         [[upstream]]\nid = \"memory\"\ncommand = [{:?}]\ntimeout = \"30s\"\n[upstream.env]\nMEMORY_FILE_PATH = {:?}\n\
         [upstream.sandbox]\nwrite = [{:?}]\n\n\
         [[upstream]]\nid = \"thinking\"\ncommand = [{:?}]\ntimeout = \"30s\"\n[upstream.sandbox]\n",
        installed_server("mcp-server-filesystem"),
        root.display().to_string(),
        root.display().to_string(),
        installed_server("mcp-server-memory"),
        memory_file.display().to_string(),
        memory_dir.display().to_string(),
        installed_server("mcp-server-sequential-thinking"),
    )
}

/// Runs the SDK client's `script` action on `url` in `mode`; one JSON value per step.
pub(crate) fn sdk_script(mode: &str, url: &str, steps: &[Value]) -> Vec<Value> {
    let mut child = Command::new(python())
        .arg(repo().join("tests/py/modern_client.py"))
        .args(["--mode", mode, url, "script"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the Python SDK client");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        for step in steps {
            writeln!(stdin, "{step}").expect("write a step");
        }
    }
    let out = child.wait_with_output().expect("client output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{mode}: {}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

fn text(result: &Value) -> String {
    result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn installed_servers_work_through_the_gateway_in_both_eras() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The filesystem server resolves symlinks in its allowed roots; so does the test.
    std::fs::create_dir_all(dir.path().join("files")).expect("root");
    let root = dir.path().join("files").canonicalize().expect("root");
    let memory_file = dir.path().join("memory.jsonl");
    let gw = gateway(&config(&root, &memory_file));

    for mode in ["2026-07-28", "legacy"] {
        let file = root.join(format!("note-{mode}.txt"));
        let entity = format!("gateway-{mode}");
        let content = format!("written through mcpgate by a {mode} client");
        let steps = [
            json!({ "action": "list" }),
            json!({ "action": "call", "name": "fs__write_file", "arguments": { "path": file, "content": content } }),
            json!({ "action": "call", "name": "fs__read_text_file", "arguments": { "path": file } }),
            json!({ "action": "call", "name": "fs__read_text_file", "arguments": { "path": "/etc/hostname" } }),
            json!({ "action": "call", "name": "memory__create_entities", "arguments": {
                "entities": [{ "name": entity, "entityType": "service", "observations": [format!("seen in {mode}")] }]
            } }),
            json!({ "action": "call", "name": "memory__open_nodes", "arguments": { "names": [entity] } }),
            json!({ "action": "call", "name": "thinking__sequentialthinking", "arguments": {
                "thought": "one step", "nextThoughtNeeded": false, "thoughtNumber": 1, "totalThoughts": 1
            } }),
        ];
        let out = sdk_script(mode, &gw.url, &steps);
        assert_eq!(out.len(), steps.len(), "{mode}: one answer per step: {out:#?}\n{}", gw.proc.log());
        let tools: Vec<&str> = out[0]["tools"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        for name in
            ["fs__write_file", "fs__read_text_file", "memory__create_entities", "memory__open_nodes", "thinking__sequentialthinking"]
        {
            assert!(tools.contains(&name), "{mode}: {name} is listed: {tools:?}");
        }
        assert_ne!(out[1]["isError"], true, "{mode}: write: {}", out[1]);
        assert_eq!(std::fs::read_to_string(&file).ok().as_deref(), Some(content.as_str()), "{mode}: the file is on disk");
        assert_eq!(text(&out[2]), content, "{mode}: and reads back: {}", out[2]);
        assert_eq!(out[3]["isError"], true, "{mode}: a path outside the root is refused by the server: {}", out[3]);
        assert_ne!(out[4]["isError"], true, "{mode}: create: {}", out[4]);
        assert!(text(&out[5]).contains(&entity) && text(&out[5]).contains(&format!("seen in {mode}")), "{mode}: open: {}", out[5]);
        let stored = std::fs::read_to_string(&memory_file).unwrap_or_default();
        assert!(stored.contains(&entity), "{mode}: the entity is in the memory file: {stored}");
        assert!(text(&out[6]).contains("thoughtNumber"), "{mode}: a thought is recorded: {}", out[6]);
    }

    // The Inspector's CLI, as a user would run it against the gateway.
    let file = root.join("note-2026-07-28.txt");
    let out = Command::new(installed_client("mcp-inspector"))
        .args(["--cli", &gw.url, "--method", "tools/call", "--tool-name", "fs__read_text_file"])
        .arg("--tool-arg")
        .arg(format!("path={}", file.display()))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("CI", "true")
        .output()
        .expect("run the Inspector");
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && printed.contains("written through mcpgate by a 2026-07-28 client"), "Inspector: {printed}");
}
