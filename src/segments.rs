//! `Segments`: Leaf-segment on this node. One `SegmentBuffer` per tag, refilled in the
//! background by Raft-committed claims, served without locks or I/O while a segment is ready.
//!
//! This is the only module that touches both `engine` and the Raft side (`Cluster`).
//!
//! Invariants:
//! 1. A range is installed in a buffer only from the `Response::Segment` of a committed and
//!    applied `ClaimSegment` (the leader answers after applying it).
//! 2. At most one claim per tag is in flight from this node (`SegmentBuffer::try_begin_load`).
//! 3. On shutdown every buffer is closed before its tail is released, and each tail is
//!    proposed once (`Cluster::write` never resends a `ReleaseSegment`).

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use arc_swap::ArcSwap;
use serde::Deserialize;
use serde::Serialize;
use tokio::sync::Notify;

use crate::clock::now_ms;
use crate::cluster::Cluster;
use crate::engine::segment::releasable_tail;
use crate::engine::segment::Switch;
use crate::engine::IdRange;
use crate::engine::SegmentBuffer;
use crate::engine::StepPolicy;
use crate::engine::Take;
use crate::error::Error;
use crate::error::ErrorCode;
use crate::metrics::Metrics;
use crate::planted::PlantedBug;

/// The largest `count` one request may ask for.
pub const MAX_COUNT: u64 = 10_000;

#[derive(Debug, Clone, Copy)]
pub struct SegmentConfig {
    /// How long a request waits for the next segment when both buffers are used up.
    pub wait: Duration,
    pub step_policy: StepPolicy,
    /// Load a segment for every tag at start instead of on first request.
    pub preload: bool,
}

/// One tag's buffers on this node, and what the service keeps beside them.
struct TagBuffer {
    tag: String,
    buffer: SegmentBuffer,
    /// Woken when a load ends, successfully or not.
    loaded: Notify,
    /// The step and completion time of the last claim, for the dynamic step.
    last_claim: Mutex<Option<(u64, Instant, u64)>>,
    exhausted: AtomicBool,
    issued: AtomicU64,
    claims: AtomicU64,
    /// Requests that found both segments used up and had to wait for a claim.
    waits: AtomicU64,
    /// IDs issued at the last rate sample, and when, for IDs/s.
    rate: Mutex<(u64, Instant, f64)>,
}

/// This node's buffer state for one tag, as `/v1/tags/{tag}` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BufferView {
    pub current: Option<RangeView>,
    pub cursor: Option<String>,
    pub next: Option<RangeView>,
    pub loading: bool,
    pub step: Option<u64>,
    pub last_claim_at: Option<String>,
    pub ids_issued: u64,
    pub claims: u64,
    /// Requests that found both segments used up and waited for a claim.
    pub waits: u64,
    pub ids_per_sec: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RangeView {
    pub start: String,
    pub end: String,
}

impl From<IdRange> for RangeView {
    fn from(range: IdRange) -> RangeView {
        RangeView { start: range.start.to_string(), end: range.end.to_string() }
    }
}

pub struct Segments {
    cluster: Arc<Cluster>,
    config: SegmentConfig,
    metrics: Arc<Metrics>,
    /// Copy-on-write: readers never lock; a new tag replaces the whole map.
    buffers: ArcSwap<HashMap<String, Arc<TagBuffer>>>,
    insert: Mutex<()>,
    /// `LEAFRAFT_PLANTED_BUG=serve-twice` (debug builds only): see [`crate::planted`].
    replay: crate::planted::Replay,
}

impl Segments {
    pub fn new(cluster: Arc<Cluster>, config: SegmentConfig, metrics: Arc<Metrics>) -> Segments {
        Segments {
            cluster,
            config,
            metrics,
            buffers: ArcSwap::default(),
            insert: Mutex::new(()),
            replay: Default::default(),
        }
    }

    /// Hands out `count` IDs of `tag` as increasing half-open ranges.
    pub async fn next_ids(self: &Arc<Self>, tag: &str, count: u64) -> Result<Vec<IdRange>, Error> {
        if count == 0 || count > MAX_COUNT {
            return Err(Error::invalid(format!("count must be between 1 and {MAX_COUNT}, got {count}")));
        }
        let buffer = match self.buffers.load().get(tag) {
            Some(buffer) => buffer.clone(),
            None => self.create_buffer(tag)?,
        };
        let serve_twice = self.planted_on_follower(PlantedBug::ServeTwice);
        if serve_twice {
            if let Some(replayed) = self.replay.replayed(tag) {
                return Ok(replayed);
            }
        }
        let mut ranges = Vec::new();
        let mut needed = count;
        let mut deadline = None;
        loop {
            match buffer.buffer.take(needed) {
                Take::Ids { range, load_due } => {
                    if load_due {
                        self.start_load(&buffer);
                    }
                    needed -= range.len();
                    ranges.push(range);
                    if needed == 0 {
                        buffer.issued.fetch_add(count, Ordering::Relaxed);
                        if serve_twice {
                            self.replay.record(tag, &ranges);
                        }
                        return Ok(ranges);
                    }
                }
                Take::UsedUp => {
                    let notified = buffer.loaded.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    match buffer.buffer.switch() {
                        Switch::Switched => continue,
                        Switch::Closed => {
                            return Err(Error::new(ErrorCode::SegmentsNotReady, "this node is shutting down"))
                        }
                        Switch::NotReady { .. } => {}
                    }
                    if buffer.exhausted.load(Ordering::Relaxed) {
                        return Err(Error::new(
                            ErrorCode::TagExhausted,
                            format!("tag '{tag}' has handed out its last ID"),
                        ));
                    }
                    self.start_load(&buffer);
                    let deadline = *deadline.get_or_insert_with(|| {
                        buffer.waits.fetch_add(1, Ordering::Relaxed);
                        tokio::time::Instant::now() + self.config.wait
                    });
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        return Err(Error::new(
                            ErrorCode::SegmentsNotReady,
                            format!("both segments of tag '{tag}' are used up and the next claim has not committed"),
                        ));
                    }
                }
            }
        }
    }

    fn create_buffer(&self, tag: &str) -> Result<Arc<TagBuffer>, Error> {
        raft::tag::validate_tag(tag).map_err(Error::invalid)?;
        self.cluster.ensure_serving()?;
        if !self.cluster.read(|sm| sm.tags.contains_key(tag)) {
            return Err(Error::tag_not_found(tag));
        }
        let _insert = self.insert.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let current = self.buffers.load();
        if let Some(buffer) = current.get(tag) {
            return Ok(buffer.clone());
        }
        let buffer = Arc::new(TagBuffer {
            tag: tag.to_string(),
            buffer: SegmentBuffer::new(),
            loaded: Notify::new(),
            last_claim: Mutex::new(None),
            exhausted: AtomicBool::new(false),
            issued: AtomicU64::new(0),
            claims: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            rate: Mutex::new((0, Instant::now(), 0.0)),
        });
        let mut next = HashMap::clone(&current);
        next.insert(tag.to_string(), buffer.clone());
        self.buffers.store(Arc::new(next));
        Ok(buffer)
    }

    /// Starts the one background claim of this tag, unless one runs or a next segment waits.
    fn start_load(self: &Arc<Self>, buffer: &Arc<TagBuffer>) {
        if !buffer.buffer.try_begin_load() {
            return;
        }
        let segments = Arc::clone(self);
        let buffer = Arc::clone(buffer);
        tokio::spawn(async move {
            segments.load(&buffer).await;
            buffer.loaded.notify_waiters();
        });
    }

    async fn load(&self, buffer: &TagBuffer) {
        let tag_step = self.cluster.read(|sm| sm.tags.get(&buffer.tag).map(|record| record.step));
        let Some(tag_step) = tag_step else {
            buffer.buffer.load_failed();
            return;
        };
        let previous = *buffer.last_claim.lock().unwrap_or_else(|p| p.into_inner());
        let step = self.config.step_policy.next_step(tag_step, previous.map(|(step, at, _)| (step, at.elapsed())));
        if self.planted_on_follower(PlantedBug::UncommittedClaim) {
            let max_id = self.cluster.read(|sm| sm.tags.get(&buffer.tag).map(|record| record.max_id));
            if let Some((start, Some(end))) = max_id.map(|start| (start, start.checked_add(step))) {
                buffer.buffer.install_next(IdRange { start, end });
                return;
            }
        }
        let started = Instant::now();
        let res = self.cluster.write(raft::Request::ClaimSegment { tag: buffer.tag.clone(), step }).await;
        self.metrics.observe_claim(&buffer.tag, started.elapsed(), res.is_ok());
        match res {
            Ok(raft::Response::Segment { start, end }) => {
                *buffer.last_claim.lock().unwrap_or_else(|p| p.into_inner()) = Some((step, Instant::now(), now_ms()));
                buffer.claims.fetch_add(1, Ordering::Relaxed);
                tracing::info!(new_max_id = end, tag = %buffer.tag, start, step, "segment claim committed");
                if !buffer.buffer.install_next(IdRange { start, end }) {
                    tracing::info!(tag = %buffer.tag, start, end, "claim arrived after close; its range stays unused");
                }
            }
            Ok(raft::Response::Rejected(raft::Rejection::TagExhausted)) => {
                buffer.exhausted.store(true, Ordering::Relaxed);
                buffer.buffer.load_failed();
            }
            Ok(other) => {
                tracing::warn!(tag = %buffer.tag, answer = ?other, "unexpected answer to a claim");
                buffer.buffer.load_failed();
            }
            Err(e) => {
                tracing::warn!(tag = %buffer.tag, error = %e, "segment claim failed");
                buffer.buffer.load_failed();
            }
        }
    }

    /// Whether `bug` is planted in this process and this node is not the leader (debug builds only).
    fn planted_on_follower(&self, bug: PlantedBug) -> bool {
        crate::planted::active() == Some(bug) && self.cluster.metrics().current_leader != Some(self.cluster.node_id())
    }

    /// Creates buffers for every tag and starts their first loads (`--preload`).
    pub fn preload(self: &Arc<Self>) {
        let tags: Vec<String> = self.cluster.read(|sm| sm.tags.keys().cloned().collect());
        for tag in tags {
            if let Ok(buffer) = self.create_buffer(&tag) {
                self.start_load(&buffer);
            }
        }
    }

    /// Closes every buffer and gives back each never-served tail with one `ReleaseSegment`,
    /// all tags at once. A release that does not commit in time only leaves a gap.
    pub async fn release_all(&self) {
        let buffers = self.buffers.load_full();
        let mut releases = tokio::task::JoinSet::new();
        for buffer in buffers.values() {
            let unserved = buffer.buffer.close();
            let Some((from, expected_max_id)) = releasable_tail(&unserved) else {
                continue;
            };
            let cluster = self.cluster.clone();
            let tag = buffer.tag.clone();
            releases.spawn(async move {
                let request = raft::Request::ReleaseSegment { tag: tag.clone(), from, expected_max_id };
                match cluster.write(request).await {
                    Ok(raft::Response::Released { applied }) => {
                        tracing::info!(tag = %tag, from, expected_max_id, applied, "segment tail released")
                    }
                    Ok(other) => tracing::warn!(tag = %tag, answer = ?other, "unexpected answer to a release"),
                    Err(e) => {
                        tracing::warn!(tag = %tag, error = %e, "segment tail not released (a gap, not a duplicate)")
                    }
                }
            });
        }
        while releases.join_next().await.is_some() {}
    }

    /// This node's buffers for `tag`, or `None` before its first request.
    pub fn view(&self, tag: &str) -> Option<BufferView> {
        let buffers = self.buffers.load();
        let buffer = buffers.get(tag)?;
        let state = buffer.buffer.state();
        let last_claim = *buffer.last_claim.lock().unwrap_or_else(|p| p.into_inner());
        let issued = buffer.issued.load(Ordering::Relaxed);
        let ids_per_sec = {
            let mut rate = buffer.rate.lock().unwrap_or_else(|p| p.into_inner());
            let elapsed = rate.1.elapsed().as_secs_f64();
            if elapsed >= 1.0 {
                *rate = (issued, Instant::now(), issued.saturating_sub(rate.0) as f64 / elapsed);
            }
            rate.2
        };
        Some(BufferView {
            current: state.current.map(RangeView::from),
            cursor: state.current.map(|_| state.cursor.to_string()),
            next: state.next.map(RangeView::from),
            loading: state.loading,
            step: last_claim.map(|(step, _, _)| step),
            last_claim_at: last_claim.map(|(_, _, at_ms)| crate::api::rfc3339(at_ms)),
            ids_issued: issued,
            claims: buffer.claims.load(Ordering::Relaxed),
            waits: buffer.waits.load(Ordering::Relaxed),
            ids_per_sec,
        })
    }

    /// Per-tag numbers for `/metrics`, sorted by tag.
    pub fn stats(&self) -> Vec<TagStats> {
        let buffers = self.buffers.load();
        let mut stats: Vec<_> = buffers
            .values()
            .map(|buffer| {
                let state = buffer.buffer.state();
                let ids_left =
                    state.current.map_or(0, |r| r.end.saturating_sub(state.cursor)) + state.next.map_or(0, |r| r.len());
                TagStats {
                    tag: buffer.tag.clone(),
                    ids_issued: buffer.issued.load(Ordering::Relaxed),
                    waits: buffer.waits.load(Ordering::Relaxed),
                    ids_left,
                }
            })
            .collect();
        stats.sort_by(|a, b| a.tag.cmp(&b.tag));
        stats
    }
}

/// One tag's counters on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagStats {
    pub tag: String,
    pub ids_issued: u64,
    pub waits: u64,
    pub ids_left: u64,
}
