//! Gateway names for upstream items: `<prefix><sep><name>` (or the bare name when an upstream's
//! prefix is empty, or the name a `rename` gives), fitted to the configured name policy (a
//! charset profile for strict model APIs and a maximum length, reached by a stable, readable
//! shortening), and the tool-name rules every served name must meet (1–128 characters of
//! `[A-Za-z0-9_.-]`).

pub const MAX_TOOL_NAME: usize = 128;
/// The shortest `max_name_length` allowed: room for a readable head and the hash.
pub const MIN_NAME_LENGTH: usize = 24;
/// Hex digits of the hash a shortened name ends with (48 bits: collisions among even a million
/// long names are improbable, and one that happens is refused, never merged).
const HASH_DIGITS: usize = 12;

/// The characters served names may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Charset {
    /// The MCP tool-name rules: `A-Z a-z 0-9 _ . -`.
    #[default]
    Mcp,
    /// No `.` either (many model APIs refuse it): each `.` becomes `_`.
    Strict,
}

/// How gateway names are made from upstream names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePolicy {
    pub separator: String,
    pub max_length: usize,
    pub charset: Charset,
}

impl Default for NamePolicy {
    fn default() -> Self {
        NamePolicy { separator: "__".into(), max_length: MAX_TOOL_NAME, charset: Charset::Mcp }
    }
}

impl NamePolicy {
    /// The served name of an upstream's tool or prompt: its `rename` if it has one, else the
    /// prefixed name, in the charset, shortened to the maximum length.
    pub fn gateway_name(&self, prefix: &str, original: &str, rename: Option<&str>) -> String {
        let full = rename.map_or_else(|| join(prefix, &self.separator, original), str::to_string);
        let full = match self.charset {
            Charset::Mcp => full,
            Charset::Strict => full.replace('.', "_"),
        };
        shorten(&full, self.max_length)
    }
}

/// `name` if it fits `max` bytes, else its head and `_` and a hash of the whole name: stable
/// (the same name always gets the same short form), readable (it starts like the name) and
/// distinct for distinct names.
pub fn shorten(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_string();
    }
    let hash: String = crate::toolbox::sha256_hex(name.as_bytes())[..HASH_DIGITS].to_string();
    let mut keep = max.saturating_sub(HASH_DIGITS + 1);
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}_{hash}", &name[..keep])
}

/// The gateway name of an upstream item.
pub fn join(prefix: &str, sep: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_string() } else { format!("{prefix}{sep}{name}") }
}

/// Why a name may not be served, or `None` when it is fine.
pub fn tool_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the name is empty".into());
    }
    if name.len() > MAX_TOOL_NAME {
        return Some(format!("the name is {} characters long, over the limit of {MAX_TOOL_NAME}", name.len()));
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || "_.-".contains(*c))) {
        return Some(format!("the name contains {bad:?}; only A-Z a-z 0-9 _ . - are allowed"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_and_checks_names() {
        assert_eq!(join("calc", "__", "add"), "calc__add");
        assert_eq!(join("", "__", "add"), "add");
        assert_eq!(tool_name_problem("calc__add"), None);
        assert!(tool_name_problem("has space").is_some());
        assert!(tool_name_problem(&"x".repeat(129)).is_some());
        assert!(tool_name_problem("").is_some());
        assert_eq!(tool_name_problem(&"x".repeat(128)), None);
    }

    #[test]
    fn policies_rename_map_the_charset_and_shorten() {
        let p = NamePolicy { separator: "__".into(), max_length: 64, charset: Charset::Strict };
        assert_eq!(p.gateway_name("gh", "repo.list", None), "gh__repo_list");
        assert_eq!(p.gateway_name("gh", "repo.list", Some("repos")), "repos");
        let long = format!("gh__{}", "create_or_update_".repeat(6));
        let short = p.gateway_name("gh", &long[4..], None);
        assert_eq!(short.len(), 64);
        assert!(short.starts_with("gh__create_or_update_"), "readable: {short}");
        assert_eq!(short, p.gateway_name("gh", &long[4..], None), "stable");
        assert_eq!(tool_name_problem(&short), None);
        assert_eq!(shorten("short", 64), "short");
    }

    #[test]
    fn shortening_never_collides_over_ten_thousand_long_names() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000 {
            // Long names that differ only past the cut, the hard case.
            let name = format!("upstream_with_a_long_prefix__{}_{i}", "get_the_full_details_of_".repeat(4));
            let short = shorten(&name, 64);
            assert!(short.len() <= 64 && tool_name_problem(&short).is_none(), "{short}");
            assert!(seen.insert(short.clone()), "collision: {short}");
        }
    }
}
