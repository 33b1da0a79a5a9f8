//! `Segment`: one tag's IDs served from a local double buffer, as Leaf's server does it, in the
//! application's own process.
//!
//! The buffer is the server's own engine (`leafraft_ids::SegmentBuffer`): taking an ID is one
//! atomic `fetch_add` on the current range. When 10 % of the current range is used, one
//! background task fetches the next range (`GET /v1/segment/{tag}/ranges?count=N`); when the
//! current one is used up, takers switch to it. A taker that finds both used up waits for the
//! fetch, at most the client's timeout, and then gets the fetch's error (or `Timeout`).
//!
//! The range size follows Leaf's dynamic step ([`StepPolicy`]): a range used up faster than the
//! configured duration doubles the next one, slower than twice it halves it, within the
//! configured bounds.
//!
//! Invariants (tested in `segment/tests.rs` and `segment/proptests.rs`):
//! 1. Every ID handed out lies in a range the server answered, and at most once: the engine's
//!    guarantee, since nothing else is installed.
//! 2. Ranges are used in the order the server answered them.
//! 3. No taker waits longer than the client's timeout.
//! 4. After `close`, or once the last handle and the client are dropped, the unused IDs are
//!    dropped, never handed to anyone: a gap. The server never hands a range out twice, so a
//!    restarted process never sees them again either.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use leafraft_ids::segment::Switch;
use leafraft_ids::IdRange;
use leafraft_ids::SegmentBuffer;
use leafraft_ids::StepPolicy;
use leafraft_ids::Take;
use tokio::runtime::Handle;
use tokio::sync::Notify;

use crate::ClientError;

/// Where ranges come from: the cluster over HTTP, or a stand-in in the tests.
pub(crate) trait RangeSource: Send + Sync + 'static {
    /// Increasing, non-empty half-open ranges totalling at most `count` IDs of `tag`.
    fn fetch(
        &self,
        tag: &str,
        count: u64,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<IdRange>, ClientError>> + Send + '_>>;

    /// The node that answered the last request, when the source knows (the planted bug's cue).
    #[cfg(feature = "conformance-plant")]
    fn last_node(&self) -> Option<String> {
        None
    }
}

/// How large the ranges are: Leaf's dynamic step between `min` and `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sizing {
    pub min: u64,
    pub max: u64,
    /// A range lasting less than this doubles the next one; more than twice this halves it.
    pub duration: Duration,
}

impl Sizing {
    fn policy(&self) -> StepPolicy {
        StepPolicy::leaf(self.duration, self.max)
    }
}

/// The shared state of one tag's handle.
pub(crate) struct SegmentState {
    tag: String,
    buffer: SegmentBuffer,
    source: Arc<dyn RangeSource>,
    runtime: Option<Handle>,
    sizing: Sizing,
    /// The size and completion time of the last fetch (the dynamic step's input).
    last_fetch: Mutex<Option<(u64, Instant)>>,
    /// Ranges of an answer beyond the first, used in order before fetching again.
    queued: Mutex<VecDeque<IdRange>>,
    /// Woken when a load ends, either way.
    loaded: Notify,
    /// Counts loads that ended, and the error of the last one if it failed.
    loads_ended: AtomicU64,
    last_failure: Mutex<Option<(u64, ClientError)>>,
    wait: Duration,
    fetches: AtomicU64,
    /// The node and the range of the last fetch (the planted bug's memory).
    #[cfg(feature = "conformance-plant")]
    planted: Mutex<(Option<String>, Option<IdRange>)>,
}

/// A handle on one tag's IDs. Cheap to clone; every clone (and every `Client::segment` call for
/// the same tag) shares one buffer.
#[derive(Clone)]
pub struct Segment {
    state: Arc<SegmentState>,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment").field("tag", &self.state.tag).field("buffer", &self.state.buffer.state()).finish()
    }
}

impl Segment {
    pub(crate) fn new(
        tag: &str,
        source: Arc<dyn RangeSource>,
        runtime: Option<Handle>,
        sizing: Sizing,
        wait: Duration,
    ) -> Segment {
        let state = SegmentState {
            tag: tag.to_string(),
            buffer: SegmentBuffer::new(),
            source,
            runtime,
            sizing,
            last_fetch: Mutex::new(None),
            queued: Mutex::new(VecDeque::new()),
            loaded: Notify::new(),
            loads_ended: AtomicU64::new(0),
            last_failure: Mutex::new(None),
            wait,
            fetches: AtomicU64::new(0),
            #[cfg(feature = "conformance-plant")]
            planted: Mutex::new((None, None)),
        };
        Segment { state: Arc::new(state) }
    }

    pub fn tag(&self) -> &str {
        &self.state.tag
    }

    /// One ID. Without waiting while the buffer holds IDs; otherwise waits for the next range, at
    /// most the client's timeout.
    ///
    /// The future is written by hand rather than with `async fn`: its first poll is
    /// [`Segment::try_next_id`] and nothing else, inlined into the caller, so a warm call costs
    /// what the buffer costs (an `async fn` built and polled its state machine on every call,
    /// ~9 ns on top).
    #[inline(always)]
    pub fn next_id(&self) -> NextId<'_> {
        NextId { segment: self, waiting: None }
    }

    /// `count` IDs, in the order handed out (increasing within each range).
    pub async fn next_ids(&self, count: u64) -> Result<Vec<u64>, ClientError> {
        let ranges = self.next_ranges(count).await?;
        Ok(ranges.iter().flat_map(|range| range.start..range.end).collect())
    }

    /// `count` IDs as half-open ranges (no list of every ID).
    pub async fn next_ranges(&self, count: u64) -> Result<Vec<IdRange>, ClientError> {
        self.state.take_waiting(count).await
    }

    /// One ID if the buffer holds one right now; never waits (a refill may start in the
    /// background).
    #[inline]
    pub fn try_next_id(&self) -> Option<u64> {
        loop {
            match self.state.buffer.take(1) {
                Take::Ids { range, load_due } => {
                    if load_due {
                        self.state.start_load();
                    }
                    return Some(range.start);
                }
                // Switching to a range that is already here does not wait.
                Take::UsedUp => match self.state.buffer.switch() {
                    Switch::Switched => continue,
                    Switch::NotReady { loading: false } => {
                        self.state.start_load();
                        return None;
                    }
                    Switch::NotReady { loading: true } | Switch::Closed => return None,
                },
            }
        }
    }

    /// Starts fetching the first range now, so that the first `next_id` does not wait.
    pub fn preload(&self) {
        self.state.start_load();
    }

    /// Stops handing out IDs. The IDs left in the buffer are dropped (a gap, never served).
    pub fn close(&self) {
        let _unused = self.state.buffer.close();
        self.state.loaded.notify_waiters();
    }

    /// How many range requests this handle has made.
    pub fn fetches(&self) -> u64 {
        self.state.fetches.load(Relaxed)
    }

    /// What the buffer holds: the current range and cursor, the next range, whether a load runs.
    pub fn buffer_state(&self) -> leafraft_ids::segment::BufferState {
        self.state.buffer.state()
    }
}

/// What [`Segment::next_id`] returns: ready at its first poll while the buffer holds IDs.
#[must_use = "futures do nothing unless polled"]
pub struct NextId<'a> {
    segment: &'a Segment,
    /// The wait for the next range, once the buffer was found used up. Boxed: the waiting
    /// path's state would otherwise make every call's future large.
    waiting: Option<WaitForRanges<'a>>,
}

type WaitForRanges<'a> = Pin<Box<dyn Future<Output = Result<Vec<IdRange>, ClientError>> + Send + 'a>>;

impl Future for NextId<'_> {
    type Output = Result<u64, ClientError>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let this = self.get_mut();
        let waiting = match &mut this.waiting {
            Some(waiting) => waiting,
            None => {
                if let Some(id) = this.segment.try_next_id() {
                    return std::task::Poll::Ready(Ok(id));
                }
                this.waiting.insert(Box::pin(this.segment.state.take_waiting(1)))
            }
        };
        waiting.as_mut().poll(cx).map(|taken| taken?.first().map(|range| range.start).ok_or(ClientError::Closed))
    }
}

impl SegmentState {
    /// Takes up to `count` IDs, waiting for ranges as needed, at most `wait` in all.
    async fn take_waiting(self: &Arc<Self>, count: u64) -> Result<Vec<IdRange>, ClientError> {
        let deadline = Instant::now() + self.wait;
        let mut taken: Vec<IdRange> = Vec::new();
        let mut left = count;
        while left > 0 {
            match self.buffer.take(left) {
                Take::Ids { range, load_due } => {
                    if load_due {
                        self.start_load();
                    }
                    left -= range.len();
                    match taken.last_mut() {
                        Some(last) if last.end == range.start => last.end = range.end,
                        _ => taken.push(range),
                    }
                }
                Take::UsedUp => self.switch_or_wait(deadline).await?,
            }
        }
        Ok(taken)
    }

    /// Replaces a used-up range by the next, waiting for a load when there is none yet.
    async fn switch_or_wait(self: &Arc<Self>, deadline: Instant) -> Result<(), ClientError> {
        let ended_before = self.loads_ended.load(Relaxed);
        let loaded = self.loaded.notified();
        tokio::pin!(loaded);
        // Registered before looking, so a load that ends in between still wakes this taker.
        loaded.as_mut().enable();
        match self.buffer.switch() {
            Switch::Switched => return Ok(()),
            Switch::Closed => return Err(ClientError::Closed),
            Switch::NotReady { loading } => {
                if !loading {
                    if let Some(error) = self.failure_since(ended_before) {
                        return Err(error);
                    }
                    self.start_load();
                }
            }
        }
        if tokio::time::timeout_at(deadline.into(), loaded).await.is_err() {
            let last =
                self.failure_since(0).map_or_else(|| "the next range did not come".to_string(), |e| e.to_string());
            return Err(ClientError::Timeout { waited: self.wait, last });
        }
        // A load ended: it installed a range (take again) or failed (the next round says so).
        if self.buffer.state().next.is_none() {
            if let Some(error) = self.failure_since(ended_before) {
                return Err(error);
            }
        }
        Ok(())
    }

    /// The error of the last load, if it failed and ended after `ended` loads.
    fn failure_since(&self, ended: u64) -> Option<ClientError> {
        let failure = self.last_failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.as_ref().filter(|(at, _)| *at > ended).map(|(_, error)| error.clone())
    }

    /// Starts loading the next range in the background unless a load runs or a range waits.
    fn start_load(self: &Arc<Self>) {
        if !self.buffer.try_begin_load() {
            return;
        }
        let runtime = self.runtime.clone().or_else(|| Handle::try_current().ok());
        match runtime {
            Some(runtime) => {
                let state = self.clone();
                runtime.spawn(async move { state.load().await });
            }
            None => self.end_load(Err(ClientError::Config("no tokio runtime to fetch ranges in".into()))),
        }
    }

    async fn load(self: Arc<Self>) {
        let queued = self.queued.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        if let Some(range) = queued {
            return self.end_load(Ok(range));
        }
        let count = self.next_count();
        self.fetches.fetch_add(1, Relaxed);
        let answer = self.source.fetch(&self.tag, count).await;
        #[cfg(feature = "conformance-plant")]
        let answer = answer.map(|ranges| self.planted_reuse(ranges));
        let first = answer.and_then(|ranges| {
            let mut ranges = ranges.into_iter().filter(|range| !range.is_empty());
            let first = ranges.next().ok_or_else(|| ClientError::Transport("an empty range answer".into()))?;
            self.queued.lock().unwrap_or_else(|e| e.into_inner()).extend(ranges);
            *self.last_fetch.lock().unwrap_or_else(|e| e.into_inner()) = Some((count, Instant::now()));
            Ok(first)
        });
        self.end_load(first);
    }

    fn end_load(&self, result: Result<IdRange, ClientError>) {
        match result {
            Ok(range) => {
                // False only when the handle was closed meanwhile: the range is dropped.
                let _installed = self.buffer.install_next(range);
                self.loads_ended.fetch_add(1, Relaxed);
            }
            Err(error) => {
                self.buffer.load_failed();
                let ended = self.loads_ended.fetch_add(1, Relaxed) + 1;
                *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = Some((ended, error));
            }
        }
        self.loaded.notify_waiters();
    }

    /// The planted bug (the conformance suite's `LEAFRAFT_CONFORMANCE_PLANT=reuse-range`, only
    /// with the `conformance-plant` feature): after a failover (another node answered than the
    /// last time), serve the previous range once more before the new ones.
    #[cfg(feature = "conformance-plant")]
    fn planted_reuse(&self, mut ranges: Vec<IdRange>) -> Vec<IdRange> {
        let node = self.source.last_node();
        let mut planted = self.planted.lock().unwrap_or_else(|e| e.into_inner());
        if crate::plant::reuse_range_after_failover() && planted.0.is_some() && planted.0 != node {
            if let Some(previous) = planted.1 {
                ranges.insert(0, previous);
            }
        }
        *planted = (node, ranges.last().copied());
        ranges
    }

    /// The size of the next range: Leaf's dynamic step from the last fetch.
    fn next_count(&self) -> u64 {
        let last = *self.last_fetch.lock().unwrap_or_else(|e| e.into_inner());
        let previous = last.map(|(count, at)| (count, at.elapsed()));
        self.sizing.policy().next_step(self.sizing.min, previous).clamp(self.sizing.min, self.sizing.max)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;
