//! What the leader does with each operation another node forwards to it (or this node submits
//! to itself while it leads): one function per operation.

use std::collections::BTreeSet;

use leafraft_state::Node;
use leafraft_state::NodeId;
use openraft::ChangeMembers;
use tokio::time::Instant;

use crate::cluster::attempt::confirm_leadership;
use crate::cluster::attempt::from_write_error;
use crate::cluster::attempt::Attempt;
use crate::cluster::Cluster;
use crate::cluster::ForwardError;
use crate::cluster::Forwarded;
use crate::cluster::ForwardedReply;
use crate::error::Error;
use crate::error::ErrorCode;

impl Cluster {
    /// Runs a forwarded operation on this node, which believes it is the leader.
    pub async fn execute_forwarded(&self, op: Forwarded) -> Result<ForwardedReply, ForwardError> {
        let deadline = Instant::now()
            + match op {
                Forwarded::AddLearner { .. } => self.learner_timeout,
                _ => self.write_timeout,
            };
        self.execute(op, deadline).await.map_err(|attempt| match attempt {
            Attempt::NotLeader | Attempt::NotSent => ForwardError::NotLeader,
            Attempt::Failed(error) => ForwardError::Failed(error),
        })
    }

    pub(super) async fn execute(&self, op: Forwarded, deadline: Instant) -> Result<ForwardedReply, Attempt> {
        match op {
            Forwarded::Write(request) => self.execute_write(request, deadline).await,
            Forwarded::AddLearner { node_id, addr, incarnation } => {
                let deadline = deadline.min(Instant::now() + self.learner_timeout);
                self.add_learner_as_leader(node_id, addr, incarnation, deadline).await
            }
            Forwarded::PromoteVoter { node_id } => self.promote_as_leader(node_id, deadline).await,
            Forwarded::RemoveMember { node_id } => self.execute_remove_member(node_id, deadline).await,
            Forwarded::ReadIndex => self.execute_read_index(deadline).await,
            // The monotonic service's sequencer serves them; it confirms leadership per batch.
            Forwarded::TakeMonotonic { .. }
            | Forwarded::TakeMonotonicBatch { .. }
            | Forwarded::TakeMonotonicVouched { .. } => {
                self.takes.execute(op, deadline).await.map_err(|refused| match refused {
                    ForwardError::NotLeader => Attempt::NotLeader,
                    ForwardError::Failed(error) => Attempt::Failed(error),
                })
            }
            Forwarded::Applied { index, wait_ms } => Ok(self.execute_applied(index, wait_ms, deadline).await),
        }
    }

    async fn execute_write(
        &self,
        request: leafraft_state::Request,
        deadline: Instant,
    ) -> Result<ForwardedReply, Attempt> {
        // The leader judges again: its cluster version is the newest, and it hears every member.
        self.check_cluster_version(&request, true).map_err(Attempt::Failed)?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        let res =
            tokio::time::timeout(remaining, self.raft.client_write(request)).await.map_err(|_| Attempt::timed_out())?;
        res.map(|resp| ForwardedReply::Written(resp.data)).map_err(from_write_error)
    }

    async fn execute_remove_member(&self, node_id: NodeId, deadline: Instant) -> Result<ForwardedReply, Attempt> {
        let membership = self.metrics().membership_config.membership().clone();
        if membership.get_node(&node_id).is_none() {
            return Err(Attempt::Failed(Error::new(
                ErrorCode::NodeNotFound,
                format!("node {node_id} is not a member"),
            )));
        }
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let change = if !voters.contains(&node_id) {
            ChangeMembers::RemoveNodes(BTreeSet::from([node_id]))
        } else if voters.len() == 1 {
            return Err(Attempt::Failed(Error::new(
                ErrorCode::LastVoter,
                format!("node {node_id} is the last voter and cannot be removed"),
            )));
        } else {
            ChangeMembers::RemoveVoters(BTreeSet::from([node_id]))
        };
        tracing::info!(node_id, "removing member");
        self.change_membership(change, deadline).await
    }

    async fn execute_read_index(&self, deadline: Instant) -> Result<ForwardedReply, Attempt> {
        confirm_leadership(&self.raft, deadline).await.map(ForwardedReply::ReadIndex)
    }

    pub(super) async fn change_membership(
        &self,
        change: ChangeMembers<NodeId, Node>,
        deadline: Instant,
    ) -> Result<ForwardedReply, Attempt> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        // `retain = false`: a removed voter leaves the cluster instead of staying as a learner.
        let res = tokio::time::timeout(remaining, self.raft.change_membership(change, false))
            .await
            .map_err(|_| Attempt::Failed(Error::no_leader("membership change timed out; it may still complete")))?;
        res.map(|_| ForwardedReply::Done).map_err(from_write_error)
    }
}
