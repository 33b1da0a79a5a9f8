//! The schemas of answers that handlers write by hand or that are documented apart from the type
//! that builds them (`/openapi.json` names them). They sit below the handlers and `openapi`, which
//! both name them, so that neither imports the other back.

use serde::Deserialize;
use serde::Serialize;

/// `GET /v1/segment/{tag}`: IDs as decimal strings, strictly increasing.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SegmentIds {
    #[schema(example = "order")]
    pub tag: String,
    #[schema(example = json!(["1001", "1002"]))]
    pub ids: Vec<String>,
}

/// `GET /v1/segment/{tag}/ranges`: half-open ranges `[start, end)` totalling `count` IDs.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SegmentRanges {
    #[schema(example = "order")]
    pub tag: String,
    pub ranges: Vec<crate::api::respond::RangeView>,
}

/// `GET /v1/snowflake`: snowflake IDs as decimal strings.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnowflakeIds {
    #[schema(example = json!(["1858431170314878976"]))]
    pub ids: Vec<String>,
}

/// `GET /decodeSnowflakeId`: Leaf's shape, all strings.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeafDecoded {
    /// `<ms>(<yyyy-MM-dd HH:mm:ss.SSS>)`, UTC.
    #[schema(example = "1732240000000(2024-11-22 01:46:40.000)")]
    pub timestamp: String,
    #[serde(rename = "workerId")]
    pub worker_id: String,
    #[serde(rename = "sequenceId")]
    pub sequence_id: String,
}

/// `GET /v1/clock`: this node's wall clock, for peer clock checks.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Clock {
    pub node_id: u64,
    /// Unix milliseconds.
    pub now_ms: u64,
}

/// `GET /healthz`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
    /// The bug armed in this node on purpose, only in test builds with the cargo feature
    /// `planted`; absent otherwise, and always absent in release builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "serve-twice")]
    pub planted: Option<String>,
}

/// `GET /readyz` when ready; `snowflake` says whether snowflake IDs are served, and why not.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    #[schema(example = "ready")]
    pub status: String,
    /// Segment IDs: ready whenever the node is.
    pub segment: KindReadiness,
    pub snowflake: SnowflakeReadiness,
    /// Time-sequence IDs: ready once this node's clock is confirmed by its peers.
    pub timeseq: KindReadiness,
    /// Monotonic tags: ready while a leader is known (the leader serves them).
    pub monotonic: KindReadiness,
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KindReadiness {
    pub ready: bool,
    /// Why this kind is refused, when not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnowflakeReadiness {
    pub ready: bool,
    /// The worker this node holds, when ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<u32>,
    /// Why snowflake IDs are refused, when not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `GET /v1/backup`: the backup file, binary (magic, version, state, CRC-32; see `src/backup.rs`).
#[derive(Debug, utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct BackupFile(pub Vec<u8>);

/// How snowflake IDs are laid out (1 sign bit, then time, worker and sequence bits); recorded in
/// the cluster at first start. Mirrors `leafraft_ids::snowflake::Layout` (checked by a test).
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnowflakeLayout {
    /// Unix milliseconds of timestamp zero.
    #[schema(example = 1288834974657u64)]
    pub epoch_ms: u64,
    #[schema(example = 41)]
    pub time_bits: u8,
    #[schema(example = 10)]
    pub worker_bits: u8,
    #[schema(example = 12)]
    pub sequence_bits: u8,
}
