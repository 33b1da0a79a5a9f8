//! Deliberate bugs that prove the chaos checker can fail (`leafraft-chaos --plant NAME`).
//!
//! A checker that never says FAIL proves nothing. This module exists only in builds with the
//! cargo feature `planted` (off by default: release, Docker and fuzz builds never have it;
//! `cargo test --workspace` does, through `leafraft-tools`' dev-dependency). In such a build the
//! environment variable `LEAFRAFT_PLANTED_BUG` arms one bug, `/healthz` names it, and
//! `leafraft planted-bugs` lists the names (the chaos runner asks before it plants). Without the
//! feature every call site is `#[cfg(feature = "planted")]` and compiles to nothing.
//!
//! They sit behind one seam: the points where a committed answer enters an ID engine (a claimed
//! segment into a tag's double buffer, a worker lease into the snowflake generator, a range into
//! a time-sequence holder, a sequence number into a scrambled tag's permutation), and the
//! cluster-version check; `batch-first-claim-only` and
//! `window-overlap` live in the state machine's `apply` (`leafraft_state::planted`), because that is where it would be. Nothing here runs while IDs are handed
//! out, and each bug acts only on a follower, so the leader's IDs stay right and the bug has
//! another node's to collide with.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::OnceLock;

use leafraft_ids::segment::IdRange;
use leafraft_ids::timeseq::SecondRange;

/// A bug the chaos suite must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedBug {
    /// `serve-twice`: the third time a follower installs a claimed segment of a tag, it installs
    /// the one before instead, whose IDs it has already served.
    ServeTwice,
    /// `uncommitted-claim`: a follower fills its buffer from its local `max_id` without a
    /// committed `ClaimSegment`, as if a claim were acknowledged before it commits.
    UncommittedClaim,
    /// `shared-worker`: the node leased worker 0 issues snowflake IDs from worker 1, which
    /// another node holds: one worker, two holders.
    SharedWorker,
    /// `timeseq-serve-twice`: the third time a follower installs a claimed time-sequence range of
    /// a namespace, it also installs the range's first sequences ahead of it, so those are served
    /// twice.
    TimeseqServeTwice,
    /// `feature-gate-off`: commands are proposed whatever the cluster version, so a
    /// member of an older release meets an entry it cannot decode (`tests/e2e/upgrade.rs`).
    FeatureGateOff,
    /// `batch-first-claim-only`: applying a `ClaimBatch` keeps only its first claim and answers
    /// the others as if applied (`leafraft_state::planted`), so their ranges are handed out again
    /// by the next claims. The one bug that lives in `apply`, on every node that arms it.
    BatchFirstClaimOnly,
    /// `window-overlap`: a claim is applied seeing only the window blocks of its very window
    /// (`leafraft_state::planted`): blind to one-second claims and to the overlapping windows of
    /// other nodes, so window blocks overlap one-second ranges and each other.
    WindowOverlap,
    /// `scramble-not-bijective`: a scrambled tag's permutation ignores the lowest bit of the
    /// sequence number (as a permutation built wrongly would), so two sequence numbers share one
    /// image. On every node: each serves both members of such pairs.
    ScrambleNotBijective,
}

impl PlantedBug {
    pub const NAMES: [&'static str; 8] = [
        "serve-twice",
        "uncommitted-claim",
        "shared-worker",
        "timeseq-serve-twice",
        "feature-gate-off",
        "batch-first-claim-only",
        "window-overlap",
        "scramble-not-bijective",
    ];

    pub fn parse(name: &str) -> Option<PlantedBug> {
        match name {
            "serve-twice" => Some(PlantedBug::ServeTwice),
            "uncommitted-claim" => Some(PlantedBug::UncommittedClaim),
            "shared-worker" => Some(PlantedBug::SharedWorker),
            "timeseq-serve-twice" => Some(PlantedBug::TimeseqServeTwice),
            "feature-gate-off" => Some(PlantedBug::FeatureGateOff),
            "batch-first-claim-only" => Some(PlantedBug::BatchFirstClaimOnly),
            "window-overlap" => Some(PlantedBug::WindowOverlap),
            "scramble-not-bijective" => Some(PlantedBug::ScrambleNotBijective),
            _ => None,
        }
    }

    /// The name `--plant` and `LEAFRAFT_PLANTED_BUG` use.
    pub fn name(self) -> &'static str {
        match self {
            PlantedBug::ServeTwice => "serve-twice",
            PlantedBug::UncommittedClaim => "uncommitted-claim",
            PlantedBug::SharedWorker => "shared-worker",
            PlantedBug::TimeseqServeTwice => "timeseq-serve-twice",
            PlantedBug::FeatureGateOff => "feature-gate-off",
            PlantedBug::BatchFirstClaimOnly => "batch-first-claim-only",
            PlantedBug::WindowOverlap => "window-overlap",
            PlantedBug::ScrambleNotBijective => "scramble-not-bijective",
        }
    }
}

/// The bug planted in this process, if any (read once).
pub fn active() -> Option<PlantedBug> {
    static ACTIVE: OnceLock<Option<PlantedBug>> = OnceLock::new();
    *ACTIVE.get_or_init(|| {
        let name = std::env::var("LEAFRAFT_PLANTED_BUG").ok()?;
        let bug = PlantedBug::parse(&name);
        tracing::warn!(bug = %name, known = bug.is_some(), "LEAFRAFT_PLANTED_BUG is set: this node is broken on purpose");
        bug
    })
}

/// Whether `bug` is planted and `is_follower` says this node follows (asked only then).
fn planted_here(bug: PlantedBug, is_follower: impl FnOnce() -> bool) -> bool {
    active() == Some(bug) && is_follower()
}

/// `uncommitted-claim`: the segment a follower installs instead of claiming one, taken from its
/// local `max_id` (`None`: claim as usual).
pub fn segment_without_claim(
    is_follower: impl FnOnce() -> bool,
    local_max_id: impl FnOnce() -> Option<u64>,
    step: u64,
) -> Option<IdRange> {
    if !planted_here(PlantedBug::UncommittedClaim, is_follower) {
        return None;
    }
    let start = local_max_id()?;
    Some(IdRange { start, end: start.checked_add(step)? })
}

/// `serve-twice`: the segment to install for a committed claim of `tag` (the committed one,
/// unless the bug swaps in an earlier one).
pub fn segment_to_install(is_follower: impl FnOnce() -> bool, tag: &str, committed: IdRange) -> IdRange {
    if !planted_here(PlantedBug::ServeTwice, is_follower) {
        return committed;
    }
    /// Per tag: how many claimed segments were installed, and the last one.
    static INSTALLED: OnceLock<Mutex<HashMap<String, (u64, IdRange)>>> = OnceLock::new();
    let mut installed = INSTALLED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let entry = installed.entry(tag.to_string()).or_insert((0, committed));
    let previous = entry.1;
    *entry = (entry.0 + 1, committed);
    if entry.0 == 3 {
        tracing::warn!(tag, ?previous, ?committed, "planted serve-twice: installing a used segment again");
        previous
    } else {
        committed
    }
}

/// `shared-worker`: the worker a generator issues from for a lease on `committed`. The node
/// leased worker 0 issues from worker 1, whatever its role: with every worker leased (the chaos
/// runner waits for that), worker 1 then has two holders. (Planted on every follower instead,
/// the bug hid whenever the leader was the node without a worker: the two followers swapped
/// workers and stayed disjoint.)
pub fn worker_to_issue_from(committed: u32, worker_bits: u8) -> u32 {
    if active() != Some(PlantedBug::SharedWorker) || committed != 0 || worker_bits == 0 {
        return committed;
    }
    tracing::warn!(committed, other = 1, "planted shared-worker: issuing from another node's worker");
    1
}

/// `timeseq-serve-twice`: a range to install ahead of the committed `range` of `namespace`: none,
/// unless the bug, on the third install, installs the range's first few sequences once more ahead
/// of it, so they are served twice as soon as the node serves a few more in that second.
/// (Installing the whole range twice hid the bug whenever the node's demand in that second did
/// not reach the second copy: CI saw such a run pass.)
pub fn timeseq_extra_range(
    is_follower: impl FnOnce() -> bool,
    namespace: &str,
    range: SecondRange,
) -> Option<SecondRange> {
    if !planted_here(PlantedBug::TimeseqServeTwice, is_follower) {
        return None;
    }
    /// How many of the range's first sequences are installed twice.
    const TWICE: u64 = 8;
    static INSTALLED: OnceLock<Mutex<HashMap<String, u64>>> = OnceLock::new();
    let mut installed = INSTALLED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let count = installed.entry(namespace.to_string()).or_insert(0);
    *count += 1;
    if *count != 3 {
        return None;
    }
    let again = SecondRange { end: range.end.min(range.start.saturating_add(TWICE)), ..range };
    tracing::warn!(namespace, ?again, "planted timeseq-serve-twice: installing claimed sequences twice");
    Some(again)
}

/// `batch-first-claim-only`, `window-overlap`: arms the bug in the state machine's
/// `apply` when it is the planted one (called once as a node starts, before Raft applies
/// anything).
pub fn arm_in_apply() {
    match active() {
        Some(PlantedBug::BatchFirstClaimOnly) => {
            tracing::warn!("planted batch-first-claim-only: claim batches apply only their first claim");
            leafraft_state::planted::arm_apply_only_first_claim();
        }
        Some(PlantedBug::WindowOverlap) => {
            tracing::warn!("planted window-overlap: claims see only the blocks of their own window");
            leafraft_state::planted::arm_window_overlap();
        }
        _ => {}
    }
}

/// `scramble-not-bijective`: the sequence number a scrambled tag's permutation is applied to:
/// itself, unless the bug sets its lowest bit, so that `2k` and `2k + 1` share one image.
pub fn scramble_input(sequence: u64) -> u64 {
    if active() != Some(PlantedBug::ScrambleNotBijective) {
        return sequence;
    }
    sequence | 1
}

/// `feature-gate-off`: whether commands skip the cluster-version check.
pub fn feature_gate_off() -> bool {
    active() == Some(PlantedBug::FeatureGateOff)
}

#[cfg(test)]
mod tests {
    use super::PlantedBug;

    #[test]
    fn every_name_parses_to_the_bug_that_has_it() {
        for name in PlantedBug::NAMES {
            let bug = PlantedBug::parse(name);
            assert_eq!(bug.map(PlantedBug::name), Some(name));
        }
        assert_eq!(PlantedBug::parse("no-such-bug"), None);
    }
}
