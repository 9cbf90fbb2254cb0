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
    if pattern == "*" {
        return true;
    }
    if pattern.is_ascii() && text.is_ascii() {
        // Each byte is a character: no copy needed.
        return walk(pattern.as_bytes(), text.as_bytes(), b'*', b'?', |a, b| a == b || (fold && a.eq_ignore_ascii_case(&b)));
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    walk(&p, &t, '*', '?', |a, b| a == b || (fold && a.eq_ignore_ascii_case(&b)))
}

fn walk<T: Copy + PartialEq>(p: &[T], t: &[T], any: T, one: T, same: impl Fn(T, T) -> bool) -> bool {
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == one || same(p[pi], t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == any {
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
    p[pi..].iter().all(|&c| c == any)
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
        // `?` is one character, not one byte.
        assert!(matches("n?te", "nоte"));
        assert!(matches("caf?", "café"));
        assert!(!matches("caf??", "café"));
        assert!(matches("*é*", "thé vert"));
    }
}
