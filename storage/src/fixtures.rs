//! Values and stores shared by the unit tests.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use leafraft_state::typ;
use leafraft_state::Request;
use openraft::CommittedLeaderId;
use openraft::EntryPayload;
use openraft::Membership;
use tempfile::TempDir;

use crate::Store;
use crate::StoreOptions;

pub fn log_id(term: u64, index: u64) -> typ::LogId {
    typ::LogId::new(CommittedLeaderId::new(term, 1), index)
}

pub fn membership(voters: &[u64]) -> typ::Membership {
    let nodes: BTreeMap<u64, leafraft_state::Node> = voters
        .iter()
        .map(|&id| (id, leafraft_state::Node::new(format!("127.0.0.1:{}", 8080 + id), 0x1000 + id)))
        .collect();
    Membership::new(vec![voters.iter().copied().collect::<BTreeSet<_>>()], nodes)
}

pub fn blank(term: u64, index: u64) -> typ::Entry {
    typ::Entry { log_id: log_id(term, index), payload: EntryPayload::Blank }
}

pub fn membership_entry(term: u64, index: u64, voters: &[u64]) -> typ::Entry {
    typ::Entry { log_id: log_id(term, index), payload: EntryPayload::Membership(membership(voters)) }
}

pub fn normal(term: u64, index: u64, request: Request) -> typ::Entry {
    typ::Entry { log_id: log_id(term, index), payload: EntryPayload::Normal(request) }
}

pub fn create(tag: &str, max_id: u64, step: u64) -> Request {
    Request::CreateTag { tag: tag.into(), max_id, step, description: format!("{tag} ids"), now_ms: 1_700_000_000_000 }
}

pub fn claim(tag: &str, step: u64) -> Request {
    Request::ClaimSegment { tag: tag.into(), step }
}

/// One request of every variant, in `Request`'s declaration order, valid in this order on an
/// empty state machine (but for the restore, which is refused there: the state holds a tag by
/// then). Each is checked against [`declared_position`], an exhaustive match, so a new variant
/// does not compile until it is listed there; `codec::tests` checks that no variant follows the
/// last one listed, so it must be added here too.
pub fn every_request() -> Vec<Request> {
    let every = vec![
        create("orders", 1, 1000),
        Request::UpdateTag {
            tag: "orders".into(),
            step: Some(2000),
            description: Some("order ids".into()),
            max_id: Some(5),
            now_ms: 1_700_000_000_001,
        },
        claim("orders", 2000),
        Request::ReleaseSegment { tag: "orders".into(), from: 1005, expected_max_id: 2005 },
        Request::SetSnowflakeLayout { layout: leafraft_ids::snowflake::Layout::LEAF },
        Request::AcquireWorker { node: 2, now_ms: 1_700_000_000_000, lease_ms: 60_000, window_ms: 10_000 },
        Request::ExtendWorker { worker: 3, epoch: 4, window_end_ms: 1_700_000_020_000, now_ms: 1_700_000_010_000 },
        Request::ReleaseWorker { worker: 3, epoch: 4, used_until_ms: Some(1_700_000_015_000) },
        Request::SetClusterId { cluster_id: 0x0a0b_0c0d },
        restore(),
        Request::CreateTagInMode {
            tag: "ticks".into(),
            max_id: 1,
            step: 1000,
            description: "ticks".into(),
            now_ms: 1_700_000_000_000,
            mode: leafraft_state::TagMode::Monotonic,
        },
        Request::SetTagMode {
            tag: "orders".into(),
            mode: leafraft_state::TagMode::Monotonic,
            now_ms: 1_700_000_000_002,
        },
        Request::ClaimMonotonic { tag: "ticks".into(), step: 1000 },
        Request::CreateNamespace { namespace: "orders".into(), record: namespace_record() },
        Request::ClaimTimeseq {
            namespace: "orders".into(),
            second: 1_700_000_001,
            count: 1000,
            now_ms: 1_700_000_000_500,
        },
        Request::RestoreTimeseq {
            namespaces: BTreeMap::from([("orders".to_string(), namespace_record())]),
            floor_s: 1_700_000_100,
        },
        Request::ImportTags {
            rows: vec![
                leafraft_state::ImportRow { tag: "orders".into(), max_id: 5000, step: 2000, description: None },
                leafraft_state::ImportRow { tag: "ticks".into(), max_id: 1, step: 1000, description: Some("t".into()) },
            ],
            now_ms: 1_700_000_000_003,
        },
        Request::SetClusterVersion { version: leafraft_state::Version::new(0, 2, 0) },
        Request::Noop,
        Request::ClaimBatch {
            claims: vec![
                leafraft_state::Claim::Segment { tag: "orders".into(), step: 2000 },
                leafraft_state::Claim::Monotonic { tag: "ticks".into(), step: 1000 },
                leafraft_state::Claim::Timeseq {
                    namespace: "orders".into(),
                    second: 1_700_000_001,
                    count: 1000,
                    now_ms: 1_700_000_000_500,
                },
            ],
        },
        Request::ReleaseBatch {
            releases: vec![
                leafraft_state::Release { tag: "orders".into(), from: 5500, expected_max_id: 7000 },
                leafraft_state::Release { tag: "ticks".into(), from: 2, expected_max_id: 1001 },
            ],
        },
        Request::CreateScrambledTag {
            tag: "coupons".into(),
            max_id: 1,
            step: 1000,
            description: "coupons".into(),
            now_ms: 1_700_000_000_004,
            key: leafraft_state::ScrambleKey { key: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10, bits: 40 },
        },
        Request::RestoreScrambleKeys {
            keys: BTreeMap::from([(
                "coupons".to_string(),
                leafraft_state::ScrambleKey { key: 0x0f0e_0d0c_u128 << 64 | 7, bits: 63 },
            )]),
        },
    ];
    for (position, request) in every.iter().enumerate() {
        assert_eq!(declared_position(request), position, "every_request() out of declaration order at {request:?}");
    }
    every
}

/// The position of a request's variant in `Request`'s declaration, which is its persisted
/// discriminant. No wildcard arm: a new variant fails to compile here until it is listed.
pub fn declared_position(request: &Request) -> usize {
    match request {
        Request::CreateTag { .. } => 0,
        Request::UpdateTag { .. } => 1,
        Request::ClaimSegment { .. } => 2,
        Request::ReleaseSegment { .. } => 3,
        Request::SetSnowflakeLayout { .. } => 4,
        Request::AcquireWorker { .. } => 5,
        Request::ExtendWorker { .. } => 6,
        Request::ReleaseWorker { .. } => 7,
        Request::SetClusterId { .. } => 8,
        Request::Restore { .. } => 9,
        Request::CreateTagInMode { .. } => 10,
        Request::SetTagMode { .. } => 11,
        Request::ClaimMonotonic { .. } => 12,
        Request::CreateNamespace { .. } => 13,
        Request::ClaimTimeseq { .. } => 14,
        Request::RestoreTimeseq { .. } => 15,
        Request::ImportTags { .. } => 16,
        Request::SetClusterVersion { .. } => 17,
        Request::Noop => 18,
        Request::ClaimBatch { .. } => 19,
        Request::ReleaseBatch { .. } => 20,
        Request::CreateScrambledTag { .. } => 21,
        Request::RestoreScrambleKeys { .. } => 22,
    }
}

/// A namespace with the default widths and epoch, a +08:00 zone and a description.
pub fn namespace_record() -> leafraft_state::NamespaceRecord {
    leafraft_state::NamespaceRecord {
        epoch_s: leafraft_state::timeseq::DEFAULT_EPOCH_S,
        utc_offset_s: 8 * 3600,
        shard_bits: 12,
        seq_bits: 19,
        description: "orders".into(),
        created_at_ms: 1_700_000_000_000,
    }
}

/// A restore of two tags (one exhausted), Leaf's layout and a snowflake floor.
pub fn restore() -> Request {
    let record = |max_id| leafraft_state::TagRecord {
        max_id,
        step: 1000,
        description: "kept".into(),
        created_at_ms: 1_700_000_000_000,
        updated_at_ms: 1_700_000_000_001,
        mode: leafraft_state::TagMode::Segment,
    };
    let tags = BTreeMap::from([
        ("coupons".to_string(), record(leafraft_state::tag::MAX_ID_LIMIT)),
        ("orders".into(), record(7_000)),
    ]);
    Request::Restore {
        tags,
        layout: Some(leafraft_ids::snowflake::Layout::LEAF),
        snowflake_floor_ms: 1_700_000_700_000,
    }
}

pub fn options(fsync: bool) -> StoreOptions {
    StoreOptions { fsync, cache_capacity_bytes: 8 * 1024 * 1024, local_node: None }
}

/// A fresh store in a fresh temporary directory (kept alive by the returned guard).
pub fn temp_store(fsync: bool) -> (TempDir, Store) {
    let dir = TempDir::new().expect("temp dir");
    let store = crate::open(dir.path(), &options(fsync)).expect("open a fresh store");
    (dir, store)
}
