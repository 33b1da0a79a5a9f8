//! The time-sequence registry: the namespaces of sharded time-sequence IDs and, per namespace and
//! Unix second inside a retention horizon, the next free sequence (the role of the original's
//! Redis keys `namespace + second`, `INCRBY` and `EXPIRE 600`).
//!
//! Invariants (tested in `timeseq/tests.rs` and `timeseq/proptests.rs`):
//! 1. A claim hands out `[next, next + count)` of one (namespace, second), capped at `2^seq_bits`,
//!    and raises `next` past it; `next` never goes down.
//! 2. The horizon (`newest_now_ms / 1000 − RETENTION_S`, and never below `floor_s`) only rises; a
//!    second below it is refused (`ClockBackwards`) and only seconds below it are forgotten. So a
//!    forgotten second is never claimed again, and no (namespace, second, sequence) is handed out
//!    twice.
//! 3. A second more than `LOOKAHEAD_MS` past the claim's `now_ms` is refused (`ClockAhead`).
//! 4. Everything time-like comes in the command; a rejected command changes nothing.
//! 5. A window claim hands out one block `[start, end)` in every second of its window (at most
//!    `MAX_WINDOW_S` seconds, the first one judged by rules 2 and 3), starting above every
//!    sequence either kind of claim gave in any of those seconds; a one-second claim starts above
//!    every window block of its second. Each namespace keeps, per window, only the highest end
//!    given in it, and forgets a window once its last second is below the horizon. So no
//!    (namespace, second, sequence) is in two claims of either kind, and the state grows with the
//!    windows, not with their seconds.
//! 6. A shared window claim is one window claim per block, in order: rule 5 holds for each.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

pub use crate::records::NamespaceRecord;
pub use crate::records::LAST_WRITABLE_SECOND;
pub use crate::records::MAX_UTC_OFFSET_S;
use crate::request::Rejection;
use crate::request::Response;
use crate::request::SharedBlock;
use crate::tag;

/// How far behind the newest applied `now_ms` a second is still remembered (the original's
/// `EXPIRE 600`): longer than any NTP correction.
pub const RETENTION_S: u64 = 600;

/// How far past its own clock a node may claim a second: the prefetch of the next second, with
/// room for a clock a little behind the leader's.
pub const LOOKAHEAD_MS: u64 = 10_000;

/// The most seconds one window claim covers.
pub const MAX_WINDOW_S: u64 = 60;

/// The most blocks one shared window claim gives (one per member: a cluster has a handful).
pub const MAX_SHARED_BLOCKS: usize = 16;

/// One namespace's window blocks: per window `(last_second, first_second)`, the highest end of
/// the blocks given in it (every block of the window lies below it). Ordered by the last second,
/// so forgetting pops from the front.
pub type WindowBlocks = BTreeMap<(u64, u64), u64>;

/// 2020-01-01T00:00:00Z, the default epoch.
pub const DEFAULT_EPOCH_S: u64 = 1_577_836_800;
pub const DEFAULT_SHARD_BITS: u8 = 12;
pub const DEFAULT_SEQ_BITS: u8 = 19;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeseqRegistry {
    pub namespaces: BTreeMap<String, NamespaceRecord>,
    /// Per namespace, per Unix second at or above the horizon that was claimed: the next free
    /// sequence.
    pub next_seq: BTreeMap<String, BTreeMap<u64, u64>>,
    /// The newest `now_ms` an accepted claim carried.
    pub newest_now_ms: u64,
    /// Unix seconds: no second below it is ever claimed. 0 except in a cluster built by
    /// `leafraft recover` (`Request::RestoreTimeseq`).
    pub floor_s: u64,
    /// The horizon the seconds were last forgotten below. Not persisted: 0 after a load, so the
    /// first claim after it forgets, as every claim did before the mark existed.
    #[serde(skip)]
    pub forgotten_below: ForgetMark,
    /// Per namespace, the window blocks given inside the horizon. Not part of this type's own
    /// encoding, which is the baseline release's: the store keeps it under keys of its own and
    /// appends it to the snapshot (`storage::codec::encode_snapshot`).
    #[serde(skip)]
    pub windows: BTreeMap<String, WindowBlocks>,
}

/// The horizon at which [`TimeseqRegistry`] last forgot the seconds below it. Every second kept
/// is at or above it, so forgetting again walks every namespace only once the horizon rose past
/// it: once per second of applied time instead of once per claim.
///
/// Not part of the state: it is not persisted and every two marks compare equal, so a registry
/// loaded from disk (mark 0) equals the one it was stored from. Its value cannot be set from
/// outside this module, so no caller can skip a forget that is due.
#[derive(Debug, Clone, Copy, Default)]
pub struct ForgetMark(u64);

impl PartialEq for ForgetMark {
    fn eq(&self, _: &ForgetMark) -> bool {
        true
    }
}

impl Eq for ForgetMark {}

impl ForgetMark {
    /// No second below this one is kept (0: none forgotten since the registry was loaded).
    pub fn horizon_s(self) -> u64 {
        self.0
    }
}

impl TimeseqRegistry {
    /// The first second that may still be claimed if the newest applied clock were `newest_now_ms`.
    pub fn horizon_for(&self, newest_now_ms: u64) -> u64 {
        (newest_now_ms / 1000).saturating_sub(RETENTION_S).max(self.floor_s)
    }

    pub fn horizon_s(&self) -> u64 {
        self.horizon_for(self.newest_now_ms)
    }

    pub fn create(&mut self, name: &str, record: NamespaceRecord) -> Response {
        if let Err(msg) = tag::validate_tag(name).and_then(|()| record.validate()) {
            return Response::Rejected(Rejection::InvalidArgument(msg));
        }
        if let Some(existing) = self.namespaces.get(name) {
            // A create sent again after a leader change may commit twice: the copy is identical
            // (the same `now_ms`) and is answered with the namespace, as the first was.
            if *existing == record {
                return Response::Namespace { namespace: name.to_string(), record: existing.clone() };
            }
            return Response::Rejected(Rejection::NamespaceExists);
        }
        self.namespaces.insert(name.to_string(), record.clone());
        Response::Namespace { namespace: name.to_string(), record }
    }

    /// Whether a claim made at `now_ms` may start at `second`: not below the horizon the claim
    /// would move it to (`ClockBackwards`), not past `now_ms` plus the look-ahead (`ClockAhead`).
    /// Answers the newest `now_ms` and the horizon once the claim is applied.
    fn judge_second(&self, second: u64, now_ms: u64) -> Result<(u64, u64), Rejection> {
        let newest_now_ms = self.newest_now_ms.max(now_ms);
        let horizon_s = self.horizon_for(newest_now_ms);
        if second < horizon_s {
            return Err(Rejection::ClockBackwards { horizon_s });
        }
        let limit_s = now_ms.saturating_add(LOOKAHEAD_MS) / 1000;
        if second > limit_s {
            return Err(Rejection::ClockAhead { limit_s });
        }
        Ok((newest_now_ms, horizon_s))
    }

    /// Claims up to `count` sequences of `(name, second)`.
    pub fn claim(&mut self, name: &str, second: u64, count: u64, now_ms: u64) -> Response {
        let Some(record) = self.namespaces.get(name) else {
            return Response::Rejected(Rejection::NamespaceNotFound);
        };
        let limit = record.seq_limit();
        if count == 0 || count > limit {
            return Response::Rejected(Rejection::InvalidArgument(format!(
                "a claim asks for 1 to {limit} sequences, got {count}"
            )));
        }
        if second < record.epoch_s || second > record.last_second() {
            return Response::Rejected(Rejection::InvalidArgument(format!(
                "second {second} is outside the namespace's time bits"
            )));
        }
        let (newest_now_ms, horizon_s) = match self.judge_second(second, now_ms) {
            Ok(judged) => judged,
            Err(rejection) => return Response::Rejected(rejection),
        };
        let one_second = self.next_seq.get(name).and_then(|seconds| seconds.get(&second)).copied().unwrap_or(0);
        let next = one_second.max(self.window_top(name, second, second));
        if next >= limit {
            return Response::Rejected(Rejection::SecondExhausted);
        }
        let end = next.saturating_add(count).min(limit);
        // No name copied but for a namespace's first second: a batch claims thousands.
        match self.next_seq.get_mut(name) {
            Some(seconds) => {
                seconds.insert(second, end);
            }
            None => {
                self.next_seq.insert(name.to_string(), BTreeMap::from([(second, end)]));
            }
        }
        self.newest_now_ms = newest_now_ms;
        if horizon_s > self.forgotten_below.0 {
            self.forget_below(horizon_s);
        }
        Response::TimeseqRange { second, start: next, end }
    }

    /// Claims one block of up to `count` sequences in every second of
    /// `[first_second, first_second + seconds)`: the same `[start, end)` in each, above every
    /// sequence any claim gave in any of them.
    pub fn claim_window(&mut self, name: &str, first_second: u64, seconds: u64, count: u64, now_ms: u64) -> Response {
        let Some(record) = self.namespaces.get(name) else {
            return Response::Rejected(Rejection::NamespaceNotFound);
        };
        let limit = record.seq_limit();
        if count == 0 || count > limit {
            return Response::Rejected(Rejection::InvalidArgument(format!(
                "a claim asks for 1 to {limit} sequences, got {count}"
            )));
        }
        if seconds == 0 || seconds > MAX_WINDOW_S {
            return Response::Rejected(Rejection::InvalidArgument(format!(
                "a window covers 1 to {MAX_WINDOW_S} seconds, got {seconds}"
            )));
        }
        let last_second = match first_second.checked_add(seconds - 1) {
            Some(last) if first_second >= record.epoch_s && last <= record.last_second() => last,
            _ => {
                return Response::Rejected(Rejection::InvalidArgument(format!(
                    "the window of {seconds} seconds from {first_second} is outside the namespace's time bits"
                )))
            }
        };
        let (newest_now_ms, horizon_s) = match self.judge_second(first_second, now_ms) {
            Ok(judged) => judged,
            Err(rejection) => return Response::Rejected(rejection),
        };
        let one_second = self
            .next_seq
            .get(name)
            .map(|claimed| claimed.range(first_second..=last_second).map(|(_, &next)| next).max().unwrap_or(0))
            .unwrap_or(0);
        #[cfg(feature = "planted")]
        let one_second = if crate::planted::window_overlap() { 0 } else { one_second };
        let start = one_second.max(self.window_top(name, first_second, last_second));
        if start >= limit {
            return Response::Rejected(Rejection::SecondExhausted);
        }
        let end = start.saturating_add(count).min(limit);
        let window = (last_second, first_second);
        match self.windows.get_mut(name) {
            Some(blocks) => {
                let top = blocks.entry(window).or_insert(end);
                *top = (*top).max(end);
            }
            None => {
                self.windows.insert(name.to_string(), BTreeMap::from([(window, end)]));
            }
        }
        self.newest_now_ms = newest_now_ms;
        if horizon_s > self.forgotten_below.0 {
            self.forget_below(horizon_s);
        }
        Response::TimeseqWindow { first_second, seconds, start, end }
    }

    /// One window claim per block, in order, each judged on its own (see
    /// [`crate::Claim::TimeseqSharedWindow`]); a claim of no blocks, or of more than
    /// `MAX_SHARED_BLOCKS`, is refused whole.
    pub fn claim_shared_window(
        &mut self,
        name: &str,
        first_second: u64,
        seconds: u64,
        now_ms: u64,
        blocks: &[SharedBlock],
    ) -> Response {
        if blocks.is_empty() || blocks.len() > MAX_SHARED_BLOCKS {
            return Response::Rejected(Rejection::InvalidArgument(format!(
                "a shared window claim holds 1 to {MAX_SHARED_BLOCKS} blocks, got {}",
                blocks.len()
            )));
        }
        Response::Batch(
            blocks.iter().map(|block| self.claim_window(name, first_second, seconds, block.count, now_ms)).collect(),
        )
    }

    /// The highest end of the window blocks of `name` covering any second of
    /// `[first_second, last_second]` (0: none).
    fn window_top(&self, name: &str, first_second: u64, last_second: u64) -> u64 {
        let Some(blocks) = self.windows.get(name) else {
            return 0;
        };
        #[cfg(feature = "planted")]
        if crate::planted::window_overlap() {
            // The planted bug: only the blocks of this very window count.
            return blocks.get(&(last_second, first_second)).copied().unwrap_or(0);
        }
        // A window covering one of those seconds ends at or after `first_second` and, being at
        // most `MAX_WINDOW_S` long, before `last_second + MAX_WINDOW_S`.
        blocks
            .range((first_second, 0)..=(last_second.saturating_add(MAX_WINDOW_S), u64::MAX))
            .filter(|(&(_, first), _)| first <= last_second)
            .map(|(_, &end)| end)
            .max()
            .unwrap_or(0)
    }

    /// Forgets every second below `horizon_s`, which can never be claimed again, and marks that
    /// it did: until the horizon rises, every second kept (and every second a claim may add) is
    /// at or above it, so forgetting again would change nothing.
    fn forget_below(&mut self, horizon_s: u64) {
        self.next_seq.retain(|_, seconds| {
            while seconds.first_key_value().is_some_and(|(&first, _)| first < horizon_s) {
                seconds.pop_first();
            }
            !seconds.is_empty()
        });
        self.windows.retain(|_, blocks| {
            while blocks.first_key_value().is_some_and(|(&(last, _), _)| last < horizon_s) {
                blocks.pop_first();
            }
            !blocks.is_empty()
        });
        self.forgotten_below = ForgetMark(horizon_s);
    }

    /// Fills a registry without namespaces with a recovered cluster's namespaces and a floor above
    /// every second the old cluster can have claimed.
    pub fn restore(&mut self, namespaces: &BTreeMap<String, NamespaceRecord>, floor_s: u64) -> Response {
        if !self.namespaces.is_empty() {
            return Response::Rejected(Rejection::InvalidArgument(format!(
                "a time-sequence restore applies only to a cluster without namespaces; this one holds {}",
                self.namespaces.len()
            )));
        }
        let checked =
            namespaces.iter().try_for_each(|(name, record)| tag::validate_tag(name).and_then(|()| record.validate()));
        if let Err(msg) = checked {
            return Response::Rejected(Rejection::InvalidArgument(msg));
        }
        self.namespaces = namespaces.clone();
        self.floor_s = self.floor_s.max(floor_s);
        let horizon_s = self.horizon_s();
        self.forget_below(horizon_s);
        Response::TimeseqRestored { namespaces: namespaces.len() as u64 }
    }
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
