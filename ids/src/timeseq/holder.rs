//! `RangeHolder`: the sequence ranges one node holds for one namespace, by second.
//!
//! The range being served lives in one slot (second, end and an atomic cursor, under a
//! generation counter: the seqlock of `engine::segment`); taking sequences is a generation load,
//! one `fetch_add` and a re-check, with no lock. Claimed ranges wait in `pending` (the next
//! second's prefetched range, more of the current second, a window's block for each of its
//! seconds) until [`RangeHolder::advance`] moves one into the slot under the mutex.
//!
//! Invariants (`timeseq/proptests.rs`):
//! 1. Every sequence handed out lies in a range given to `install_range` or a block given to
//!    `install_block`, which the caller does only with a committed and applied claim; each is
//!    handed out at most once (a block moves into the slot at most once per second).
//! 2. The slot's second never goes down, so per holder a later second's IDs come later.
//! 3. A range is served only from its second on (on the caller's clock); a range whose second
//!    has passed is dropped, never served late.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Mutex;
use std::sync::MutexGuard;

/// Sequences `[start, end)` of Unix second `second`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SecondRange {
    pub second: u64,
    pub start: u64,
    pub end: u64,
}

impl SecondRange {
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

#[derive(Debug, Default)]
struct Slot {
    generation: AtomicU64,
    second: AtomicU64,
    end: AtomicU64,
    /// Passing this sequence means half the range is used: time to claim more.
    refill_at: AtomicU64,
    cursor: AtomicU64,
}

impl Slot {
    fn set(&self, range: SecondRange) {
        self.generation.fetch_add(1, SeqCst);
        self.second.store(range.second, SeqCst);
        self.end.store(range.end, SeqCst);
        self.refill_at.store(range.start.saturating_add(range.len() / 2), SeqCst);
        self.cursor.store(range.start, SeqCst);
        self.generation.fetch_add(1, SeqCst);
    }

    /// (second, cursor clamped to end, end). Caller holds the lock.
    fn read(&self) -> (u64, u64, u64) {
        let end = self.end.load(SeqCst);
        (self.second.load(SeqCst), self.cursor.load(SeqCst).min(end), end)
    }
}

/// The answer of one lock-free take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Up to the asked number of sequences, and whether this take passed the refill mark.
    Ids { range: SecondRange, refill_due: bool },
    /// The slot is used up or its second has passed: call [`RangeHolder::advance`].
    Empty,
}

/// The answer of [`RangeHolder::advance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// The slot serves the current second: take again.
    Ready,
    /// Nothing is held for `second`, the second being served (the current one, or the slot's
    /// after the clock stepped back), whether or not a later second's range is: claim more of
    /// it, and wait for a later second only once `second` is used up cluster-wide.
    Empty {
        second: u64,
    },
    Closed,
}

/// A committed block not yet wholly served: sequences `[start, end)` of every second in
/// `[next, last]`. A window claim is one of these, not one range per second: a node holding
/// 10,000 namespaces' windows would otherwise keep and shift 600,000 ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    /// The first second not yet moved into the slot (every earlier one was served or passed).
    next: u64,
    last: u64,
    start: u64,
    end: u64,
}

impl Held {
    fn covers(&self, second: u64) -> bool {
        self.next <= second && second <= self.last
    }
}

#[derive(Debug, Default)]
struct Slow {
    /// Claimed blocks not yet wholly in the slot, in no order.
    pending: Vec<Held>,
    /// Seconds a claim is in flight for.
    loading: Vec<u64>,
    closed: bool,
}

/// What the holder holds, for status pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderState {
    /// The slot's range (start unknown once installed: the cursor's position is what counts).
    pub current: Option<SecondRange>,
    pub pending: Vec<SecondRange>,
    pub loading: Vec<u64>,
}

#[derive(Debug, Default)]
pub struct RangeHolder {
    slot: Slot,
    slow: Mutex<Slow>,
}

impl RangeHolder {
    pub fn new() -> RangeHolder {
        RangeHolder::default()
    }

    /// Takes up to `max` sequences of the slot's second, if that second has not passed at `now_s`.
    #[inline]
    pub fn take(&self, now_s: u64, max: u64) -> Take {
        let slot = &self.slot;
        loop {
            let generation = slot.generation.load(SeqCst);
            if generation & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let second = slot.second.load(SeqCst);
            if second < now_s {
                return Take::Empty;
            }
            let old = slot.cursor.fetch_add(max, SeqCst);
            let end = slot.end.load(SeqCst);
            let refill_at = slot.refill_at.load(SeqCst);
            if slot.generation.load(SeqCst) != generation {
                continue;
            }
            if old >= end {
                return Take::Empty;
            }
            let taken_to = old.saturating_add(max).min(end);
            let refill_due = old < refill_at && refill_at <= taken_to;
            return Take::Ids { range: SecondRange { second, start: old, end: taken_to }, refill_due };
        }
    }

    /// Moves the first held range of the current second (or, after the clock stepped back, of
    /// the slot's second) into a used-up or outdated slot; drops ranges whose second has passed.
    /// A later second's range held (the prefetch) leaves the answer `Empty`: the current second
    /// may still have sequences to claim.
    pub fn advance(&self, now_s: u64) -> Advance {
        let mut slow = self.lock();
        if slow.closed {
            return Advance::Closed;
        }
        let (slot_second, cursor, end) = self.slot.read();
        if slot_second >= now_s && cursor < end {
            return Advance::Ready;
        }
        // Keep a used-up cursor from creeping towards overflow while takers keep adding to it.
        self.slot.cursor.fetch_min(end, SeqCst);
        let serving = now_s.max(slot_second);
        slow.pending.retain(|held| held.last >= serving);
        // Of the blocks that cover the second, the lowest first (as the claims gave them).
        let first = slow
            .pending
            .iter()
            .enumerate()
            .filter(|(_, held)| held.covers(serving))
            .min_by_key(|(_, held)| (held.start, held.end))
            .map(|(i, _)| i);
        let Some(i) = first else {
            return Advance::Empty { second: serving };
        };
        let held = &mut slow.pending[i];
        let range = SecondRange { second: serving, start: held.start, end: held.end };
        // Served in this second once: never again, in this second or an earlier one.
        held.next = serving.saturating_add(1);
        if held.next > held.last {
            slow.pending.swap_remove(i);
        }
        self.slot.set(range);
        Advance::Ready
    }

    /// Claims the right to claim sequences of `second`: true for one caller until
    /// [`load_ended`](Self::load_ended).
    pub fn try_begin_load(&self, second: u64) -> bool {
        let mut slow = self.lock();
        if slow.closed || slow.loading.contains(&second) {
            return false;
        }
        slow.loading.push(second);
        true
    }

    pub fn load_ended(&self, second: u64) {
        self.lock().loading.retain(|&s| s != second);
    }

    /// Keeps a committed claim's range until its second is served. False (nothing kept) once
    /// closed or when the range is empty.
    pub fn install_range(&self, range: SecondRange) -> bool {
        self.install_block(range.second, range.second, range.start, range.end)
    }

    /// Keeps a committed window's block, `[start, end)` in every second of
    /// `[first_second, last_second]`, until each second is served. False (nothing kept) once
    /// closed or when the block is empty.
    pub fn install_block(&self, first_second: u64, last_second: u64, start: u64, end: u64) -> bool {
        let mut slow = self.lock();
        if slow.closed || end <= start || last_second < first_second {
            return false;
        }
        slow.pending.push(Held { next: first_second, last: last_second, start, end });
        true
    }

    /// Sequences held for `second` and not yet handed out (the slot's and the pending ones).
    pub fn held_for(&self, second: u64) -> u64 {
        let slow = self.lock();
        let (slot_second, cursor, end) = self.slot.read();
        let in_slot = if slot_second == second { end - cursor } else { 0 };
        let pending = slow.pending.iter().filter(|held| held.covers(second));
        in_slot + pending.map(|held| held.end - held.start).sum::<u64>()
    }

    /// Stops handing out sequences; what is held becomes a gap.
    pub fn close(&self) {
        let mut slow = self.lock();
        slow.closed = true;
        slow.pending.clear();
        let slot = &self.slot;
        slot.generation.fetch_add(1, SeqCst);
        slot.end.store(0, SeqCst);
        slot.cursor.store(0, SeqCst);
        slot.generation.fetch_add(1, SeqCst);
    }

    pub fn state(&self) -> HolderState {
        let slow = self.lock();
        let (second, cursor, end) = self.slot.read();
        let current = (cursor < end).then_some(SecondRange { second, start: cursor, end });
        let mut pending: Vec<SecondRange> = slow
            .pending
            .iter()
            .flat_map(|held| {
                (held.next..=held.last).map(|second| SecondRange { second, start: held.start, end: held.end })
            })
            .collect();
        pending.sort_unstable();
        HolderState { current, pending, loading: slow.loading.clone() }
    }

    fn lock(&self) -> MutexGuard<'_, Slow> {
        // Every update of `Slow` leaves it consistent, so a poisoned lock is still safe to use.
        self.slow.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(second: u64, start: u64, end: u64) -> SecondRange {
        SecondRange { second, start, end }
    }

    #[test]
    fn a_prefetched_second_is_served_from_its_second_on() {
        let holder = RangeHolder::new();
        assert_eq!(holder.take(100, 1), Take::Empty);
        assert_eq!(holder.advance(100), Advance::Empty { second: 100 });
        assert!(holder.install_range(range(101, 0, 10)));
        assert_eq!(holder.advance(100), Advance::Empty { second: 100 });
        assert_eq!(holder.take(100, 1), Take::Empty);
        assert_eq!(holder.advance(101), Advance::Ready);
        assert_eq!(holder.take(101, 4), Take::Ids { range: range(101, 0, 4), refill_due: false });
        assert_eq!(holder.take(101, 4), Take::Ids { range: range(101, 4, 8), refill_due: true });
        assert_eq!(holder.held_for(101), 2);
        // The second passes: the rest is a gap, never served late.
        assert_eq!(holder.take(102, 1), Take::Empty);
        assert!(holder.install_range(range(101, 10, 20)));
        assert_eq!(holder.advance(102), Advance::Empty { second: 102 });
        assert_eq!(holder.state().pending, []);
    }

    #[test]
    fn a_held_next_second_leaves_the_current_one_to_claim_and_serve() {
        let holder = RangeHolder::new();
        holder.install_range(range(100, 0, 4));
        assert_eq!(holder.advance(100), Advance::Ready);
        assert!(matches!(holder.take(100, 4), Take::Ids { range: SecondRange { second: 100, start: 0, end: 4 }, .. }));
        // The next second is prefetched while the current one is used up on this node: the
        // answer is to claim more of the current second, not to wait for the next.
        holder.install_range(range(101, 0, 8));
        assert_eq!(holder.take(100, 1), Take::Empty);
        assert_eq!(holder.advance(100), Advance::Empty { second: 100 });
        holder.install_range(range(100, 4, 6));
        assert_eq!(holder.advance(100), Advance::Ready);
        assert!(matches!(holder.take(100, 5), Take::Ids { range: SecondRange { second: 100, start: 4, end: 6 }, .. }));
        assert_eq!(holder.advance(100), Advance::Empty { second: 100 });
        // The prefetched range is still there for its second.
        assert_eq!(holder.advance(101), Advance::Ready);
        assert!(matches!(holder.take(101, 8), Take::Ids { range: SecondRange { second: 101, start: 0, end: 8 }, .. }));
    }

    #[test]
    fn more_of_the_same_second_follows_and_a_clock_stepped_back_keeps_the_second() {
        let holder = RangeHolder::new();
        holder.install_range(range(50, 0, 2));
        holder.install_range(range(50, 7, 9));
        assert_eq!(holder.advance(50), Advance::Ready);
        assert!(matches!(holder.take(50, 5), Take::Ids { range: SecondRange { start: 0, end: 2, .. }, .. }));
        assert_eq!(holder.take(50, 1), Take::Empty);
        // The clock went back a second: the slot's second is kept, never an older one.
        holder.install_range(range(49, 0, 5));
        assert_eq!(holder.advance(49), Advance::Ready);
        assert!(matches!(holder.take(49, 5), Take::Ids { range: SecondRange { second: 50, start: 7, end: 9 }, .. }));
        assert_eq!(holder.advance(49), Advance::Empty { second: 50 });
    }

    /// A window's block serves each of its seconds once, from that second on, beside the
    /// one-second ranges of the same seconds; the seconds that passed unserved are a gap.
    #[test]
    fn a_block_serves_each_of_its_seconds_once() {
        let holder = RangeHolder::new();
        assert!(holder.install_block(10, 13, 4, 8));
        assert!(holder.install_range(range(11, 0, 4)));
        assert_eq!(holder.held_for(11), 8);
        assert_eq!(holder.advance(10), Advance::Ready);
        assert!(matches!(holder.take(10, 9), Take::Ids { range: SecondRange { second: 10, start: 4, end: 8 }, .. }));
        assert_eq!(holder.advance(10), Advance::Empty { second: 10 }, "once per second");
        // Second 11: the one-second range (lower) first, then the block.
        assert_eq!(holder.advance(11), Advance::Ready);
        assert!(matches!(holder.take(11, 9), Take::Ids { range: SecondRange { second: 11, start: 0, end: 4 }, .. }));
        assert_eq!(holder.advance(11), Advance::Ready);
        assert!(matches!(holder.take(11, 9), Take::Ids { range: SecondRange { second: 11, start: 4, end: 8 }, .. }));
        assert_eq!(holder.advance(11), Advance::Empty { second: 11 });
        assert_eq!(holder.state().pending, [range(12, 4, 8), range(13, 4, 8)]);
        // The clock jumps past second 12: it passed unserved; 13 is served, then nothing.
        assert_eq!(holder.advance(13), Advance::Ready);
        assert!(matches!(holder.take(13, 1), Take::Ids { range: SecondRange { second: 13, start: 4, end: 5 }, .. }));
        assert_eq!(holder.state().pending, []);
        assert!(!holder.install_block(20, 19, 0, 4), "an empty window");
        assert!(!holder.install_block(20, 21, 4, 4), "an empty block");
    }

    #[test]
    fn loads_are_one_per_second_and_close_ends_everything() {
        let holder = RangeHolder::new();
        assert!(holder.try_begin_load(5));
        assert!(!holder.try_begin_load(5));
        assert!(holder.try_begin_load(6));
        holder.load_ended(5);
        assert!(holder.try_begin_load(5));
        holder.install_range(range(5, 0, 3));
        assert_eq!(holder.advance(5), Advance::Ready);
        holder.close();
        assert_eq!(holder.take(5, 1), Take::Empty);
        assert_eq!(holder.advance(5), Advance::Closed);
        assert!(!holder.install_range(range(6, 0, 3)));
    }
}
