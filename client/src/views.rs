//! The JSON answers of the admin API as types (`docs/api.md`). Each keeps the fields it does not
//! know in `extra`, so a newer server's fields survive a read and a print unchanged.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use crate::decode::decimal;
use crate::decode::decimal_option;
use leafraft_ids::IdRange;

type Extra = serde_json::Map<String, serde_json::Value>;

/// A tag (`GET /v1/tags/{tag}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tag {
    pub tag: String,
    /// Every ID of the tag handed out so far lies below this.
    #[serde(with = "decimal")]
    pub max_id: u64,
    pub step: u64,
    pub description: String,
    /// RFC 3339.
    pub created_at: String,
    pub updated_at: String,
    /// `segment` or `monotonic` (empty from a server that predates modes).
    #[serde(default)]
    pub mode: String,
    /// Whether the tag's IDs are served scrambled (absent, so false, from a server without them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scramble: bool,
    /// A scrambled tag's ID space is `[1, 2^scramble_bits - 1)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scramble_bits: Option<u8>,
    /// The answering node's buffers for the tag (null until it has served the tag).
    pub buffers: Option<Buffers>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One node's double buffer for one tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Buffers {
    pub current: Option<Range>,
    #[serde(with = "decimal_option")]
    pub cursor: Option<u64>,
    pub next: Option<Range>,
    pub loading: bool,
    pub step: Option<u64>,
    pub last_claim_at: Option<String>,
    pub ids_issued: u64,
    pub claims: u64,
    pub waits: u64,
    pub ids_per_sec: f64,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A half-open range of IDs `[start, end)` as the API writes it (decimal strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    #[serde(with = "decimal")]
    pub start: u64,
    #[serde(with = "decimal")]
    pub end: u64,
}

impl From<Range> for IdRange {
    fn from(range: Range) -> IdRange {
        IdRange { start: range.start, end: range.end }
    }
}

/// The body of `POST /v1/tags`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewTag {
    pub tag: String,
    #[serde(skip_serializing_if = "Option::is_none", with = "decimal_option")]
    pub max_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `segment` (default) or `monotonic`: served only by the leader, in real-time order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Serve the tag's IDs through a keyed permutation of its ID space (segment tags only; fixed
    /// at creation): they then reveal neither volume nor order. Its IDs come as lists only
    /// ([`Client::segment_ids`](crate::Client::segment_ids)), never as ranges.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scramble: Option<bool>,
    /// A scrambled tag's ID space, `[1, 2^bits - 1)`: 16 to 63 bits (the server's default, 63,
    /// is every ID a tag can have). Narrower gives shorter IDs and a tag exhausted sooner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scramble_bits: Option<u8>,
}

/// One tag of `POST /v1/import/tags`: created from this when missing; otherwise `max_id` is raised
/// to at least this (never lowered), and step and description set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportTag {
    pub tag: String,
    #[serde(with = "crate::decode::decimal")]
    pub max_id: u64,
    pub step: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// What an import batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Imported {
    pub created: u64,
    pub updated: u64,
}

/// The body of `PATCH /v1/tags/{tag}`: only what is set changes (`max_id` only rises).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TagUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", with = "decimal_option")]
    pub max_id: Option<u64>,
    /// `monotonic` moves a segment tag to monotonic; nothing moves it back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

impl TagUpdate {
    pub fn is_empty(&self) -> bool {
        self.step.is_none() && self.description.is_none() && self.max_id.is_none() && self.mode.is_none()
    }
}

/// `GET /v1/cluster`: the answering node's view of the membership and of Raft.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterStatus {
    pub node_id: u64,
    /// `leader`, `follower`, `learner`, `candidate`, ...
    pub role: String,
    pub leader_id: Option<u64>,
    pub term: u64,
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    /// Node ID (as a string) to `host:port`.
    pub nodes: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Members at whose address a node of another cluster answered (node ID → its cluster ID).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub foreign_clusters: BTreeMap<String, String>,
    #[serde(default)]
    pub incarnations: BTreeMap<String, String>,
    pub commit_index: Option<u64>,
    pub applied_index: Option<u64>,
    /// On the leader only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<BTreeMap<String, Replication>>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replication {
    pub matched_index: Option<u64>,
    pub lag: u64,
}

/// `GET /v1/workers`: the snowflake worker registry and the answering node's own state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workers {
    /// The layout recorded in the cluster (null until a node serving snowflake records it).
    pub layout: Option<SnowflakeLayout>,
    pub workers: Vec<Worker>,
    /// The answering node's snowflake state (its worker, window, clock check), as it reports it.
    pub this_node: serde_json::Value,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worker {
    pub worker_id: u32,
    pub holder: Option<u64>,
    pub epoch: u64,
    pub window_end_ms: u64,
    pub floor_ms: u64,
    pub last_heartbeat_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnowflakeLayout {
    pub epoch_ms: u64,
    pub time_bits: u8,
    pub worker_bits: u8,
    pub sequence_bits: u8,
}

impl From<SnowflakeLayout> for leafraft_ids::snowflake::Layout {
    fn from(layout: SnowflakeLayout) -> leafraft_ids::snowflake::Layout {
        leafraft_ids::snowflake::Layout {
            epoch_ms: layout.epoch_ms,
            time_bits: layout.time_bits,
            worker_bits: layout.worker_bits,
            sequence_bits: layout.sequence_bits,
        }
    }
}

/// `GET /v1/snowflake/decode/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecodedSnowflake {
    #[serde(with = "decimal")]
    pub id: u64,
    pub timestamp_ms: u64,
    /// RFC 3339.
    pub time: String,
    pub worker_id: u64,
    pub sequence: u64,
}

/// A time-sequence namespace (`GET /v1/timeseq/{ns}`): its layout, fixed at creation, and the
/// answering node's ranges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Namespace {
    pub namespace: String,
    /// RFC 3339: second zero of the IDs' time bits.
    pub epoch: String,
    /// `UTC` or a fixed offset such as `+08:00` (the string form's calendar).
    pub time_zone: String,
    pub time_bits: u8,
    pub shard_bits: u8,
    pub seq_bits: u8,
    pub description: String,
    /// RFC 3339.
    pub created_at: String,
    /// The answering node's ranges (null until it has served the namespace).
    pub ranges: Option<NamespaceRanges>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One node's ranges of one namespace: `"second:start-end"` (Unix second, half-open sequences).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamespaceRanges {
    /// The range being served.
    pub current: Option<String>,
    /// Claimed ranges not yet served (the rest of this second, the next second's prefetch).
    pub pending: Vec<String>,
    pub ids_issued: u64,
    /// IDs this node issued during the last full second (what its claims are sized by).
    pub last_second_ids: u64,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The body of `POST /v1/timeseq`: what is not set takes the server's default (epoch
/// 2020-01-01T00:00:00Z, UTC, 12 shard bits, 19 sequence bits).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewNamespace {
    pub namespace: String,
    /// RFC 3339, a whole second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
    /// `UTC`, `Z` or a fixed offset `+08:00`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard_bits: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq_bits: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `GET /v1/timeseq/{ns}/decode/{id}`: a long or string-form ID taken apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecodedTimeseq {
    /// The ID as it was given.
    pub id: String,
    /// Unix seconds.
    pub seconds: u64,
    /// RFC 3339 (UTC).
    pub time: String,
    pub shard: u64,
    pub sequence: u64,
}
