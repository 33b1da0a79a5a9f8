//! The background side of `Timeseq`: claims through Raft (the only place ranges enter a
//! holder), the prefetch of the next second, the rate each claim is sized by, and the copy of
//! the peer clock check's verdict.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::NamespaceHolder;
use super::Timeseq;
use crate::clock::now_ms;
use crate::error::Error;
use crate::error::ErrorCode;
use leafraft_ids::timeseq::SecondRange;

/// How often `maintain` looks at the clock check, the rates and the prefetches.
const TICK: Duration = Duration::from_millis(100);

/// A namespace not used for this long is not prefetched.
const IDLE_MS: u64 = 3_000;

/// How long before a window starts its claim is sent at the earliest: inside the look-ahead
/// (10 s; the claim's own `now_ms` is read later still).
const WINDOW_AHEAD_MS: u64 = 9_500;

/// The span the renewals are spread over: each namespace renews at its own moment, a hash of its
/// name, between `WINDOW_AHEAD_MS` and this much less before its window. Namespaces first used
/// in the same second have windows that end in the same second, and renewing them all in one
/// tick (30,000 claims at 10,000 namespaces on three nodes) slowed every request for seconds;
/// the latest moment still leaves 5.5 s for a claim to commit before its window's first second.
const WINDOW_SPREAD_MS: u64 = 4_000;

/// The smallest block a window reserves per second (a namespace asked for one ID a second on
/// this node gets a few: the request that finds the block used up takes a one-second claim).
const MIN_WINDOW_BLOCK: u64 = 4;

/// How long a node waits before it tries a window claim again after one failed.
const WINDOW_RETRY_MS: u64 = 1_000;

impl Timeseq {
    /// Starts the one claim of `second` for `ns` unless one is in flight.
    pub(super) fn start_claim(self: &Arc<Self>, ns: &Arc<NamespaceHolder>, second: u64) {
        if !ns.holder.try_begin_load(second) {
            return;
        }
        let service = Arc::clone(self);
        let ns = Arc::clone(ns);
        tokio::spawn(async move {
            service.claim(&ns, second).await;
            ns.holder.load_ended(second);
            ns.claimed.notify_waiters();
        });
    }

    async fn claim(&self, ns: &NamespaceHolder, second: u64) {
        let wanted = ns.wanted.swap(0, Ordering::Relaxed).min(ns.sizer.max);
        let now = now_ms();
        let count = ns.sizer.size(rate(ns, now)).max(wanted);
        let claim = leafraft_state::Claim::Timeseq { namespace: ns.name.clone(), second, count, now_ms: now };
        let failure = match self.claims.claim(claim).await {
            Ok(leafraft_state::Response::TimeseqRange { second: claimed, start, end }) if claimed == second => {
                self.counters.claims.fetch_add(1, Ordering::Relaxed);
                forget_passed_failure(ns, second);
                tracing::debug!(namespace = %ns.name, second, start, end, "time-sequence claim committed");
                let range = SecondRange { second, start, end };
                #[cfg(feature = "planted")]
                if let Some(again) = crate::planted::timeseq_extra_range(
                    || self.cluster.metrics().current_leader != Some(self.cluster.node_id()),
                    &ns.name,
                    range,
                ) {
                    ns.holder.install_range(again);
                }
                ns.holder.install_range(range);
                return;
            }
            Ok(leafraft_state::Response::Rejected(rejection)) => {
                match rejection {
                    leafraft_state::Rejection::SecondExhausted => {
                        self.counters.exhausted_seconds.fetch_add(1, Ordering::Relaxed)
                    }
                    leafraft_state::Rejection::ClockAhead { .. } | leafraft_state::Rejection::ClockBackwards { .. } => {
                        self.counters.refused_clocks.fetch_add(1, Ordering::Relaxed)
                    }
                    _ => 0,
                };
                Error::from_rejection(&ns.name, &rejection)
            }
            Ok(other) => Error::no_leader(format!("unexpected answer to a time-sequence claim: {other:?}")),
            Err(error) => error,
        };
        tracing::debug!(namespace = %ns.name, second, error = %failure, "time-sequence claim failed");
        *ns.last_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some((second, failure));
    }

    /// Starts the claim of the window from `first_second` for `ns` unless one is in flight.
    fn start_window_claim(self: &Arc<Self>, ns: &Arc<NamespaceHolder>, first_second: u64) {
        if ns.window_loading.swap(true, Ordering::AcqRel) {
            return;
        }
        self.spawn_window_claim(ns, first_second);
    }

    /// Starts the claim of a first window from `second` (the one a request waits for) when
    /// windows are allowed, none is held from `second` on, none is in flight and none failed
    /// lately; answers whether it did (else the caller claims `second` alone).
    pub(super) fn start_first_window(self: &Arc<Self>, ns: &Arc<NamespaceHolder>, second: u64) -> bool {
        let held = ns.window_until.load(Ordering::Relaxed) > second;
        let retry_due = now_ms() >= ns.window_retry_ms.load(Ordering::Relaxed);
        if held || !retry_due || !self.windows_allowed() || ns.window_loading.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.spawn_window_claim(ns, second);
        true
    }

    fn spawn_window_claim(self: &Arc<Self>, ns: &Arc<NamespaceHolder>, first_second: u64) {
        let service = Arc::clone(self);
        let ns = Arc::clone(ns);
        tokio::spawn(async move {
            service.claim_window(&ns, first_second).await;
            ns.window_loading.store(false, Ordering::Release);
            // A request may wait for this window's first second.
            ns.claimed.notify_waiters();
        });
    }

    async fn claim_window(&self, ns: &NamespaceHolder, first_second: u64) {
        // What waiting requests want counts too: a first window is sized by its first request.
        let wanted = ns.wanted.load(Ordering::Relaxed).min(ns.sizer.max);
        let peak =
            ns.window_peak.swap(0, Ordering::Relaxed).max(ns.last_second_ids.load(Ordering::Relaxed)).max(wanted);
        let block = window_block(ns.window_block.load(Ordering::Relaxed), peak, ns.sizer.max);
        let now = now_ms();
        let claim = leafraft_state::Claim::TimeseqWindow {
            namespace: ns.name.clone(),
            first_second,
            seconds: super::WINDOW_S,
            count: block,
            now_ms: now,
        };
        match self.claims.claim(claim).await {
            Ok(leafraft_state::Response::TimeseqWindow { first_second: first, seconds, start, end })
                if first == first_second =>
            {
                self.counters.window_claims.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(namespace = %ns.name, first, seconds, start, end, "time-sequence window committed");
                for second in first..first.saturating_add(seconds) {
                    ns.holder.install_range(SecondRange { second, start, end });
                }
                ns.window_block.store(block, Ordering::Relaxed);
                let until = first.saturating_add(seconds);
                if ns.window_until.load(Ordering::Relaxed) != first {
                    ns.window_from.store(first, Ordering::Relaxed);
                }
                ns.window_until.store(until, Ordering::Relaxed);
            }
            answer => {
                tracing::debug!(namespace = %ns.name, first_second, ?answer, "time-sequence window claim failed");
                ns.window_retry_ms.store(now_ms().saturating_add(WINDOW_RETRY_MS), Ordering::Relaxed);
            }
        }
    }

    /// Whether every member decodes window claims (they travel in `ClaimBatch` only).
    fn windows_allowed(&self) -> bool {
        self.cluster.cluster_version() >= leafraft_state::Version::CLAIM_BATCHES
    }

    /// Runs until `stop` changes: copies the clock verdict, rolls the rates over each second and
    /// claims the next second's range for every namespace in use.
    pub async fn maintain(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            self.clock_refused.store(self.clock.refusal().map(Arc::new));
            let now = now_ms();
            let windows = self.windows_allowed();
            for ns in &self.holders.values() {
                roll_rate(ns, now);
                let idle_ms = now.saturating_sub(ns.last_used_ms.load(Ordering::Relaxed));
                let in_use = idle_ms < IDLE_MS;
                let next_second = now / 1000 + 1;
                if windows {
                    // The next window: right after the one held, or from the next second when
                    // none is held (a namespace's first use, or used again after a pause).
                    let first = ns.window_until.load(Ordering::Relaxed).max(next_second);
                    let continues = first > next_second && idle_ms < super::WINDOW_S * 1000;
                    let due = first * 1000 <= now + WINDOW_AHEAD_MS
                        && first * 1000 <= now + renewal_ahead_ms(&ns.name)
                        && now >= ns.window_retry_ms.load(Ordering::Relaxed)
                        && (in_use || continues);
                    if due {
                        self.start_window_claim(ns, first);
                    }
                    // Nor a one-second prefetch while a window claim (which covers the next
                    // second whenever none is held) is in flight.
                    if ns.window_covers(next_second) || ns.window_loading.load(Ordering::Acquire) {
                        continue;
                    }
                }
                // From the start of the second before (the first tick in it), so that a node's
                // wave of prefetches (one claim per namespace in use: 10,000 of them fill ten
                // entries) has the whole second to commit before its IDs are due. From
                // mid-second, at 10,000 namespaces the late end of the wave missed its second.
                if in_use && ns.holder.held_for(next_second) == 0 {
                    self.start_claim(ns, next_second);
                }
            }
            tokio::select! {
                _ = stop.changed() => break,
                _ = tokio::time::sleep(TICK) => {}
            }
        }
        self.close_all();
    }
}

impl NamespaceHolder {
    /// Whether a committed window holds a block for `second`.
    fn window_covers(&self, second: u64) -> bool {
        self.window_from.load(Ordering::Relaxed) <= second && second < self.window_until.load(Ordering::Relaxed)
    }

    /// Whether a range of `second` passing its refill mark needs a one-second claim: always
    /// outside a window; inside one only when this node takes more a second than the block holds
    /// (a burst), so a namespace in steady use claims nothing but its windows.
    pub(super) fn refill_wanted(&self, second: u64) -> bool {
        !self.window_covers(second)
            || self.last_second_ids.load(Ordering::Relaxed) > self.window_block.load(Ordering::Relaxed)
    }
}

/// How long before its next window `namespace` renews: between `WINDOW_AHEAD_MS` and
/// `WINDOW_SPREAD_MS` less, fixed per name (CRC-32 of it; only timing depends on it).
fn renewal_ahead_ms(namespace: &str) -> u64 {
    WINDOW_AHEAD_MS - u64::from(crc32fast::hash(namespace.as_bytes())) % WINDOW_SPREAD_MS
}

/// The block of the next window: Leaf's dynamic step over windows. It starts at the busiest
/// second since the last window claim plus half, rounded up to a power of two; grows at once
/// (at least doubling) when that is more than the last block, shrinks by half only when it is
/// below a quarter of it; between `MIN_WINDOW_BLOCK` and `max`.
fn window_block(last_block: u64, peak: u64, max: u64) -> u64 {
    let wanted = peak.saturating_add(peak / 2).max(MIN_WINDOW_BLOCK).next_power_of_two();
    let block = if last_block == 0 {
        wanted
    } else if wanted > last_block {
        wanted.max(last_block.saturating_mul(2))
    } else if wanted.saturating_mul(4) <= last_block {
        last_block / 2
    } else {
        last_block
    };
    block.clamp(MIN_WINDOW_BLOCK.min(max), max)
}

/// A claim of `second` committed: an earlier refusal up to that second no longer holds (a
/// failed prefetch retried, a leader back), except that a used-up earlier second stays used up.
/// Without this, a request short of IDs of the current second would answer that stale refusal
/// instead of claiming.
fn forget_passed_failure(ns: &NamespaceHolder, second: u64) {
    let mut failure = ns.last_failure.lock().unwrap_or_else(|p| p.into_inner());
    let passed =
        failure.as_ref().is_some_and(|(failed, error)| *failed <= second && error.code != ErrorCode::SecondExhausted);
    if passed {
        *failure = None;
    }
}

/// The shortest stretch the recent rate is estimated over, so that a few requests in the first
/// milliseconds after a claim do not pass for a flood.
const MIN_RATE_WINDOW_MS: u64 = 10;

/// Sequences per second this claim is sized by: those taken during the last full second, or the
/// rate since the previous claim began when that is higher. A namespace busy again after idling
/// has a last second of nothing; sized by it alone, its first second would crawl along in claims
/// of the minimum size, and requests would wait for each one.
fn rate(ns: &NamespaceHolder, now: u64) -> u64 {
    let taken = ns.taken.load(Ordering::Relaxed);
    let since = taken.saturating_sub(ns.taken_at_last_claim.swap(taken, Ordering::Relaxed));
    let window_ms = now.saturating_sub(ns.last_claim_ms.swap(now, Ordering::Relaxed)).max(MIN_RATE_WINDOW_MS);
    let recent = since.saturating_mul(1000) / window_ms;
    ns.last_second_ids.load(Ordering::Relaxed).max(recent)
}

/// Once per second: the sequences taken during the second that ended become the rate claims
/// follow.
fn roll_rate(ns: &NamespaceHolder, now: u64) {
    let second = now / 1000;
    let mut last = ns.rate_second.lock().unwrap_or_else(|p| p.into_inner());
    if *last != second {
        let issued = ns.taken.load(Ordering::Relaxed);
        let previous = ns.issued_at_second_start.swap(issued, Ordering::Relaxed);
        let elapsed_s = second.saturating_sub(*last).max(1);
        let ids = issued.saturating_sub(previous) / elapsed_s;
        ns.last_second_ids.store(ids, Ordering::Relaxed);
        ns.window_peak.fetch_max(ids, Ordering::Relaxed);
        *last = second;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leafraft_ids::timeseq::Layout;

    fn namespace() -> NamespaceHolder {
        NamespaceHolder::new("orders", Layout { epoch_s: 0, utc_offset_s: 0, shard_bits: 4, seq_bits: 19 })
    }

    /// After a minute of idling, the last full second served nothing; the second claim of a
    /// burst is sized by what the burst took since the first claim began, not by that second.
    #[test]
    fn a_namespace_busy_again_after_idling_sizes_claims_by_its_recent_rate() {
        let ns = namespace();
        roll_rate(&ns, 60_000);
        assert_eq!(ns.sizer.size(rate(&ns, 60_000)), ns.sizer.min, "the first claim knows no rate");
        ns.taken.fetch_add(400, Ordering::Relaxed);
        assert_eq!(rate(&ns, 60_020), 20_000, "400 sequences in 20 ms");
        assert_eq!(ns.sizer.size(20_000), 5_000);
        ns.taken.fetch_add(5, Ordering::Relaxed);
        assert_eq!(rate(&ns, 60_021), 500, "a few sequences within the shortest window count over 10 ms");
    }

    #[test]
    fn window_blocks_grow_at_once_and_decay_by_halves() {
        let max = 32_768;
        assert_eq!(window_block(0, 0, max), MIN_WINDOW_BLOCK, "a first window knows little");
        assert_eq!(window_block(0, 1, max), 4);
        assert_eq!(window_block(0, 100, max), 256);
        assert_eq!(window_block(4, 3, max), 4, "3 and half of it fit in 4");
        assert_eq!(window_block(4, 4, max), 8, "grows at least twofold");
        assert_eq!(window_block(8, 100, max), 256);
        assert_eq!(window_block(256, 120, max), 256, "kept while above a quarter");
        assert_eq!(window_block(256, 20, max), 128, "halves once the need is a quarter");
        assert_eq!(window_block(4, 0, max), 4, "never below the minimum");
        assert_eq!(window_block(0, 1_000_000, max), max);
        assert_eq!(window_block(1, 0, 1), 1, "a namespace of one sequence a second");
    }

    #[test]
    fn renewals_are_spread_over_the_span_by_name() {
        let moments: Vec<u64> = (0..1000).map(|i| renewal_ahead_ms(&format!("ns-{i:05}"))).collect();
        assert!(moments.iter().all(|ms| (WINDOW_AHEAD_MS - WINDOW_SPREAD_MS..=WINDOW_AHEAD_MS).contains(ms)));
        // Spread: each of the span's eight half-seconds holds some of them, none most.
        let mut per_slot = [0usize; 8];
        for ms in &moments {
            per_slot[((WINDOW_AHEAD_MS - ms) / 500).min(7) as usize] += 1;
        }
        assert!(per_slot.iter().all(|n| (60..=190).contains(n)), "{per_slot:?}");
        assert_eq!(renewal_ahead_ms("orders"), renewal_ahead_ms("orders"), "fixed per name");
    }

    /// A busy last second keeps claims large through a quiet moment.
    #[test]
    fn the_last_full_second_still_sizes_claims_when_it_was_busier() {
        let ns = namespace();
        roll_rate(&ns, 1_000);
        ns.taken.fetch_add(100_000, Ordering::Relaxed);
        roll_rate(&ns, 2_000);
        assert_eq!(rate(&ns, 2_500), 100_000);
        assert_eq!(ns.sizer.size(rate(&ns, 2_600)), 25_000);
    }
}
