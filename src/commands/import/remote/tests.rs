//! Unit tests of one remote as an upstream: header templates and plain text.

use super::*;

#[test]
fn a_header_template_gives_a_prefix_only_when_its_variable_ends_it() {
    assert_eq!(template_prefix("Bearer {token}"), (Some("Bearer "), false));
    assert_eq!(template_prefix("{key}"), (Some(""), false));
    assert_eq!(template_prefix("plain"), (None, false));
    assert_eq!(template_prefix("{user}:{password}"), (None, true), "two variables: the whole value");
    assert_eq!(template_prefix("Token {t}; v=2"), (None, true), "text after the variable: the whole value");
    assert_eq!(template_prefix("Bearer\n{t}"), (None, true), "no control character in a prefix");
}

#[test]
fn plain_text_is_one_line_without_controls() {
    assert_eq!(plain("a\nb\r\n[[x]]\u{1b}[0m\u{2028}\u{202e}c"), "a b  [[x]] [0m  c");
    assert_eq!(shown(&"é".repeat(200)).chars().count(), 120);
}
