//! The log writer: each line (an audit line on every call, among others) is formatted on the
//! thread that logs it, then handed to one writer thread that owns stderr, so no request waits
//! for a write to a slow terminal, pipe or journal. The hand-over queue is bounded; when it is
//! full the line is dropped and counted (`mcpgate_log_lines_dropped_total`), never silently lost
//! and never blocking. [`LogGuard`] flushes what is queued when the process ends.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

/// Lines dropped because the writer could not keep up (since the process started).
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// How many lines may wait for the writer.
const QUEUE: usize = 16_384;

pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Where log lines go: `tracing_subscriber`'s writer factory.
#[derive(Clone)]
pub struct LogWriter {
    tx: SyncSender<Vec<u8>>,
}

/// Keeps the writer thread; dropping it flushes the queued lines (for at most a second).
pub struct LogGuard {
    tx: Option<SyncSender<Vec<u8>>>,
    thread: Option<JoinHandle<()>>,
}

/// Starts the writer thread over `out` (stderr in the binary).
pub fn start(out: impl Write + Send + 'static) -> (LogWriter, LogGuard) {
    let (tx, rx) = sync_channel::<Vec<u8>>(QUEUE);
    let thread = std::thread::Builder::new().name("mcpgate-log".into()).spawn(move || write_all(rx, out)).ok();
    (LogWriter { tx: tx.clone() }, LogGuard { tx: Some(tx), thread })
}

/// How often the writer takes the queued lines: a line waits at most this long. The writer
/// sleeps in between instead of waiting on the queue, so logging a line never wakes a thread
/// (on a busy gateway, a wake-up per line cost more than formatting it).
const FLUSH_EVERY: Duration = Duration::from_millis(20);

fn write_all(rx: Receiver<Vec<u8>>, out: impl Write) {
    use std::sync::mpsc::TryRecvError;
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    loop {
        std::thread::sleep(FLUSH_EVERY);
        loop {
            match rx.try_recv() {
                Ok(line) => {
                    let _ = out.write_all(&line);
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    let _ = out.flush();
                    return;
                }
            }
        }
        let _ = out.flush();
    }
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let deadline = std::time::Instant::now() + Duration::from_secs(1);
            while !t.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

/// One line being formatted; it is queued whole when dropped.
pub struct Line {
    buf: Vec<u8>,
    tx: SyncSender<Vec<u8>>,
}

impl Write for Line {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        match self.tx.try_send(std::mem::take(&mut self.buf)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line { buf: Vec::with_capacity(256), tx: self.tx.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_arrive_whole_and_in_order_and_the_guard_flushes_them() {
        let sink = Sink::default();
        let (writer, guard) = start(sink.clone());
        for i in 0..100 {
            let mut line = tracing_subscriber::fmt::MakeWriter::make_writer(&writer);
            write!(line, "line {i}").unwrap();
            writeln!(line, " end").unwrap();
        }
        drop(writer);
        drop(guard);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 100);
        assert_eq!(lines[42], "line 42 end");
    }
}
