//! `SegmentBuffer`: Leaf's double buffer for one tag on one node.
//!
//! The current segment is an immutable `[start, end)` with an atomic cursor. Taking IDs is one
//! `ArcSwap::load` and one `fetch_add`: no lock and no I/O. Only the slow path (the current
//! segment used up, switching to the next, installing a freshly claimed next) takes a mutex.
//!
//! Invariants:
//! 1. Every ID handed out lies in a segment given to `install_next`, which the caller does only
//!    with the answer of a committed and applied claim.
//! 2. An ID is handed out at most once: each comes from a distinct `fetch_add` window of one
//!    segment's cursor, and a segment is never installed twice.
//! 3. Per buffer IDs strictly increase: segments are installed in claim order, claims only move
//!    forward, and the cursor only moves forward.
//! 4. After `close`, nothing more is handed out, and the IDs it reports unserved were never
//!    handed out.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;

use arc_swap::ArcSwap;

/// A half-open range of IDs `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    pub start: u64,
    pub end: u64,
}

impl IdRange {
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// One committed claim being served.
#[derive(Debug)]
pub struct Segment {
    range: IdRange,
    /// The next ID to hand out. It may run past `end` (a take that finds the segment used up
    /// still adds); such values hand out nothing.
    cursor: AtomicU64,
    /// Handing out this ID (or passing it) means 10 % of the segment is used: time to load the
    /// next one.
    load_at: u64,
}

impl Segment {
    pub fn new(range: IdRange) -> Segment {
        let load_at = range.start.saturating_add(range.len().div_ceil(10));
        Segment { range, cursor: AtomicU64::new(range.start), load_at }
    }

    fn empty() -> Segment {
        Segment::new(IdRange { start: 0, end: 0 })
    }

    pub fn range(&self) -> IdRange {
        self.range
    }

    /// The next ID this segment would hand out, clamped to its end.
    pub fn cursor(&self) -> u64 {
        self.cursor.load(Ordering::Relaxed).min(self.range.end)
    }

    fn is_used_up(&self) -> bool {
        self.cursor.load(Ordering::Relaxed) >= self.range.end
    }
}

/// The answer of one fast-path take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Up to the asked number of IDs, and whether this take crossed the 10 % mark (the caller
    /// should start loading the next segment).
    Ids { range: IdRange, load_due: bool },
    /// The current segment is used up: call [`SegmentBuffer::switch`].
    UsedUp,
}

/// The answer of [`SegmentBuffer::switch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// A fresh current segment is in place: take again.
    Switched,
    /// No next segment yet; `loading` says whether a load is under way.
    NotReady { loading: bool },
    /// The buffer was closed for shutdown.
    Closed,
}

#[derive(Debug, Default)]
struct Slow {
    next: Option<Arc<Segment>>,
    loading: bool,
    closed: bool,
}

/// What the buffer holds, for status pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferState {
    pub current: Option<IdRange>,
    pub cursor: u64,
    pub next: Option<IdRange>,
    pub loading: bool,
}

#[derive(Debug)]
pub struct SegmentBuffer {
    current: ArcSwap<Segment>,
    slow: Mutex<Slow>,
    /// True once a take has seen the current segment used up while no next one was ready; a
    /// plain flag the service reads for metrics.
    starved: AtomicBool,
}

impl Default for SegmentBuffer {
    fn default() -> Self {
        SegmentBuffer::new()
    }
}

impl SegmentBuffer {
    pub fn new() -> SegmentBuffer {
        SegmentBuffer {
            current: ArcSwap::from_pointee(Segment::empty()),
            slow: Mutex::default(),
            starved: AtomicBool::new(false),
        }
    }

    /// Takes up to `max` IDs from the current segment (fewer at its end). Lock-free.
    pub fn take(&self, max: u64) -> Take {
        let segment = self.current.load();
        let old = segment.cursor.fetch_add(max, Ordering::Relaxed);
        if old >= segment.range.end {
            return Take::UsedUp;
        }
        let end = old.saturating_add(max).min(segment.range.end);
        let load_due = old < segment.load_at && segment.load_at <= end;
        Take::Ids { range: IdRange { start: old, end }, load_due }
    }

    /// Replaces a used-up current segment by the next one, if there is one.
    pub fn switch(&self) -> Switch {
        let mut slow = self.lock();
        if slow.closed {
            return Switch::Closed;
        }
        let current = self.current.load();
        if !current.is_used_up() {
            // Another taker switched first.
            return Switch::Switched;
        }
        // Keep a used-up cursor from creeping towards overflow while takers keep adding to it.
        current.cursor.fetch_min(current.range.end, Ordering::Relaxed);
        match slow.next.take() {
            Some(next) => {
                self.current.store(next);
                Switch::Switched
            }
            None => {
                self.starved.store(true, Ordering::Relaxed);
                Switch::NotReady { loading: slow.loading }
            }
        }
    }

    /// Claims the right to load the next segment: true for exactly one caller until that load
    /// ends with [`install_next`](Self::install_next) or [`load_failed`](Self::load_failed), and
    /// false while a next segment is already waiting.
    pub fn try_begin_load(&self) -> bool {
        let mut slow = self.lock();
        if slow.closed || slow.loading || slow.next.is_some() {
            return false;
        }
        slow.loading = true;
        true
    }

    /// Installs a committed claim as the next segment and ends the load. Returns false (and
    /// installs nothing) when the buffer was closed meanwhile: the caller then owns the range.
    pub fn install_next(&self, range: IdRange) -> bool {
        let mut slow = self.lock();
        slow.loading = false;
        if slow.closed || range.is_empty() {
            return false;
        }
        debug_assert!(slow.next.is_none(), "a load runs only while no next segment waits");
        slow.next = Some(Arc::new(Segment::new(range)));
        true
    }

    pub fn load_failed(&self) {
        self.lock().loading = false;
    }

    /// Stops handing out IDs and answers the ranges that were never handed out, in increasing
    /// order (the unused end of the current segment, then the whole next one).
    pub fn close(&self) -> Vec<IdRange> {
        let mut slow = self.lock();
        slow.closed = true;
        let current = self.current.load_full();
        // After this swap every take on the current segment finds it used up; takes that came
        // before it handed out only IDs below the old cursor.
        let served_to = current.cursor.swap(current.range.end, Ordering::Relaxed).min(current.range.end);
        let mut unserved = Vec::new();
        if served_to < current.range.end {
            unserved.push(IdRange { start: served_to, end: current.range.end });
        }
        if let Some(next) = slow.next.take() {
            unserved.push(next.range);
        }
        unserved
    }

    pub fn state(&self) -> BufferState {
        let slow = self.lock();
        let current = self.current.load();
        BufferState {
            current: (!current.range.is_empty()).then_some(current.range),
            cursor: current.cursor(),
            next: slow.next.as_ref().map(|next| next.range),
            loading: slow.loading,
        }
    }

    /// Whether a take ever found the buffer empty (both segments used up).
    pub fn has_starved(&self) -> bool {
        self.starved.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Slow> {
        // A panic while holding this lock cannot leave `Slow` inconsistent (every update is a
        // single field store), so a poisoned lock is still safe to use.
        self.slow.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The tail of `unserved` (as `close` answers it) that may be given back with one
/// `ReleaseSegment`: the contiguous run ending at the last range's end, as `(from, end)`.
pub fn releasable_tail(unserved: &[IdRange]) -> Option<(u64, u64)> {
    let last = unserved.last()?;
    let mut from = last.start;
    for range in unserved.iter().rev().skip(1) {
        if range.end != from {
            break;
        }
        from = range.start;
    }
    Some((from, last.end))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;
