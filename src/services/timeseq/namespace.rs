//! `NamespaceHolder`: one namespace's ranges on this node, and what the service keeps beside
//! them to size its claims and schedule its windows.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::error::Error;
use leafraft_ids::timeseq::Layout;
use leafraft_ids::timeseq::RangeHolder;
use leafraft_ids::timeseq::RangeSizer;

/// One namespace's ranges on this node and what the service keeps beside them.
pub(super) struct NamespaceHolder {
    pub(super) name: String,
    pub(super) layout: Layout,
    pub(super) holder: RangeHolder,
    pub(super) sizer: RangeSizer,
    /// Woken when a claim ends, successfully or not.
    pub(super) claimed: Notify,
    /// The refusal of the last claim that failed, with the second it was for.
    pub(super) last_failure: Mutex<Option<(u64, Error)>>,
    pub(super) issued: AtomicU64,
    /// Sequences taken from ranges, including those of requests that failed later: the demand
    /// the rate (and so the claim size) follows, so that requests that never complete (each
    /// waiting for more than a small claim brings) still grow the claims.
    pub(super) taken: AtomicU64,
    /// Sequences that waiting requests still need beyond what is held: the next claim covers
    /// them (up to the sizer's maximum) instead of the rate alone, so a cold namespace asked for
    /// large batches does not crawl up in claims of the minimum size.
    pub(super) wanted: AtomicU64,
    /// Sequences taken during the last full second (the claim size follows it) and the count at
    /// the start of the current one.
    pub(super) last_second_ids: AtomicU64,
    pub(super) issued_at_second_start: AtomicU64,
    /// The second the rate was last rolled at.
    pub(super) rate_second: AtomicU64,
    /// `taken` when the last claim began, and when (Unix ms): the recent rate a claim is also
    /// sized by.
    pub(super) taken_at_last_claim: AtomicU64,
    pub(super) last_claim_ms: AtomicU64,
    /// Unix ms of the last request, so only namespaces in use are prefetched.
    pub(super) last_used_ms: AtomicU64,
    /// The committed windows installed: every second of `[window_from, window_until)` holds a
    /// block (0, 0: none). Contiguous windows extend it.
    pub(super) window_from: AtomicU64,
    pub(super) window_until: AtomicU64,
    /// The block of the last window claimed (the growth and decay start from it).
    pub(super) window_block: AtomicU64,
    /// The busiest second's sequences since the last window claim began.
    pub(super) window_peak: AtomicU64,
    /// A window claim is in flight.
    pub(super) window_loading: AtomicBool,
    /// Unix ms before which no window claim is tried again after one failed.
    pub(super) window_retry_ms: AtomicU64,
    /// How long before its next window this namespace renews, and the second of the minute its
    /// windows start at: fixed per name, computed once instead of on every tick.
    pub(super) renewal_ahead_ms: u64,
    pub(super) window_phase: u64,
}

impl NamespaceHolder {
    pub(super) fn new(name: &str, layout: Layout) -> NamespaceHolder {
        NamespaceHolder {
            renewal_ahead_ms: super::schedule::renewal_ahead_ms(name),
            window_phase: super::schedule::window_phase(name),
            name: name.to_string(),
            layout,
            holder: RangeHolder::new(),
            sizer: RangeSizer::for_seq_bits(layout.seq_bits),
            claimed: Notify::new(),
            last_failure: Mutex::new(None),
            issued: AtomicU64::new(0),
            taken: AtomicU64::new(0),
            wanted: AtomicU64::new(0),
            last_second_ids: AtomicU64::new(0),
            issued_at_second_start: AtomicU64::new(0),
            rate_second: AtomicU64::new(0),
            taken_at_last_claim: AtomicU64::new(0),
            last_claim_ms: AtomicU64::new(0),
            last_used_ms: AtomicU64::new(0),
            window_from: AtomicU64::new(0),
            window_until: AtomicU64::new(0),
            window_block: AtomicU64::new(0),
            window_peak: AtomicU64::new(0),
            window_loading: AtomicBool::new(false),
            window_retry_ms: AtomicU64::new(0),
        }
    }

    /// Records a committed window of `block` sequences a second from `first` (its blocks
    /// installed, or about to be by this node's apply): it extends the windows held when it
    /// continues or overlaps them, else they start anew from it. Recording the same window twice
    /// changes nothing (the claimer's answer and its own apply may both record it).
    pub(super) fn record_window(&self, first: u64, seconds: u64, block: u64) {
        let held_until = self.window_until.load(Ordering::Relaxed);
        if held_until < first {
            self.window_from.store(first, Ordering::Relaxed);
        }
        self.window_until.fetch_max(first.saturating_add(seconds), Ordering::Relaxed);
        self.window_block.store(block, Ordering::Relaxed);
    }
}
