//! Markdown as the docs tests read it: the headings outside fenced blocks, the section under a
//! heading (up to the next heading of the same or a higher level), the prose of a text without its
//! fenced blocks, the bodies of its fenced blocks of one language, and the anchor GitHub gives a
//! heading, so that a test can scope what it checks to one part of a page.

/// Each line of `text`, and whether it belongs to a fenced block (its fence lines included).
fn lines_fenced(text: &str) -> Vec<(&str, bool)> {
    let mut out = Vec::new();
    let mut open = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            out.push((line, true));
            open = !open;
        } else {
            out.push((line, open));
        }
    }
    out
}

/// A heading line's level and title: `### Latest run` is (3, "Latest run").
fn heading_of(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|c| *c == '#').count();
    if level == 0 || level > 6 {
        return None;
    }
    line[level..].strip_prefix(' ').map(|title| (level, title.trim()))
}

/// Every heading outside fenced blocks: (level, title as written).
pub fn headings(text: &str) -> Vec<(usize, String)> {
    lines_fenced(text)
        .into_iter()
        .filter(|(_, fenced)| !*fenced)
        .filter_map(|(line, _)| heading_of(line).map(|(level, title)| (level, title.to_string())))
        .collect()
}

/// The section whose heading's title starts with `title`, its heading line included, up to the
/// next heading of the same or a higher level; `None` when no heading has that title.
pub fn section(text: &str, title: &str) -> Option<String> {
    let lines = lines_fenced(text);
    let start = lines.iter().position(|(line, fenced)| !*fenced && heading_of(line).is_some_and(|(_, t)| t.starts_with(title)))?;
    let (level, _) = heading_of(lines[start].0)?;
    let end = lines[start + 1..]
        .iter()
        .position(|(line, fenced)| !*fenced && heading_of(line).is_some_and(|(l, _)| l <= level))
        .map_or(lines.len(), |i| start + 1 + i);
    Some(lines[start..end].iter().map(|(line, _)| *line).collect::<Vec<&str>>().join("\n"))
}

/// `text` without its fenced blocks.
pub fn prose(text: &str) -> String {
    lines_fenced(text).into_iter().filter(|(_, fenced)| !*fenced).map(|(line, _)| line).collect::<Vec<&str>>().join("\n")
}

/// The lines inside the fenced blocks of `text` (not the fences themselves).
pub fn fenced_lines(text: &str) -> Vec<&str> {
    lines_fenced(text).into_iter().filter(|(line, fenced)| *fenced && !line.trim_start().starts_with("```")).map(|(line, _)| line).collect()
}

/// The bodies of the fenced blocks of `text` whose language is `lang`, in order.
pub fn blocks(text: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    // The block being read: whether it is of `lang`, and its body.
    let mut current: Option<(bool, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            match current.take() {
                None => current = Some((trimmed.trim_start_matches('`').trim() == lang, String::new())),
                Some((true, body)) => out.push(body),
                Some((false, _)) => {}
            }
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

/// The anchor GitHub makes of a heading: lower case, spaces as `-`, punctuation other than `-`
/// and `_` dropped (`` `[[rate_limit]]` `` is `rate_limit`, "Latest run" is `latest-run`).
pub fn slug(title: &str) -> String {
    title
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}
