//! The background task that keeps this node's worker: it agrees on the layout, checks the clock,
//! acquires a worker and extends its window ahead of need, and gives it back on a graceful stop.
//! Everything it installs in the generator is the answer of a committed command.

use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use crate::clock::millis;
use crate::clock::now_ms;
use crate::error::Error;
use crate::error::ErrorCode;
use crate::services::snowflakes::lease_validity;
use crate::services::snowflakes::Holding;
use crate::services::snowflakes::Snowflakes;
use leafraft_ids::snowflake::Generator;

impl Snowflakes {
    /// Keeps a worker with a window ahead of the clock until `stop` is set; then releases it.
    pub async fn maintain(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let period = (self.config.window / 4).clamp(Duration::from_millis(50), Duration::from_secs(2));
        let mut metrics = self.cluster.raft().metrics();
        // Once Raft stops, its metrics channel closes and `changed` answers at once: it must not
        // wake this loop any more, or it spins.
        let mut metrics_open = true;
        loop {
            // A dropped sender counts as a stop (its `changed` would also answer at once).
            if *stop.borrow() || stop.has_changed().is_err() {
                break;
            }
            let ready = self.cluster.ensure_ready().is_ok();
            if ready {
                // A tick can wait up to the write timeout on Raft; a stop must not. An acquire
                // cut short this way may still commit: that worker then expires unused (a gap).
                tokio::select! {
                    () = self.tick() => {}
                    _ = stop.changed() => break,
                }
            }
            tokio::select! {
                _ = stop.changed() => {}
                _ = tokio::time::sleep(period) => {}
                // Wake early when this node becomes ready: acquire without a full period. Only
                // then: once ready, every write a tick proposes changes the metrics, and waking
                // on that would propose again at once (a refused acquire or layout, in a loop).
                changed = metrics.changed(), if !ready && metrics_open => metrics_open = changed.is_ok(),
            }
        }
        self.release().await;
    }

    async fn tick(&self) {
        if !self.lock().layout_agreed && !self.agree_layout().await {
            return;
        }
        let verdict = self.clock.check().await;
        let serving = self.lock().record_verdict(verdict);
        if !serving {
            return;
        }
        let holding =
            self.lock().holding.as_ref().map(|h| (h.worker, h.epoch, h.generator.window_end_ms(), h.valid_until));
        match holding {
            None => self.acquire().await,
            Some((worker, epoch, window_end, valid_until)) => {
                let asked = Instant::now();
                let now = now_ms();
                let valid_for = valid_until.saturating_duration_since(asked);
                if needs_extension(window_end, now, self.config.window, valid_for, self.lease_validity()) {
                    self.extend(worker, epoch, asked, now).await;
                }
            }
        }
    }

    async fn agree_layout(&self) -> bool {
        match self.cluster.write(leafraft_state::Request::SetSnowflakeLayout { layout: self.config.layout }).await {
            Ok(leafraft_state::Response::SnowflakeLayout(recorded)) if recorded == self.config.layout => {
                self.lock().layout_agreed = true;
                true
            }
            Ok(leafraft_state::Response::SnowflakeLayout(recorded)) => {
                let message = format!(
                    "this node is configured with snowflake layout {:?}, the cluster records {recorded:?}; \
                     snowflake is refused rather than mixing layouts",
                    self.config.layout
                );
                tracing::error!(%message);
                self.lock().refused = Some(Error::new(ErrorCode::WorkerUnavailable, message));
                false
            }
            Ok(other) => {
                tracing::warn!(answer = ?other, "unexpected answer to the layout");
                false
            }
            Err(e) => {
                tracing::debug!(error = %e, "layout not recorded yet");
                false
            }
        }
    }

    async fn acquire(&self) {
        // Before the `now_ms` the lease is judged by, so the validity errs early.
        let asked = Instant::now();
        let request = leafraft_state::Request::AcquireWorker {
            node: self.cluster.node_id(),
            now_ms: now_ms(),
            lease_ms: millis(self.config.lease),
            window_ms: millis(self.config.window),
        };
        match self.cluster.write(request).await {
            Ok(leafraft_state::Response::WorkerAcquired { worker, epoch, floor_ms, window_end_ms }) => {
                let seed = self.config.random_sequence.then(|| now_ms() ^ (u64::from(worker) << 32));
                let issue_as = worker;
                #[cfg(feature = "planted")]
                let issue_as = crate::planted::worker_to_issue_from(issue_as, self.config.layout.worker_bits);
                let generator = Generator::new(
                    self.layout,
                    u64::from(issue_as),
                    floor_ms,
                    window_end_ms,
                    millis(self.config.max_backward),
                    seed,
                );
                tracing::info!(worker, epoch, floor_ms, window_end_ms, "snowflake worker acquired");
                let mut state = self.lock();
                if !state.stopped {
                    let valid_until = asked + self.lease_validity();
                    state.holding = Some(Holding { worker, epoch, generator, valid_until });
                }
            }
            Ok(leafraft_state::Response::Rejected(rejection)) => {
                tracing::warn!(%rejection, "no snowflake worker acquired")
            }
            Ok(other) => tracing::warn!(answer = ?other, "unexpected answer to acquiring a worker"),
            Err(e) => tracing::debug!(error = %e, "acquiring a worker failed; will retry"),
        }
    }

    fn lease_validity(&self) -> Duration {
        lease_validity(self.config.lease, self.config.max_skew, self.config.window)
    }

    /// `asked` is read before `now`, so the validity errs early.
    async fn extend(&self, worker: u32, epoch: u64, asked: Instant, now: u64) {
        let window_end_ms = now.saturating_add(millis(self.config.window));
        let request = leafraft_state::Request::ExtendWorker { worker, epoch, window_end_ms, now_ms: now };
        match self.cluster.write(request).await {
            Ok(leafraft_state::Response::WorkerExtended { window_end_ms }) => {
                let mut state = self.lock();
                if let Some(holding) = state.holding.as_mut().filter(|h| h.epoch == epoch) {
                    holding.generator.extend_window(window_end_ms);
                    holding.valid_until = holding.valid_until.max(asked + self.lease_validity());
                }
            }
            Ok(leafraft_state::Response::Rejected(leafraft_state::Rejection::LeaseLost)) => {
                // Another holder took the worker. What this node issued stays below the window it
                // had committed, which the new holding starts above; stop and acquire again.
                tracing::warn!(worker, epoch, "snowflake worker lost to another holder");
                let mut state = self.lock();
                if state.holding.as_ref().is_some_and(|h| h.epoch == epoch) {
                    state.holding = None;
                }
            }
            Ok(other) => tracing::warn!(answer = ?other, "unexpected answer to extending the window"),
            Err(e) => {
                tracing::warn!(error = %e, worker, "window not extended; IDs continue inside the committed window")
            }
        }
    }

    /// Stops issuing and gives the worker back, recording the last timestamp used so the next
    /// holding starts right after it.
    pub async fn release(&self) {
        let holding = {
            let mut state = self.lock();
            state.stopped = true;
            state.holding.take()
        };
        let Some(holding) = holding else {
            return;
        };
        let used_until_ms = holding.generator.last_timestamp_ms();
        let request =
            leafraft_state::Request::ReleaseWorker { worker: holding.worker, epoch: holding.epoch, used_until_ms };
        match self.cluster.write(request).await {
            Ok(leafraft_state::Response::WorkerReleased { applied }) => {
                tracing::info!(worker = holding.worker, epoch = holding.epoch, applied, "snowflake worker released")
            }
            Ok(other) => tracing::warn!(answer = ?other, "unexpected answer to releasing the worker"),
            Err(e) => tracing::warn!(error = %e, "worker not released; it expires after --worker-lease-ms"),
        }
    }

    /// An operator frees `worker` (its holder is gone for good): the next holder starts above the
    /// window the old one committed.
    pub async fn release_for_operator(&self, worker: u32) -> Result<(), Error> {
        let epoch = self.cluster.read(|sm| sm.snowflake.workers.get(&worker).map(|lease| lease.epoch));
        let Some(epoch) = epoch else {
            return Err(Error::new(ErrorCode::NotFound, format!("worker {worker} was never used")));
        };
        let request = leafraft_state::Request::ReleaseWorker { worker, epoch, used_until_ms: None };
        match self.cluster.write(request).await? {
            leafraft_state::Response::WorkerReleased { applied: true } => {
                tracing::info!(worker, epoch, "snowflake worker released by an operator");
                Ok(())
            }
            leafraft_state::Response::WorkerReleased { applied: false } => Err(Error::new(
                ErrorCode::WorkerUnavailable,
                format!("worker {worker} is not held (or changed hands meanwhile); nothing released"),
            )),
            other => Err(Error::no_leader(format!("unexpected answer to a release: {other:?}"))),
        }
    }
}

/// Whether a holding is extended now: when its window ends within half a window of the clock, or
/// when under half of its validity is left (`valid_for` of `validity`). The second matters when
/// the window is far ahead of the clock (a recovered cluster's floor): an extension then moves
/// no window end, but it renews the lease that keeps the holding valid and keeps others from
/// taking the worker over.
pub(super) fn needs_extension(
    window_end_ms: u64,
    now_ms: u64,
    window: Duration,
    valid_for: Duration,
    validity: Duration,
) -> bool {
    window_end_ms.saturating_sub(now_ms) < millis(window) / 2 || valid_for < validity / 2
}
