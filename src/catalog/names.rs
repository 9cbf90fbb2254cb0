//! Gateway names for upstream items: `<prefix><sep><name>`, or the bare name when an upstream's
//! prefix is empty, and the tool-name rules every served name must meet (1–128 characters of
//! `[A-Za-z0-9_.-]`).

pub const MAX_TOOL_NAME: usize = 128;

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
}
