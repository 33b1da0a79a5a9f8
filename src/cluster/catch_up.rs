//! Catching up once after start, before this node first reports ready.
//!
//! What a node found applied at open can be less than what it had applied (and answered reads
//! from) before a crash: sled keeps the last applies in its buffer until the next flush, while
//! the log entries they came from are on disk. A restarted follower also knows its leader at once,
//! from its persisted vote, before it has heard from it. So "knows a leader and has applied what
//! it found applied at open" can hold while the node is behind what it already answered, and its
//! reads would go back in time (`docs/semantics.md`). One linearizable read closes that: the leader's commit
//! index covers everything this node ever applied, and the read waits until it is applied here.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Cluster;

/// The first pause between attempts; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

impl Cluster {
    /// Does one linearizable read as soon as this node knows a leader, retrying with backoff, and
    /// then lets [`Cluster::readiness`] report ready. Runs once per process, in the background;
    /// a node whose store is new has nothing to catch up with.
    pub async fn catch_up(&self) {
        if self.has_caught_up() {
            return;
        }
        let mut metrics = self.raft().metrics();
        let mut backoff = FIRST_BACKOFF;
        loop {
            if self.replica_readiness().is_ok() {
                match self.linearize().await {
                    Ok(()) => {
                        self.caught_up.store(true, Ordering::Release);
                        tracing::info!("caught up with the leader's commit index: ready");
                        return;
                    }
                    Err(e) => {
                        tracing::info!(error = %e, "catching up with the leader failed; retrying");
                        tokio::time::sleep(backoff).await;
                    }
                }
            } else {
                // Woken early by a new leader or applied index; a closed channel (Raft stopped)
                // answers at once, so then the full pause is taken.
                if let Ok(Err(_closed)) = tokio::time::timeout(backoff, metrics.changed()).await {
                    tokio::time::sleep(backoff).await;
                }
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Whether the catch-up read has completed.
    pub fn has_caught_up(&self) -> bool {
        self.caught_up.load(Ordering::Acquire)
    }
}
