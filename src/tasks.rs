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

#[cfg(test)]
mod tests {
    use super::*;

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
