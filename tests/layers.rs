//! The layering, checked: every unit (a top-level module of `src/`, or a crate under `crates/` as
//! a whole, named by its folder) belongs to one layer (the table below, drawn in
//! docs/architecture.md), and production code may name only units of its own layer or below, with
//! no cycle among them. The crates' dependencies make the compiler refuse most upward imports;
//! this check covers what shares the `mcpgate` crate (the core and the edges) and that crate's
//! imports of the others (`mcpgate_x::…`, and `crate::x` where `src/lib.rs` re-exports a crate or
//! its module as `x`). Within a crate, the folder check keeps the modules of each folder, the
//! crate's root too, free of rings. It reads the sources (all but the items under `#[cfg(test)]`,
//! and no `tests.rs` or `tests/` file). A new module of `src/` or a new crate needs a layer here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[path = "layers/folders.rs"]
mod folders;

/// Bottom to top. A unit may import its own layer and the layers below.
const LAYERS: &[(&str, &[&str])] = &[
    ("1 protocol: the wire model and runtime helpers", &["protocol"]),
    ("2 pure model: names, merge, views, decisions, sealed tokens, REST descriptions", &["model"]),
    ("3 config: the file model and its validation", &["config"]),
    (
        "4 net and processes: the HTTP client, PEM/TLS, Redis, the state database; the sandbox, the supervisor, code mode's interpreter",
        &["net", "store", "sandbox", "coderun"],
    ),
    ("5 upstreams, authentication, per-user identity, telemetry", &["upstream", "auth", "identity", "telemetry"]),
    ("6 core: gateway state, the pipeline, the change hub, limits, audit", &["audit", "usage", "hub", "gateway", "dispatch", "discovery"]),
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

/// A unit a file names: a top-level module of its own crate (`crate::x`, or `super::…` up to the
/// root), or a crate of the workspace by its library name (`mcpgate_x::…`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Local(String),
    Crate(String),
}

/// What a file names, with the line of each first mention.
fn references(module: &[String], code: &str) -> BTreeMap<Target, usize> {
    let mut out = BTreeMap::new();
    for (n, line) in code.lines().enumerate() {
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < line.len() {
            let rest = &line[i..];
            let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
            let target = if !boundary {
                None
            } else if let Some(r) = rest.strip_prefix("crate::") {
                ident(r).map(Target::Local)
            } else if rest.starts_with("super::") {
                let mut depth = 0;
                let mut r = rest;
                while let Some(next) = r.strip_prefix("super::") {
                    depth += 1;
                    r = next;
                }
                // `super` from `a::b::c` is `a::b`; reaching the crate root names the next segment.
                if depth >= module.len() { ident(r) } else { Some(module[0].clone()) }.map(Target::Local)
            } else if rest.starts_with("mcpgate_") {
                ident(rest).filter(|c| rest[c.len()..].starts_with("::")).map(Target::Crate)
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

/// The unit a source root is as a whole: a crate's folder name for `crates/x/src`, else `None`.
fn crate_of(src: &Path) -> Option<String> {
    let dir = src.parent()?;
    dir.parent().is_some_and(|p| p.ends_with("crates")).then(|| dir.file_name()?.to_str().map(str::to_string)).flatten()
}

/// The crates under `crates/`: library name (`mcpgate_net`, from the package's) → unit (`net`).
fn crates() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for src in roots() {
        let Some(unit) = crate_of(&src) else { continue };
        let manifest = src.with_file_name("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        let name = text.lines().find_map(|l| l.strip_prefix("name = ")).unwrap_or_else(|| panic!("{}: no name", manifest.display()));
        out.insert(name.trim_matches('"').replace('-', "_"), unit);
    }
    out
}

/// The names a crate root's `use` items give other crates or their items (`pub use mcpgate_config
/// as config;`, `pub use mcpgate_model::{catalog, policy};`): name → the crate's unit.
fn reexports(root: &str, crates: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for item in root.split(';').map(str::trim) {
        let Some(path) = item.strip_prefix("pub use ").or_else(|| item.strip_prefix("use ")) else { continue };
        let Some(unit) = path.split([':', ' ']).next().and_then(|c| crates.get(c)) else { continue };
        let names: Vec<&str> = match path.split_once("::{") {
            Some((_, group)) => group.trim_end_matches('}').split(',').collect(),
            None => vec![path],
        };
        for name in names {
            let name = name.rsplit(" as ").next().unwrap_or(name).rsplit("::").next().unwrap_or(name).trim();
            if !name.is_empty() && name != "self" {
                out.insert(name.to_string(), unit.clone());
            }
        }
    }
    out
}

/// The unit a file of `krate` (`None`: the `mcpgate` crate) reaches with `target`, or `None` for
/// its own crate's insides (a crate is one unit) and for what is not the workspace's.
fn unit(krate: Option<&str>, target: &Target, crates: &BTreeMap<String, String>, reexports: &BTreeMap<String, String>) -> Option<String> {
    match (target, krate) {
        (Target::Crate(lib), _) => crates.get(lib).cloned(),
        (Target::Local(_), Some(_)) => None,
        (Target::Local(m), None) => Some(reexports.get(m).unwrap_or(m).clone()),
    }
}

/// Every import between units of the source root `src`: (from, to) → where it first happens.
fn edges(src: &Path, crates: &BTreeMap<String, String>, reexports: &BTreeMap<String, String>) -> BTreeMap<(String, String), String> {
    let krate = crate_of(src);
    let mut files = Vec::new();
    sources(src, &mut files);
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap_or(&file);
        let shown = file.strip_prefix(top).unwrap_or(&file).display().to_string();
        let module = module_path(rel);
        let me = match (&krate, module.first()) {
            (Some(k), _) => k.clone(),
            (None, Some(m)) if m != "main" && m != "lib" => m.clone(),
            _ => continue,
        };
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (target, line) in references(&module, &production(&text)) {
            if let Some(to) = unit(krate.as_deref(), &target, crates, reexports).filter(|t| *t != me) {
                out.entry((me.clone(), to)).or_insert_with(|| format!("{shown}:{line}"));
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
    for ring in rings(&graph) {
        let (last, first) = (ring[ring.len() - 2], ring[ring.len() - 1]);
        out.push(format!("cycle: {} (first import: {})", ring.join(" -> "), edges[&(last.to_string(), first.to_string())]));
    }
    out.sort();
    out.dedup();
    out
}

/// Every ring of `graph` (a module, the modules it reaches back to it through, and itself again),
/// once each, written from its least member.
fn rings<'a>(graph: &BTreeMap<&'a str, Vec<&'a str>>) -> BTreeSet<Vec<&'a str>> {
    let mut out = BTreeSet::new();
    for start in graph.keys() {
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(start, vec![start])];
        let mut seen = BTreeSet::new();
        while let Some((node, path)) = stack.pop() {
            for next in graph.get(node).into_iter().flatten() {
                if next == start {
                    let least = path.iter().min().copied().unwrap_or(start);
                    let at = path.iter().position(|m| *m == least).unwrap_or(0);
                    let mut ring: Vec<&str> = path[at..].iter().chain(&path[..at]).copied().collect();
                    ring.push(least);
                    out.insert(ring);
                } else if seen.insert(*next) {
                    let mut p = path.clone();
                    p.push(next);
                    stack.push((next, p));
                }
            }
        }
    }
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
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crates = crates();
    let lib = std::fs::read_to_string(top.join("src/lib.rs")).expect("src/lib.rs");
    let reexports = reexports(&production(&lib), &crates);
    let mine = top_level_modules(&top.join("src"));
    for m in mine.iter().chain(crates.values()) {
        assert!(layer_of(m).is_some(), "{m}: a top-level module of src/ or a crate without a layer: add it to LAYERS in tests/layers.rs");
    }
    let clash: Vec<&String> = mine.iter().filter(|m| crates.values().any(|c| c == *m)).collect();
    assert!(clash.is_empty(), "modules of src/ named like a crate under crates/ (one unit each): {clash:?}");
    let known: BTreeSet<String> = mine.iter().chain(crates.values()).cloned().collect();
    let all: BTreeMap<(String, String), String> = roots().iter().flat_map(|r| edges(r, &crates, &reexports)).collect();
    assert!(all.keys().any(|(f, t)| mine.contains(f) && t == "config"), "the check no longer sees src/ use the config crate");
    let found = violations(&all, &known);
    assert!(found.is_empty(), "the layering is broken:\n{}", found.join("\n"));
}

#[test]
fn the_check_sees_upward_imports_super_paths_and_cycles() {
    let module = |p: &str| module_path(Path::new(p));
    assert_eq!(module("a/b/mod.rs"), ["a", "b"]);
    assert_eq!(module("a.rs"), ["a"]);
    let (local, krate) = (|s: &str| Target::Local(s.to_string()), |s: &str| Target::Crate(s.to_string()));
    let code = production(
        "use crate::gateway::Gateway;\nlet x = super::super::hub::Hub;\n// crate::cli in a comment\n#[cfg(test)]\nuse crate::server;",
    );
    let refs = references(&module("edge/era.rs"), &code);
    assert_eq!(refs.keys().collect::<Vec<_>>(), [&local("gateway"), &local("hub")]);
    // Production code after a test module is read too; the test module is not.
    let code = production(
        "#[cfg(test)]\nmod tests;\nuse crate::audit;\n#[cfg(test)]\nmod more {\n    use crate::cli;\n    const S: &str = \"}\";\n}\nuse crate::usage;",
    );
    let refs = references(&module("edge/era.rs"), &code);
    assert_eq!(refs, BTreeMap::from([(local("audit"), 3), (local("usage"), 9)]), "{code}");
    assert_eq!(references(&module("catalog/merge.rs"), "use super::uris;").keys().collect::<Vec<_>>(), [&local("catalog")]);
    assert!(references(&module("a.rs"), "mycrate::gateway").is_empty(), "only paths that start at `crate`");
    let refs = references(&module("a.rs"), "use mcpgate_store::Db;\nlet m = \"mcpgate_calls_total\"; mcpgate_config::Config::default()");
    assert_eq!(refs, BTreeMap::from([(krate("mcpgate_config"), 2), (krate("mcpgate_store"), 1)]));
    // The top crate's `crate::x` names the crate `src/lib.rs` re-exports as `x`; a crate's own
    // `crate::` paths stay inside it, its one unit.
    let crates: BTreeMap<String, String> =
        [("mcpgate_config", "config"), ("mcpgate_model", "model")].iter().map(|(l, u)| (l.to_string(), u.to_string())).collect();
    let lib = production(
        "pub mod gateway;\n// pub use mcpgate_net as net;\npub use mcpgate_config as config;\npub use mcpgate_model::{catalog, policy as rules};\nuse std::fmt;",
    );
    let re = reexports(&lib, &crates);
    let names = |m: &[(&str, &str)]| m.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<BTreeMap<_, _>>();
    assert_eq!(re, names(&[("catalog", "model"), ("config", "config"), ("rules", "model")]));
    assert_eq!(unit(None, &local("catalog"), &crates, &re).as_deref(), Some("model"));
    assert_eq!(unit(None, &local("gateway"), &crates, &re).as_deref(), Some("gateway"));
    assert_eq!(unit(Some("config"), &local("catalog"), &crates, &re), None, "a crate's insides are its own");
    assert_eq!(unit(Some("config"), &krate("mcpgate_model"), &crates, &re).as_deref(), Some("model"));
    assert_eq!(unit(None, &krate("mcpgate_other"), &crates, &re), None);
    assert_eq!(crate_of(Path::new("/w/crates/net/src")).as_deref(), Some("net"));
    assert_eq!(crate_of(Path::new("/w/src")), None);
    let known: BTreeSet<String> =
        ["protocol", "model", "config", "gateway", "audit", "usage", "hub"].iter().map(|s| s.to_string()).collect();
    let edge = |pairs: &[(&str, &str, &str)]| pairs.iter().map(|(a, b, at)| ((a.to_string(), b.to_string()), at.to_string())).collect();
    let found = violations(&edge(&[("protocol", "gateway", "crates/protocol/src/meta.rs:1")]), &known);
    assert!(found.len() == 1 && found[0].contains("crates/protocol/src/meta.rs:1") && found[0].contains("above it"), "{found:?}");
    let found = violations(&edge(&[("model", "config", "crates/model/src/token.rs:4")]), &known);
    assert!(found.len() == 1 && found[0].contains("`model` (layer 2") && found[0].contains("above it"), "{found:?}");
    let ring = [("audit", "usage", "src/audit.rs:5"), ("usage", "hub", "src/usage.rs:5"), ("hub", "audit", "src/hub.rs:3")];
    assert!(violations(&edge(&ring[..2]), &known).is_empty(), "no cycle yet: {:?}", violations(&edge(&ring[..2]), &known));
    let found = violations(&edge(&ring), &known);
    assert!(found.iter().any(|f| f.starts_with("cycle: ") && f.contains("src/hub.rs:3")), "a cycle within one layer: {found:?}");
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

/// One module style: a module with children is `x.rs` beside its folder `x/` (clippy's
/// `mod_module_files`, denied in Cargo.toml, says so too), never `x/mod.rs`.
#[test]
fn no_module_is_a_mod_rs() {
    let mut files = Vec::new();
    for root in roots() {
        sources(&root, &mut files);
    }
    let found: Vec<String> =
        files.iter().filter(|f| f.file_name().is_some_and(|n| n == "mod.rs")).map(|f| f.display().to_string()).collect();
    assert!(found.is_empty(), "write these as `x.rs` beside their folder `x/`:\n{}", found.join("\n"));
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
