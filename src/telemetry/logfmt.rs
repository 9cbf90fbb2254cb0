//! The fields of a text log line, written so that a logfmt reader (Loki, Vector, go-logfmt) reads
//! exactly the fields that were logged: a value recorded as a string (every client- or
//! upstream-chosen value the gateway logs: an audit line's caller, item and arguments, a request's
//! `x-request-id`) is written bare when it is a plain word, and quoted otherwise (empty, or with a
//! space, `=`, `"`, `\` or a control character), with `"` and `\` escaped and control characters
//! spelt out. So `item=nope upstream=evil` chosen as a tool name is one value, never two fields.
//! Other values (numbers, `%`-formatted values the gateway builds) are written as before.

use std::fmt::{self, Write};
use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::Writer;

/// The text log's field formatter (`fmt::layer().fmt_fields(Logfmt)`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Logfmt;

impl<'a> MakeVisitor<Writer<'a>> for Logfmt {
    type Visitor = Fields<'a>;

    fn make_visitor(&self, target: Writer<'a>) -> Fields<'a> {
        Fields { writer: target, empty: true, result: Ok(()) }
    }
}

/// Writes one event's or span's fields.
pub struct Fields<'a> {
    writer: Writer<'a>,
    empty: bool,
    result: fmt::Result,
}

impl Fields<'_> {
    /// The separator before a field (none before the first).
    fn separate(&mut self) -> fmt::Result {
        if self.empty {
            self.empty = false;
            Ok(())
        } else {
            self.writer.write_char(' ')
        }
    }

    fn name(field: &Field) -> &str {
        field.name().strip_prefix("r#").unwrap_or(field.name())
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        self.result = self.separate().and_then(|()| {
            if field.name() == "message" {
                self.writer.write_str(value)
            } else {
                write!(self.writer, "{}=", Self::name(field)).and_then(|()| quoted(&mut self.writer, value))
            }
        });
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() || field.name().starts_with("log.") {
            return;
        }
        self.result = self.separate().and_then(|()| {
            if field.name() == "message" {
                write!(self.writer, "{value:?}")
            } else {
                write!(self.writer, "{}={value:?}", Self::name(field))
            }
        });
    }
}

impl VisitOutput<fmt::Result> for Fields<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for Fields<'_> {
    fn writer(&mut self) -> &mut dyn Write {
        &mut self.writer
    }
}

/// Whether `value` must be quoted to be read back as one value.
fn needs_quotes(value: &str) -> bool {
    value.is_empty() || value.chars().any(|c| c <= ' ' || c == '=' || c == '"' || c == '\\' || c.is_control() || c.is_whitespace())
}

/// Writes `value` as one logfmt value: bare when it is a plain word, else quoted and escaped.
pub fn quoted(out: &mut impl Write, value: &str) -> fmt::Result {
    if !needs_quotes(value) {
        return out.write_str(value);
    }
    out.write_char('"')?;
    for c in value.chars() {
        match c {
            '"' => out.write_str("\\\"")?,
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            c if c.is_control() => write!(out, "\\u{{{:x}}}", c as u32)?,
            c => out.write_char(c)?,
        }
    }
    out.write_char('"')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(v: &str) -> String {
        let mut s = String::new();
        quoted(&mut s, v).unwrap();
        s
    }

    #[test]
    fn plain_words_stay_bare_and_everything_else_is_one_quoted_value() {
        assert_eq!(q("alpha__echo"), "alpha__echo");
        assert_eq!(q("vault+mem://secret/key"), "vault+mem://secret/key");
        assert_eq!(q(""), "\"\"");
        assert_eq!(q("nope upstream=evil"), "\"nope upstream=evil\"");
        assert_eq!(q("a=b"), "\"a=b\"");
        assert_eq!(q(r#"x" caller=admin \"#), r#""x\" caller=admin \\""#);
        assert_eq!(q("a\nb\u{1b}"), "\"a\\nb\\u{1b}\"");
        assert_eq!(q("a\u{a0}b"), "\"a\u{a0}b\"", "a non-ASCII space is quoted too");
    }
}
