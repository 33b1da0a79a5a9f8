//! The commands proposed through Raft and the answers applying them gives.
//!
//! `Request` is stored in the Raft log, so its encoding is a persisted format: new variants are
//! appended at the end, existing variants never change their fields, and nothing time-like is
//! read while applying: whatever depends on time travels inside the command (`now_ms`).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use crate::records::NamespaceRecord;
use crate::records::ScrambleKey;
use crate::records::TagMode;
use crate::records::TagRecord;
use crate::version::Version;
use crate::NodeId;
use leafraft_ids::snowflake::Layout as SnowflakeLayout;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Creates a tag whose next segment starts at `max_id`.
    CreateTag { tag: String, max_id: u64, step: u64, description: String, now_ms: u64 },
    /// Changes a tag's step or description, or raises its `max_id` (never lowers it).
    UpdateTag { tag: String, step: Option<u64>, description: Option<String>, max_id: Option<u64>, now_ms: u64 },
    /// Claims `[max_id, max_id + step)` (shorter at the end of the ID space) and raises `max_id`.
    ClaimSegment { tag: String, step: u64 },
    /// Gives back the never-served tail `[from, expected_max_id)` of the latest claim: lowers
    /// `max_id` to `from` only if `max_id` still equals `expected_max_id`.
    ///
    /// Safety rests on each claim's tail being proposed at most once (never retried): then the
    /// only claim that can end at `expected_max_id` while `max_id` equals it is the releaser's.
    ReleaseSegment { tag: String, from: u64, expected_max_id: u64 },
    /// Records the snowflake layout if none is recorded yet; answers the recorded one.
    SetSnowflakeLayout {
        #[serde(with = "crate::records::snowflake_layout")]
        layout: SnowflakeLayout,
    },
    /// Gives `node` a worker lease with a window of `window_ms` past `max(now_ms, floor)`.
    AcquireWorker { node: NodeId, now_ms: u64, lease_ms: u64, window_ms: u64 },
    /// Moves a lease's window forward, only while `epoch` holds.
    ExtendWorker { worker: u32, epoch: u64, window_end_ms: u64, now_ms: u64 },
    /// Frees a lease if `epoch` holds; `used_until_ms` lowers its window to what was used.
    ReleaseWorker { worker: u32, epoch: u64, used_until_ms: Option<u64> },
    /// Records the cluster ID if none is recorded yet (and `cluster_id` is nonzero); answers the
    /// recorded one. The first leader proposes the ID every initial member derived from the
    /// initial membership.
    SetClusterId { cluster_id: u64 },
    /// Fills a new cluster with the state `leafraft recover` computed from a lost one: the tags
    /// (their `max_id` already raised by the safety margin), the snowflake layout, and the floor
    /// below which no worker's holding starts. Applies only while the state holds no tag and no
    /// worker, so it can never lower anything a running cluster handed out.
    Restore {
        tags: BTreeMap<String, TagRecord>,
        #[serde(with = "crate::records::optional_snowflake_layout")]
        layout: Option<SnowflakeLayout>,
        snowflake_floor_ms: u64,
    },
    /// `CreateTag` and `SetTagMode` in one entry, so a tag created monotonic is never a segment
    /// tag that nodes could claim ranges of, not even between two entries.
    CreateTagInMode { tag: String, max_id: u64, step: u64, description: String, now_ms: u64, mode: TagMode },
    /// Moves a tag to `mode`: only from segment to monotonic, never back.
    SetTagMode { tag: String, mode: TagMode, now_ms: u64 },
    /// The leader's claim of `[max_id, max_id + step)` of a monotonic tag. It serves the range
    /// only in the term whose entry this is (see `src/services/monotonic`); a segment claim of such a tag,
    /// and this claim of a segment tag, are refused.
    ClaimMonotonic { tag: String, step: u64 },
    /// Creates a time-sequence namespace (`record.created_at_ms` is the proposer's clock).
    CreateNamespace { namespace: String, record: NamespaceRecord },
    /// Claims up to `count` sequences of `(namespace, second)` (Unix seconds); `now_ms` is the
    /// claimer's clock, against which the second is judged and the retention horizon moves.
    ClaimTimeseq { namespace: String, second: u64, count: u64, now_ms: u64 },
    /// Fills a recovered cluster's time-sequence namespaces, with a floor (Unix seconds) above
    /// every second the old cluster can have claimed. Applies only while no namespace exists.
    RestoreTimeseq { namespaces: BTreeMap<String, NamespaceRecord>, floor_s: u64 },
    /// Creates or raises many tags in one entry (`leafraft tag import`): every row or, when one is
    /// invalid, none. A missing tag is created from its row (segment mode, an empty description
    /// for `None`); an existing one gets `max_id` raised to at least the row's, never lowered (so
    /// a copy committed again after claims changes nothing), and the row's step and description.
    ImportTags { rows: Vec<ImportRow>, now_ms: u64 },
    // --- Release 0.2.0. A member of an older release cannot decode what follows, so
    // each is proposed only once the cluster version allows it (`Request::needs`).
    /// Raises the cluster version to `version` (never lowers it). The leader proposes it once
    /// every member (voters and learners) reports running at least `version`, because from then
    /// on commands that need it may be proposed; this entry itself is the first such command.
    SetClusterVersion { version: Version },
    /// Changes nothing: `POST /v1/cluster/noop`, the check that a cluster commits entries only
    /// its current release can decode (the command the upgrade test sees refused, then accepted).
    Noop,
    // --- Release 0.3.0, proposed only from cluster version `Version::CLAIM_BATCHES`.
    /// Every claim a node needs at one moment in one entry (the refills of several tags, the next
    /// second of every namespace in use): applied in order, each exactly as its own command
    /// (`Claim::request`) would be and judged on its own, so a refused claim refuses only itself.
    /// Answered with `Response::Batch`, one answer per claim in the same order.
    ClaimBatch { claims: Vec<Claim> },
    /// Many never-served tails given back in one entry (a graceful stop gives back every
    /// buffer's): applied in order, each exactly as its own `ReleaseSegment` and judged on its
    /// own. Answered with `Response::Batch`, one `Released` (or refusal) per release in the same
    /// order. Like `ReleaseSegment`, proposed at most once, never resent.
    ReleaseBatch { releases: Vec<Release> },
    // --- Release 0.3.0, proposed only from cluster version `Version::SCRAMBLED_TAGS`.
    /// Creates a segment tag whose IDs are served scrambled: every node serves `P(n)` for the
    /// sequence number `n` its ranges hold, `P` the keyed permutation of the tag's ID space
    /// (`leafraft_ids::scramble`) under `key`. The proposer draws the key once; it enters the
    /// state in the same entry as the tag, so no ID of the tag is ever served unscrambled, and
    /// nothing changes it afterwards. A copy committed again is answered as the first one. The
    /// tag's IDs lie in `[1, 2^key.bits - 1)`: its claims stop there (`TagExhausted`).
    CreateScrambledTag { tag: String, max_id: u64, step: u64, description: String, now_ms: u64, key: ScrambleKey },
    /// The keys of a recovered cluster's scrambled tags (`leafraft recover`, after `Restore`):
    /// applies only while no tag has a key, and only to segment tags that exist.
    RestoreScrambleKeys { keys: BTreeMap<String, ScrambleKey> },
}

/// One release of a [`Request::ReleaseBatch`]: the fields of the `ReleaseSegment` it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    pub tag: String,
    pub from: u64,
    pub expected_max_id: u64,
}

/// One claim of a [`Request::ClaimBatch`]: the fields of the command it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Claim {
    /// As [`Request::ClaimSegment`].
    Segment { tag: String, step: u64 },
    /// As [`Request::ClaimMonotonic`].
    Monotonic { tag: String, step: u64 },
    /// As [`Request::ClaimTimeseq`].
    Timeseq { namespace: String, second: u64, count: u64, now_ms: u64 },
    // --- Also release 0.3.0: travels only inside a `ClaimBatch`, which no older member decodes.
    /// Claims one block of up to `count` sequences in every second of
    /// `[first_second, first_second + seconds)` (Unix seconds, `seconds` at most
    /// `timeseq::MAX_WINDOW_S`): the same block `[start, end)` in each, above everything either
    /// kind of claim gave in any of them. `now_ms` is the claimer's clock, as in `Timeseq`.
    /// Answered with `Response::TimeseqWindow`. No command of its own: only in a batch.
    TimeseqWindow { namespace: String, first_second: u64, seconds: u64, count: u64, now_ms: u64 },
    /// One window claim for each of several members: for every block of `blocks`, in order, the
    /// `TimeseqWindow` claim of `block.count` sequences in the same window with the same `now_ms`,
    /// judged on its own. Answered with `Response::Batch`, one answer per block in the same order.
    /// A member serves its block from its own apply of this entry, never from the answer, and
    /// only if the entry was committed after its process began (`src/services/timeseq/shared.rs`):
    /// one claim serves every member of a namespace, and a restarted member never serves a
    /// block again. At most `timeseq::MAX_SHARED_BLOCKS` blocks. Only inside a `ClaimBatch`.
    TimeseqSharedWindow { namespace: String, first_second: u64, seconds: u64, now_ms: u64, blocks: Vec<SharedBlock> },
}

/// One member's block of a [`Claim::TimeseqSharedWindow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedBlock {
    /// The member that serves the block.
    pub member: NodeId,
    /// Sequences asked for in every second of the window.
    pub count: u64,
}

impl Claim {
    /// The command this claim applies as, if it has one of its own (a window claim travels only
    /// inside a `ClaimBatch`).
    pub fn request(&self) -> Option<Request> {
        match self.clone() {
            Claim::Segment { tag, step } => Some(Request::ClaimSegment { tag, step }),
            Claim::Monotonic { tag, step } => Some(Request::ClaimMonotonic { tag, step }),
            Claim::Timeseq { namespace, second, count, now_ms } => {
                Some(Request::ClaimTimeseq { namespace, second, count, now_ms })
            }
            Claim::TimeseqWindow { .. } | Claim::TimeseqSharedWindow { .. } => None,
        }
    }

    /// The tag this claim raises, if it claims IDs of a tag.
    pub fn tag(&self) -> Option<&str> {
        match self {
            Claim::Segment { tag, .. } | Claim::Monotonic { tag, .. } => Some(tag),
            Claim::Timeseq { .. } | Claim::TimeseqWindow { .. } | Claim::TimeseqSharedWindow { .. } => None,
        }
    }
}

/// What proposing a request takes, beyond a valid state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// The cluster version at least this (a command that members of older releases cannot decode).
    ClusterVersion(Version),
    /// Every member (voters and learners) reporting at least this version: raising the cluster
    /// version to it.
    EveryMember(Version),
}

/// One tag of an [`Request::ImportTags`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportRow {
    pub tag: String,
    pub max_id: u64,
    pub step: u64,
    /// `None`: a new tag gets an empty description, an existing one keeps its own.
    pub description: Option<String>,
}

impl Request {
    /// Every tag this request may create or change: its one tag, or each row of an import.
    pub fn tags(&self) -> Vec<&str> {
        match self {
            Request::ImportTags { rows, .. } => rows.iter().map(|row| row.tag.as_str()).collect(),
            Request::ClaimBatch { claims } => claims.iter().filter_map(Claim::tag).collect(),
            Request::ReleaseBatch { releases } => releases.iter().map(|release| release.tag.as_str()).collect(),
            _ => self.tag().into_iter().collect(),
        }
    }

    /// The one tag this request is about, if any (an import, about many, answers none: see
    /// [`Request::tags`]).
    pub fn tag(&self) -> Option<&str> {
        match self {
            Request::CreateTag { tag, .. }
            | Request::UpdateTag { tag, .. }
            | Request::ClaimSegment { tag, .. }
            | Request::ReleaseSegment { tag, .. }
            | Request::CreateTagInMode { tag, .. }
            | Request::SetTagMode { tag, .. }
            | Request::ClaimMonotonic { tag, .. }
            | Request::CreateScrambledTag { tag, .. } => Some(tag),
            Request::SetSnowflakeLayout { .. }
            | Request::AcquireWorker { .. }
            | Request::ExtendWorker { .. }
            | Request::ReleaseWorker { .. }
            | Request::SetClusterId { .. }
            | Request::Restore { .. }
            | Request::CreateNamespace { .. }
            | Request::ClaimTimeseq { .. }
            | Request::RestoreTimeseq { .. }
            | Request::ImportTags { .. }
            | Request::SetClusterVersion { .. }
            | Request::Noop
            | Request::ClaimBatch { .. }
            | Request::ReleaseBatch { .. }
            | Request::RestoreScrambleKeys { .. } => None,
        }
    }

    /// What proposing this request needs: every command of the baseline release needs nothing more
    /// than the baseline cluster version. No wildcard: a new command must say what it needs.
    pub fn needs(&self) -> Needs {
        match self {
            Request::CreateTag { .. }
            | Request::UpdateTag { .. }
            | Request::ClaimSegment { .. }
            | Request::ReleaseSegment { .. }
            | Request::SetSnowflakeLayout { .. }
            | Request::AcquireWorker { .. }
            | Request::ExtendWorker { .. }
            | Request::ReleaseWorker { .. }
            | Request::SetClusterId { .. }
            | Request::Restore { .. }
            | Request::CreateTagInMode { .. }
            | Request::SetTagMode { .. }
            | Request::ClaimMonotonic { .. }
            | Request::CreateNamespace { .. }
            | Request::ClaimTimeseq { .. }
            | Request::RestoreTimeseq { .. }
            | Request::ImportTags { .. } => Needs::ClusterVersion(Version::BASELINE),
            Request::SetClusterVersion { version } => Needs::EveryMember(*version),
            Request::Noop => Needs::ClusterVersion(Version::new(0, 2, 0)),
            Request::ClaimBatch { .. } | Request::ReleaseBatch { .. } => Needs::ClusterVersion(Version::CLAIM_BATCHES),
            Request::CreateScrambledTag { .. } | Request::RestoreScrambleKeys { .. } => {
                Needs::ClusterVersion(Version::SCRAMBLED_TAGS)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The answer to entries that carry no request (blank and membership entries).
    Empty,
    /// The tag after a create or an update.
    Tag {
        tag: String,
        record: TagRecord,
    },
    /// A committed claim: the half-open range `[start, end)` now belongs to the claimer.
    Segment {
        start: u64,
        end: u64,
    },
    /// Whether a release lowered `max_id`.
    Released {
        applied: bool,
    },
    /// The request was valid to propose but the state did not allow it; nothing changed.
    Rejected(Rejection),
    /// The snowflake layout recorded in the cluster.
    SnowflakeLayout(#[serde(with = "crate::records::snowflake_layout")] SnowflakeLayout),
    /// A worker lease: IDs with timestamps in `[floor_ms, window_end_ms]` (Unix ms).
    WorkerAcquired {
        worker: u32,
        epoch: u64,
        floor_ms: u64,
        window_end_ms: u64,
    },
    WorkerExtended {
        window_end_ms: u64,
    },
    WorkerReleased {
        applied: bool,
    },
    /// The cluster ID recorded in the replicated state (0: none yet).
    ClusterId {
        cluster_id: u64,
    },
    /// A restore filled the state with this many tags.
    Restored {
        tags: u64,
    },
    /// A time-sequence namespace after its create.
    Namespace {
        namespace: String,
        record: NamespaceRecord,
    },
    /// A committed time-sequence claim: sequences `[start, end)` of Unix second `second` now belong
    /// to the claimer.
    TimeseqRange {
        second: u64,
        start: u64,
        end: u64,
    },
    /// A time-sequence restore filled this many namespaces.
    TimeseqRestored {
        namespaces: u64,
    },
    /// An import created `created` tags and changed `updated` others (the rest were as asked).
    Imported {
        created: u64,
        updated: u64,
    },
    /// The cluster version after a `SetClusterVersion`.
    ClusterVersion {
        version: Version,
    },
    /// The answers to a `ClaimBatch`, one per claim in its order: `Segment`, `TimeseqRange`,
    /// `TimeseqWindow` or `Rejected`, exactly what each claim's own command would have answered.
    Batch(Vec<Response>),
    /// A committed window claim: sequences `[start, end)` of every Unix second in
    /// `[first_second, first_second + seconds)` now belong to the claimer.
    TimeseqWindow {
        first_second: u64,
        seconds: u64,
        start: u64,
        end: u64,
    },
}

/// Why applying a request changed nothing. Mirrors the error codes of the HTTP API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rejection {
    TagNotFound,
    TagExists,
    MaxIdDecrease {
        current: u64,
    },
    TagExhausted,
    InvalidArgument(String),
    /// Every worker ID is held by a live holder.
    NoWorkerAvailable,
    /// The lease's epoch moved on: another holder (or an operator) took the worker.
    LeaseLost,
    /// No snowflake layout is recorded yet.
    LayoutMissing,
    /// The request does not fit the tag's mode (a segment claim of a monotonic tag, a mode
    /// change back to segment).
    ModeMismatch(String),
    NamespaceNotFound,
    NamespaceExists,
    /// The claimed second is below the retention horizon (Unix seconds): the claimer's clock is
    /// behind, or the second was forgotten.
    ClockBackwards {
        horizon_s: u64,
    },
    /// The claimed second is past the claimer's clock plus the lookahead (Unix seconds).
    ClockAhead {
        limit_s: u64,
    },
    /// Every sequence of the claimed second is taken.
    SecondExhausted,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::TagNotFound => write!(f, "tag does not exist"),
            Rejection::TagExists => write!(f, "tag already exists"),
            Rejection::MaxIdDecrease { current } => write!(f, "max_id may only rise (current {current})"),
            Rejection::TagExhausted => write!(f, "tag has handed out its last ID"),
            Rejection::InvalidArgument(msg) => write!(f, "{msg}"),
            Rejection::NoWorkerAvailable => write!(f, "every worker ID is held"),
            Rejection::LeaseLost => write!(f, "the worker lease is held under another epoch"),
            Rejection::LayoutMissing => write!(f, "no snowflake layout is recorded"),
            Rejection::ModeMismatch(msg) => write!(f, "{msg}"),
            Rejection::NamespaceNotFound => write!(f, "namespace does not exist"),
            Rejection::NamespaceExists => write!(f, "namespace already exists"),
            Rejection::ClockBackwards { horizon_s } => {
                write!(f, "the second is below the cluster's retention horizon (Unix second {horizon_s})")
            }
            Rejection::ClockAhead { limit_s } => {
                write!(f, "the second is past the claimer's clock plus the lookahead (Unix second {limit_s})")
            }
            Rejection::SecondExhausted => write!(f, "every sequence of the second is taken"),
        }
    }
}
