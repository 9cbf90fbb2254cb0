//! The layering, checked: every top-level module (of `src/` and of each crate under `crates/`)
//! belongs to one layer (the table below, drawn in docs/architecture.md), and production code may
//! name only modules of its own layer or below, with no cycle among them. The crates of layers 1-4
//! make the compiler refuse most upward imports; this check covers what shares a crate (the core
//! and the edges) and the crates' own modules. It reads the sources (all but the items under
//! `#[cfg(test)]`, and no `tests.rs` or `tests/` file) and resolves `crate::x` and `super::` paths
//! to the top-level module they name. A new module must be given a layer here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Bottom to top. A module may import its own layer and the layers below.
const LAYERS: &[(&str, &[&str])] = &[
    ("1 protocol: the wire model and runtime helpers", &["protocol", "reply", "sync", "tasks", "text", "toolbox"]),
    ("2 pure model: names, merge, views, decisions, sealed tokens, REST descriptions", &["policy", "token", "catalog", "openapi", "yaml"]),
    ("3 config: the file model and its validation", &["config"]),
    (
        "4 net and processes: the HTTP client, PEM/TLS, Redis, the state database; the sandbox, the supervisor",
        &["net", "cluster", "files", "once", "postgres", "sqlite", "sandbox", "supervise", "spawn"],
    ),
    ("5 upstreams, authentication, per-user identity, telemetry", &["upstream", "auth", "identity", "telemetry"]),
    ("6 core: gateway state, the pipeline, the change hub, limits, audit", &["audit", "usage", "hub", "gateway", "dispatch"]),
    ("7 edges: the client edge (listeners, eras, pages), the console API, the demo server", &["edge", "console", "demo"]),
    ("8 commands", &["commands"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

/// The module path of a source file under `src/` (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`).
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs").to_string();
        if stem != "mod" {
            parts.push(stem);
        }
    }
    parts
}

/// The production part of a file: comments removed, and every item under `#[cfg(test)]` (a
/// `mod tests;`, a `mod tests { … }`, a test-only `use` or function) blanked out, lines kept (so
/// production code after a test module is read too, and line numbers stay true).
fn production(text: &str) -> String {
    let code = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut out = String::with_capacity(code.len());
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let end = test_item_end(item);
        out.extend(item[..end].chars().filter(|c| *c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Where the item that `item` (starting at its `#[cfg(test)]`) gates ends: after its `;`, or after
/// the brace that closes its block; string literals are skipped, so braces in them do not count.
fn test_item_end(item: &str) -> usize {
    let bytes = item.as_bytes();
    let (mut i, mut depth) = ("#[cfg(test)]".len(), 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                // A string (raw ones too: `r#"…"#` ends at `"#`), escapes skipped.
                let raw = i > 0 && (bytes[i - 1] == b'#' || bytes[i - 1] == b'r');
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' && !raw { 2 } else { 1 };
                }
            }
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// The top-level modules a file names, with the line of each first mention.
fn references(module: &[String], code: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (n, line) in code.lines().enumerate() {
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < line.len() {
            let rest = &line[i..];
            let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
            let target = if boundary && rest.starts_with("crate::") {
                ident(&rest["crate::".len()..])
            } else if boundary && rest.starts_with("super::") {
                let mut depth = 0;
                let mut r = rest;
                while let Some(next) = r.strip_prefix("super::") {
                    depth += 1;
                    r = next;
                }
                // `super` from `a::b::c` is `a::b`; reaching the crate root names the next segment.
                if depth >= module.len() { ident(r) } else { Some(module[0].clone()) }
            } else {
                None
            };
            if let Some(t) = target {
                out.entry(t).or_insert(n + 1);
            }
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    out
}

fn ident(s: &str) -> Option<String> {
    let id: String = s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    (!id.is_empty()).then_some(id)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                sources(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "tests.rs") {
            out.push(path);
        }
    }
}

/// The source roots: `src/` and every `crates/*/src/`.
fn roots() -> Vec<PathBuf> {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![top.join("src")];
    if let Ok(entries) = std::fs::read_dir(top.join("crates")) {
        let mut crates: Vec<PathBuf> = entries.flatten().map(|e| e.path().join("src")).filter(|p| p.is_dir()).collect();
        crates.sort();
        out.extend(crates);
    }
    out
}

/// Every import between top-level modules of the source root `src`: (from, to) → where it first
/// happens.
fn edges(src: &Path) -> BTreeMap<(String, String), String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap_or(&file);
        let shown = file.strip_prefix(top).unwrap_or(&file).display().to_string();
        let module = module_path(rel);
        let Some(me) = module.first().cloned() else { continue };
        if me == "main" || me == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (target, line) in references(&module, &production(&text)) {
            if target != me {
                out.entry((me.clone(), target)).or_insert_with(|| format!("{shown}:{line}"));
            }
        }
    }
    out
}

/// The violations of the layer table and the cycles of `edges`, one line each.
fn violations(edges: &BTreeMap<(String, String), String>, known: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for ((from, to), at) in edges {
        if !known.contains(to) {
            continue;
        }
        match (layer_of(from), layer_of(to)) {
            (None, _) => out.push(format!("{at}: module `{from}` has no layer: add it to LAYERS in tests/layers.rs")),
            (_, None) => out.push(format!("{at}: module `{to}` has no layer: add it to LAYERS in tests/layers.rs")),
            (Some(a), Some(b)) if b > a => {
                out.push(format!("{at}: `{from}` (layer {}) imports `{to}` (layer {}), which is above it", LAYERS[a].0, LAYERS[b].0))
            }
            _ => {}
        }
    }
    // Cycles: an import across layers that points down can close none, so a cycle the table
    // does not catch lies within one layer: a path back to a module from one of its imports.
    let same_layer = |(a, b): &&(String, String)| layer_of(a).is_some() && layer_of(a) == layer_of(b);
    let graph: BTreeMap<&str, Vec<&str>> = edges.keys().filter(same_layer).fold(BTreeMap::new(), |mut g, (a, b)| {
        g.entry(a.as_str()).or_default().push(b.as_str());
        g
    });
    for start in graph.keys() {
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(start, vec![start])];
        let mut seen = BTreeSet::new();
        while let Some((node, path)) = stack.pop() {
            for next in graph.get(node).into_iter().flatten() {
                if next == start {
                    let cycle = path.iter().chain(std::iter::once(start)).copied().collect::<Vec<_>>().join(" -> ");
                    out.push(format!("cycle: {cycle} (first import: {})", edges[&(path[path.len() - 1].to_string(), next.to_string())]));
                } else if seen.insert(*next) {
                    let mut p = path.clone();
                    p.push(next);
                    stack.push((next, p));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Every module path of a source root (`a`, `a::b`, …), for telling a module from an item.
fn module_paths(src: &Path) -> BTreeSet<Vec<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    files.iter().map(|f| module_path(f.strip_prefix(src).unwrap_or(f))).filter(|m| !m.is_empty()).collect()
}

/// The module a path written in `module` names (`crate::a::b::Item`, `super::b`, `self::b`, and in a
/// folder's `mod.rs` a child by its bare name), as the longest prefix that is a module, or `None`.
fn resolve(module: &[String], is_mod_rs: bool, path: &str, modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let segments: Vec<&str> = path.split("::").collect();
    // The module `self` is: a file `a/b.rs` and a folder's `a/b/mod.rs` are both `a::b`.
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
        Some(first) if is_mod_rs => {
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
        let is_mod_rs = rel.file_name().is_some_and(|n| n == "mod.rs");
        let shown = file.strip_prefix(top).unwrap_or(&file).display().to_string();
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (n, line) in production(&text).lines().enumerate() {
            for path in paths_in(line) {
                let Some(target) = resolve(&module, is_mod_rs, &path, &modules) else { continue };
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
        for start in graph.keys() {
            let mut stack: Vec<(&str, Vec<&str>)> = vec![(start, vec![start])];
            let mut seen = BTreeSet::new();
            while let Some((node, path)) = stack.pop() {
                for next in graph.get(node).into_iter().flatten() {
                    if next == start {
                        // One line per cycle, however it is entered: start from its least member.
                        let least = path.iter().min().copied().unwrap_or(start);
                        let at = path.iter().position(|m| *m == least).unwrap_or(0);
                        let mut ring: Vec<&str> = path[at..].iter().chain(&path[..at]).copied().collect();
                        ring.push(least);
                        let first = &edges[&(folder.to_string(), ring[ring.len() - 2].to_string(), least.to_string())];
                        out.push(format!("cycle in {folder}: {} (closing import: {first})", ring.join(" -> ")));
                    } else if seen.insert(*next) {
                        let mut p = path.clone();
                        p.push(next);
                        stack.push((next, p));
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn top_level_modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()))
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let name = p.file_stem()?.to_string_lossy().into_owned();
            (p.is_dir() || p.extension().is_some_and(|x| x == "rs")).then_some(name)
        })
        .filter(|n| n != "main" && n != "lib")
        .collect()
}

#[test]
fn modules_import_only_their_layer_and_below_and_form_no_cycle() {
    let roots = roots();
    let known: BTreeSet<String> = roots.iter().flat_map(|r| top_level_modules(r)).collect();
    for m in &known {
        assert!(layer_of(m).is_some(), "{m}: a top-level module without a layer: add it to LAYERS in tests/layers.rs");
    }
    let all: BTreeMap<(String, String), String> = roots.iter().flat_map(|r| edges(r)).collect();
    let found = violations(&all, &known);
    assert!(found.is_empty(), "the layering is broken:\n{}", found.join("\n"));
}

#[test]
fn the_check_sees_upward_imports_super_paths_and_cycles() {
    let module = |p: &str| module_path(Path::new(p));
    assert_eq!(module("a/b/mod.rs"), ["a", "b"]);
    assert_eq!(module("a.rs"), ["a"]);
    let code = production(
        "use crate::gateway::Gateway;\nlet x = super::super::hub::Hub;\n// crate::cli in a comment\n#[cfg(test)]\nuse crate::server;",
    );
    let refs = references(&module("protocol/meta.rs"), &code);
    assert_eq!(refs.keys().collect::<Vec<_>>(), ["gateway", "hub"]);
    // Production code after a test module is read too; the test module is not.
    let code = production(
        "#[cfg(test)]\nmod tests;\nuse crate::audit;\n#[cfg(test)]\nmod more {\n    use crate::cli;\n    const S: &str = \"}\";\n}\nuse crate::usage;",
    );
    let refs = references(&module("protocol/meta.rs"), &code);
    assert_eq!(refs, BTreeMap::from([("audit".to_string(), 3), ("usage".to_string(), 9)]), "{code}");
    assert_eq!(references(&module("catalog/merge.rs"), "use super::uris;").keys().collect::<Vec<_>>(), ["catalog"]);
    assert!(references(&module("a.rs"), "mycrate::gateway").is_empty(), "only paths that start at `crate`");
    let known: BTreeSet<String> = ["protocol", "gateway", "policy", "catalog", "token"].iter().map(|s| s.to_string()).collect();
    let mut e = BTreeMap::new();
    e.insert(("protocol".to_string(), "gateway".to_string()), "src/protocol/meta.rs:1".to_string());
    let found = violations(&e, &known);
    assert!(found.len() == 1 && found[0].contains("src/protocol/meta.rs:1") && found[0].contains("above it"), "{found:?}");
    let mut e = BTreeMap::new();
    e.insert(("catalog".to_string(), "token".to_string()), "src/catalog/cursor.rs:5".to_string());
    e.insert(("token".to_string(), "policy".to_string()), "src/token.rs:5".to_string());
    assert!(violations(&e, &known).is_empty(), "no cycle yet: {:?}", violations(&e, &known));
    e.insert(("policy".to_string(), "catalog".to_string()), "src/policy/mod.rs:3".to_string());
    let found = violations(&e, &known);
    assert!(found.iter().any(|f| f.starts_with("cycle: ") && f.contains("src/policy/mod.rs:3")), "a cycle within one layer: {found:?}");
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

/// The `Result<T, String>` types production code writes (an error as text, which no caller can
/// match on and which loses its cause), each as `file:line`.
fn string_errors(code: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(at) = code[from..].find("Result<") {
        let start = from + at;
        from = start + "Result<".len();
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        // The arguments up to the matching `>`, and the last one at the top level.
        let (mut depth, mut i, mut args) = (1usize, from, vec![from]);
        while i < bytes.len() && depth > 0 {
            match bytes[i] {
                b'<' | b'(' | b'[' => depth += 1,
                b'>' if i > 0 && bytes[i - 1] == b'-' => {}
                b'>' | b')' | b']' => depth -= 1,
                b',' if depth == 1 => args.push(i + 1),
                _ => {}
            }
            i += 1;
        }
        args.push(i);
        // The last argument written (a trailing comma leaves an empty one after it).
        let written: Vec<&str> = args.windows(2).map(|w| code[w[0]..w[1] - 1].trim()).filter(|a| !a.is_empty()).collect();
        if depth == 0 && written.len() >= 2 && written.last() == Some(&"String") {
            out.push(code[..start].matches('\n').count() + 1);
        }
    }
    out
}

/// Where production code may still give an error as a `String`, and why (none today: every
/// module has a typed error). A new entry needs its argument here, in review.
const STRING_ERRORS_ALLOWED: &[(&str, &str)] = &[];

#[test]
fn production_code_gives_typed_errors_not_strings() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for root in roots() {
        sources(&root, &mut files);
    }
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let shown = file.strip_prefix(top).unwrap_or(&file).display().to_string();
        for line in string_errors(&production(&text)) {
            if !STRING_ERRORS_ALLOWED.iter().any(|(f, _)| *f == shown) {
                found.push(format!("{shown}:{line}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "Result<_, String> in production code (give the module a typed error, thiserror, with the same text):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_string_error_count_sees_what_it_should() {
    assert_eq!(string_errors("fn a() -> Result<u8, String> {}"), [1]);
    assert_eq!(string_errors("fn a() ->\n  Result<\n    Vec<u8>,\n    String,\n  > {}"), [2]);
    assert_eq!(string_errors("fn a() -> Result<HashMap<String, String>, Box<E>> {}"), Vec::<usize>::new());
    assert_eq!(string_errors("fn a(f: fn(u8) -> Result<u8, String>) -> Result<(), E> {}"), [1]);
    assert_eq!(string_errors("type R = std::result::Result<(), String>;"), [1]);
    assert_eq!(string_errors("fn a() -> Result<String, Error> {}"), Vec::<usize>::new());
    assert_eq!(string_errors("fn a() -> MyResult<u8, String> {}"), Vec::<usize>::new());
}

/// `unsafe` is refused by the workspace's lints (Cargo.toml) in every crate but the sandbox's,
/// which takes its own: a crate that does not take the workspace's lints escapes the rule.
#[test]
fn every_crate_but_the_sandbox_takes_the_workspace_lints() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = std::fs::read_to_string(top.join("Cargo.toml")).expect("Cargo.toml");
    assert!(root.contains("[workspace.lints.rust]\nunsafe_code = \"forbid\""), "the workspace forbids unsafe code");
    let mut manifests = vec![top.join("Cargo.toml")];
    manifests.extend(std::fs::read_dir(top.join("crates")).expect("crates/").flatten().map(|e| e.path().join("Cargo.toml")));
    for manifest in manifests {
        let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        let sandbox = manifest.parent().is_some_and(|d| d.ends_with("crates/sandbox"));
        if sandbox {
            assert!(text.contains("unsafe_op_in_unsafe_fn") && text.contains("undocumented_unsafe_blocks"), "{}", manifest.display());
        } else {
            assert!(text.contains("[lints]\nworkspace = true"), "{}: add `[lints] workspace = true`", manifest.display());
        }
    }
}

/// Source comments point only at what a reader of this repository has: its docs, RFCs and specs by
/// name, never a document outside it (the project's working notes are not shipped).
#[test]
fn no_source_comment_cites_a_document_outside_the_repository() {
    let mut files = Vec::new();
    for root in roots() {
        sources(&root, &mut files);
    }
    let outside = ["brief §", "brief, §", "../shared/", "shared/spec", "DESIGN.md", "PEERS.md", "DEPENDENCIES.md"];
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let comment = line.find("//").map(|i| &line[i..]).unwrap_or("");
            if let Some(cite) = outside.iter().find(|c| comment.contains(*c)) {
                found.push(format!("{}:{}: cites {cite:?}", file.display(), n + 1));
            }
        }
    }
    assert!(found.is_empty(), "comments that cite documents outside the repository:\n{}", found.join("\n"));
}
