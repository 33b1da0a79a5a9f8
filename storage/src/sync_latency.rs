//! How long each durable sync of the store took ([`Engine::sync`](crate::engine::Engine::sync):
//! sled's flush, then `fdatasync` of its files), in fixed buckets of plain atomics, process-wide.
//!
//! Every Raft append and vote waits for one sync before it is acknowledged, so a slow disk shows
//! here before it shows as elections or slow claims. One process holds one node's store in
//! production; in-process tests that run several nodes add their syncs together.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Upper bounds of the buckets, in seconds: 250 µs (a write cache or tmpfs) to 10 s (a disk that
/// stalls); slower ones land in `+Inf`. A healthy SSD syncs in about a millisecond.
pub const SYNC_BOUNDS: [f64; 14] =
    [0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

struct Buckets {
    counts: [AtomicU64; SYNC_BOUNDS.len() + 1],
    sum_nanos: AtomicU64,
}

static SYNCS: Buckets =
    Buckets { counts: [const { AtomicU64::new(0) }; SYNC_BOUNDS.len() + 1], sum_nanos: AtomicU64::new(0) };

/// What the syncs so far took: a count per bucket of [`SYNC_BOUNDS`] (not cumulative; the last
/// one is `+Inf`) and the sum of their times.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncLatency {
    pub counts: Vec<u64>,
    pub sum_seconds: f64,
}

/// Records one sync that took `took`.
pub(crate) fn observe(took: Duration) {
    let seconds = took.as_secs_f64();
    let bucket = SYNC_BOUNDS.iter().position(|bound| seconds <= *bound).unwrap_or(SYNC_BOUNDS.len());
    SYNCS.counts[bucket].fetch_add(1, Ordering::Relaxed);
    SYNCS.sum_nanos.fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// The syncs of this process so far.
pub fn sync_latency() -> SyncLatency {
    SyncLatency {
        counts: SYNCS.counts.iter().map(|count| count.load(Ordering::Relaxed)).collect(),
        sum_seconds: SYNCS.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_lands_in_the_first_bucket_that_holds_it() {
        let before = sync_latency();
        observe(Duration::from_millis(3));
        observe(Duration::from_secs(60));
        let after = sync_latency();
        let added: Vec<u64> = after.counts.iter().zip(&before.counts).map(|(a, b)| a - b).collect();
        // 3 ms is above 2.5 ms and at most 5 ms; a minute is past every bound.
        assert!(added[4] >= 1 && added[SYNC_BOUNDS.len()] >= 1, "{added:?}");
        assert!(after.sum_seconds - before.sum_seconds >= 60.003 - 1e-9);
    }
}
