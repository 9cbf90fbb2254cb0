//! The one owner of background work: every long-lived loop and stream the gateway starts (upstream
//! maintenance, stdio readers and writers, upstream GET and listen streams, reply relays) is
//! spawned through [`Background`], which tracks it and hands it a cancellation token. Shutdown (and
//! Part 8's reload) cancels the token and waits for the tracked tasks to finish, so nothing is left
//! running detached.

use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[derive(Clone, Default)]
pub struct Background {
    tracker: TaskTracker,
    cancel: CancellationToken,
}

impl Background {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `fut` until it finishes or the owner shuts down, whichever comes first.
    pub fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let cancel = self.cancel.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = fut => {}
            }
        });
    }

    /// Runs `fut` to its end, tracked but not cancelled: for work that must finish on its own
    /// terms at shutdown (a stream sending its final message when [`Self::token`] is cancelled).
    pub fn track<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(fut);
    }

    /// An owner for a part of the work (one upstream's loops): tracked with the rest, stopped
    /// with the rest at shutdown, and on its own by [`Self::stop`].
    pub fn child(&self) -> Background {
        Background { tracker: self.tracker.clone(), cancel: self.cancel.child_token() }
    }

    /// Stops this owner's tasks (and its children's), not the rest.
    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// A token cancelled at shutdown, for loops that want to end on their own terms.
    pub fn token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    pub fn is_stopping(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The number of tasks still running.
    pub fn len(&self) -> usize {
        self.tracker.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }

    /// Cancels every task and waits up to `grace` for them to end; `false` if some did not.
    pub async fn shutdown(&self, grace: Duration) -> bool {
        self.cancel.cancel();
        self.tracker.close();
        tokio::time::timeout(grace, self.tracker.wait()).await.is_ok()
    }
}

/// Exponential backoff with jitter: each wait is a random time up to the current ceiling, which
/// doubles from `start` to `max`; [`Backoff::reset`] after a success. [`Backoff::steady`] waits
/// the ceiling itself.
#[derive(Debug, Clone)]
pub struct Backoff {
    start: Duration,
    max: Duration,
    ceiling: Duration,
    jitter: bool,
}

impl Backoff {
    pub fn new(start: Duration, max: Duration) -> Self {
        Backoff { start, max, ceiling: start, jitter: true }
    }

    /// Without jitter: `start`, twice that, and so on up to `max`.
    pub fn steady(start: Duration, max: Duration) -> Self {
        Backoff { jitter: false, ..Backoff::new(start, max) }
    }

    pub fn reset(&mut self) {
        self.ceiling = self.start;
    }

    /// The next wait: between half the ceiling and the ceiling, so retries spread out but never
    /// come back at once.
    pub fn next_wait(&mut self) -> Duration {
        use aws_lc_rs::rand::SecureRandom;
        if !self.jitter {
            let wait = self.ceiling;
            self.ceiling = (self.ceiling * 2).min(self.max);
            return wait;
        }
        let mut b = [0u8; 4];
        let r = aws_lc_rs::rand::SystemRandom::new().fill(&mut b).map(|_| u32::from_le_bytes(b)).unwrap_or(u32::MAX / 2);
        let wait = self.ceiling.mul_f64(0.5 + 0.5 * f64::from(r) / f64::from(u32::MAX));
        self.ceiling = (self.ceiling * 2).min(self.max);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_up_to_its_maximum() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(400));
        let waits: Vec<Duration> = (0..5).map(|_| b.next_wait()).collect();
        assert!(waits[0] >= Duration::from_millis(50) && waits[0] <= Duration::from_millis(100), "{waits:?}");
        assert!(waits[4] >= Duration::from_millis(200) && waits[4] <= Duration::from_millis(400), "{waits:?}");
        b.reset();
        assert!(b.next_wait() <= Duration::from_millis(100));
    }

    #[test]
    fn a_steady_backoff_doubles_without_jitter() {
        let mut b = Backoff::steady(Duration::from_secs(1), Duration::from_secs(5));
        let waits: Vec<u64> = (0..5).map(|_| b.next_wait().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        b.reset();
        assert_eq!(b.next_wait(), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn shutdown_cancels_and_waits_for_every_task() {
        let bg = Background::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        bg.spawn(async move {
            let _keep = tx;
            std::future::pending::<()>().await;
        });
        bg.spawn(async {});
        assert!(bg.shutdown(Duration::from_secs(1)).await);
        assert!(bg.is_empty());
        assert!(rx.await.is_err(), "the pending task was dropped");
    }
}
