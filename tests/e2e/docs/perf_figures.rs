//! One source for the benchmark figures: docs/performance.md's "Latest run" section. Where README.md
//! (its Performance section) and docs/production.md (its Sizing section, the paragraphs that
//! state what was measured; its list items are sizing advice with headroom) give a figure of CPU
//! per call, throughput or memory, that is a number followed by µs, req/s, calls/s, MiB or KiB, the
//! number must be one of the Latest run's (thousands separators aside), and a table either page
//! quotes must be lines of the Latest run's own. Both sections link to it, so a new run is
//! recorded once, and a page that still quotes the previous one fails here.

use super::markdown::{fenced_lines, headings, prose, section, slug};
use crate::harness::*;

const UNITS: &[&str] = &["µs", "req/s", "calls/s", "MiB", "KiB"];

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The numbers of `text`, thousands separators dropped (`12,550` is `12550`).
fn numbers(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .map(|t| t.trim_matches(|c: char| c == '.' || c == ',').replace(',', ""))
        .filter(|t| t.chars().any(|c| c.is_ascii_digit()))
        .collect()
}

/// Each figure of `text` with one of [`UNITS`] after it: (as written, its number without
/// thousands separators).
fn figures(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for unit in UNITS {
        for (at, _) in text.match_indices(unit) {
            let before = text[..at].trim_end();
            let start = before
                .char_indices()
                .rev()
                .find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == ','))
                .map_or(0, |(i, c)| i + c.len_utf8());
            let number = before[start..].trim_matches(|c: char| c == '.' || c == ',');
            if number.chars().any(|c| c.is_ascii_digit()) {
                out.push((format!("{number} {unit}"), number.replace(',', "")));
            }
        }
    }
    out
}

/// The paragraphs of `text` that are not list items.
fn paragraphs(text: &str) -> String {
    text.split("\n\n")
        .filter(|p| {
            let first = p.trim_start();
            !(first.starts_with("- ") || first.starts_with("* "))
        })
        .collect::<Vec<&str>>()
        .join("\n\n")
}

#[test]
fn readme_and_production_quote_only_the_latest_runs_figures() {
    let performance = read("docs/performance.md");
    let latest_title = headings(&performance)
        .into_iter()
        .map(|(_, t)| t)
        .find(|t| t.starts_with("Latest run"))
        .expect("docs/performance.md has a \"Latest run\" section");
    let latest = section(&performance, &latest_title).expect("the Latest run section");
    let known = numbers(&latest);
    assert!(known.len() >= 20, "docs/performance.md's Latest run holds the run's table: {known:?}");
    let table: Vec<&str> = fenced_lines(&latest).into_iter().map(str::trim).filter(|l| !l.is_empty()).collect();
    let link = format!("performance.md#{}", slug(&latest_title));

    let readme = read("README.md");
    let production = read("docs/production.md");
    let scopes = [
        ("README.md", "Performance", section(&readme, "Performance"), false),
        ("docs/production.md", "Sizing", section(&production, "Sizing"), true),
    ];
    let mut problems = Vec::new();
    for (file, title, text, measured_only) in scopes {
        let text = text.unwrap_or_else(|| panic!("{file} has no \"{title}\" section"));
        if !text.contains(&link) {
            problems.push(format!("{file} ({title}): no link to the figures' source, {link}"));
        }
        let stated = if measured_only { paragraphs(&prose(&text)) } else { prose(&text) };
        for (figure, number) in figures(&stated) {
            if !known.contains(&number) {
                problems.push(format!("{file} ({title}): {figure} is not a figure of docs/performance.md's {latest_title}"));
            }
        }
        for line in fenced_lines(&text).into_iter().map(str::trim).filter(|l| !l.is_empty()) {
            if !table.contains(&line) {
                problems.push(format!("{file} ({title}): the quoted line `{line}` is not in docs/performance.md's {latest_title}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "README.md and docs/production.md must quote docs/performance.md's {latest_title} exactly, or only link to it:\n{}",
        problems.join("\n")
    );
}
