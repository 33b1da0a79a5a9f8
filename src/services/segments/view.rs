//! What `/v1/tags/{tag}` and `/metrics` show of this node's buffers, in numbers.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Segments;
use crate::metrics::SegmentStats;
use crate::metrics::TagStats;
use leafraft_ids::IdRange;

/// IDs issued at the last sample, when it was taken, and the rate it measured.
#[derive(Debug, Clone, Copy)]
pub(super) struct RateSample {
    pub(super) issued: u64,
    pub(super) at: Instant,
    pub(super) ids_per_sec: f64,
}

impl RateSample {
    /// Takes a new sample once a second has passed since the last one; answers the latest rate.
    pub(super) fn update(&mut self, issued: u64) -> f64 {
        let elapsed = self.at.elapsed().as_secs_f64();
        if elapsed >= 1.0 {
            let ids_per_sec = issued.saturating_sub(self.issued) as f64 / elapsed;
            *self = RateSample { issued, at: Instant::now(), ids_per_sec };
        }
        self.ids_per_sec
    }
}

/// This node's buffers for one tag at one moment, in numbers; `api` formats them.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferState {
    pub current: Option<IdRange>,
    /// The next ID of the current segment (meaningful while there is one).
    pub cursor: Option<u64>,
    pub next: Option<IdRange>,
    /// A claim for the next segment is in flight.
    pub loading: bool,
    /// The step of the last claim (the dynamic step).
    pub step: Option<u64>,
    /// When the last claim committed, Unix ms.
    pub last_claim_at_ms: Option<u64>,
    pub ids_issued: u64,
    pub claims: u64,
    /// Requests that found both segments used up and waited for a claim.
    pub waits: u64,
    pub ids_per_sec: f64,
}

impl BufferState {
    /// How much of the current segment is used, in percent.
    pub fn used_percent(&self) -> Option<f64> {
        let current = self.current?;
        let len = current.len();
        if len == 0 {
            return None;
        }
        let used = self.cursor?.saturating_sub(current.start);
        Some((used as f64 / len as f64 * 100.0).clamp(0.0, 100.0))
    }
}

impl Segments {
    /// This node's buffers for `tag`, or `None` before its first request.
    pub fn view(&self, tag: &str) -> Option<BufferState> {
        let buffer = self.buffers.get(tag)?;
        let state = buffer.buffer.state();
        let last_claim = *buffer.last_claim.lock().unwrap_or_else(|p| p.into_inner());
        let issued = buffer.issued.load(Ordering::Relaxed);
        let ids_per_sec = buffer.rate.lock().unwrap_or_else(|p| p.into_inner()).update(issued);
        Some(BufferState {
            current: state.current,
            cursor: state.current.map(|_| state.cursor),
            next: state.next,
            loading: state.loading,
            step: last_claim.map(|last| last.step),
            last_claim_at_ms: last_claim.map(|last| last.at_ms),
            ids_issued: issued,
            claims: buffer.claims.load(Ordering::Relaxed),
            waits: buffer.waits.load(Ordering::Relaxed),
            ids_per_sec,
        })
    }

    /// The tags this node has buffers of (it served them since it started, and not so long ago
    /// that their buffers were dropped as idle).
    pub fn served_tags(&self) -> Vec<String> {
        self.buffers.names()
    }

    /// Per-tag numbers for `/metrics`, and the counts of the buffers dropped since start. The map
    /// read here keeps its buffers alive while the dropped counts are read, so a buffer is
    /// counted once (a dropped one adds its counts when the last request lets go of it).
    pub fn stats(&self) -> SegmentStats {
        let buffers = self.buffers.values();
        let tags = buffers
            .iter()
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
        let dropped = &self.dropped;
        let count = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        SegmentStats {
            tags,
            dropped_ids_issued: count(&dropped.ids_issued),
            dropped_waits: count(&dropped.waits),
            idle_drops: count(&dropped.idle_drops),
            idle_releases: vec![
                ("applied", count(&dropped.released)),
                ("refused", count(&dropped.refused)),
                ("failed", count(&dropped.failed)),
            ],
        }
    }
}
