//! The sending side's lease and amnesia rules over a scripted transport: what goes with an
//! append, what an answer counts for, and what a refusal and a snapshot do.

use std::collections::BTreeSet;
use std::collections::VecDeque;
use std::sync::Mutex;

use openraft::error::NetworkError;
use openraft::error::RPCError;
use openraft::CommittedLeaderId;
use openraft::EntryPayload;
use openraft::LogId;
use openraft::Membership;
use openraft::StoredMembership;

use super::*;
use crate::LocalDurability;

const HOLD: Duration = Duration::from_millis(600);

/// What the scripted link saw and will answer, shared with the test.
#[derive(Default)]
struct Script {
    /// The `matched` each append was sent with.
    sent: Vec<Option<u64>>,
    answers: VecDeque<Appended>,
    snapshots: usize,
}

#[derive(Clone, Default)]
struct Scripted(Arc<Mutex<Script>>);

impl Scripted {
    fn answer(&self, answer: Result<typ::AppendEntriesResponse, typ::RPCError>, hold: Option<Duration>) {
        self.0.lock().expect("lock").answers.push_back(Appended { answer, vote_hold: hold, amnesiac: None });
    }

    fn refuse_as_amnesiac(&self) {
        let refused = Err(RPCError::Network(NetworkError::new(&std::io::Error::other("refused"))));
        let reason = Some("MEMBER_AMNESIAC: its log went back".to_string());
        self.0.lock().expect("lock").answers.push_back(Appended { answer: refused, vote_hold: None, amnesiac: reason });
    }

    fn sent(&self) -> Vec<Option<u64>> {
        self.0.lock().expect("lock").sent.clone()
    }
}

impl Transport for Scripted {
    type Link = Scripted;

    async fn link(&mut self, _target: NodeId, _node: &Node) -> Scripted {
        self.clone()
    }
}

impl Link for Scripted {
    async fn append(
        &mut self,
        _rpc: &typ::AppendEntriesRequest,
        matched: Option<u64>,
        _option: &RPCOption,
    ) -> Appended {
        let mut script = self.0.lock().expect("lock");
        script.sent.push(matched);
        script.answers.pop_front().expect("a scripted answer")
    }

    async fn snapshot(
        &mut self,
        _rpc: typ::InstallSnapshotRequest,
        _option: RPCOption,
    ) -> Result<typ::InstallSnapshotResponse, typ::RPCError<InstallSnapshotError>> {
        self.0.lock().expect("lock").snapshots += 1;
        Ok(typ::InstallSnapshotResponse { vote: typ::Vote::new_committed(3, 1) })
    }

    async fn vote(&mut self, rpc: typ::VoteRequest, _option: RPCOption) -> Result<typ::VoteResponse, typ::RPCError> {
        Ok(typ::VoteResponse::new(rpc.vote, None, true))
    }
}

fn append(indexes: &[u64]) -> typ::AppendEntriesRequest {
    let log_id = |index| LogId::new(CommittedLeaderId::new(3, 1), index);
    typ::AppendEntriesRequest {
        vote: typ::Vote::new_committed(3, 1),
        prev_log_id: None,
        entries: indexes.iter().map(|&i| typ::Entry { log_id: log_id(i), payload: EntryPayload::Blank }).collect(),
        leader_commit: None,
    }
}

fn option() -> RPCOption {
    RPCOption::new(Duration::from_secs(5))
}

/// Node 1's network with a lease and an amnesia guard, and its connection to node 2 (recorded
/// with incarnation 9).
async fn node_one(script: &Scripted) -> (Arc<LeaderLease>, Arc<AmnesiaGuard>, GuardedConnection<Scripted>) {
    let lease = Arc::new(LeaderLease::new(HOLD));
    let amnesia = Arc::new(AmnesiaGuard::new(Arc::new(LocalDurability::new(None))));
    let mut network = GuardedNetwork::new(script.clone(), Arc::clone(&lease), Some(Arc::clone(&amnesia)));
    let connection = network.new_client(2, &Node::new("node-2", 9)).await;
    (lease, amnesia, connection)
}

fn two_voters() -> Vec<BTreeSet<NodeId>> {
    vec![BTreeSet::from([1, 2])]
}

#[tokio::test]
async fn an_answered_append_counts_with_the_hold_the_follower_reported_and_its_match_goes_with_the_next() {
    let script = Scripted::default();
    let (lease, amnesia, mut connection) = node_one(&script).await;
    let vote = typ::Vote::new_committed(3, 1);

    // No hold reported: the answer is passed on but never counts.
    script.answer(Ok(typ::AppendEntriesResponse::Success), None);
    connection.append_entries(append(&[5, 6]), option()).await.expect("answered");
    assert_eq!(lease.expiry(&vote, 1, &two_voters()), None);
    assert_eq!(amnesia.matched((2, 9), &append(&[])), Some(6), "recorded under the membership's incarnation");

    let before = crate::lease::now();
    script.answer(Ok(typ::AppendEntriesResponse::Success), Some(HOLD));
    connection.append_entries(append(&[7]), option()).await.expect("answered");
    let expiry = lease.expiry(&vote, 1, &two_voters()).expect("the acknowledgement counts");
    assert!(expiry >= before.plus(HOLD * 3 / 4), "runs from the send time: {expiry:?}");

    // A lost answer counts for nothing; what was matched still goes with the next append.
    script.answer(Err(RPCError::Network(NetworkError::new(&std::io::Error::other("lost")))), Some(HOLD));
    connection.append_entries(append(&[8]), option()).await.expect_err("lost");
    assert_eq!(script.sent(), vec![None, Some(6), Some(7)]);
    assert_eq!(amnesia.matched((2, 9), &append(&[])), Some(7));
}

#[tokio::test]
async fn a_refusal_as_amnesiac_is_counted_and_passed_on() {
    let script = Scripted::default();
    let (_, amnesia, mut connection) = node_one(&script).await;
    script.refuse_as_amnesiac();
    connection.append_entries(append(&[1]), option()).await.expect_err("refused");
    assert_eq!(amnesia.refusals(), 1);
}

#[tokio::test]
async fn a_snapshot_with_a_new_configuration_ends_the_lease() {
    let script = Scripted::default();
    let (lease, _, mut connection) = node_one(&script).await;
    let vote = typ::Vote::new_committed(3, 1);
    script.answer(Ok(typ::AppendEntriesResponse::Success), Some(HOLD));
    connection.append_entries(append(&[1]), option()).await.expect("answered");
    assert!(lease.expiry(&vote, 1, &two_voters()).is_some());

    let membership = Membership::new(vec![BTreeSet::from([1, 2, 3])], None);
    let meta = typ::SnapshotMeta {
        last_log_id: Some(LogId::new(CommittedLeaderId::new(3, 1), 2)),
        last_membership: StoredMembership::new(Some(LogId::new(CommittedLeaderId::new(3, 1), 2)), membership),
        snapshot_id: "s".to_string(),
    };
    let chunk = typ::InstallSnapshotRequest { vote, meta, offset: 0, data: Vec::new(), done: true };
    connection.install_snapshot(chunk, option()).await.expect("installed");
    assert_eq!(script.0.lock().expect("lock").snapshots, 1);
    assert_eq!(lease.expiry(&vote, 1, &two_voters()), None, "acknowledgements sent before it no longer count");
}

#[tokio::test]
async fn without_a_guard_nothing_is_sent_with_an_append() {
    let script = Scripted::default();
    let mut network = GuardedNetwork::new(script.clone(), Arc::new(LeaderLease::disabled()), None);
    let mut connection = network.new_client(2, &Node::new("node-2", 9)).await;
    script.answer(Ok(typ::AppendEntriesResponse::Success), Some(HOLD));
    script.answer(Ok(typ::AppendEntriesResponse::Success), Some(HOLD));
    connection.append_entries(append(&[1]), option()).await.expect("answered");
    connection.append_entries(append(&[2]), option()).await.expect("answered");
    assert_eq!(script.sent(), vec![None, None]);
    let vote = connection.vote(typ::VoteRequest::new(typ::Vote::new(4, 1), None), option()).await.expect("vote");
    assert!(vote.vote_granted);
}
