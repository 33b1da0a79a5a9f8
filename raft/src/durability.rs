//! [`DurableCommitNetwork`]: no append leaves this node with a `leader_commit` beyond what its own
//! log has on disk. The leader's own appends count before their sync (see `leafraft_durability`,
//! which keeps [`LocalDurability`] for the log store); this wrapper is the network's half of that
//! bargain, so no follower applies an entry the leader could still lose.

use std::sync::Arc;

use leafraft_durability::LocalDurability;
use leafraft_state::typ;
use leafraft_state::Node;
use leafraft_state::NodeId;
use leafraft_state::TypeConfig;
use openraft::network::RPCOption;
use openraft::RaftNetwork;
use openraft::RaftNetworkFactory;

/// Wraps a network so that no append carries a `leader_commit` beyond what this node has on disk
/// (see the module documentation).
#[derive(Clone)]
pub struct DurableCommitNetwork<F> {
    inner: F,
    durability: Arc<LocalDurability>,
}

impl<F> DurableCommitNetwork<F> {
    pub fn new(inner: F, durability: Arc<LocalDurability>) -> Self {
        DurableCommitNetwork { inner, durability }
    }
}

impl<F> RaftNetworkFactory<TypeConfig> for DurableCommitNetwork<F>
where
    F: RaftNetworkFactory<TypeConfig>,
{
    type Network = DurableCommitConnection<F::Network>;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> Self::Network {
        DurableCommitConnection {
            inner: self.inner.new_client(target, node).await,
            durability: Arc::clone(&self.durability),
        }
    }
}

pub struct DurableCommitConnection<N> {
    inner: N,
    durability: Arc<LocalDurability>,
}

impl<N> RaftNetwork<TypeConfig> for DurableCommitConnection<N>
where
    N: RaftNetwork<TypeConfig>,
{
    async fn append_entries(
        &mut self,
        rpc: typ::AppendEntriesRequest,
        option: RPCOption,
    ) -> Result<typ::AppendEntriesResponse, typ::RPCError> {
        if let Some(committed) = rpc.leader_commit {
            // Normally already there: the follower's acknowledgement that made the entry committed
            // took longer than the local sync that started before it was sent.
            let ttl = option.hard_ttl();
            match tokio::time::timeout(ttl, self.durability.wait(committed.index)).await {
                Ok(Ok(())) => {}
                Ok(Err(failed)) => {
                    return Err(openraft::error::RPCError::Unreachable(openraft::error::Unreachable::new(&failed)))
                }
                Err(_) => {
                    let waited = openraft::error::NetworkError::new(&std::io::Error::other(format!(
                        "the local log was not on disk up to the commit within {ttl:?}"
                    )));
                    return Err(openraft::error::RPCError::Network(waited));
                }
            }
        }
        self.inner.append_entries(rpc, option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: typ::InstallSnapshotRequest,
        option: RPCOption,
    ) -> Result<typ::InstallSnapshotResponse, typ::RPCError<openraft::error::InstallSnapshotError>> {
        self.inner.install_snapshot(rpc, option).await
    }

    async fn vote(&mut self, rpc: typ::VoteRequest, option: RPCOption) -> Result<typ::VoteResponse, typ::RPCError> {
        self.inner.vote(rpc, option).await
    }
}

#[cfg(test)]
mod tests;
