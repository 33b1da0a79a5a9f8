//! `GuardedNetwork`: the amnesia check's rules on the sending side, written once over any
//! transport between nodes: the HTTP client (`network::NetworkFactory`) and the in-process router
//! of the cluster tests both only carry messages ([`Transport`], [`Link`]).
//!
//! Per append to a follower: the highest index this node saw the follower match under its
//! leadership goes with it ([`AmnesiaGuard::matched`]); on an answer, what the follower appended is
//! recorded ([`AmnesiaGuard::record`]); a follower that refused as amnesiac is counted
//! ([`AmnesiaGuard::refused`]). Snapshots and votes pass unchanged.
//!
//! The receiving side (`AmnesiaGuard::admit`, `network::vote_from_member`) stays with each
//! transport's server end.

use std::future::Future;
use std::sync::Arc;

use openraft::error::InstallSnapshotError;
use openraft::network::RPCOption;
use openraft::RaftNetwork;
use openraft::RaftNetworkFactory;

use crate::amnesia::AmnesiaGuard;
use leafraft_state::typ;
use leafraft_state::Node;
use leafraft_state::NodeId;
use leafraft_state::TypeConfig;

/// What a [`Link`] brought back from one append.
#[derive(Debug)]
pub struct Appended {
    /// The follower's answer, or why there is none, in openraft's terms.
    pub answer: Result<typ::AppendEntriesResponse, typ::RPCError>,
    /// The follower refused the append as amnesiac (its log ends below `matched`): the reason.
    pub amnesiac: Option<String>,
}

/// Builds the [`Link`] to each peer; one per transport (HTTP, the test router).
pub trait Transport: Send + Sync + 'static {
    type Link: Link;

    /// The link to node `target`, recorded in the membership as `node`.
    fn link(&mut self, target: NodeId, node: &Node) -> impl Future<Output = Self::Link> + Send;
}

/// Carries one node's Raft RPCs to one peer and their answers back, and nothing more.
pub trait Link: Send + Sync + 'static {
    /// Sends `rpc` with `matched`, the highest index the sender saw this peer match under `rpc`'s
    /// leadership, for the peer's amnesia check.
    fn append(
        &mut self,
        rpc: &typ::AppendEntriesRequest,
        matched: Option<u64>,
        option: &RPCOption,
    ) -> impl Future<Output = Appended> + Send;

    fn snapshot(
        &mut self,
        rpc: typ::InstallSnapshotRequest,
        option: RPCOption,
    ) -> impl Future<Output = Result<typ::InstallSnapshotResponse, typ::RPCError<InstallSnapshotError>>> + Send;

    fn vote(
        &mut self,
        rpc: typ::VoteRequest,
        option: RPCOption,
    ) -> impl Future<Output = Result<typ::VoteResponse, typ::RPCError>> + Send;
}

/// openraft's network: a [`Transport`] under this node's amnesia guard.
#[derive(Clone)]
pub struct GuardedNetwork<T> {
    transport: T,
    /// `None`: nothing is sent with appends, nothing recorded (a lone member, `recover`).
    amnesia: Option<Arc<AmnesiaGuard>>,
}

impl<T> GuardedNetwork<T> {
    pub fn new(transport: T, amnesia: Option<Arc<AmnesiaGuard>>) -> Self {
        GuardedNetwork { transport, amnesia }
    }
}

impl<T: Transport> RaftNetworkFactory<TypeConfig> for GuardedNetwork<T> {
    type Network = GuardedConnection<T::Link>;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> Self::Network {
        GuardedConnection {
            link: self.transport.link(target, node).await,
            amnesia: self.amnesia.clone(),
            target,
            target_incarnation: node.incarnation,
        }
    }
}

/// openraft's client for one peer (see [`GuardedNetwork`]).
pub struct GuardedConnection<L> {
    link: L,
    amnesia: Option<Arc<AmnesiaGuard>>,
    target: NodeId,
    /// What the membership openraft replicates with records for the target (0: unknown).
    target_incarnation: u64,
}

impl<L: Link> RaftNetwork<TypeConfig> for GuardedConnection<L> {
    async fn append_entries(
        &mut self,
        rpc: typ::AppendEntriesRequest,
        option: RPCOption,
    ) -> Result<typ::AppendEntriesResponse, typ::RPCError> {
        let target = (self.target, self.target_incarnation);
        let matched = self.amnesia.as_ref().and_then(|amnesia| amnesia.matched(target, &rpc));
        let Appended { answer, amnesiac } = self.link.append(&rpc, matched, &option).await;
        if let Some(amnesia) = &self.amnesia {
            if let Some(reason) = &amnesiac {
                amnesia.refused(self.target, reason);
            }
            if let Ok(answer) = &answer {
                amnesia.record(target, &rpc, answer);
            }
        }
        answer
    }

    async fn install_snapshot(
        &mut self,
        rpc: typ::InstallSnapshotRequest,
        option: RPCOption,
    ) -> Result<typ::InstallSnapshotResponse, typ::RPCError<InstallSnapshotError>> {
        self.link.snapshot(rpc, option).await
    }

    async fn vote(&mut self, rpc: typ::VoteRequest, option: RPCOption) -> Result<typ::VoteResponse, typ::RPCError> {
        self.link.vote(rpc, option).await
    }
}

#[cfg(test)]
mod tests;
