//! `Fence`: the log index at or below which this process serves no block of a shared window
//! (`shared.rs`, rule 3): the leader's commit index, read once after the process began.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

/// The log index at or below which an applied entry's blocks are not served by this process
/// (see `shared.rs`, rule 3). Unknown until learned: then no block is served.
#[derive(Debug)]
pub(super) struct Fence(AtomicU64);

impl Fence {
    const UNKNOWN: u64 = u64::MAX;

    pub(super) fn unknown() -> Fence {
        Fence(AtomicU64::new(Fence::UNKNOWN))
    }

    /// Whether the blocks of the entry at `index` may be served.
    pub(super) fn admits(&self, index: u64) -> bool {
        let fence = self.0.load(Ordering::Acquire);
        fence != Fence::UNKNOWN && index > fence
    }

    /// Sets the fence once, to a read index this process obtained (0: nothing was committed).
    pub(super) fn learn(&self, read_index: Option<u64>) {
        let _ = self.0.compare_exchange(Fence::UNKNOWN, read_index.unwrap_or(0), Ordering::AcqRel, Ordering::Acquire);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing is admitted before the fence is learned, nothing at or below it after, and it is
    /// learned once.
    #[test]
    fn the_fence_admits_only_entries_past_the_first_read_index() {
        let fence = Fence::unknown();
        assert!(!fence.admits(1) && !fence.admits(u64::MAX - 1), "unknown: nothing");
        fence.learn(Some(40));
        assert!(
            !fence.admits(39) && !fence.admits(40),
            "at or below the read index: an earlier process may have served it"
        );
        assert!(fence.admits(41));
        fence.learn(Some(10));
        assert!(!fence.admits(40), "learned once: a later read index does not lower or move it");
        let empty = Fence::unknown();
        empty.learn(None);
        assert!(empty.admits(1), "nothing was committed: every entry is new");
    }
}
