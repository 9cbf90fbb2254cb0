//! docs/configuration.md opens with an overview of every top-level part `gateway.toml` accepts,
//! so a newcomer sees them all before the reference of each. The parts are read from the file
//! model itself: the fields of `FileConfig` (crates/config/src/document.rs) under their serde
//! `rename`, a `Vec` being an array of tables (`[[upstream]]`) and anything else a table
//! (`[server]`). The overview is what comes before the page's first `##`/`###` heading (the
//! headings that each document one part), fenced blocks (the shipped file) left out. For each
//! part it must hold a line that links to that part's own section (`` [`[[confirm]]`](#confirm) ``,
//! the anchor GitHub makes of the section's heading) followed by a few words of purpose; and
//! every part the overview links to must be one the file model accepts.

use super::config_keys::fields_of;
use super::markdown::{headings, prose, slug};
use crate::harness::*;

#[test]
fn the_configuration_overview_lists_every_top_level_part() {
    let doc = std::fs::read_to_string(repo().join("docs/configuration.md")).expect("docs/configuration.md");
    let parts = fields_of("FileConfig");
    assert!(parts.len() >= 15, "the top-level parts of FileConfig in crates/config/src/document.rs: {parts:?}");
    let text = prose(&doc);
    let overview = &text[..text.find("\n##").expect("docs/configuration.md has a section per part")];
    let titles = headings(&doc);

    let mut problems = Vec::new();
    for (key, ty) in &parts {
        let form = if ty.starts_with("Vec<") { format!("[[{key}]]") } else { format!("[{key}]") };
        let heading = format!("`{form}`");
        if !titles.iter().any(|(level, t)| *level >= 2 && *t == heading) {
            problems.push(format!("{form}: no `### {heading}` section documents it"));
            continue;
        }
        let link = format!("[{heading}](#{})", slug(&heading));
        let Some(line) = overview.lines().find(|l| l.contains(link.as_str())) else {
            problems.push(format!("{form}: the overview has no line linking to its section, such as `| {link} | what it is for |`"));
            continue;
        };
        let purpose = line.split_once(link.as_str()).map_or("", |(_, rest)| rest);
        let words = purpose.split(|c: char| c.is_whitespace() || c == '|').filter(|w| w.chars().any(char::is_alphanumeric)).count();
        if words < 3 {
            problems.push(format!("{form}: the overview links to it without saying what it is for: {line}"));
        }
    }

    // No part the configuration does not accept.
    for line in overview.lines() {
        let Some(rest) = line.trim_start_matches(|c: char| c == '|' || c.is_whitespace()).strip_prefix("[`[") else { continue };
        let key = rest.split('`').next().unwrap_or("").trim_matches(|c: char| c == '[' || c == ']');
        if !parts.iter().any(|(k, _)| k == key) {
            problems.push(format!("the overview lists `{key}`, which is not a top-level part of FileConfig: {line}"));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/configuration.md: the overview before the first section must list every part gateway.toml accepts:\n{}",
        problems.join("\n")
    );
}
