//! Valid values of every type decoded from the wire or from disk, encoded: the seed corpus the
//! mutations start from.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use leafraft::cluster::forward::Vouch;
use leafraft::cluster::ForwardError;
use leafraft::cluster::Forwarded;
use leafraft::cluster::ForwardedReply;
use leafraft::cluster::MonotonicTake;
use leafraft::error::Error;
use leafraft::error::ErrorCode;
use leafraft_ids::snowflake::Layout as SnowflakeLayout;
use leafraft_state::typ;
use leafraft_state::IdStateMachine;
use leafraft_state::Node;
use leafraft_state::Request;
use leafraft_state::Response;
use leafraft_state::SnowflakeRegistry;
use leafraft_state::TagRecord;
use leafraft_state::WorkerLease;
use openraft::error::Fatal;
use openraft::error::RaftError;
use openraft::error::SnapshotMismatch;
use openraft::CommittedLeaderId;
use openraft::EntryPayload;
use openraft::SnapshotSegmentId;
use openraft::Vote;
use serde::Serialize;

/// The sender of the Raft RPCs: a peer of the fuzzed node (node 1), which refuses RPCs in its own
/// name.
const PEER: u64 = 2;

pub fn encoded<T: Serialize>(values: &[T]) -> Vec<Vec<u8>> {
    values.iter().map(|value| leafraft_state::codec::encode(value).expect("a valid value encodes")).collect()
}

pub fn log_id(term: u64, index: u64) -> typ::LogId {
    typ::LogId::new(CommittedLeaderId::new(term, 1), index)
}

pub fn membership() -> typ::Membership {
    let nodes: BTreeMap<u64, Node> =
        (1..=4).map(|id| (id, Node::new(format!("127.0.0.1:{}", 9000 + id), id))).collect();
    typ::Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes)
}

pub fn requests() -> Vec<Request> {
    vec![
        Request::CreateTag { tag: "order".into(), max_id: 1, step: 1000, description: "orders".into(), now_ms: 7 },
        Request::UpdateTag {
            tag: "order".into(),
            step: Some(2000),
            description: Some("d".into()),
            max_id: Some(5000),
            now_ms: 8,
        },
        Request::UpdateTag { tag: "order".into(), step: None, description: None, max_id: None, now_ms: 9 },
        Request::ClaimSegment { tag: "order".into(), step: 1000 },
        Request::ReleaseSegment { tag: "order".into(), from: 10, expected_max_id: 1001 },
        Request::SetSnowflakeLayout { layout: SnowflakeLayout::LEAF },
        Request::AcquireWorker { node: 2, now_ms: 1_700_000_000_000, lease_ms: 60_000, window_ms: 10_000 },
        Request::ExtendWorker { worker: 3, epoch: 4, window_end_ms: 1_700_000_020_000, now_ms: 1_700_000_010_000 },
        Request::ReleaseWorker { worker: 3, epoch: 4, used_until_ms: Some(1_700_000_015_000) },
        Request::SetClusterId { cluster_id: 0x1eaf_4af7 },
        Request::Restore {
            tags: BTreeMap::from([(
                "order".to_string(),
                leafraft_state::TagRecord {
                    max_id: 1_000_001,
                    step: 1000,
                    description: "orders".into(),
                    created_at_ms: 7,
                    updated_at_ms: 9,
                    mode: leafraft_state::TagMode::Segment,
                },
            )]),
            layout: Some(SnowflakeLayout::LEAF),
            snowflake_floor_ms: 1_800_000_000_000,
        },
    ]
}

pub fn entries() -> Vec<typ::Entry> {
    let mut entries = vec![
        typ::Entry { log_id: log_id(1, 1), payload: EntryPayload::Membership(membership()) },
        typ::Entry { log_id: log_id(2, 2), payload: EntryPayload::Blank },
    ];
    entries.extend(
        (3..).zip(requests()).map(|(i, r)| typ::Entry { log_id: log_id(2, i), payload: EntryPayload::Normal(r) }),
    );
    entries
}

pub fn append_requests() -> Vec<Vec<u8>> {
    let all = entries();
    let requests: Vec<typ::AppendEntriesRequest> = [&all[..0], &all[..1], &all[1..4], &all[..]]
        .into_iter()
        .map(|entries| typ::AppendEntriesRequest {
            vote: Vote::new_committed(2, PEER),
            prev_log_id: Some(log_id(1, 1)),
            entries: entries.to_vec(),
            leader_commit: Some(log_id(1, 1)),
        })
        .collect();
    encoded(&requests)
}

pub fn vote_requests() -> Vec<Vec<u8>> {
    encoded(&[
        typ::VoteRequest::new(Vote::new(3, PEER), Some(log_id(2, 10))),
        typ::VoteRequest::new(Vote::new(1, 3), None),
    ])
}

pub fn snapshot_meta() -> typ::SnapshotMeta {
    typ::SnapshotMeta {
        last_log_id: Some(log_id(2, 12)),
        last_membership: typ::StoredMembership::new(Some(log_id(1, 1)), membership()),
        snapshot_id: "2-1-12-3".into(),
    }
}

pub fn snapshot_requests() -> Vec<Vec<u8>> {
    let data = leafraft_state::codec::encode(&state_machines()[1]).expect("encode");
    let chunk = |offset: u64, data: Vec<u8>, done| typ::InstallSnapshotRequest {
        vote: Vote::new_committed(2, PEER),
        meta: snapshot_meta(),
        offset,
        data,
        done,
    };
    encoded(&[chunk(0, data.clone(), true), chunk(0, data[..10].to_vec(), false), chunk(10, vec![1; 100], false)])
}

pub fn forwarded() -> Vec<Vec<u8>> {
    let mut ops: Vec<Forwarded> = requests().into_iter().map(Forwarded::Write).collect();
    ops.extend([
        Forwarded::AddLearner { node_id: 4, addr: "127.0.0.1:9004".into(), incarnation: 7 },
        Forwarded::PromoteVoter { node_id: 4 },
        Forwarded::RemoveMember { node_id: 4 },
        Forwarded::ReadIndex,
        Forwarded::TakeMonotonic { tag: "ticks".into(), count: 3 },
        Forwarded::TakeMonotonicBatch {
            takes: vec![
                MonotonicTake { tag: "ticks".into(), count: 3, contiguous: false },
                MonotonicTake { tag: "ticks".into(), count: 10_000, contiguous: true },
            ],
        },
        Forwarded::TakeMonotonicVouched {
            takes: vec![MonotonicTake { tag: "ticks".into(), count: 3, contiguous: false }],
            vouch: Vouch { voter: 2, saved: Some(leafraft_state::typ::Vote::new_committed(4, 1)) },
        },
    ]);
    encoded(&ops)
}

fn responses() -> Vec<Response> {
    let record = tag_records()[0].clone();
    vec![
        Response::Empty,
        Response::Tag { tag: "order".into(), record },
        Response::Segment { start: 1, end: 1001 },
        Response::Released { applied: true },
        Response::Rejected(leafraft_state::Rejection::MaxIdDecrease { current: 5 }),
        Response::Rejected(leafraft_state::Rejection::InvalidArgument("bad".into())),
        Response::SnowflakeLayout(SnowflakeLayout::LEAF),
        Response::WorkerAcquired { worker: 1, epoch: 2, floor_ms: 3, window_end_ms: 4 },
        Response::WorkerExtended { window_end_ms: 5 },
        Response::WorkerReleased { applied: false },
    ]
}

pub fn forward_answers() -> Vec<Vec<u8>> {
    let mut answers: Vec<Result<ForwardedReply, ForwardError>> =
        responses().into_iter().map(|r| Ok(ForwardedReply::Written(r))).collect();
    answers.extend([
        Ok(ForwardedReply::Done),
        Ok(ForwardedReply::ReadIndex(Some(7))),
        Ok(ForwardedReply::Taken(vec![(1, 4)])),
        Ok(ForwardedReply::TakenBatch(vec![
            Ok(vec![(1, 4), (9, 10)]),
            Err(Error::new(ErrorCode::TagNotFound, "tag 'x' does not exist")),
        ])),
        Err(ForwardError::NotLeader),
        Err(ForwardError::Failed(Error::new(ErrorCode::TagExists, "tag 'order' already exists"))),
    ]);
    encoded(&answers)
}

/// Encoded values of one type.
pub type Corpus = Vec<Vec<u8>>;

/// The answers to an append, a vote and a snapshot chunk.
pub fn raft_answers() -> (Corpus, Corpus, Corpus) {
    let stopped = || RaftError::Fatal(Fatal::Stopped);
    let append: Vec<Result<typ::AppendEntriesResponse, typ::RaftError>> = vec![
        Ok(typ::AppendEntriesResponse::Success),
        Ok(typ::AppendEntriesResponse::PartialSuccess(Some(log_id(2, 5)))),
        Ok(typ::AppendEntriesResponse::Conflict),
        Ok(typ::AppendEntriesResponse::HigherVote(Vote::new(9, 2))),
        Err(stopped()),
    ];
    let vote: Vec<Result<typ::VoteResponse, typ::RaftError>> =
        vec![Ok(typ::VoteResponse::new(Vote::new(3, 1), Some(log_id(2, 10)), true)), Err(stopped())];
    let mismatch = SnapshotMismatch {
        expect: SnapshotSegmentId { id: "a".into(), offset: 0 },
        got: SnapshotSegmentId { id: "a".into(), offset: 7 },
    };
    let snapshot: Vec<Result<typ::InstallSnapshotResponse, typ::RaftError<typ::InstallSnapshotError>>> = vec![
        Ok(typ::InstallSnapshotResponse { vote: Vote::new_committed(2, 1) }),
        Err(RaftError::APIError(typ::InstallSnapshotError::SnapshotMismatch(mismatch))),
        Err(RaftError::Fatal(Fatal::Stopped)),
    ];
    (encoded(&append), encoded(&vote), encoded(&snapshot))
}

pub fn tag_records() -> Vec<TagRecord> {
    vec![
        TagRecord {
            max_id: 1001,
            step: 1000,
            description: "orders".into(),
            created_at_ms: 7,
            updated_at_ms: 8,
            mode: leafraft_state::TagMode::Segment,
        },
        TagRecord {
            max_id: u64::MAX >> 1,
            step: 1,
            description: String::new(),
            created_at_ms: 0,
            updated_at_ms: 0,
            mode: leafraft_state::TagMode::Segment,
        },
    ]
}

pub fn registries() -> Vec<SnowflakeRegistry> {
    let lease = WorkerLease {
        holder: Some(2),
        epoch: 3,
        window_end_ms: 1_700_000_010_000,
        floor_ms: 1_600_000_000_000,
        last_extend_ms: 1_700_000_000_000,
        released_by: None,
    };
    let released = WorkerLease { holder: None, released_by: Some(3), ..lease.clone() };
    vec![
        SnowflakeRegistry::default(),
        SnowflakeRegistry {
            layout: Some(SnowflakeLayout::LEAF),
            workers: BTreeMap::from([(0, lease), (5, released)]),
            floor_ms: 1_800_000_000_000,
        },
    ]
}

pub fn state_machines() -> Vec<IdStateMachine> {
    let mut sm = IdStateMachine::default();
    for entry in entries() {
        sm.apply(&entry);
    }
    vec![IdStateMachine::default(), sm]
}

/// The persisted types; `storage::SnapshotRecord` is fuzzed in `storage/src/fuzz.rs`.
pub fn persisted() -> [(&'static str, Vec<Vec<u8>>); 7] {
    [
        ("vote", encoded(&[typ::Vote::new_committed(2, 1), typ::Vote::new(3, 2)])),
        ("log id", encoded(&[log_id(2, 12)])),
        ("log entry", encoded(&entries())),
        ("membership", encoded(&[typ::StoredMembership::new(Some(log_id(1, 1)), membership())])),
        ("tag record", encoded(&tag_records())),
        ("snowflake registry", encoded(&registries())),
        ("snapshot", encoded(&state_machines())),
    ]
}
