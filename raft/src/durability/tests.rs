//! That no commit leaves the node before the entries it covers are on disk.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use openraft::network::RPCOption;
use openraft::CommittedLeaderId;
use openraft::RaftNetwork;
use openraft::RaftNetworkFactory;

use super::*;

fn committed(term: u64, leader: NodeId) -> typ::Vote {
    let mut vote = typ::Vote::new(term, leader);
    vote.commit();
    vote
}

/// The inner network of the wrapper: records the commits it was asked to send.
#[derive(Clone, Default)]
struct Recorder {
    sent: Arc<Mutex<Vec<Option<u64>>>>,
}

impl RaftNetworkFactory<TypeConfig> for Recorder {
    type Network = Recorder;
    async fn new_client(&mut self, _target: NodeId, _node: &Node) -> Recorder {
        self.clone()
    }
}

impl RaftNetwork<TypeConfig> for Recorder {
    async fn append_entries(
        &mut self,
        rpc: typ::AppendEntriesRequest,
        _option: RPCOption,
    ) -> Result<typ::AppendEntriesResponse, typ::RPCError> {
        self.sent.lock().expect("lock").push(rpc.leader_commit.map(|id| id.index));
        Ok(typ::AppendEntriesResponse::Success)
    }

    async fn install_snapshot(
        &mut self,
        _rpc: typ::InstallSnapshotRequest,
        _option: RPCOption,
    ) -> Result<typ::InstallSnapshotResponse, typ::RPCError<openraft::error::InstallSnapshotError>> {
        unreachable!("not used")
    }

    async fn vote(&mut self, _rpc: typ::VoteRequest, _option: RPCOption) -> Result<typ::VoteResponse, typ::RPCError> {
        unreachable!("not used")
    }
}

/// Node 1's log, durable below `end`.
fn durable_below(end: u64) -> Arc<LocalDurability> {
    let durability = Arc::new(LocalDurability::new(Some(1)));
    durability.wrote(end - 1);
    durability.synced(durability.ticket());
    durability
}

/// A connection to node 2 through the wrapper, over a recording inner network.
async fn wrapped(durability: &Arc<LocalDurability>) -> (Recorder, DurableCommitConnection<Recorder>) {
    let recorder = Recorder::default();
    let mut factory = DurableCommitNetwork::new(recorder.clone(), Arc::clone(durability));
    let connection = factory.new_client(2, &Node::new("127.0.0.1:1", 0)).await;
    (recorder, connection)
}

fn append(committed_index: Option<u64>) -> typ::AppendEntriesRequest {
    typ::AppendEntriesRequest {
        vote: committed(2, 1),
        prev_log_id: None,
        entries: vec![],
        leader_commit: committed_index.map(|index| typ::LogId::new(CommittedLeaderId::new(2, 1), index)),
    }
}

#[tokio::test]
async fn no_append_carries_a_commit_beyond_what_is_on_disk_here() {
    let durability = durable_below(3);
    let (recorder, mut connection) = wrapped(&durability).await;
    let option = RPCOption::new(Duration::from_secs(5));

    connection.append_entries(append(None), option.clone()).await.expect("no commit: sent at once");
    connection.append_entries(append(Some(2)), option.clone()).await.expect("durable commit: sent at once");
    durability.wrote(4);
    let ticket = durability.ticket();
    let held = tokio::spawn(async move { connection.append_entries(append(Some(4)), option).await });
    tokio::task::yield_now().await;
    assert_eq!(*recorder.sent.lock().expect("lock"), [None, Some(2)], "a commit left before its entries were on disk");
    durability.synced(ticket);
    held.await.expect("join").expect("sent once durable");
    assert_eq!(*recorder.sent.lock().expect("lock"), [None, Some(2), Some(4)]);
}

#[tokio::test]
async fn after_a_failed_sync_no_commit_beyond_the_disk_is_sent() {
    let durability = durable_below(3);
    let (recorder, mut connection) = wrapped(&durability).await;
    durability.wrote(4);
    durability.failed();
    let sent = connection.append_entries(append(Some(4)), RPCOption::new(Duration::from_secs(5))).await;
    assert!(sent.is_err());
    assert!(recorder.sent.lock().expect("lock").is_empty());
}
