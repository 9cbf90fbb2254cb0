//! The map of docs/architecture.md ("The tree") names every folder of the workspace that holds a
//! module, so a newcomer finds each part of the pipeline from the page alone; a folder added
//! without a line there fails here.

use super::markdown;
use crate::harness::*;
use std::path::Path;

/// The folders under `dir` that hold a module (a `.rs` file other than `tests.rs`), relative to
/// the repository.
fn module_folders(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut holds_module = false;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            module_folders(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "tests.rs") {
            holds_module = true;
        }
    }
    if holds_module {
        out.push(dir.strip_prefix(repo()).unwrap_or(dir).display().to_string());
    }
}

#[test]
fn the_architecture_map_names_every_folder() {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).expect("docs/architecture.md");
    let tree = markdown::section(&doc, "The tree").expect("docs/architecture.md: a \"The tree\" section");
    let mut folders = Vec::new();
    module_folders(&repo().join("src"), &mut folders);
    for krate in std::fs::read_dir(repo().join("crates")).expect("crates/").flatten() {
        module_folders(&krate.path().join("src"), &mut folders);
    }
    assert!(folders.len() > 30, "the folders found: {folders:?}");
    let missing: Vec<&String> = folders
        .iter()
        .filter(|f| {
            // A crate's or src/'s root by its full path, a folder below by its name and a slash.
            let named =
                if f.ends_with("/src") || *f == "src" { format!("{f}/") } else { format!("{}/", f.rsplit('/').next().unwrap_or(f)) };
            !tree.contains(&named)
        })
        .collect();
    assert!(missing.is_empty(), "folders the map in docs/architecture.md (\"The tree\") does not name: {missing:?}");
}
