//! Glob patterns for policy rules: `*` matches any run of characters (the separator included),
//! `?` exactly one; everything else matches itself. Matching is linear-time backtracking over
//! the last `*`, so hostile names and patterns cannot make it slow.

pub fn matches(pattern: &str, text: &str) -> bool {
    matches_with(pattern, text, false)
}

/// [`matches`] with ASCII letters compared regardless of case.
pub fn matches_ignoring_case(pattern: &str, text: &str) -> bool {
    matches_with(pattern, text, true)
}

fn matches_with(pattern: &str, text: &str, fold: bool) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let same = |a: char, b: char| a == b || (fold && a.eq_ignore_ascii_case(&b));
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || same(p[pi], t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::{matches, matches_ignoring_case};

    #[test]
    fn globs() {
        assert!(matches("calc__*", "calc__add"));
        assert!(!matches("calc__*", "text__add"));
        assert!(matches("*__delete_*", "github__delete_repo"));
        assert!(!matches("*__delete_*", "github__deleted"));
        assert!(matches("*", ""));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
        assert!(matches("exact", "exact"));
        assert!(!matches("exact", "exactly"));
        assert!(matches("*a*b*c*", "xxaxxbxxcxx"));
        assert!(!matches(&"*a".repeat(50), &"a".repeat(40)));
        assert!(!matches("mem://secret/*", "mem://SECRET/key"));
        assert!(matches_ignoring_case("mem://secret/*", "MEM://SeCreT/key"));
    }
}
