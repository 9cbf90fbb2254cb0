//! The shipped configuration files point to documentation that exists: every comment of
//! `gateway.toml` (and of the `.toml` files under deploy/) that names a Markdown file, such as
//! `README.md` or `docs/configuration.md`, names one in the repository, and a quoted title right
//! after the name (`docs/configuration.md ("Configuration reference")`) is a heading of that file.
//! And the configuration reference shows the shipped `gateway.toml` as it is.

use super::markdown::headings;
use crate::harness::*;
use std::path::PathBuf;

/// `gateway.toml` and every `.toml` file under deploy/.
fn shipped() -> Vec<PathBuf> {
    let mut files = vec![repo().join("gateway.toml")];
    super::files_with(&repo().join("deploy"), "toml", &mut files);
    files
}

/// Where the comment of a TOML line starts: a `#` outside quoted strings.
fn comment_start(line: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some('"'), '\\') if !escaped => {
                escaped = true;
                continue;
            }
            (Some(q), _) if c == q && !escaped => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') => return Some(i),
            _ => {}
        }
        escaped = false;
    }
    None
}

/// The comments of a TOML text, with the line each starts on; consecutive whole-line comments
/// are one comment (a sentence may wrap).
fn comments(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut continuing = false;
    for (i, line) in text.lines().enumerate() {
        let Some(at) = comment_start(line) else {
            continuing = false;
            continue;
        };
        let words = line[at..].trim_start_matches('#').trim();
        let whole_line = line[..at].trim().is_empty();
        if continuing && whole_line {
            if let Some((_, comment)) = out.last_mut() {
                comment.push(' ');
                comment.push_str(words);
            }
        } else {
            out.push((i + 1, words.to_string()));
        }
        continuing = whole_line;
    }
    out
}

/// The Markdown files a comment names, each with the title quoted right after it, if any:
/// `docs/configuration.md ("Configuration reference")` is ("docs/configuration.md",
/// Some("Configuration reference")).
fn references(comment: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for (at, _) in comment.match_indices(".md") {
        let end = at + ".md".len();
        if comment[end..].starts_with(|c: char| c.is_alphanumeric()) {
            continue;
        }
        let start = comment[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_alphanumeric() || matches!(*c, '/' | '-' | '_' | '.')))
            .map_or(0, |(i, c)| i + c.len_utf8());
        if start == at {
            continue;
        }
        let rest = comment[end..].trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '(' | ',' | ':'));
        let title = rest.strip_prefix('"').and_then(|r| r.split_once('"')).map(|(t, _)| t.to_string());
        out.push((comment[start..end].to_string(), title));
    }
    out
}

#[test]
fn the_shipped_configuration_points_to_documentation_that_exists() {
    let mut checked = 0;
    for file in shipped() {
        let name = file.strip_prefix(repo()).unwrap_or(&file).display().to_string();
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (line, comment) in comments(&text) {
            for (doc, title) in references(&comment) {
                let path = repo().join(&doc);
                let body = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{name}:{line}: the comment names {doc}, which cannot be read ({e}): {comment}"));
                if let Some(title) = title {
                    let titles: Vec<String> = headings(&body).into_iter().map(|(_, t)| t.replace('`', "")).collect();
                    assert!(
                        titles.iter().any(|t| *t == title.replace('`', "")),
                        "{name}:{line}: the comment names \"{title}\" in {doc}, which has no such heading: {comment}\n\
                         its headings: {titles:?}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 2, "the shipped gateway.toml names the configuration reference and the isolation page: {checked} references found");
}

#[test]
fn the_configuration_reference_shows_the_shipped_file() {
    let doc = std::fs::read_to_string(repo().join("docs/configuration.md")).expect("docs/configuration.md");
    let shipped = std::fs::read_to_string(repo().join("gateway.toml")).expect("gateway.toml");
    let intro = "The shipped file:";
    let at = doc.find(intro).unwrap_or_else(|| panic!("docs/configuration.md introduces the shipped file with {intro:?}"));
    let shown = super::markdown::blocks(&doc[at..], "toml").into_iter().next().expect("a ```toml block after it");
    assert_eq!(shown.trim_end(), shipped.trim_end(), "docs/configuration.md: the block after {intro:?} is not the shipped gateway.toml");
}
