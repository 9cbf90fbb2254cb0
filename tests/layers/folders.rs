//! The folder check: the modules of one folder (a crate's root too) import each other in no ring,
//! whatever the layer table says about the unit they belong to. It resolves every path a
//! production line writes (`crate::…`, `super::…`, `self::…`, a parent's bare child) to the
//! module it names, and keeps the imports between siblings.

use super::{module_path, production, roots, sources};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module path of a source root (`a`, `a::b`, …), for telling a module from an item.
fn module_paths(src: &Path) -> BTreeSet<Vec<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    files.iter().map(|f| module_path(f.strip_prefix(src).unwrap_or(f))).filter(|m| !m.is_empty()).collect()
}

/// The module a path written in `module` names (`crate::a::b::Item`, `super::b`, `self::b`, and in a
/// module with children a child by its bare name), as the longest prefix that is a module, or `None`.
fn resolve(module: &[String], parent: bool, path: &str, modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let segments: Vec<&str> = path.split("::").collect();
    // The module `self` is: a file `a/b.rs` (its children in `a/b/`) is `a::b`.
    let mut base: Vec<String>;
    let mut rest = &segments[..];
    match segments.first().copied() {
        Some("crate") => {
            base = Vec::new();
            rest = &segments[1..];
        }
        Some("super") | Some("self") => {
            base = module.to_vec();
            while let Some((first, tail)) = rest.split_first() {
                match *first {
                    "super" => {
                        base.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = tail;
            }
        }
        Some(first) if parent => {
            let mut child = module.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            base = module.to_vec();
        }
        _ => return None,
    }
    let mut found = modules.contains(&base).then(|| base.clone());
    for seg in rest {
        base.push(seg.to_string());
        if modules.contains(&base) {
            found = Some(base.clone());
        } else {
            break;
        }
    }
    found
}

/// The imports between sibling modules of one folder (`a::x` → `a::y`, wherever below `x` and `y`
/// the two ends lie), keyed by the folder and the pair: (folder, from, to) → where it first happens.
/// A child naming its parent's own items is not a sibling import.
fn folder_edges(src: &Path) -> BTreeMap<(String, String, String), String> {
    let modules = module_paths(src);
    let mut files = Vec::new();
    sources(src, &mut files);
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap_or(&file);
        let module = module_path(rel);
        if module.is_empty() || module[0] == "main" || module[0] == "lib" {
            continue;
        }
        let parent = modules.iter().any(|m| m.len() == module.len() + 1 && m.starts_with(&module));
        let shown = file.strip_prefix(top).unwrap_or(&file).display().to_string();
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (n, line) in production(&text).lines().enumerate() {
            for path in paths_in(line) {
                let Some(target) = resolve(&module, parent, &path, &modules) else { continue };
                let common = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
                if common < module.len() && common < target.len() {
                    let folder = if common == 0 { "<root>".to_string() } else { module[..common].join("::") };
                    let key = (folder, module[common].clone(), target[common].clone());
                    out.entry(key).or_insert_with(|| format!("{shown}:{}", n + 1));
                }
            }
        }
    }
    out
}

/// The `a::b::c` paths a line of code writes, each from its first segment (strings not skipped:
/// a path-shaped string is rare and would only add an edge). `use a::{b, c::d}` gives `a::b`, `a::c::d`.
fn paths_in(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
        if start && (c.is_ascii_alphabetic() || c == b'_') {
            let mut j = i;
            while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_' || bytes[j] == b':') {
                j += 1;
            }
            let path = line[i..j].trim_end_matches(':');
            if path.contains("::") {
                out.push(path.to_string());
            }
            // A group: `prefix::{x, y::z}` (one level, which is how the code writes them).
            if line[..j].ends_with("::")
                && bytes.get(j) == Some(&b'{')
                && let Some(close) = line[j..].find('}')
            {
                for item in line[j + 1..j + close].split(',') {
                    let item = item.trim().split(' ').next().unwrap_or("");
                    if !item.is_empty() && item != "self" {
                        out.push(format!("{path}::{item}"));
                    }
                }
                i = j + close + 1;
                continue;
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// The cycles among the siblings of each folder, one line each.
fn folder_cycles(edges: &BTreeMap<(String, String, String), String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut folders: BTreeMap<&str, BTreeMap<&str, Vec<&str>>> = BTreeMap::new();
    for (folder, from, to) in edges.keys() {
        folders.entry(folder).or_default().entry(from).or_default().push(to);
    }
    for (folder, graph) in &folders {
        for ring in super::rings(graph) {
            let (last, least) = (ring[ring.len() - 2], ring[ring.len() - 1]);
            let first = &edges[&(folder.to_string(), last.to_string(), least.to_string())];
            out.push(format!("cycle in {folder}: {} (closing import: {first})", ring.join(" -> ")));
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn no_folder_has_a_cycle_among_its_modules() {
    let found: Vec<String> = roots().iter().flat_map(|r| folder_cycles(&folder_edges(r))).collect();
    assert!(
        found.is_empty(),
        "modules of one folder import each other in a ring (move what both need below them, or merge them):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_folder_check_resolves_paths_and_finds_rings() {
    let modules: BTreeSet<Vec<String>> = [vec!["a"], vec!["a", "x"], vec!["a", "y"], vec!["a", "y", "z"], vec!["b"]]
        .iter()
        .map(|m| m.iter().map(|s| s.to_string()).collect())
        .collect();
    let m = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(resolve(&m(&["a", "x"]), false, "super::y::z::Item", &modules), Some(m(&["a", "y", "z"])));
    assert_eq!(resolve(&m(&["a", "x"]), false, "crate::a::y::f", &modules), Some(m(&["a", "y"])));
    assert_eq!(resolve(&m(&["a"]), true, "y::z::Thing", &modules), Some(m(&["a", "y", "z"])));
    assert_eq!(resolve(&m(&["a", "x"]), false, "std::io::Error", &modules), None);
    assert_eq!(resolve(&m(&["a", "x"]), false, "super::Item", &modules), Some(m(&["a"])));
    assert_eq!(paths_in("use super::{y, z::w as v};"), ["super::y", "super::z::w"]);
    let mut e = BTreeMap::new();
    e.insert(("a".to_string(), "x".to_string(), "y".to_string()), "src/a/x.rs:1".to_string());
    assert!(folder_cycles(&e).is_empty());
    e.insert(("a".to_string(), "y".to_string(), "x".to_string()), "src/a/y.rs:2".to_string());
    let found = folder_cycles(&e);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("cycle in a: x -> y -> x"), "{found:?}");
}
