//! Changes that every member enforces on its own, answered only once every member has them.
//!
//! Most commands take effect where they are proposed: a claim is the leader's answer, a worker
//! lease carries its window. A few change what each node does with what it already holds, and
//! each node learns of them only when it applies them: a tag moved to monotonic stops being served
//! from the segment buffers of a node only once that node has applied the move. Answering such a
//! change when the leader committed it would let a member that lags (cut off, paused, slow) serve
//! from its buffers after the answer, below IDs the leader's sequencer already answered. So the
//! answer waits until every member, voters and learners, reports that it applied at least the
//! leader's commit index read after the change ([`Cluster::confirm_every_member_applied`]); a
//! member that does not answer in time is named in 503 `MEMBERS_BEHIND`, the change stays
//! committed, and asking again waits again. The list of such commands is in `docs/invariants.md`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use leafraft_state::NodeId;
use raft::Raft;
use tokio::time::Instant;

use crate::cluster::Cluster;
use crate::cluster::ForwardError;
use crate::cluster::Forwarded;
use crate::cluster::ForwardedReply;
use crate::cluster::Peers;
use crate::error::Error;
use crate::error::ErrorCode;

/// How long the answer waits for the members to report: a member that lags longer than this is
/// named, and the caller may ask again.
const MEMBERS_WAIT: Duration = Duration::from_secs(3);

impl Cluster {
    /// Answers once every member (voters and learners, this node included) has applied every
    /// entry committed before the call; otherwise 503 `MEMBERS_BEHIND` naming the members that
    /// did not report it in time. `what` names the change in the message.
    pub async fn confirm_every_member_applied(&self, what: &str) -> Result<(), Error> {
        let index = self.read_index().await?.unwrap_or(0);
        let wait = MEMBERS_WAIT.min(self.write_timeout);
        let members: Vec<(NodeId, leafraft_state::Node)> = {
            let metrics = self.metrics();
            metrics.membership_config.membership().nodes().map(|(id, node)| (*id, node.clone())).collect()
        };
        // All members at once, each asked on a task of its own; one whose task was lost (it
        // panicked) is as unconfirmed as one that did not answer.
        let mut unanswered: BTreeSet<NodeId> = members.iter().map(|(id, _)| *id).collect();
        let mut reports = tokio::task::JoinSet::new();
        for (id, node) in members {
            let (raft, peers, own) = (self.raft.clone(), Arc::clone(&self.peers), id == self.node_id);
            reports.spawn(async move {
                let applied = match own {
                    true => applied_within(&raft, index, wait).await,
                    false => applied_at(peers.as_ref(), id, &node, index, wait).await,
                };
                (id, applied)
            });
        }
        let mut behind: Vec<(NodeId, String)> = Vec::new();
        while let Some(report) = reports.join_next().await {
            if let Ok((id, applied)) = report {
                unanswered.remove(&id);
                if let Err(why) = applied {
                    behind.push((id, why));
                }
            }
        }
        behind.extend(unanswered.into_iter().map(|id| (id, "the question was lost".to_string())));
        behind.sort();
        if behind.is_empty() {
            return Ok(());
        }
        let named: Vec<String> = behind.iter().map(|(id, why)| format!("node {id} ({why})")).collect();
        Err(Error::new(
            ErrorCode::MembersBehind,
            format!(
                "{what} is committed, but not every member has applied it yet: {}; ask again to wait again",
                named.join(", ")
            ),
        ))
    }

    /// On any member: waits up to `wait_ms` (bounded by this node's write timeout) until this
    /// replica applied `index`, then answers what it applied.
    pub(super) async fn execute_applied(&self, index: u64, wait_ms: u64, deadline: Instant) -> ForwardedReply {
        let wait = Duration::from_millis(wait_ms).min(deadline.saturating_duration_since(Instant::now()));
        let _ = applied_within(&self.raft, index, wait).await;
        ForwardedReply::Applied(applied_index(&self.raft))
    }
}

/// Waits up to `wait` until this replica applied `index`; the reason when it did not.
async fn applied_within(raft: &Raft, index: u64, wait: Duration) -> Result<(), String> {
    raft.wait(Some(wait))
        .applied_index_at_least(Some(index), "every member applied")
        .await
        .map(|_| ())
        .map_err(|_| format!("applied {} of {index} within {wait:?}", applied_index(raft)))
}

/// Asks member `id` to report once it applied `index` (it waits up to `wait`).
async fn applied_at(
    peers: &dyn Peers,
    id: NodeId,
    node: &leafraft_state::Node,
    index: u64,
    wait: Duration,
) -> Result<(), String> {
    let op = Forwarded::Applied { index, wait_ms: wait.as_millis() as u64 };
    // The member answers within `wait`; the rest is for the round trip.
    let timeout = wait + Duration::from_secs(1);
    match peers.forward(id, node, &op, timeout).await {
        Ok(Ok(ForwardedReply::Applied(applied))) if applied >= index => Ok(()),
        Ok(Ok(ForwardedReply::Applied(applied))) => Err(format!("applied {applied} of {index} within {wait:?}")),
        Ok(Ok(other)) => Err(format!("unexpected answer {other:?}")),
        Ok(Err(ForwardError::NotLeader)) => Err("refused the question".to_string()),
        Ok(Err(ForwardError::Failed(error))) => Err(error.message),
        Err(error) => Err(format!("no answer: {error}")),
    }
}

/// The index this replica has applied (0 before the first entry).
fn applied_index(raft: &Raft) -> u64 {
    raft.metrics().borrow().last_applied.map_or(0, |id| id.index)
}
