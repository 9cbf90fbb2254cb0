//! The console's view of the audit stream: the last calls kept in a ring, and each new one sent to
//! the open console streams. Nothing is kept or sent unless a console is enabled (one atomic load
//! on the call path otherwise). Records carry what the audit line carries — never arguments.

use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use tokio::sync::broadcast;

/// How many recent calls the console shows.
const KEPT: usize = 200;

static ON: AtomicBool = AtomicBool::new(false);

#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    pub ts_ms: u64,
    pub caller: String,
    pub endpoint: String,
    pub method: String,
    pub item: String,
    pub upstream: String,
    pub outcome: String,
    pub duration_ms: u64,
}

struct Feed {
    recent: Mutex<VecDeque<CallRecord>>,
    live: broadcast::Sender<CallRecord>,
}

fn feed() -> &'static Feed {
    static FEED: OnceLock<Feed> = OnceLock::new();
    FEED.get_or_init(|| Feed { recent: Mutex::new(VecDeque::with_capacity(KEPT)), live: broadcast::channel(256).0 })
}

/// Starts keeping calls (when a console is enabled).
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Keeps one ended call (called by the audit log).
pub fn push(make: impl FnOnce() -> CallRecord) {
    if !enabled() {
        return;
    }
    let record = make();
    let f = feed();
    {
        let mut r = crate::sync::lock(&f.recent);
        if r.len() == KEPT {
            r.pop_front();
        }
        r.push_back(record.clone());
    }
    // No receiver (no console open) is fine.
    let _ = f.live.send(record);
}

/// The kept calls, newest first.
pub fn recent() -> Vec<CallRecord> {
    crate::sync::lock(&feed().recent).iter().rev().cloned().collect()
}

/// New calls as they end.
pub fn subscribe() -> broadcast::Receiver<CallRecord> {
    feed().live.subscribe()
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
