//! A bounded Server-Sent Events decoder for upstream response streams: it yields the `data` of
//! each event (multi-line data joined with `\n`), remembers the last event id and the `retry`
//! delay (what resuming a closed stream needs), ignores comments and other fields, accepts
//! LF, CRLF and CR line endings, and refuses any line or event larger than its limit, so a
//! misbehaving upstream cannot make the gateway buffer without bound.

use bytes::{Buf, BytesMut};

#[derive(Debug, PartialEq, Eq)]
pub struct TooLarge(pub usize);

pub struct SseDecoder {
    buf: BytesMut,
    data: Vec<u8>,
    has_data: bool,
    max: usize,
    skip_lf: bool,
    /// How much of `buf` is known to hold no line break (so it is not scanned again).
    scanned: usize,
    /// The last event id (committed when an event is dispatched, as the SSE rules say), and the
    /// id buffer of the event being read.
    last_id: Option<String>,
    id_buffer: Option<String>,
    retry: Option<u64>,
    /// Events dispatched so far.
    dispatched: u64,
}

impl SseDecoder {
    pub fn new(max_event_bytes: usize) -> Self {
        SseDecoder {
            buf: BytesMut::new(),
            data: Vec::new(),
            has_data: false,
            max: max_event_bytes,
            skip_lf: false,
            scanned: 0,
            last_id: None,
            id_buffer: None,
            retry: None,
            dispatched: 0,
        }
    }

    /// A decoder for a resumed stream: it starts from what `previous` learnt (the last event id
    /// and the retry delay hold until the new stream sets them).
    pub fn resumed(previous: &SseDecoder) -> Self {
        SseDecoder {
            last_id: previous.last_id.clone(),
            id_buffer: previous.last_id.clone(),
            retry: previous.retry,
            ..SseDecoder::new(previous.max)
        }
    }

    /// The id of the last dispatched event (`Last-Event-ID` when resuming); an empty id clears it.
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref().filter(|id| !id.is_empty())
    }

    /// How many events were dispatched.
    pub fn dispatched(&self) -> u64 {
        self.dispatched
    }

    /// The reconnection delay the stream set, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Feeds a chunk; returns the data of every event completed by it.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, TooLarge> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        loop {
            if self.skip_lf && !self.buf.is_empty() {
                if self.buf[0] == b'\n' {
                    self.buf.advance(1);
                }
                self.skip_lf = false;
            }
            let Some(found) = self.buf[self.scanned..].iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.scanned = self.buf.len();
                break;
            };
            let pos = self.scanned + found;
            self.scanned = 0;
            let line = self.buf.split_to(pos);
            let term = self.buf[0];
            self.buf.advance(1);
            if term == b'\r' {
                self.skip_lf = true;
            }
            self.line(&line, &mut events)?;
        }
        if self.buf.len() > self.max {
            return Err(TooLarge(self.max));
        }
        Ok(events)
    }

    fn line(&mut self, line: &[u8], events: &mut Vec<Vec<u8>>) -> Result<(), TooLarge> {
        if line.is_empty() {
            // Dispatch: the id read so far becomes the last event id, data or not.
            self.last_id = self.id_buffer.clone();
            self.dispatched += 1;
            if self.has_data {
                events.push(std::mem::take(&mut self.data));
                self.has_data = false;
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        // Per the SSE rules: an id with NUL is ignored; retry is digits only.
        if field == b"id" && !value.contains(&0) {
            self.id_buffer = Some(String::from_utf8_lossy(value).into_owned());
            return Ok(());
        }
        if field == b"retry" && !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
            self.retry = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            return Ok(());
        }
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
            if self.data.len() > self.max {
                return Err(TooLarge(self.max));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_events_across_chunks_and_line_endings() {
        let mut d = SseDecoder::new(1024);
        assert!(d.push(b"event: message\r\ndata: {\"a\"").unwrap().is_empty());
        assert_eq!(d.push(b":1}\r\n\r\n: ping\n\n").unwrap(), vec![b"{\"a\":1}".to_vec()]);
        assert_eq!(d.push(b"id: 1\ndata: x\ndata:y\n\n").unwrap(), vec![b"x\ny".to_vec()]);
        assert_eq!(d.push(b"data: a\r").unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(d.push(b"\ndata: b\r\r").unwrap(), vec![b"a\nb".to_vec()]);
        // An event with an empty data line (server-everything's priming event) is still an event.
        assert_eq!(d.push(b"id: 9\ndata: \n\n").unwrap(), vec![Vec::<u8>::new()]);
    }

    #[test]
    fn keeps_the_last_event_id_and_the_retry_delay() {
        let mut d = SseDecoder::new(1024);
        assert_eq!(d.push(b"id: e-1\nretry: 500\ndata: \n\n").unwrap(), vec![Vec::<u8>::new()]);
        assert_eq!((d.last_id(), d.retry()), (Some("e-1"), Some(500)));
        d.push(b"retry: soon\nid: bad\0id\ndata: x\n\n").unwrap();
        assert_eq!((d.last_id(), d.retry()), (Some("e-1"), Some(500)), "invalid fields are ignored");
        let r = SseDecoder::resumed(&d);
        assert_eq!((r.last_id(), r.retry()), (Some("e-1"), Some(500)));
        // An id counts once its event is dispatched: a stream cut inside an event resumes after
        // the one before, so the cut event is sent again.
        let mut d = SseDecoder::new(1024);
        d.push(b"id: 6\ndata: a\n\nid: 7\ndata: {\"partial").unwrap();
        assert_eq!(d.last_id(), Some("6"));
        d.push(b"\"}\n\n").unwrap();
        assert_eq!(d.last_id(), Some("7"));
        d.push(b"id:\ndata: x\n\n").unwrap();
        assert_eq!(d.last_id(), None, "an empty id clears it");
    }

    #[test]
    fn refuses_oversized_events() {
        let mut d = SseDecoder::new(8);
        assert_eq!(d.push(b"data: 0123456789\n"), Err(TooLarge(8)));
        let mut d = SseDecoder::new(8);
        assert_eq!(d.push(b"data: 0123456789"), Err(TooLarge(8)));
    }
}
