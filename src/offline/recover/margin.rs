//! The safety margin of `leafraft recover`, pure: from the old cluster's state as a copy shows it,
//! the state a new cluster may start from without handing out an ID the old one did.
//!
//! What the old cluster handed out that the copy does not show is unbounded in count but bounded
//! in rate and time:
//! - **Segments.** A tag's `max_id` rises only through committed claims (and operator raises, see
//!   docs/operations.md), each by at most that tag's [`claim_bound`]: a segment tag's claimers ask
//!   for Leaf's dynamic step, which never passes the larger of the tag's own step and 1,000,000; a
//!   monotonic tag's leader asks for up to `MAX_STEP`. If the old cluster commits at most
//!   `claims_per_sec` claims per second, a tag's `max_id` rises by at most `claims_per_sec ×
//!   claim_bound` IDs per second after the copy. Each tag is raised by its rate times the time since
//!   the copy (plus `margin_ms` for the clocks of the two machines differing, plus `margin_ids`).
//!   A tag that would pass `MAX_ID_LIMIT` becomes exhausted; nothing wraps.
//! - **Snowflake.** A window is committed at most `MAX_WINDOW_MS` past its proposer's clock, and the
//!   old cluster proposes nothing after the recovery starts. Every worker ID's next holding starts
//!   above `max(every window end, the registry's floor, recover time) + MAX_WINDOW_MS + the lease +
//!   margin_ms + 2 × (recover − copy)`. The first terms cover what the copy shows, extensions it
//!   missed and a takeover's window. The last covers a cluster that already ran from the same copy
//!   (a backup restored twice): its holdings start at its own floor, ahead of the clock, and move
//!   up a millisecond per `2^sequence_bits` IDs a worker issues, i.e. at most one millisecond per
//!   millisecond at the layout's full rate; twice the time since the copy leaves room for twice that.
//! - **Time sequences.** A second is claimed at most `LOOKAHEAD_MS` past its claimer's clock, and
//!   the old cluster claims nothing after the recovery starts. The new cluster claims no second
//!   below `max(the newest clock the copy applied, its floor, recover time) + LOOKAHEAD_MS +
//!   margin_ms`, so no (namespace, second) the old cluster used is used again, whatever was claimed
//!   of it. A cluster that already ran from the same copy is covered too: its claims, like the old
//!   cluster's, are bounded by its clocks before this recovery started.

use std::collections::BTreeMap;

use leafraft_ids::snowflake::Layout as SnowflakeLayout;
use leafraft_state::snowflake::MAX_WINDOW_MS;
use leafraft_state::tag::MAX_ID_LIMIT;
use leafraft_state::tag::MAX_STEP;
use leafraft_state::timeseq::LOOKAHEAD_MS;
use leafraft_state::NamespaceRecord;
use leafraft_state::Request;
use leafraft_state::SnowflakeRegistry;
use leafraft_state::TagRecord;
use leafraft_state::TimeseqRegistry;

/// The rate bound's default: claims the old cluster could commit per second. About 16 times the
/// peak measured here (`leafraft bench claims`: 6,017/s with 16 claimers on 2 cores, docs/benchmarks.md).
pub const DEFAULT_CLAIMS_PER_SEC: u64 = 100_000;

/// The default allowance for the old cluster's clocks running ahead of this machine's.
pub const DEFAULT_MARGIN_MS: u64 = 60_000;

/// The default worker lease (`serve --worker-lease-ms`).
pub const DEFAULT_WORKER_LEASE_MS: u64 = 60_000;

/// What the operator can tune (`leafraft recover --margin ... --claims-per-sec ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarginOptions {
    /// IDs added to every tag on top of the rate bound.
    pub margin_ids: u64,
    /// The most claims the old cluster could commit per second.
    pub claims_per_sec: u64,
    /// Added to the time since the copy and to the snowflake floor: how far the old cluster's
    /// clocks may have been ahead of this machine's.
    pub margin_ms: u64,
    /// The longest worker lease the old cluster ran with.
    pub worker_lease_ms: u64,
}

impl Default for MarginOptions {
    fn default() -> Self {
        MarginOptions {
            margin_ids: 0,
            claims_per_sec: DEFAULT_CLAIMS_PER_SEC,
            margin_ms: DEFAULT_MARGIN_MS,
            worker_lease_ms: DEFAULT_WORKER_LEASE_MS,
        }
    }
}

/// The replicated state a recovery starts from (a survivor's, or a backup's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OldState {
    pub tags: BTreeMap<String, TagRecord>,
    pub snowflake: SnowflakeRegistry,
    pub timeseq: TimeseqRegistry,
    /// The scrambled tags' keys: a recovered tag serves through the same permutation, so the
    /// raised `max_id` keeps it from serving an ID it served before.
    pub scramble_keys: BTreeMap<String, leafraft_state::ScrambleKey>,
}

/// What the new cluster starts with: the content of its one `Restore` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raised {
    pub tags: BTreeMap<String, TagRecord>,
    pub layout: Option<SnowflakeLayout>,
    pub snowflake_floor_ms: u64,
    /// How many IDs each tag was raised by (before clamping at the limit).
    pub margins: BTreeMap<String, u128>,
    pub namespaces: BTreeMap<String, NamespaceRecord>,
    /// Unix seconds: the first second any time-sequence claim may use in the new cluster.
    pub timeseq_floor_s: u64,
    pub scramble_keys: BTreeMap<String, leafraft_state::ScrambleKey>,
}

impl Raised {
    pub fn request(&self) -> Request {
        Request::Restore { tags: self.tags.clone(), layout: self.layout, snowflake_floor_ms: self.snowflake_floor_ms }
    }

    /// The time-sequence half of the restore, committed right after [`request`](Self::request).
    pub fn timeseq_request(&self) -> Request {
        Request::RestoreTimeseq { namespaces: self.namespaces.clone(), floor_s: self.timeseq_floor_s }
    }

    /// The scrambled tags' keys, committed after the two restores: none when no tag is
    /// scrambled; else the cluster version that allows the command (the one member runs this
    /// release), then the keys.
    pub fn scramble_requests(&self) -> Vec<Request> {
        if self.scramble_keys.is_empty() {
            return Vec::new();
        }
        vec![
            Request::SetClusterVersion { version: leafraft_state::Version::SCRAMBLED_TAGS },
            Request::RestoreScrambleKeys { keys: self.scramble_keys.clone() },
        ]
    }

    /// Tags the margin left without IDs (their `max_id` is at the limit).
    pub fn exhausted(&self) -> impl Iterator<Item = &str> {
        self.tags.iter().filter(|(_, record)| record.max_id >= MAX_ID_LIMIT).map(|(name, _)| name.as_str())
    }
}

/// The latest wall clock the state has applied a command with (Unix ms), if any: a time at which
/// the copy was complete, since every command it holds was proposed by then.
pub fn latest_time_ms(tags: &BTreeMap<String, TagRecord>, snowflake: &SnowflakeRegistry) -> Option<u64> {
    let tags = tags.values().flat_map(|record| [record.created_at_ms, record.updated_at_ms]);
    let workers = snowflake.workers.values().map(|lease| lease.last_extend_ms);
    tags.chain(workers).filter(|&ms| ms > 0).max()
}

/// The most IDs one claim of the tag `record` can take: what its claimers ask for. Segment tags
/// are claimed by the nodes' buffers with Leaf's dynamic step (never above the larger of the tag's
/// step and `StepPolicy::LEAF.max_step`); monotonic tags by the leader's sequencer (up to
/// `MAX_STEP`). An operator who raised a tag's step after the copy must say so with `--margin`.
pub fn claim_bound(record: &TagRecord) -> u64 {
    match record.mode {
        leafraft_state::TagMode::Segment => record.step.clamp(leafraft_ids::StepPolicy::LEAF.max_step, MAX_STEP),
        leafraft_state::TagMode::Monotonic => MAX_STEP,
    }
}

/// How many IDs a tag whose claims take at most `claim_bound` IDs can have handed out that the
/// copy does not show: `margin_ids + claims_per_sec × claim_bound × (recover − copy + margin_ms) /
/// 1000`, rounded up, in 128 bits (`u128::MAX` when even that overflows).
pub fn id_margin(copy_time_ms: u64, recover_time_ms: u64, claim_bound: u64, options: &MarginOptions) -> u128 {
    let elapsed_ms = u128::from(recover_time_ms.saturating_sub(copy_time_ms)) + u128::from(options.margin_ms);
    u128::from(options.claims_per_sec)
        .checked_mul(u128::from(claim_bound))
        .and_then(|per_sec| per_sec.checked_mul(elapsed_ms))
        .map(|ids| ids.div_ceil(1000))
        .and_then(|ids| ids.checked_add(u128::from(options.margin_ids)))
        .unwrap_or(u128::MAX)
}

/// The first millisecond any holding may use in the new cluster.
pub fn snowflake_floor_ms(
    old: &SnowflakeRegistry,
    copy_time_ms: u64,
    recover_time_ms: u64,
    options: &MarginOptions,
) -> u64 {
    let latest_window = old.workers.values().map(|lease| lease.window_end_ms).max().unwrap_or(0);
    let since_copy = recover_time_ms.saturating_sub(copy_time_ms);
    latest_window
        .max(old.floor_ms)
        .max(recover_time_ms)
        .saturating_add(MAX_WINDOW_MS)
        .saturating_add(options.worker_lease_ms)
        .saturating_add(options.margin_ms)
        .saturating_add(since_copy.saturating_mul(2))
        .saturating_add(1)
}

/// The first Unix second any time-sequence claim may use in the new cluster.
pub fn timeseq_floor_s(old: &TimeseqRegistry, recover_time_ms: u64, options: &MarginOptions) -> u64 {
    let latest_ms = old.newest_now_ms.max(old.floor_s.saturating_mul(1000)).max(recover_time_ms);
    (latest_ms.saturating_add(LOOKAHEAD_MS).saturating_add(options.margin_ms) / 1000).saturating_add(1)
}

/// The state the new cluster starts from, recovered at `recover_time_ms` from a copy complete at
/// `copy_time_ms` (both Unix ms).
pub fn raise(old: &OldState, copy_time_ms: u64, recover_time_ms: u64, options: &MarginOptions) -> Raised {
    let margins: BTreeMap<String, u128> = old
        .tags
        .iter()
        .map(|(name, record)| (name.clone(), id_margin(copy_time_ms, recover_time_ms, claim_bound(record), options)))
        .collect();
    let tags = old
        .tags
        .iter()
        .map(|(name, record)| {
            let margin_ids = margins.get(name).copied().unwrap_or(u128::MAX);
            let raised = u128::from(record.max_id).saturating_add(margin_ids).min(u128::from(MAX_ID_LIMIT));
            // `raised` is at most MAX_ID_LIMIT, so it fits; a tag at the limit is exhausted.
            let max_id = u64::try_from(raised).unwrap_or(MAX_ID_LIMIT).max(record.max_id);
            (name.clone(), TagRecord { max_id, ..record.clone() })
        })
        .collect();
    Raised {
        tags,
        layout: old.snowflake.layout,
        snowflake_floor_ms: snowflake_floor_ms(&old.snowflake, copy_time_ms, recover_time_ms, options),
        margins,
        namespaces: old.timeseq.namespaces.clone(),
        timeseq_floor_s: timeseq_floor_s(&old.timeseq, recover_time_ms, options),
        scramble_keys: old.scramble_keys.clone(),
    }
}

#[cfg(test)]
mod tests;
