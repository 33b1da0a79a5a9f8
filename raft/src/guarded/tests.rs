//! The sending side's amnesia rules over a scripted transport: what goes with an append, what an
//! answer records, and what a refusal does.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use openraft::error::NetworkError;
use openraft::error::RPCError;
use openraft::CommittedLeaderId;
use openraft::EntryPayload;
use openraft::LogId;

use super::*;
use leafraft_durability::LocalDurability;

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
    fn answer(&self, answer: Result<typ::AppendEntriesResponse, typ::RPCError>) {
        self.0.lock().expect("lock").answers.push_back(Appended { answer, amnesiac: None });
    }

    fn refuse_as_amnesiac(&self) {
        let refused = Err(RPCError::Network(NetworkError::new(&std::io::Error::other("refused"))));
        let reason = Some("MEMBER_AMNESIAC: its log went back".to_string());
        self.0.lock().expect("lock").answers.push_back(Appended { answer: refused, amnesiac: reason });
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

/// Node 1's network with an amnesia guard, and its connection to node 2 (recorded with
/// incarnation 9).
async fn node_one(script: &Scripted) -> (Arc<AmnesiaGuard>, GuardedConnection<Scripted>) {
    let amnesia = Arc::new(AmnesiaGuard::new(Arc::new(LocalDurability::new(None))));
    let mut network = GuardedNetwork::new(script.clone(), Some(Arc::clone(&amnesia)));
    let connection = network.new_client(2, &Node::new("node-2", 9)).await;
    (amnesia, connection)
}

#[tokio::test]
async fn an_answered_append_records_the_match_that_goes_with_the_next() {
    let script = Scripted::default();
    let (amnesia, mut connection) = node_one(&script).await;
    script.answer(Ok(typ::AppendEntriesResponse::Success));
    connection.append_entries(append(&[5, 6]), option()).await.expect("answered");
    assert_eq!(amnesia.matched((2, 9), &append(&[])), Some(6), "recorded under the membership's incarnation");
    script.answer(Ok(typ::AppendEntriesResponse::Success));
    connection.append_entries(append(&[7]), option()).await.expect("answered");
    // A lost answer records nothing; what was matched still goes with the next append.
    script.answer(Err(RPCError::Network(NetworkError::new(&std::io::Error::other("lost")))));
    connection.append_entries(append(&[8]), option()).await.expect_err("lost");
    assert_eq!(script.sent(), vec![None, Some(6), Some(7)]);
    assert_eq!(amnesia.matched((2, 9), &append(&[])), Some(7));
}

#[tokio::test]
async fn a_refusal_as_amnesiac_is_counted_and_passed_on() {
    let script = Scripted::default();
    let (amnesia, mut connection) = node_one(&script).await;
    script.refuse_as_amnesiac();
    connection.append_entries(append(&[1]), option()).await.expect_err("refused");
    assert_eq!(amnesia.refusals(), 1);
}

#[tokio::test]
async fn without_a_guard_nothing_is_sent_with_an_append() {
    let script = Scripted::default();
    let mut network = GuardedNetwork::new(script.clone(), None);
    let mut connection = network.new_client(2, &Node::new("node-2", 9)).await;
    script.answer(Ok(typ::AppendEntriesResponse::Success));
    script.answer(Ok(typ::AppendEntriesResponse::Success));
    connection.append_entries(append(&[1]), option()).await.expect("answered");
    connection.append_entries(append(&[2]), option()).await.expect("answered");
    assert_eq!(script.sent(), vec![None, None]);
    let vote = connection.vote(typ::VoteRequest::new(typ::Vote::new(4, 1), None), option()).await.expect("vote");
    assert!(vote.vote_granted);
}
