//! The outcome of one attempt to run an operation on the node believed to lead, and the two Raft
//! calls whose errors become one: confirming leadership and a client write. The leader's handlers
//! (`leader`), the monotonic sequencer and the retry loop (`mod.rs`) all speak it; it sits below
//! them so that they import no cycle.

use std::time::Duration;

use leafraft_state::typ;
use openraft::error::ChangeMembershipError;
use openraft::error::CheckIsLeaderError;
use openraft::error::ClientWriteError;
use openraft::error::RaftError;
use tokio::time::Instant;

use crate::error::Error;
use crate::error::ErrorCode;

/// The outcome of one attempt to run an operation on the node believed to lead.
pub(crate) enum Attempt {
    /// That node is not the leader (the request may have been appended before it lost that).
    NotLeader,
    /// Nothing was sent.
    NotSent,
    Failed(Error),
}

impl Attempt {
    pub(super) fn timed_out() -> Attempt {
        Attempt::Failed(Error::no_leader("timed out; the request may or may not have been applied"))
    }
}

/// Confirms that this node leads with one heartbeat round a quorum acknowledges, and answers the
/// index a linearizable read must wait for. A leader just elected, or one whose followers answer
/// late under load, can miss one round; a confirmation changes nothing, so it is asked again, a
/// heartbeat later, until the deadline.
pub(crate) async fn confirm_leadership(raft: &raft::Raft, deadline: Instant) -> Result<Option<u64>, Attempt> {
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

pub(crate) fn from_write_error(e: typ::RaftError<typ::ClientWriteError>) -> Attempt {
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
