//! Audit records leaving the process besides the log line: as JSON lines to a file (`[audit]
//! file`), rotated when it reaches `max_file_size` (`audit.jsonl` → `audit.jsonl.1` → … up to
//! `keep_files`), and as OTLP log records where OTLP export runs (`[audit] otlp = true`, see
//! `telemetry::otlp`). The call path only hands a line to a bounded queue; one thread writes the
//! file, so a slow disk never holds up a call. A line the queue cannot take is counted
//! (`mcpgate_audit_records_dropped_total`) and the first drop is logged, never silently lost.
//! The export owns its writer thread: [`Export::close`] (at shutdown) has it write what is queued,
//! flush, and end, before the process exits.

use super::CallRecord;
use super::chain::{Chain, KeyError, Signer};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::time::Duration;

/// What the writer thread is sent: a line, or the order to write what is queued, flush, say so
/// and end.
enum Msg {
    /// A record's line, its `seq` and its hash (the next record's `prev`, and what a checkpoint
    /// signs), worked out once.
    Line(String, u64, String),
    Close(std::sync::mpsc::Sender<()>),
}

/// Lines waiting for the writer at most.
const QUEUE: usize = 8192;

/// Audit records dropped because the export could not keep up.
static DROPPED: AtomicU64 = AtomicU64::new(0);

pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// A record sent as an OTLP log (set by the telemetry when it exports logs): its fields (name,
/// value) and its duration.
pub type LogSink = Arc<dyn Fn(&[(&'static str, &str)], u64) + Send + Sync>;

/// Why the export to a file cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("cannot open the audit file {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The newline that ends a line a crash cut short cannot be written.
    #[error("cannot write the audit file {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the audit file writer: {0}")]
    Writer(#[source] std::io::Error),
}

/// Where records go.
#[derive(Default)]
pub struct Export {
    file: Option<SyncSender<Msg>>,
    /// The hash chain both exports carry (`chain`): taken in the order lines are queued.
    chain: std::sync::Mutex<Option<Chain>>,
    /// The writer thread, joined by [`Export::close`].
    writer: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Shared with the file writer, which sends its signed checkpoints there too.
    otlp: Arc<std::sync::OnceLock<LogSink>>,
}

#[derive(Serialize)]
struct FileRecord<'a> {
    seq: u64,
    prev: &'a str,
    #[serde(flatten)]
    record: &'a CallRecord,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a str>,
}

impl Export {
    /// The export to the file of `cfg`, its writer thread started (OTLP logs are added by
    /// [`Export::send_logs`] once the exporter runs).
    pub fn start(cfg: &mcpgate_config::usage::AuditConfig) -> Result<Export, ExportError> {
        let Some(path) = &cfg.file else {
            let fresh = Chain { seq: 1, prev: super::chain::GENESIS.into() };
            return Ok(Export { chain: std::sync::Mutex::new(Some(fresh)), ..Export::default() });
        };
        let signer = cfg.signing_key_file.as_deref().map(Signer::load).transpose()?;
        let mut writer = Rotating::open(path.clone(), cfg.max_file_bytes, cfg.keep_files)?;
        writer.signer = signer.map(|s| (s, cfg.checkpoint_every));
        let otlp = Arc::new(std::sync::OnceLock::new());
        writer.otlp = Some(otlp.clone());
        let chain = Chain::resume(path);
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let handle = std::thread::Builder::new().name("mcpgate-audit".into()).spawn(move || writer.run(rx)).map_err(ExportError::Writer)?;
        Ok(Export { file: Some(tx), chain: std::sync::Mutex::new(Some(chain)), writer: std::sync::Mutex::new(Some(handle)), otlp })
    }

    /// Has the file writer write every record queued so far, flush and end, waiting at most
    /// `within`; `false` when it did not finish in time. Records written afterwards are dropped
    /// (and counted). Nothing to do without a file.
    pub fn close(&self, within: Duration) -> bool {
        let Some(tx) = &self.file else { return true };
        let (ack, done) = std::sync::mpsc::channel();
        if tx.send(Msg::Close(ack)).is_err() {
            return true;
        }
        if done.recv_timeout(within).is_err() {
            return false;
        }
        if let Some(handle) = mcpgate_protocol::sync::lock(&self.writer).take() {
            let _ = handle.join();
        }
        true
    }

    /// Sends every record to `sink` as well (an OTLP log exporter); once.
    pub fn send_logs(&self, sink: LogSink) {
        let _ = self.otlp.set(sink);
    }

    /// Whether records go anywhere.
    pub fn active(&self) -> bool {
        self.file.is_some() || self.otlp.get().is_some()
    }

    pub fn write(&self, record: &CallRecord, arguments: Option<&str>) {
        let otlp = self.otlp.get();
        if self.file.is_none() && otlp.is_none() {
            return;
        }
        // The record's place in the chain, taken (and the line queued) under one lock, so the
        // file's order is the chain's; a line the queue cannot take does not advance it. Both
        // exports carry the same line, so a collector checks the chain as `audit verify` does.
        let mut chain = mcpgate_protocol::sync::lock(&self.chain);
        let Some(link) = chain.as_mut() else { return };
        let (seq, prev) = (link.seq, link.prev.clone());
        let line = match serde_json::to_string(&FileRecord { seq, prev: &prev, record, arguments }) {
            Ok(line) => line,
            Err(e) => {
                tracing::warn!(error = %e, "an audit record could not be encoded");
                return;
            }
        };
        let hash = super::chain::sha256_hex(&line);
        match &self.file {
            Some(tx) => match tx.try_send(Msg::Line(line.clone(), seq, hash.clone())) {
                Ok(()) => *link = Chain { seq: seq + 1, prev: hash },
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                    if DROPPED.fetch_add(1, Ordering::Relaxed) == 0 {
                        tracing::warn!(
                            "audit records are being dropped: the audit file cannot keep up (counted in \
                                mcpgate_audit_records_dropped_total)"
                        );
                    }
                    // Not in the file, so not in the chain: the OTLP export skips it too.
                    return;
                }
            },
            None => *link = Chain { seq: seq + 1, prev: hash },
        }
        drop(chain);
        if let Some(sink) = otlp {
            let r = record;
            let seq_text = seq.to_string();
            let mut fields: Vec<(&'static str, &str)> = vec![
                ("audit.seq", &seq_text),
                ("audit.prev", &prev),
                ("audit.line", &line),
                ("caller", &r.caller),
                ("endpoint", &r.endpoint),
                ("method", &r.method),
                ("item", &r.item),
                ("upstream", &r.upstream),
                ("outcome", &r.outcome),
            ];
            if let Some(p) = &r.presented {
                fields.push(("presented", p));
            }
            if let Some(a) = arguments {
                fields.push(("arguments", a));
            }
            sink(&fields, r.duration_ms);
        }
    }
}

/// The file and its rotation.
struct Rotating {
    path: PathBuf,
    max: u64,
    keep: usize,
    out: std::io::BufWriter<std::fs::File>,
    size: u64,
    /// The checkpoint signer and how many records between checkpoints.
    signer: Option<(Signer, u64)>,
    /// The last record written (seq, hash), and records since the last checkpoint.
    last: Option<(u64, String)>,
    since: u64,
    /// Where OTLP log records go, once that export runs: each checkpoint is sent there too.
    otlp: Option<Arc<std::sync::OnceLock<LogSink>>>,
}

/// Whether the file's last byte is a newline (an unreadable file counts as one: nothing to mend).
fn ends_with_newline(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else { return true };
    let mut last = [0u8; 1];
    f.seek(SeekFrom::End(-1)).and_then(|_| f.read_exact(&mut last)).map_or(true, |()| last[0] == b'\n')
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o.open(path)
}

impl Rotating {
    fn open(path: PathBuf, max: u64, keep: usize) -> Result<Rotating, ExportError> {
        let mut file = match open_append(&path) {
            Ok(f) => f,
            Err(source) => return Err(ExportError::Open { path, source }),
        };
        let mut size = file.metadata().map(|m| m.len()).unwrap_or(0);
        // A line a crash cut short stays a line of its own: the next record is not glued to it.
        if size > 0 && !ends_with_newline(&path) {
            if let Err(source) = file.write_all(b"\n") {
                return Err(ExportError::Write { path, source });
            }
            size += 1;
        }
        Ok(Rotating { path, max, keep, out: std::io::BufWriter::new(file), size, signer: None, last: None, since: 0, otlp: None })
    }

    /// `audit.jsonl.N` for N ≥ 1.
    fn numbered(&self, n: usize) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    }

    /// A signed checkpoint of the last record written, if there is a signer and a new record.
    fn checkpoint(&mut self) -> std::io::Result<()> {
        let (Some((signer, _)), Some((seq, hash))) = (&self.signer, &self.last) else { return Ok(()) };
        if self.since == 0 {
            return Ok(());
        }
        let ts = mcpgate_protocol::toolbox::unix_ms();
        let line = signer.checkpoint(*seq, hash, ts);
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.size += line.len() as u64 + 1;
        self.since = 0;
        if let Some(sink) = self.otlp.as_ref().and_then(|o| o.get()) {
            sink(&[("audit.checkpoint", &line)], 0);
        }
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        // Each file ends with a checkpoint of its last record.
        self.checkpoint()?;
        self.out.flush()?;
        if self.keep == 0 {
            std::fs::remove_file(&self.path)?;
        } else {
            let _ = std::fs::remove_file(self.numbered(self.keep));
            for n in (1..self.keep).rev() {
                let _ = std::fs::rename(self.numbered(n), self.numbered(n + 1));
            }
            std::fs::rename(&self.path, self.numbered(1))?;
        }
        self.out = std::io::BufWriter::new(open_append(&self.path)?);
        self.size = 0;
        Ok(())
    }

    fn write_line(&mut self, line: &str, seq: u64, hash: String) -> std::io::Result<()> {
        let len = line.len() as u64 + 1;
        if self.size > 0 && self.size + len > self.max {
            self.rotate()?;
        }
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.size += len;
        if self.signer.is_some() {
            self.last = Some((seq, hash));
            self.since += 1;
            if self.signer.as_ref().is_some_and(|(_, every)| self.since >= *every) {
                self.checkpoint()?;
            }
        }
        Ok(())
    }

    /// Writes lines until every sender is gone or it is told to close, flushing whenever the queue
    /// runs empty.
    fn run(mut self, rx: Receiver<Msg>) {
        let mut failing = false;
        while let Ok(first) = rx.recv() {
            let mut closing = None;
            let mut done = Ok(());
            let mut next = Some(first);
            while let Some(msg) = next.take() {
                match msg {
                    Msg::Line(line, seq, hash) => done = done.and_then(|()| self.write_line(&line, seq, hash)),
                    Msg::Close(ack) => {
                        closing = Some(ack);
                        break;
                    }
                }
                next = rx.try_recv().ok();
            }
            let done = done.and_then(|()| self.out.flush());
            match done {
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!(file = %self.path.display(), "the audit file is written again");
                }
                Ok(()) => {}
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(file = %self.path.display(), error = %e, "the audit file cannot be written");
                }
                Err(_) => {}
            }
            if let Some(ack) = closing {
                // The last records are signed before the process ends.
                let _ = self.checkpoint().and_then(|()| self.out.flush());
                let _ = ack.send(());
                return;
            }
        }
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: usize) -> CallRecord {
        CallRecord {
            ts_ms: 1,
            caller: "alice".into(),
            endpoint: "/mcp/dev".into(),
            method: "tools/call".into(),
            item: "calc__add".into(),
            presented: Some("add".into()),
            upstream: "calc".into(),
            outcome: format!("ok {i}"),
            rule: None,
            guard: None,
            reason: None,
            program: None,
            duration_ms: 2,
        }
    }

    #[test]
    fn closing_writes_every_queued_record_before_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let cfg =
            mcpgate_config::usage::AuditConfig { file: Some(path.clone()), max_file_bytes: 1 << 30, keep_files: 2, ..Default::default() };
        let export = Export::start(&cfg).unwrap();
        for i in 0..2000 {
            export.write(&record(i), None);
        }
        assert!(export.close(Duration::from_secs(10)), "the writer finished");
        // The queue (8192) holds them all: every one is in the file once close returns.
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2000);
        export.write(&record(9), None);
        assert!(export.close(Duration::from_secs(1)), "closing again is harmless");
    }

    #[test]
    fn lines_rotate_at_the_size_and_old_files_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut w = Rotating::open(path.clone(), 4096, 2).unwrap();
        for i in 0..200 {
            let line = serde_json::to_string(&FileRecord { seq: i as u64 + 1, prev: "", record: &record(i), arguments: None }).unwrap();
            w.write_line(&line, i as u64 + 1, String::new()).unwrap();
        }
        w.out.flush().unwrap();
        let names: Vec<String> = {
            let mut n: Vec<String> =
                std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            n.sort();
            n
        };
        assert_eq!(names, ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]);
        for n in &names {
            let text = std::fs::read_to_string(dir.path().join(n)).unwrap();
            assert!(text.len() as u64 <= 4096, "{n} is {} bytes", text.len());
            for line in text.lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                assert_eq!(v["item"], "calc__add");
                assert_eq!(v["presented"], "add");
            }
        }
        // The newest lines are in the live file, the oldest kept in .2.
        let last = std::fs::read_to_string(&path).unwrap();
        assert!(last.contains("\"ok 199\""), "{last}");
    }
}
