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

use super::schedule::first_window_s;
use super::schedule::home_member;
use super::schedule::window_block;
use super::schedule::FALLBACK_AHEAD_MS;
use super::schedule::WINDOW_AHEAD_MS;
use super::schedule::WINDOW_S;
use super::shared::Members;

/// How often `maintain` looks at the clock check, the rates and the prefetches.
const TICK: Duration = Duration::from_millis(100);

/// A namespace not used for this long is not prefetched.
const IDLE_MS: u64 = 3_000;

/// How often renewals of held windows go out, all those due together: a Raft entry costs the
/// three nodes about 4 ms of CPU whatever it holds, and renewals spread over a window, sent on
/// every tick, went out two entries a tick per node for a few claims each: four times the CPU of
/// the same claims in a few entries. Once a second, each node's renewals were one burst of
/// about 220 claims (10,000 namespaces); four times a second, a quarter of that, which slowed
/// fewer requests in the seconds measured. A renewal has seconds to spare.
const RENEWAL_PERIOD_MS: u64 = 250;

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

    /// Starts the claim of the window from `first_second` for `ns` unless one is in flight: for
    /// this node alone, or for each of `members` (this node among them) when it is the
    /// namespace's home.
    pub(super) fn start_window_claim(
        self: &Arc<Self>,
        ns: &Arc<NamespaceHolder>,
        first_second: u64,
        members: Option<Members>,
    ) {
        if ns.window_loading.swap(true, Ordering::AcqRel) {
            return;
        }
        self.spawn_window_claim(ns, first_second, members);
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
        self.spawn_window_claim(ns, second, None);
        true
    }

    fn spawn_window_claim(self: &Arc<Self>, ns: &Arc<NamespaceHolder>, first_second: u64, members: Option<Members>) {
        let service = Arc::clone(self);
        let ns = Arc::clone(ns);
        tokio::spawn(async move {
            service.claim_window(&ns, first_second, members).await;
            ns.window_loading.store(false, Ordering::Release);
            // A request may wait for this window's first second.
            ns.claimed.notify_waiters();
        });
    }

    async fn claim_window(&self, ns: &NamespaceHolder, first_second: u64, members: Option<Members>) {
        // What waiting requests want counts too: a first window is sized by its first request.
        let wanted = ns.wanted.load(Ordering::Relaxed).min(ns.sizer.max);
        let peak =
            ns.window_peak.swap(0, Ordering::Relaxed).max(ns.last_second_ids.load(Ordering::Relaxed)).max(wanted);
        let block = window_block(ns.window_block.load(Ordering::Relaxed), peak, ns.sizer.max);
        // A window right after the one held is a full one; any other is a first window, up to
        // the second the namespace's windows start at.
        let seconds = if ns.window_until.load(Ordering::Relaxed) == first_second {
            WINDOW_S
        } else {
            first_window_s(ns.window_phase, first_second)
        };
        let now = now_ms();
        if let Some(members) = members {
            return self.claim_shared_window(ns, first_second, seconds, block, &members, now).await;
        }
        let claim = leafraft_state::Claim::TimeseqWindow {
            namespace: ns.name.clone(),
            first_second,
            seconds,
            count: block,
            now_ms: now,
        };
        match self.claims.claim(claim).await {
            Ok(leafraft_state::Response::TimeseqWindow { first_second: first, seconds, start, end })
                if first == first_second =>
            {
                self.counters.window_claims.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(namespace = %ns.name, first, seconds, start, end, "time-sequence window committed");
                ns.holder.install_block(first, first.saturating_add(seconds).saturating_sub(1), start, end);
                ns.record_window(first, seconds, block);
            }
            answer => {
                tracing::debug!(namespace = %ns.name, first_second, ?answer, "time-sequence window claim failed");
                ns.window_retry_ms.store(now_ms().saturating_add(WINDOW_RETRY_MS), Ordering::Relaxed);
            }
        }
    }

    /// Whether every member decodes window claims (they travel in `ClaimBatch` only).
    pub(super) fn windows_allowed(&self) -> bool {
        self.cluster.cluster_version() >= leafraft_state::Version::CLAIM_BATCHES
    }

    /// Runs until `stop` changes: copies the clock verdict, rolls the rates over each second and
    /// claims the next second's range for every namespace in use.
    pub async fn maintain(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        tokio::spawn(Arc::clone(&self).learn_fence(stop.clone()));
        let mut renewal_period = 0;
        loop {
            self.clock_refused.store(self.clock.refusal().map(Arc::new));
            let now = now_ms();
            let windows = self.windows_allowed();
            // Renewals are shared when this node is one of several members.
            let members = if windows { self.sharing_members() } else { None };
            // Renewals of held windows go out together on one tick in `RENEWAL_PERIOD_MS`.
            let renewals_due =
                std::mem::replace(&mut renewal_period, now / RENEWAL_PERIOD_MS) != now / RENEWAL_PERIOD_MS;
            self.holders.for_each_value(|ns| {
                roll_rate(ns, now);
                let idle_ms = now.saturating_sub(ns.last_used_ms.load(Ordering::Relaxed));
                let in_use = idle_ms < IDLE_MS;
                let next_second = now / 1000 + 1;
                if windows {
                    // The next window: right after the one held, or from the next second when
                    // none is held (a namespace's first use, or used again after a pause).
                    let first = ns.window_until.load(Ordering::Relaxed).max(next_second);
                    let continues = first > next_second && idle_ms < WINDOW_S * 1000;
                    // A window that continues is renewed by the namespace's home for every
                    // member; the others claim it themselves only if that claim has not reached
                    // them `FALLBACK_AHEAD_MS` before it starts.
                    // (The home is hashed only for a window inside the look-ahead: once a tick
                    // for each namespace would be 100,000 hashes a second at 10,000 of them.)
                    let ahead = first * 1000 <= now + WINDOW_AHEAD_MS
                        && now >= ns.window_retry_ms.load(Ordering::Relaxed)
                        && if continues { renewals_due } else { in_use };
                    let shared = members.as_ref().filter(|_| ahead && continues);
                    let home = shared.filter(|members| home_member(&ns.name, members) == Some(self.cluster.node_id()));
                    let ahead_ms =
                        if shared.is_some() && home.is_none() { FALLBACK_AHEAD_MS } else { ns.renewal_ahead_ms };
                    if ahead && first * 1000 <= now + ahead_ms {
                        self.start_window_claim(ns, first, home.cloned());
                    } else if in_use
                        && ns.outgrew_window(next_second)
                        && now >= ns.window_retry_ms.load(Ordering::Relaxed)
                    {
                        // A whole second above the block held: a block of its own for the rest of
                        // the window, sized by that second, instead of a one-second claim at
                        // every refill mark until the window ends (at 7,000 IDs a second on a
                        // node, four a second).
                        self.start_window_claim(ns, next_second, None);
                    }
                    // Nor a one-second prefetch while a window claim (which covers the next
                    // second whenever none is held) is in flight.
                    if ns.window_covers(next_second) || ns.window_loading.load(Ordering::Acquire) {
                        return;
                    }
                }
                // From the start of the second before (the first tick in it), so that a node's
                // wave of prefetches (one claim per namespace in use: 10,000 of them fill ten
                // entries) has the whole second to commit before its IDs are due. From
                // mid-second, at 10,000 namespaces the late end of the wave missed its second.
                if in_use && ns.holder.held_for(next_second) == 0 {
                    self.start_claim(ns, next_second);
                }
            });
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

    /// Whether this node took more in its last full second than the block of the window it holds
    /// from `next_second` on gives a second: a rate the window claim was not sized for.
    fn outgrew_window(&self, next_second: u64) -> bool {
        self.window_covers(next_second)
            && self.last_second_ids.load(Ordering::Relaxed) > self.window_block.load(Ordering::Relaxed)
    }

    /// Whether a range of `second` passing its refill mark needs a one-second claim: always
    /// outside a window; inside one only when this node takes more a second than the block holds
    /// (a burst), so a namespace in steady use claims nothing but its windows.
    pub(super) fn refill_wanted(&self, second: u64) -> bool {
        !self.window_covers(second)
            || self.last_second_ids.load(Ordering::Relaxed) > self.window_block.load(Ordering::Relaxed)
    }
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
    // One load on most ticks (nine in ten). Only `maintain`'s one task rolls, so a plain store
    // moves the mark.
    let last = ns.rate_second.load(Ordering::Relaxed);
    if last == second {
        return;
    }
    ns.rate_second.store(second, Ordering::Relaxed);
    let issued = ns.taken.load(Ordering::Relaxed);
    let previous = ns.issued_at_second_start.swap(issued, Ordering::Relaxed);
    let elapsed_s = second.saturating_sub(last).max(1);
    let ids = issued.saturating_sub(previous) / elapsed_s;
    ns.last_second_ids.store(ids, Ordering::Relaxed);
    ns.window_peak.fetch_max(ids, Ordering::Relaxed);
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

    /// A full second above the window's block outgrows the window (a block of its own follows
    /// for the rest of it); at or below it, or outside the window, it does not.
    #[test]
    fn a_second_above_the_block_outgrows_the_window() {
        let ns = namespace();
        ns.record_window(100, 60, 1024);
        ns.last_second_ids.store(1024, Ordering::Relaxed);
        assert!(!ns.outgrew_window(101));
        ns.last_second_ids.store(7_000, Ordering::Relaxed);
        assert!(ns.outgrew_window(101));
        assert!(!ns.outgrew_window(160), "past the window: the renewal sizes it");
        ns.record_window(101, 59, 16_384);
        assert!(!ns.outgrew_window(101), "the added block is sized above the rate");
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
