//! `SegmentBuffer`: Leaf's double buffer for one tag on one node.
//!
//! The current segment lives in one `Slot`: `end` and an atomic `cursor`, guarded by a
//! generation counter (a seqlock). Taking IDs is a generation load, one `fetch_add` on the
//! cursor, two loads and a generation re-check: no lock, no allocation, no I/O. Only the slow
//! path (the current segment used up, switching to the next, installing a freshly claimed next,
//! closing) takes a mutex, and it is the only writer of the slot.
//!
//! Invariants:
//! 1. Every ID handed out lies in a segment given to `install_next`, which the caller does only
//!    with the answer of a committed and applied claim.
//! 2. An ID is handed out at most once: each comes from a distinct `fetch_add` window of the
//!    cursor within one generation; a take that overlapped a generation change hands out nothing
//!    (its window is lost, a gap) and tries again.
//! 3. Per buffer IDs strictly increase: segments are installed in claim order, claims only move
//!    forward, and within a generation the cursor only moves forward.
//! 4. After `close`, nothing more is handed out, and the IDs it reports unserved were never
//!    handed out.
//!
//! Every access to the slot's atomics is `SeqCst`: the argument for invariant 2 needs one total
//! order of the writer's stores and the reader's loads (on x86 such loads are plain moves).

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Mutex;
use std::sync::MutexGuard;

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

/// The segment being served. Written only under `SegmentBuffer::slow`.
#[derive(Debug, Default)]
struct Slot {
    /// Odd while the writer changes the slot; bumped twice per change.
    generation: AtomicU64,
    start: AtomicU64,
    end: AtomicU64,
    /// Handing out this ID (or passing it) means 10 % of the segment is used: time to load the
    /// next one.
    load_at: AtomicU64,
    /// The next ID to hand out. It may run past `end` (a take that finds the segment used up
    /// still adds); such values hand out nothing.
    cursor: AtomicU64,
}

impl Slot {
    /// Replaces the segment. Caller holds the slow-path lock.
    fn set(&self, range: IdRange) {
        self.generation.fetch_add(1, SeqCst);
        self.start.store(range.start, SeqCst);
        self.end.store(range.end, SeqCst);
        self.load_at.store(range.start.saturating_add(range.len().div_ceil(10)), SeqCst);
        self.cursor.store(range.start, SeqCst);
        self.generation.fetch_add(1, SeqCst);
    }

    /// The segment and its cursor clamped to the end. Caller holds the slow-path lock, so the
    /// values belong together.
    fn read(&self) -> (IdRange, u64) {
        let range = IdRange { start: self.start.load(SeqCst), end: self.end.load(SeqCst) };
        (range, self.cursor.load(SeqCst).min(range.end))
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
    next: Option<IdRange>,
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

#[derive(Debug, Default)]
pub struct SegmentBuffer {
    current: Slot,
    slow: Mutex<Slow>,
}

impl SegmentBuffer {
    pub fn new() -> SegmentBuffer {
        SegmentBuffer::default()
    }

    /// Takes up to `max` IDs from the current segment (fewer at its end). Lock-free. Inlined
    /// across crates: it is the whole hot path of the server and of the client library.
    #[inline]
    pub fn take(&self, max: u64) -> Take {
        let slot = &self.current;
        loop {
            let generation = slot.generation.load(SeqCst);
            if generation & 1 == 1 {
                // The writer is between its two bumps: a handful of stores.
                std::hint::spin_loop();
                continue;
            }
            let old = slot.cursor.fetch_add(max, SeqCst);
            let end = slot.end.load(SeqCst);
            let load_at = slot.load_at.load(SeqCst);
            if slot.generation.load(SeqCst) != generation {
                continue;
            }
            if old >= end {
                return Take::UsedUp;
            }
            let taken_to = old.saturating_add(max).min(end);
            let load_due = old < load_at && load_at <= taken_to;
            return Take::Ids { range: IdRange { start: old, end: taken_to }, load_due };
        }
    }

    /// Replaces a used-up current segment by the next one, if there is one.
    pub fn switch(&self) -> Switch {
        let mut slow = self.lock();
        if slow.closed {
            return Switch::Closed;
        }
        let (current, cursor) = self.current.read();
        if cursor < current.end {
            // Another taker switched first.
            return Switch::Switched;
        }
        // Keep a used-up cursor from creeping towards overflow while takers keep adding to it.
        self.current.cursor.fetch_min(current.end, SeqCst);
        match slow.next.take() {
            Some(next) => {
                self.current.set(next);
                Switch::Switched
            }
            None => Switch::NotReady { loading: slow.loading },
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
        slow.next = Some(range);
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
        // Inside the odd generation, takes cannot complete; a take that raced the cursor read
        // below sees the generation change and hands nothing out. So every ID below `served_to`
        // may have been handed out and none at or above it was.
        let slot = &self.current;
        slot.generation.fetch_add(1, SeqCst);
        let end = slot.end.load(SeqCst);
        let served_to = slot.cursor.load(SeqCst).min(end);
        slot.start.store(0, SeqCst);
        slot.end.store(0, SeqCst);
        slot.load_at.store(0, SeqCst);
        slot.cursor.store(0, SeqCst);
        slot.generation.fetch_add(1, SeqCst);
        let mut unserved = Vec::new();
        if served_to < end {
            unserved.push(IdRange { start: served_to, end });
        }
        if let Some(next) = slow.next.take() {
            unserved.push(next);
        }
        unserved
    }

    pub fn state(&self) -> BufferState {
        let slow = self.lock();
        let (current, cursor) = self.current.read();
        BufferState {
            current: (!current.is_empty()).then_some(current),
            cursor,
            next: slow.next,
            loading: slow.loading,
        }
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
