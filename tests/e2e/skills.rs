//! Part 24: Agent Skills (SEP-2640) through the gateway, with the server people start from
//! (FastMCP 4.1.6 `SkillsDirectoryProvider` + `SkillsExtension`, tests/py/skills_server.py) twice,
//! both serving a skill named `code-review`: FastMCP's own client (`SkillsClientExtension`,
//! tests/py/skills_client.py) lists, gets and reads them through the gateway under
//! `skill://<prefix>/<skill-path>/SKILL.md`, and what it reads matches the files byte for byte
//! (digests and sizes); callers see the skills their policy allows; a changed SKILL.md is held
//! under `[pins] mode = "enforce"` until approved.

use crate::harness::*;
use serde_json::{Value, json};
use std::path::Path;

const REVIEW_A: &str = "---\nname: code-review\ndescription: Review a change for correctness and style\n---\n# Code review\n\nRead the diff, then the tests.\n";
const CHECKLIST: &str = "Checklist: tests, names, errors.\n";
const REVIEW_B: &str = "---\nname: code-review\ndescription: Review infrastructure changes\n---\nCheck the plan output first.\n";
const DEPLOY_B: &str = "---\nname: deploy\ndescription: Ship a release\n---\nTag, build, publish.\n";

/// Two skill roots: `a` with `code-review` (and a supporting file), `b` with its own
/// `code-review` and `deploy`.
pub(crate) fn skill_roots() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |rel: &str, text: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(p, text).expect("write a skill file");
    };
    write("a/code-review/SKILL.md", REVIEW_A);
    write("a/code-review/references/CHECKLIST.md", CHECKLIST);
    write("b/code-review/SKILL.md", REVIEW_B);
    write("b/deploy/SKILL.md", DEPLOY_B);
    dir
}

/// The `[[upstream]]` tables of the two skill servers (stdio) over `roots`.
pub(crate) fn skill_upstreams(roots: &Path) -> String {
    let script = repo().join("tests/py/skills_server.py");
    ["a", "b"]
        .iter()
        .map(|s| {
            format!(
                "[[upstream]]\nid = \"{s}\"\nprefix = \"{s}\"\ncommand = [{:?}, {:?}, \"--root\", {:?}]\ntimeout = \"30s\"\n\n",
                python(),
                script.display().to_string(),
                roots.join(s).display().to_string()
            )
        })
        .collect()
}

pub(crate) fn digest(text: &str) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes());
    format!("sha256:{}", d.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// FastMCP's client with the Skills extension against `url` (with a bearer key, if any).
pub(crate) fn fastmcp_skills(url: &str, key: Option<&str>) -> Value {
    let mut cmd = std::process::Command::new(python());
    cmd.arg(repo().join("tests/py/skills_client.py")).arg(url);
    if let Some(k) = key {
        cmd.arg(k);
    }
    let out = cmd.output().expect("run the FastMCP skills client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim().lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the client printed no JSON ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
}

fn uris(listing: &Value) -> Vec<String> {
    let mut u: Vec<String> =
        listing["skills"].as_array().map(|s| s.iter().filter_map(|s| s["uri"].as_str().map(String::from)).collect()).unwrap_or_default();
    u.sort();
    u
}

#[tokio::test(flavor = "multi_thread")]
async fn fastmcp_lists_gets_and_reads_skills_of_two_upstreams_through_the_gateway() {
    let roots = skill_roots();
    let gw = gateway(&format!("[server]\nlisten = \"127.0.0.1:0\"\n\n{}", skill_upstreams(roots.path())));
    let got = fastmcp_skills(&gw.url, None);
    assert!(got.get("error").is_none(), "{got}\n{}", gw.proc.log());
    assert_eq!(
        uris(&got),
        ["skill://a/code-review/SKILL.md", "skill://b/code-review/SKILL.md", "skill://b/deploy/SKILL.md"],
        "one skill per (upstream, skill), the scheme kept, the last segment still the name: {got}"
    );
    let files = [
        ("skill://a/code-review/SKILL.md", REVIEW_A),
        ("skill://a/code-review/references/CHECKLIST.md", CHECKLIST),
        ("skill://b/code-review/SKILL.md", REVIEW_B),
        ("skill://b/deploy/SKILL.md", DEPLOY_B),
    ];
    for (uri, text) in files {
        assert_eq!(got["files"][uri]["digest"], digest(text), "{uri} reads back the file's bytes: {got}");
        assert_eq!(got["files"][uri]["size"], text.len(), "{uri}: {got}");
    }
    for skill in got["skills"].as_array().into_iter().flatten() {
        let uri = skill["uri"].as_str().unwrap_or_default();
        assert_eq!(got["got"][uri], *skill, "skills/get answers the listed entry: {got}");
        for r in skill["resources"].as_array().into_iter().flatten() {
            let text = files.iter().find(|(u, _)| r["uri"] == *u).map(|(_, t)| *t).unwrap_or_else(|| panic!("{r} is one of the files"));
            assert_eq!(r["digest"], digest(text), "digests pass through untouched: {r}");
            assert_eq!(r["size"], text.len(), "{r}");
        }
    }
    // The skill files are resources under the same URIs.
    let listed = rpc(&gw.url, "resources/list", json!({})).await.json();
    let resources: Vec<&str> = listed["result"]["resources"].as_array().into_iter().flatten().filter_map(|r| r["uri"].as_str()).collect();
    assert!(resources.contains(&"skill://a/code-review/references/CHECKLIST.md"), "{listed}");
    assert!(!resources.iter().any(|u| u.contains("+skill:")), "the scheme is kept: {listed}");
    let unknown = rpc(&gw.url, "skills/get", json!({ "uri": "skill://a/nothing/SKILL.md" })).await.json();
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}
