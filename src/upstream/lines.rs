//! Reading a child's stdout and stderr as bytes, one line at a time, whatever it writes: a line
//! that is not UTF-8 or not JSON is the reader's caller's business (it logs and skips it), and a
//! line longer than the limit is skipped up to its end and reported as [`Line::TooLong`], so one
//! bad line never ends the reader while the child lives on. Memory is bounded by the limit.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// One line, without its `\n` (and without a `\r` before it).
    Full(Bytes),
    /// A line longer than the limit was skipped; how many bytes it had at least.
    TooLong(usize),
}

pub struct LineReader<R> {
    inner: R,
    buf: BytesMut,
    max: usize,
    /// Bytes of an over-long line skipped so far (0: not skipping).
    skipping: usize,
    /// How much of `buf` is known to hold no `\n`.
    scanned: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(inner: R, max: usize) -> Self {
        LineReader { inner, buf: BytesMut::with_capacity(8 * 1024), max: max.max(1), skipping: 0, scanned: 0 }
    }

    /// The next line; `None` at the end of the input.
    pub async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            if let Some(found) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
                let end = self.scanned + found;
                let mut line = self.buf.split_to(end + 1);
                self.scanned = 0;
                line.truncate(end);
                if line.last() == Some(&b'\r') {
                    line.truncate(end - 1);
                }
                if self.skipping > 0 {
                    let skipped = self.skipping + line.len();
                    self.skipping = 0;
                    return Ok(Some(Line::TooLong(skipped)));
                }
                if line.len() > self.max {
                    return Ok(Some(Line::TooLong(line.len())));
                }
                return Ok(Some(Line::Full(line.freeze())));
            }
            self.scanned = self.buf.len();
            if self.buf.len() > self.max {
                // Too long already: drop what we have and skip to the end of the line.
                self.skipping += self.buf.len();
                self.buf.clear();
                self.scanned = 0;
            }
            if self.buf.capacity() - self.buf.len() < 4096 {
                self.buf.reserve(8 * 1024);
            }
            let n = self.inner.read_buf(&mut self.buf).await?;
            if n == 0 {
                if self.skipping > 0 {
                    let skipped = self.skipping + self.buf.len();
                    self.skipping = 0;
                    self.buf.clear();
                    return Ok(Some(Line::TooLong(skipped)));
                }
                if self.buf.is_empty() {
                    return Ok(None);
                }
                self.scanned = 0;
                let rest = self.buf.split();
                return Ok(Some(if rest.len() > self.max { Line::TooLong(rest.len()) } else { Line::Full(rest.freeze()) }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], max: usize) -> Vec<Line> {
        let mut r = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(l) = r.next_line().await.unwrap() {
            out.push(l);
        }
        out
    }

    #[tokio::test]
    async fn bad_and_long_lines_are_reported_and_reading_goes_on() {
        let mut input = b"{\"a\":1}\r\n\xff\xfe binary\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100_000));
        input.extend_from_slice(b"\n{\"b\":2}\nlast");
        let lines = all(&input, 1000).await;
        assert_eq!(lines[0], Line::Full(Bytes::from_static(b"{\"a\":1}")));
        assert_eq!(lines[1], Line::Full(Bytes::from_static(b"\xff\xfe binary")), "not UTF-8 is still a line");
        assert!(matches!(lines[2], Line::TooLong(n) if n >= 100_000), "{:?}", lines[2]);
        assert_eq!(lines[3], Line::Full(Bytes::from_static(b"{\"b\":2}")));
        assert_eq!(lines[4], Line::Full(Bytes::from_static(b"last")));
        assert_eq!(lines.len(), 5);
    }
}
