//! What the clients saw: every request with when it was sent and answered, where, and what came
//! back. The checker reads only this; nothing in it is inferred from the cluster's own claims.
//!
//! Times are microseconds since the run started, on the runner's monotonic clock, so real-time
//! order between two requests is `a.end_us < b.start_us` whatever the nodes' wall clocks say.

use std::collections::BTreeMap;

/// One node process: node ID and how many times the runner has started it (1 = first start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Incarnation {
    pub node: u64,
    pub start: u32,
}

impl std::fmt::Display for Incarnation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node {}#{}", self.node, self.start)
    }
}

/// The ID endpoints the clients call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    /// `GET /v1/segment/{tag}?count=N`
    SegmentList,
    /// `GET /v1/segment/{tag}/ranges?count=N`
    SegmentRanges,
    /// `GET /api/segment/get/{tag}` (Leaf)
    LeafSegment,
    /// `GET /v1/snowflake?count=N`
    SnowflakeList,
    /// `GET /api/snowflake/get/{key}` (Leaf)
    LeafSnowflake,
    /// `GET /v1/timeseq/{ns}?shard=S&count=N`
    TimeseqList,
    /// `GET /api/timeseq/get/{ns}?shard=S` (Leaf-style)
    LeafTimeseq,
}

impl Endpoint {
    pub const ALL: [Endpoint; 7] = [
        Endpoint::SegmentList,
        Endpoint::SegmentRanges,
        Endpoint::LeafSegment,
        Endpoint::SnowflakeList,
        Endpoint::LeafSnowflake,
        Endpoint::TimeseqList,
        Endpoint::LeafTimeseq,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Endpoint::SegmentList => "/v1/segment",
            Endpoint::SegmentRanges => "/v1/segment/ranges",
            Endpoint::LeafSegment => "/api/segment/get",
            Endpoint::SnowflakeList => "/v1/snowflake",
            Endpoint::LeafSnowflake => "/api/snowflake/get",
            Endpoint::TimeseqList => "/v1/timeseq",
            Endpoint::LeafTimeseq => "/api/timeseq/get",
        }
    }

    pub fn is_timeseq(self) -> bool {
        matches!(self, Endpoint::TimeseqList | Endpoint::LeafTimeseq)
    }
}

/// What a request came back with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Segment IDs of `tag` as increasing half-open ranges, in the order the answer listed them.
    Segment { tag: String, ranges: Vec<(u64, u64)> },
    /// Snowflake IDs in the order the answer listed them.
    Snowflake(Vec<u64>),
    /// Long-form time-sequence IDs of `namespace`, asked for `shard`, in the answer's order.
    Timeseq { namespace: String, shard: u64, ids: Vec<u64> },
    /// A definite refusal: an error code from the node, or a connection that was never made.
    Failed(String),
    /// No answer in time, or the connection broke mid-request: the IDs may have been issued.
    Unknown(String),
    /// An answer the client could not understand (a bug in the node or the runner).
    Malformed(String),
}

/// One request.
#[derive(Debug, Clone)]
pub struct Op {
    pub endpoint: Endpoint,
    pub node: u64,
    /// The process that answered, when the same one ran from send to answer.
    pub incarnation: Option<Incarnation>,
    pub start_us: u64,
    pub end_us: u64,
    pub outcome: Outcome,
}

/// A read of a tag's `max_id` from one node (`GET /v1/tags/{tag}`): local, or through the leader
/// (`?consistent=true`, linearizable).
#[derive(Debug, Clone)]
pub struct MaxIdRead {
    pub node: u64,
    /// Which data directory of the node answered (bumped when it is wiped and rebuilt).
    pub disk: u32,
    pub consistent: bool,
    pub tag: String,
    pub start_us: u64,
    pub end_us: u64,
    pub max_id: u64,
}

/// Everything the checker judges.
#[derive(Debug, Default)]
pub struct History {
    pub ops: Vec<Op>,
    pub max_id_reads: Vec<MaxIdRead>,
    /// When a node was being stopped gracefully, from SIGTERM to exit: it gives back its buffer
    /// tails, which may lower `max_id` to the first ID it never served.
    pub graceful_stops_us: Vec<(u64, u64)>,
    /// The runner's wall clock (Unix ms) at time zero of the run: what time-sequence seconds are
    /// compared with.
    pub started_unix_ms: u64,
    /// When the answer 200 to the move of `chaos-switch` to monotonic arrived (the runner's own
    /// `PATCH`, `crate::faults::switch`); `None` when the run made no move, or got no 200.
    pub switched_us: Option<u64>,
}

impl History {
    /// Counts of requests per endpoint and outcome class, and errors by code.
    pub fn tally(&self) -> Tally {
        let mut tally = Tally::default();
        for op in &self.ops {
            let row = tally.by_endpoint.entry(op.endpoint.name()).or_default();
            match &op.outcome {
                Outcome::Segment { ranges, .. } => {
                    row.ok += 1;
                    tally.segment_ids += ranges.iter().map(|(start, end)| end.saturating_sub(*start)).sum::<u64>();
                }
                Outcome::Snowflake(ids) => {
                    row.ok += 1;
                    tally.snowflake_ids += ids.len() as u64;
                }
                Outcome::Timeseq { ids, .. } => {
                    row.ok += 1;
                    tally.timeseq_ids += ids.len() as u64;
                }
                Outcome::Failed(code) => {
                    row.failed += 1;
                    *tally.errors.entry(code.clone()).or_default() += 1;
                }
                Outcome::Unknown(reason) => {
                    row.unknown += 1;
                    *tally.unknown.entry(reason.clone()).or_default() += 1;
                }
                Outcome::Malformed(_) => {
                    row.failed += 1;
                    *tally.errors.entry("MALFORMED_ANSWER".into()).or_default() += 1;
                }
            }
        }
        tally
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct EndpointTally {
    pub ok: u64,
    pub failed: u64,
    pub unknown: u64,
}

#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub by_endpoint: BTreeMap<&'static str, EndpointTally>,
    pub errors: BTreeMap<String, u64>,
    pub unknown: BTreeMap<String, u64>,
    pub segment_ids: u64,
    pub snowflake_ids: u64,
    pub timeseq_ids: u64,
}

impl Tally {
    pub fn add(&mut self, other: &Tally) {
        for (name, row) in &other.by_endpoint {
            let mine = self.by_endpoint.entry(name).or_default();
            mine.ok += row.ok;
            mine.failed += row.failed;
            mine.unknown += row.unknown;
        }
        for (code, n) in &other.errors {
            *self.errors.entry(code.clone()).or_default() += n;
        }
        for (reason, n) in &other.unknown {
            *self.unknown.entry(reason.clone()).or_default() += n;
        }
        self.segment_ids += other.segment_ids;
        self.snowflake_ids += other.snowflake_ids;
        self.timeseq_ids += other.timeseq_ids;
    }
}
