//! Where the kept state lives, as the docs say it: `Usage::open` (src/usage.rs) and the
//! identity set-up (src/gateway/personal/setup.rs) keep the token vault and the usage counts in
//! the state database whenever PostgreSQL is configured, `[cluster]` or not; only without
//! PostgreSQL does `[cluster]` put them in Redis. So a sentence that ties `[cluster]` to the vault
//! or the counts must name the PostgreSQL case, or it tells replicas on PostgreSQL the wrong thing.

use super::markdown;
use crate::harness::*;

/// The sentences of a page's prose (table cells taken one by one), joined across line breaks.
fn sentences(text: &str) -> Vec<String> {
    let prose = markdown::prose(text);
    let mut out = Vec::new();
    for paragraph in prose.split("\n\n") {
        let cells: Vec<String> = if paragraph.trim_start().starts_with('|') {
            paragraph.lines().flat_map(|l| l.split('|').map(str::to_string).collect::<Vec<_>>()).collect()
        } else {
            vec![paragraph.lines().map(str::trim).collect::<Vec<_>>().join(" ")]
        };
        for cell in cells {
            // "e.g." and "i.e." do not end a sentence.
            let cell = cell.replace("e.g. ", "e.g.\u{a0}").replace("i.e. ", "i.e.\u{a0}");
            out.extend(cell.split_inclusive(". ").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
        }
    }
    out
}

/// Whether a sentence speaks of where the vault or the usage counts are kept.
fn about_kept_state(sentence: &str) -> bool {
    let s = sentence.to_lowercase();
    ["vault", "usage count", "the counts", "counts go", "counts are", "tokens and counts"].iter().any(|w| s.contains(w))
}

#[test]
fn every_sentence_that_puts_the_vault_or_the_counts_in_redis_names_the_postgresql_case() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for file in super::doc_files() {
        let text = std::fs::read_to_string(&file).expect("read a doc");
        for s in sentences(&text).into_iter().filter(|s| s.contains("[cluster]") && about_kept_state(s)) {
            checked += 1;
            if !(s.contains("PostgreSQL") || s.contains("postgres")) {
                wrong.push(format!("{}: {s}", file.strip_prefix(repo()).unwrap_or(&file).display()));
            }
        }
    }
    assert!(checked >= 5, "only {checked} sentences tie [cluster] to the vault or the counts");
    assert!(
        wrong.is_empty(),
        "these sentences tie [cluster] to the vault or the usage counts without the PostgreSQL case (with [state] postgres, the database keeps them even with [cluster]; see Usage::open and gateway/personal/setup.rs):\n{}",
        wrong.join("\n")
    );
}

/// docs/production.md's "What a crash can lose" covers every store, and what it says of them
/// is the code's: the SQLite pragmas `crates/store/src/sqlite.rs` sets, and the default flush interval.
#[test]
fn what_a_crash_can_lose_covers_every_store_as_the_code_keeps_it() {
    let doc = std::fs::read_to_string(repo().join("docs/production.md")).expect("docs/production.md");
    let section = markdown::section(&doc, "What a crash can lose").expect("docs/production.md: a section \"What a crash can lose\"");
    let section = section.split_whitespace().collect::<Vec<_>>().join(" ");
    for store in ["**The SQLite state database**", "**PostgreSQL**", "**Redis with `[cluster]`**", "**The audit file**"] {
        assert!(section.contains(store), "\"What a crash can lose\" has no item for {store}");
    }
    let sqlite = std::fs::read_to_string(repo().join("crates/store/src/sqlite.rs")).expect("crates/store/src/sqlite.rs");
    for (pragma, said) in [("\"journal_mode\", \"WAL\"", "WAL mode"), ("\"synchronous\", \"FULL\"", "`synchronous = FULL`")] {
        assert_eq!(
            sqlite.contains(pragma),
            section.contains(said),
            "the section says {said:?} only if crates/store/src/sqlite.rs sets {pragma}"
        );
    }
    let every = mcpgate_config::usage::UsageConfig::default().flush_interval.as_secs();
    assert!(
        section.contains(&format!("flush_interval` (default {every} s)")),
        "the section must give the default `[usage] flush_interval`, {every} s, as the most counts a crash loses"
    );
    let audit = std::fs::read_to_string(repo().join("src/audit/chain.rs")).expect("src/audit/chain.rs");
    let said = "the last record is incomplete (a crash while writing?)";
    assert!(audit.contains(said) && section.contains(said), "the section quotes what `mcpgate audit verify` says of a torn last line");
}
