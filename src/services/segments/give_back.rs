//! Giving back what a node holds and will not serve: on shutdown every buffer's never-served
//! tail, and while running the tail of a buffer that went idle, which is then dropped from the
//! map (the next request for the tag creates a fresh one, as on first use).
//!
//! Every give-back is one `ReleaseSegment { tag, from, expected_max_id }`, which the state
//! machine applies only while `max_id` still equals `expected_max_id` (nobody claimed since), and
//! which is proposed once and never resent (a redelivered release could apply after a re-claim).
//! Many tails at once (a graceful stop gives back every buffer's) go as `ReleaseBatch` entries of
//! many releases each, once the cluster version allows it: each release in one is judged exactly
//! as its own `ReleaseSegment`, and the batch too is proposed once.
//! Its `from` comes from [`SegmentBuffer::close`](leafraft_ids::SegmentBuffer::close), which stops
//! the buffer and reads how far it served in one step that no take can straddle: a request that
//! loaded the buffer before it was dropped either took its IDs before that point or takes none.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Segments;
use super::TagBuffer;
use crate::services::claims::ClaimWriter;
use leafraft_ids::segment::releasable_tail;

/// The longest time between two idle sweeps.
const MAX_SWEEP_PERIOD: Duration = Duration::from_secs(60);

/// The shortest time between two idle sweeps.
const MIN_SWEEP_PERIOD: Duration = Duration::from_millis(10);

/// The counters of buffers this node dropped, so totals over all tags stay true, and what the
/// idle drops gave back.
#[derive(Debug, Default)]
pub(super) struct Dropped {
    pub(super) ids_issued: AtomicU64,
    pub(super) waits: AtomicU64,
    /// Buffers dropped for idleness.
    pub(super) idle_drops: AtomicU64,
    /// Their tails' give-backs, by outcome.
    pub(super) released: AtomicU64,
    pub(super) refused: AtomicU64,
    pub(super) failed: AtomicU64,
}

/// What the idle sweep saw of one buffer: its IDs issued, and since when that number stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct IdleMark {
    issued: u64,
    since: Instant,
}

impl IdleMark {
    pub(super) fn new(now: Instant) -> IdleMark {
        IdleMark { issued: 0, since: now }
    }

    /// Records what a sweep at `now` sees (`issued`; `busy`: a claim in flight) and answers
    /// whether the buffer has served nothing and loaded nothing for at least `idle`. The count
    /// moves when a request ends, so a buffer is idle at least `idle` after its last request.
    pub(super) fn went_idle(&mut self, issued: u64, busy: bool, now: Instant, idle: Duration) -> bool {
        if busy || issued != self.issued {
            *self = IdleMark { issued, since: now };
        }
        now.saturating_duration_since(self.since) >= idle
    }
}

/// How one give-back ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// `max_id` went down to the tail's start.
    Applied,
    /// Someone claimed after this node: the tail stays a gap.
    Refused,
    /// No answer (it may still apply, exactly once): a gap at worst.
    Failed,
}

/// A closed buffer's tail to give back: `(tag, from, expected_max_id)`.
type Tail = (String, u64, u64);

/// Closes `buffer` and answers its never-served tail, if any.
fn close(buffer: &TagBuffer) -> Option<Tail> {
    let (from, expected_max_id) = releasable_tail(&buffer.buffer.close())?;
    Some((buffer.tag.clone(), from, expected_max_id))
}

impl TagBuffer {
    fn went_idle(&self, now: Instant, idle: Duration) -> bool {
        let busy = self.buffer.state().loading;
        let issued = self.issued.load(Ordering::Relaxed);
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).went_idle(issued, busy, now, idle)
    }
}

impl Segments {
    /// Closes every buffer and gives back each never-served tail ([`give_back_all`]), for at most
    /// [`RELEASES_ON_STOP_WITHIN`]. A release that does not commit in time only leaves a gap.
    /// From here on a closed buffer answers "shutting down" and no buffer is created.
    pub async fn release_all(&self) {
        let buffers = {
            let _insert = self.insert.lock().unwrap_or_else(|p| p.into_inner());
            self.stopping.store(true, Ordering::SeqCst);
            self.buffers.values()
        };
        let tails: Vec<Tail> = buffers.iter().filter_map(|buffer| close(buffer)).collect();
        give_back_on_stop(&self.cluster, tails).await;
    }

    /// Drops the buffers that served nothing and loaded nothing for `idle` up to `now`, and gives
    /// back their never-served tails; answers how many it dropped. Each is taken out of the map
    /// and then closed under the lock that creates buffers, so the tag's next buffer is created
    /// only after the old one can serve nothing more.
    pub async fn drop_idle(&self, now: Instant, idle: Duration) -> usize {
        let idle_buffers: Vec<Arc<TagBuffer>> =
            self.buffers.values().into_iter().filter(|buffer| buffer.went_idle(now, idle)).collect();
        if idle_buffers.is_empty() {
            return 0;
        }
        let (dropped, tails): (usize, Vec<Tail>) = {
            let _insert = self.insert.lock().unwrap_or_else(|p| p.into_inner());
            if self.stopping.load(Ordering::SeqCst) {
                return 0;
            }
            // Out of the map first: a request that sees the closed buffer looks again and finds
            // none, and creates the next one once this lock is free.
            let dropping: Vec<&Arc<TagBuffer>> =
                idle_buffers.iter().filter(|buffer| self.buffers.remove_if_current(&buffer.tag, buffer)).collect();
            self.dropped.idle_drops.fetch_add(dropping.len() as u64, Ordering::Relaxed);
            (dropping.len(), dropping.into_iter().filter_map(|buffer| close(buffer)).collect())
        };
        for outcome in give_back_all(&self.cluster, tails, "idle").await {
            let counter = match outcome {
                Outcome::Applied => &self.dropped.released,
                Outcome::Refused => &self.dropped.refused,
                Outcome::Failed => &self.dropped.failed,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        dropped
    }

    /// Drops idle buffers (see [`Segments::drop_idle`]) every quarter of the idle time (at most a
    /// minute apart) until `stop` turns true or closes; returns at once without an idle time.
    pub async fn drop_idle_buffers(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let Some(idle) = self.config.idle else { return };
        let mut sweeps = tokio::time::interval((idle / 4).clamp(MIN_SWEEP_PERIOD, MAX_SWEEP_PERIOD));
        sweeps.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = sweeps.tick() => {}
                _ = stop.wait_for(|stop| *stop) => return,
            }
            let dropped = self.drop_idle(Instant::now(), idle).await;
            if dropped > 0 {
                tracing::info!(dropped, idle_ms = crate::clock::millis(idle), "idle segment buffers dropped");
            }
        }
    }
}

/// Gives every tail back on a graceful stop ([`give_back_all`]) for at most
/// [`RELEASES_ON_STOP_WITHIN`]; answers how each ended, or `None` when the time ran out first
/// (the releases still in flight are dropped: each applies at most once, or stays a gap).
async fn give_back_on_stop<W: ClaimWriter + ?Sized>(writer: &Arc<W>, tails: Vec<Tail>) -> Option<Vec<Outcome>> {
    let count = tails.len();
    match tokio::time::timeout(RELEASES_ON_STOP_WITHIN, give_back_all(writer, tails, "shutdown")).await {
        Ok(outcomes) => Some(outcomes),
        Err(_) => {
            tracing::warn!(
                tails = count,
                within_ms = crate::clock::millis(RELEASES_ON_STOP_WITHIN),
                "not every segment tail was given back in time; the rest stay gaps (not duplicates)"
            );
            None
        }
    }
}

/// Gives every tail back and answers how each ended (not in the order of `tails`): in
/// `ReleaseBatch` entries ([`in_batches`]), [`MAX_BATCHES_IN_FLIGHT`] at once, when there are
/// several and the cluster version allows it; else one `ReleaseSegment` per tail,
/// [`MAX_RELEASES_IN_FLIGHT`] at once. `writer` is the node's `Cluster` (a stand-in in the tests);
/// `ReleaseBatch` came with `ClaimBatch`, at cluster version 0.3.0 (`batches_allowed`).
async fn give_back_all<W: ClaimWriter + ?Sized>(writer: &Arc<W>, tails: Vec<Tail>, why: &'static str) -> Vec<Outcome> {
    if tails.len() > 1 && writer.batches_allowed() {
        let count = tails.len();
        let answered =
            run_bounded(in_batches(tails), MAX_BATCHES_IN_FLIGHT, |batch| give_back_batch(writer.clone(), batch, why))
                .await;
        let mut outcomes: Vec<Outcome> = answered.into_iter().flatten().flatten().collect();
        // A batch whose task failed has no outcomes: its tails may still apply, once.
        outcomes.resize(count, Outcome::Failed);
        return outcomes;
    }
    release_bounded(tails, MAX_RELEASES_IN_FLIGHT, |(tag, from, expected_max_id)| {
        give_back(writer.clone(), tag, from, expected_max_id, why)
    })
    .await
}

/// The most `ReleaseBatch` entries a node has in flight, as for its claim batches.
const MAX_BATCHES_IN_FLIGHT: usize = 4;

/// The most bytes one batch's releases may take encoded: a proposed request must stay within
/// `MAX_REQUEST_BYTES`; the rest is room for the entry's own framing.
const MAX_BATCH_BYTES: usize = leafraft_state::codec::MAX_REQUEST_BYTES - 1024;

/// The bytes a release takes in a batch (fixed-width integers: see `leafraft_state::codec`): the tag's
/// length and bytes, `from` and `expected_max_id`.
fn encoded_len(tail: &Tail) -> usize {
    8 + tail.0.len() + 8 + 8
}

/// `tails` cut into batches of at most [`MAX_BATCH_BYTES`] encoded (at least one tail each).
fn in_batches(tails: Vec<Tail>) -> Vec<Vec<Tail>> {
    let mut batches: Vec<Vec<Tail>> = Vec::new();
    let mut bytes = 0;
    for tail in tails {
        let len = encoded_len(&tail);
        match batches.last_mut() {
            Some(batch) if bytes + len <= MAX_BATCH_BYTES => {
                bytes += len;
                batch.push(tail);
            }
            _ => {
                bytes = len;
                batches.push(vec![tail]);
            }
        }
    }
    batches
}

/// Proposes one `ReleaseBatch` of `tails` (once: `Cluster::write` never resends it) and answers
/// how each release ended.
async fn give_back_batch<W: ClaimWriter + ?Sized>(writer: Arc<W>, tails: Vec<Tail>, why: &'static str) -> Vec<Outcome> {
    let count = tails.len();
    let releases = tails
        .into_iter()
        .map(|(tag, from, expected_max_id)| leafraft_state::Release { tag, from, expected_max_id })
        .collect();
    match writer.write(leafraft_state::Request::ReleaseBatch { releases }).await {
        Ok(leafraft_state::Response::Batch(answers)) if answers.len() == count => {
            let outcomes: Vec<Outcome> = answers
                .iter()
                .map(|answer| match answer {
                    leafraft_state::Response::Released { applied: true } => Outcome::Applied,
                    leafraft_state::Response::Released { applied: false } => Outcome::Refused,
                    _ => Outcome::Failed,
                })
                .collect();
            let applied = outcomes.iter().filter(|outcome| **outcome == Outcome::Applied).count();
            tracing::info!(tails = count, applied, why, "segment tails released");
            outcomes
        }
        Ok(other) => {
            tracing::warn!(tails = count, answer = ?other, why, "unexpected answer to a release batch");
            vec![Outcome::Failed; count]
        }
        Err(e) => {
            tracing::warn!(tails = count, error = %e, why, "segment tails not released (gaps, not duplicates)");
            vec![Outcome::Failed; count]
        }
    }
}

/// How long a graceful stop gives tails back: with 100,000 buffers, 64 at a time took about 30 s,
/// Kubernetes' whole grace period. A tail not given back by then stays a gap: its buffer is
/// closed, so nothing of it is served, and a release still in flight applies only if no claim
/// came after it (`ReleaseSegment`'s `expected_max_id`).
const RELEASES_ON_STOP_WITHIN: Duration = Duration::from_secs(10);

/// The most releases a node has in flight. They were all started at once: a graceful stop with
/// 100,000 buffers sent about 33,000 forwards from each follower, each on its own connection, and
/// the leader ran out of file descriptors (`Too many open files`), which stopped its Raft when a
/// vote could not be written.
const MAX_RELEASES_IN_FLIGHT: usize = 64;

/// Runs `release` for every tail, at most `limit` at once, and answers their outcomes.
async fn release_bounded<F, Fut>(tails: Vec<Tail>, limit: usize, release: F) -> Vec<Outcome>
where
    F: Fn(Tail) -> Fut,
    Fut: std::future::Future<Output = Outcome> + Send + 'static,
{
    let answered = run_bounded(tails, limit, release).await;
    answered.into_iter().map(|outcome| outcome.unwrap_or(Outcome::Failed)).collect()
}

/// Runs `run` for every item, at most `limit` at once, and answers what each gave (`None`: its
/// task failed), in the order they finished.
async fn run_bounded<T, O, F, Fut>(items: Vec<T>, limit: usize, run: F) -> Vec<Option<O>>
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = O> + Send + 'static,
    O: Send + 'static,
{
    let mut running = tokio::task::JoinSet::new();
    let mut answered = Vec::with_capacity(items.len());
    for item in items {
        if running.len() >= limit.max(1) {
            if let Some(done) = running.join_next().await {
                answered.push(done.ok());
            }
        }
        running.spawn(run(item));
    }
    while let Some(done) = running.join_next().await {
        answered.push(done.ok());
    }
    answered
}

async fn give_back<W: ClaimWriter + ?Sized>(
    writer: Arc<W>,
    tag: String,
    from: u64,
    expected_max_id: u64,
    why: &'static str,
) -> Outcome {
    let request = leafraft_state::Request::ReleaseSegment { tag: tag.clone(), from, expected_max_id };
    match writer.write(request).await {
        Ok(leafraft_state::Response::Released { applied }) => {
            tracing::info!(tag = %tag, from, expected_max_id, applied, why, "segment tail released");
            if applied {
                Outcome::Applied
            } else {
                Outcome::Refused
            }
        }
        Ok(other) => {
            tracing::warn!(tag = %tag, answer = ?other, why, "unexpected answer to a release");
            Outcome::Failed
        }
        Err(e) => {
            tracing::warn!(tag = %tag, error = %e, why, "segment tail not released (a gap, not a duplicate)");
            Outcome::Failed
        }
    }
}

#[cfg(test)]
mod tests;
