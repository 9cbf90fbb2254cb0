//! The fields of a text log line, written so that a logfmt reader (Loki, Vector, go-logfmt) reads
//! exactly the fields that were logged: a value recorded as a string (every client- or
//! upstream-chosen value the gateway logs: an audit line's caller, item and arguments, a request's
//! `x-request-id`) is written bare when it is a plain word, and quoted otherwise (empty, or with a
//! space, `=`, `"`, `\` or a control character), with `"` and `\` escaped and control characters
//! spelt out. So `item=nope upstream=evil` chosen as a tool name is one value, never two fields.
//! Formatted values (`%error`, `?list`) follow the same rule, so every field of every text line
//! reads back as written; the message itself is written as it is.

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

    /// A value that is one plain word whatever it is (a number, a boolean).
    fn plain(&mut self, field: &Field, value: impl fmt::Display) {
        if self.result.is_err() || field.name().starts_with("log.") {
            return;
        }
        self.result = self.separate().and_then(|()| {
            if field.name() == "message" { write!(self.writer, "{value}") } else { write!(self.writer, "{}={value}", Self::name(field)) }
        });
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

    // Numbers and booleans are one plain word: written as they are, without the copy a
    // formatted value takes to learn whether it needs quotes (an audit line's `duration_ms`).
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.plain(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.plain(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.plain(field, value);
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
                return write!(self.writer, "{value:?}");
            }
            // A formatted value (`%error`, `?list`) may hold spaces and `=` too: one value all the
            // same. One that is already a quoted string (`?name` of a string) stays as it is.
            let text = format!("{value:?}");
            write!(self.writer, "{}=", Self::name(field))?;
            if is_quoted(&text) { self.writer.write_str(&text) } else { quoted(&mut self.writer, &text) }
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

/// Whether `text` is one whole quoted string (as `Debug` writes a string): `"`, then characters
/// with every `"` and `\` escaped, then `"`.
fn is_quoted(text: &str) -> bool {
    let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else { return false };
    let mut escaped = false;
    for c in inner.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return false,
            c if c.is_control() => return false,
            _ => {}
        }
    }
    !escaped
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

    #[test]
    fn debug_strings_are_already_one_value() {
        assert!(is_quoted(&format!("{:?}", "a b=c \" \\ \n")));
        assert!(!is_quoted(r#""a" b="c""#));
        assert!(!is_quoted(r#""a\""#));
        assert!(!is_quoted("plain"));
        assert!(!is_quoted("\""));
    }

    /// Every field of a real event, formatted by the subscriber, reads back as one value.
    #[test]
    fn every_field_of_an_event_is_one_value() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let out = sink.clone();
        let subscriber =
            tracing_subscriber::fmt().fmt_fields(Logfmt).with_ansi(false).without_time().with_writer(move || sink.clone()).finish();
        tracing::subscriber::with_default(subscriber, || {
            let (name, error) = ("nope upstream=evil", std::io::Error::other("refused: caller=admin"));
            tracing::info!(item = name, error = %error, list = ?["a b"], n = 3, plain = "ok", "audit");
        });
        let line = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(line.contains(r#"audit item="nope upstream=evil" error="refused: caller=admin" list="[\"a b\"]" n=3 plain=ok"#), "{line}");
    }
}
