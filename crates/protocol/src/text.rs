//! Counted nouns in what the gateway says to people (the CLI, the console, messages to
//! clients): "1 upstream", "2 upstreams", never "1 upstreams".

/// `n` and the noun that agrees with it: `one` for exactly one, `many` otherwise (zero too).
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// [`count`] of a length.
pub fn count_of(n: usize, one: &str, many: &str) -> String {
    count(n as u64, one, many)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_takes_the_singular_and_every_other_number_the_plural() {
        assert_eq!(count_of(1, "upstream", "upstreams"), "1 upstream");
        assert_eq!(count_of(0, "upstream", "upstreams"), "0 upstreams");
        assert_eq!(count_of(2, "entry", "entries"), "2 entries");
        assert_eq!(count(1u64, "call", "calls"), "1 call");
    }
}
