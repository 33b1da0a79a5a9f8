//! What the leader does with each operation another node forwards to it (or this node submits
//! to itself while it leads): one function per operation.

use std::collections::BTreeSet;
use std::time::Duration;

use openraft::error::ChangeMembershipError;
use openraft::error::CheckIsLeaderError;
use openraft::error::ClientWriteError;
use openraft::error::RaftError;
use openraft::ChangeMembers;
use raft::typ;
use raft::Node;
use raft::NodeId;
use tokio::time::Instant;

use crate::cluster::sequencer::Refused;
use crate::cluster::Cluster;
use crate::cluster::ForwardError;
use crate::cluster::Forwarded;
use crate::cluster::ForwardedReply;
use crate::error::Error;
use crate::error::ErrorCode;

/// The outcome of one attempt to run an operation on the node believed to lead.
pub(super) enum Attempt {
    /// That node is not the leader (the request may have been appended before it lost that).
    NotLeader,
    /// Nothing was sent.
    NotSent,
    Failed(Error),
}

impl Attempt {
    fn timed_out() -> Attempt {
        Attempt::Failed(Error::no_leader("timed out; the request may or may not have been applied"))
    }
}

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
            Forwarded::TakeMonotonic { tag, count } => self.execute_take(&tag, count, deadline).await,
        }
    }

    /// Monotonic IDs come from this leader's sequencer, which confirms leadership per batch.
    async fn execute_take(&self, tag: &str, count: u64, deadline: Instant) -> Result<ForwardedReply, Attempt> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let taken = tokio::time::timeout(remaining, self.sequencer().take(tag, count))
            .await
            .map_err(|_| Attempt::Failed(Error::no_leader("timed out; no ID of this request was handed out")))?;
        match taken {
            Ok(ranges) => Ok(ForwardedReply::Taken(ranges.iter().map(|r| (r.start, r.end)).collect())),
            Err(Refused::NotLeader) => Err(Attempt::NotLeader),
            Err(Refused::Failed(error)) => Err(Attempt::Failed(error)),
        }
    }

    async fn execute_write(&self, request: raft::Request, deadline: Instant) -> Result<ForwardedReply, Attempt> {
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

/// Confirms that this node leads with one heartbeat round a quorum acknowledges, and answers the
/// index a linearizable read must wait for. A leader just elected, or one whose followers answer
/// late under load, can miss one round; a confirmation changes nothing, so it is asked again, a
/// heartbeat later, until the deadline.
pub(super) async fn confirm_leadership(raft: &raft::Raft, deadline: Instant) -> Result<Option<u64>, Attempt> {
    let heartbeat = Duration::from_millis(raft.config().heartbeat_interval);
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let res = tokio::time::timeout(remaining, raft.get_read_log_id())
            .await
            .map_err(|_| Attempt::Failed(Error::no_leader("leadership could not be confirmed in time")))?;
        match res {
            Ok((read_log_id, _applied)) => return Ok(read_log_id.map(|id| id.index)),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(_))) => return Err(Attempt::NotLeader),
            Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(e)))
                if Instant::now() + heartbeat < deadline =>
            {
                tracing::debug!(error = %e, "leadership not confirmed by a quorum; asking again");
                tokio::time::sleep(heartbeat).await;
            }
            Err(e) => return Err(Attempt::Failed(Error::no_leader(format!("cannot confirm leadership: {e}")))),
        }
    }
}

pub(super) fn from_write_error(e: typ::RaftError<typ::ClientWriteError>) -> Attempt {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => Attempt::NotLeader,
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => Attempt::Failed(match e {
            ChangeMembershipError::LearnerNotFound(e) => {
                Error::new(ErrorCode::NotALearner, format!("node {} is not a learner", e.node_id))
            }
            ChangeMembershipError::EmptyMembership(_) => {
                Error::new(ErrorCode::LastVoter, "the change would leave no voter")
            }
            ChangeMembershipError::InProgress(_) => Error::no_leader("another membership change is in progress; retry"),
        }),
        RaftError::Fatal(fatal) => Attempt::Failed(Error::no_leader(format!("raft stopped on this node: {fatal}"))),
    }
}
