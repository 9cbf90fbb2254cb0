//! Every key the configuration file accepts is documented in docs/configuration.md: the keys are
//! read from the file model itself (each `#[serde(deny_unknown_fields)]` struct of
//! crates/config, its fields under their `rename`), and each must appear there in code type
//! (`` `key` ``, `` `key = …` ``) or as a table heading (`[key]`, `[[section.key]]`).
//! [`fields_of`] reads the keys of one struct, for the other docs tests.

use crate::harness::*;

/// (file, struct, key) of every key of the file model.
fn keys() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let dir = repo().join("crates/config/src");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("the config sources").flatten().map(|e| e.path()).collect();
    files.sort();
    for file in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "rs")) {
        let text = std::fs::read_to_string(&file).expect("a config source");
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for part in text.split("#[serde(deny_unknown_fields)]").skip(1) {
            let Some(body_at) = part.find('{') else { continue };
            let strukt = part[..body_at].split_whitespace().last().unwrap_or("?").to_string();
            let body = &part[body_at + 1..part.find("\n}").unwrap_or(part.len())];
            let mut attrs: Vec<&str> = Vec::new();
            for line in body.lines().map(str::trim) {
                if line.starts_with("#[serde") {
                    attrs.push(line);
                    continue;
                }
                if line.is_empty() || line.starts_with("//") {
                    continue;
                }
                if let Some(field) = line.strip_prefix("pub ").and_then(|l| l.split(':').next()) {
                    let renamed = attrs.iter().find_map(|a| a.split("rename = \"").nth(1).and_then(|r| r.split('"').next()));
                    if !attrs.iter().any(|a| a.contains("flatten") || a.contains("skip")) {
                        out.push((name.clone(), strukt.clone(), renamed.unwrap_or(field).to_string()));
                    }
                }
                attrs.clear();
            }
        }
    }
    out
}

#[test]
fn every_config_key_is_in_the_configuration_reference() {
    let doc = std::fs::read_to_string(repo().join("docs/configuration.md")).expect("docs/configuration.md");
    let all = keys();
    assert!(all.len() > 80, "the file model was read: {} keys", all.len());
    let documented =
        |k: &str| [format!("`{k}`"), format!("`{k} ="), format!("[{k}]"), format!(".{k}]")].iter().any(|form| doc.contains(form.as_str()));
    let missing: Vec<String> =
        all.iter().filter(|(_, _, k)| !documented(k)).map(|(f, s, k)| format!("{k} ({s} in crates/config/src/{f})")).collect();
    assert!(
        missing.is_empty(),
        "keys the configuration file accepts that docs/configuration.md does not document:\n{}",
        missing.join("\n")
    );
}

/// The fields of struct `name` (wherever in crates/config/src it is defined), each as the
/// configuration file spells it (its serde `rename`, else the field's name) with its Rust type as
/// written; fields serde flattens or skips are left out, as in [`keys`].
pub fn fields_of(name: &str) -> Vec<(String, String)> {
    let dir = repo().join("crates/config/src");
    let open = format!("pub struct {name} {{");
    let mut files: Vec<_> =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten().map(|e| e.path()).collect();
    files.sort();
    let (path, text) = files
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(&p).ok().map(|t| (p, t)))
        .find(|(_, t)| t.contains(&open))
        .unwrap_or_else(|| panic!("{}: no `{open}` in any file", dir.display()));
    let at = text.find(&open).unwrap_or_else(|| panic!("{}: no `{open}`", path.display()));
    let body = &text[at + open.len()..];
    let body = &body[..body.find("\n}").unwrap_or(body.len())];
    let mut out = Vec::new();
    let mut attrs: Vec<&str> = Vec::new();
    for line in body.lines().map(str::trim) {
        if line.starts_with("#[") {
            if line.starts_with("#[serde") {
                attrs.push(line);
            }
            continue;
        }
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        if let Some((field, ty)) = line.strip_prefix("pub ").and_then(|l| l.split_once(':')) {
            let renamed = attrs.iter().find_map(|a| a.split("rename = \"").nth(1).and_then(|r| r.split('"').next()));
            if !attrs.iter().any(|a| a.contains("flatten") || a.contains("skip")) {
                out.push((renamed.unwrap_or(field.trim()).to_string(), ty.trim().trim_end_matches(',').trim().to_string()));
            }
        }
        attrs.clear();
    }
    out
}
