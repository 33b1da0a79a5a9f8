//! Membership changes on the leader that keep the cluster's guarantees: a learner is recorded with
//! the identity of the disk that answers at its address, answers once it has caught up, and is
//! promoted only while it replicates the leader's log; and `hello` (through [`super::Peers`]),
//! how nodes learn who answers at an address before they trust it.
//!
//! Why: a 3-node cluster that promotes a learner at a dead address has 4 voters with one dead, and
//! the next failure stops it (etcd refuses to promote a learner that is not in sync). A member
//! whose data dir was wiped must not be admitted again under its old identity: it would vote with
//! an empty log as if it remembered what it acknowledged.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;

use leafraft_state::Node;
use leafraft_state::NodeId;
use openraft::ChangeMembers;
use openraft::ServerState;
use raft::network::identity::hex_id;
use tokio::time::Instant;

use super::attempt::Attempt;
use super::Cluster;
use super::ForwardedReply;
use super::Hello;
use super::HelloError;
use crate::error::Error;
use crate::error::ErrorCode;

/// A promotion is allowed while the learner's matched log index is at most this far behind the
/// leader's last log index: in sync, allowing for the entries in flight under load.
pub const MAX_PROMOTION_LAG: u64 = 100;

/// How long one `hello` may take.
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);

impl Cluster {
    /// The latest membership this node knows, empty until it has one.
    pub fn members(&self) -> BTreeMap<NodeId, Node> {
        let metrics = self.metrics();
        metrics.membership_config.membership().nodes().map(|(id, node)| (*id, node.clone())).collect()
    }

    /// This node's own `hello`.
    pub fn hello_answer(&self) -> Hello {
        let local = self.identity.local();
        let members: BTreeMap<NodeId, Node> = self.members();
        Hello {
            node_id: local.node_id,
            incarnation: local.incarnation,
            cluster_id: self.read(|state| state.cluster_id),
            initialized: !members.is_empty(),
            members,
        }
    }

    /// Asks the node at `addr` who it is; `expected` is the node ID that should answer there.
    pub async fn hello(&self, addr: &str, expected: Option<NodeId>, timeout: Duration) -> Result<Hello, HelloError> {
        let target = expected.map(|id| (id, self.identity.recorded_incarnation(id)));
        self.peers.hello(addr, target, timeout).await
    }

    /// Adds `node_id` at `addr` as a learner and waits until it has caught up. `incarnation` is
    /// the joiner's own (0 when an operator adds it and does not know it); the node that answers
    /// at `addr` is asked, so that the membership records the disk that really runs there.
    pub(super) async fn add_learner_as_leader(
        &self,
        node_id: NodeId,
        addr: String,
        incarnation: u64,
        deadline: Instant,
    ) -> Result<ForwardedReply, Attempt> {
        let incarnation = self.incarnation_at(node_id, &addr, incarnation, deadline).await?;
        let membership = self.metrics().membership_config.membership().clone();
        if let Some(node) = membership.get_node(&node_id) {
            if node.addr != addr {
                return Err(Attempt::Failed(Error::invalid(format!(
                    "node {node_id} is already a member at {}; remove it first",
                    node.addr
                ))));
            }
            if node.incarnation != 0 && incarnation != 0 && node.incarnation != incarnation {
                return Err(Attempt::Failed(Error::new(ErrorCode::ClusterMismatch, rejoin_refusal(node_id, node))));
            }
            if membership.voter_ids().any(|id| id == node_id) {
                return Ok(ForwardedReply::Done);
            }
        } else {
            tracing::info!(node_id, addr = %addr, incarnation = %hex_id(incarnation), "adding learner");
            let remaining = deadline.saturating_duration_since(Instant::now());
            let added =
                tokio::time::timeout(remaining, self.raft.add_learner(node_id, Node::new(&addr, incarnation), false))
                    .await
                    .map_err(|_| not_caught_up(node_id, &addr, self.learner_timeout))?;
            added.map_err(super::attempt::from_write_error)?;
        }
        self.wait_caught_up(node_id, &addr, deadline).await?;
        tracing::info!(node_id, "learner caught up");
        Ok(ForwardedReply::Done)
    }

    /// The incarnation of the node at `addr`: what it answers, checked against what the joiner
    /// said; `given` (maybe 0) when nothing answers yet.
    async fn incarnation_at(&self, node_id: NodeId, addr: &str, given: u64, deadline: Instant) -> Result<u64, Attempt> {
        let timeout = deadline.saturating_duration_since(Instant::now()).min(HELLO_TIMEOUT);
        match self.hello(addr, Some(node_id), timeout).await {
            Ok(hello) if given != 0 && hello.incarnation != given => Err(Attempt::Failed(Error::new(
                ErrorCode::ClusterMismatch,
                format!(
                    "node {node_id} at {addr} has incarnation {}, not {}: another process answers there",
                    hex_id(hello.incarnation),
                    hex_id(given)
                ),
            ))),
            Ok(hello) => Ok(hello.incarnation),
            Err(HelloError::Refused(reason)) => Err(Attempt::Failed(Error::new(ErrorCode::ClusterMismatch, reason))),
            Err(HelloError::Unanswered(reason)) => {
                tracing::info!(node_id, addr, reason, "the new learner does not answer yet; adding it anyway");
                Ok(given)
            }
        }
    }

    /// Waits until this leader's replication to `node_id` is in sync ([`MAX_PROMOTION_LAG`]).
    async fn wait_caught_up(&self, node_id: NodeId, addr: &str, deadline: Instant) -> Result<(), Attempt> {
        let mut rx = self.raft.metrics();
        let remaining = deadline.saturating_duration_since(Instant::now());
        let leads = tokio::time::timeout(remaining, async {
            let metrics =
                rx.wait_for(|m| m.state != ServerState::Leader || replication_lag(m, node_id).is_ok()).await.ok()?;
            Some(metrics.state == ServerState::Leader)
        })
        .await;
        match leads {
            Ok(Some(true)) => Ok(()),
            Ok(_) => Err(Attempt::NotLeader),
            Err(_) => Err(not_caught_up(node_id, addr, self.learner_timeout)),
        }
    }

    /// Promotes a learner that replicates the leader's log and still runs on the disk the
    /// membership records (recording it first if it was added before it answered).
    pub(super) async fn promote_as_leader(
        &self,
        node_id: NodeId,
        deadline: Instant,
    ) -> Result<ForwardedReply, Attempt> {
        let metrics = self.metrics();
        let membership = metrics.membership_config.membership().clone();
        let not_a_learner = |message: String| Attempt::Failed(Error::new(ErrorCode::NotALearner, message));
        if membership.voter_ids().any(|id| id == node_id) {
            return Err(not_a_learner(format!("node {node_id} is already a voter")));
        }
        let Some(node) = membership.get_node(&node_id).cloned() else {
            return Err(not_a_learner(format!("node {node_id} is not a member; add it as a learner first")));
        };
        if let Err(reason) = replication_lag(&metrics, node_id) {
            return Err(Attempt::Failed(Error::new(
                ErrorCode::LearnerNotCaughtUp,
                format!("node {node_id} at {} {reason}; promote it once it has caught up", node.addr),
            )));
        }
        let timeout = deadline.saturating_duration_since(Instant::now()).min(HELLO_TIMEOUT);
        let hello = match self.hello(&node.addr, Some(node_id), timeout).await {
            Ok(hello) => hello,
            Err(HelloError::Refused(reason)) => {
                return Err(Attempt::Failed(Error::new(ErrorCode::ClusterMismatch, reason)));
            }
            Err(HelloError::Unanswered(reason)) => {
                return Err(Attempt::Failed(Error::new(
                    ErrorCode::LearnerNotCaughtUp,
                    format!("node {node_id} at {} does not answer: {reason}", node.addr),
                )));
            }
        };
        if node.incarnation == 0 {
            // Added while nothing answered: record the disk that caught up before it votes.
            let recorded = Node::new(&node.addr, hello.incarnation);
            tracing::info!(node_id, incarnation = %hex_id(hello.incarnation), "recording the learner's identity");
            self.change_membership(ChangeMembers::SetNodes(BTreeMap::from([(node_id, recorded)])), deadline).await?;
        }
        tracing::info!(node_id, "promoting learner to voter");
        self.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([node_id])), deadline).await
    }
}

/// `Ok(lag)` when this node leads and its replication to `node_id` has matched within
/// [`MAX_PROMOTION_LAG`] entries of its last log index; otherwise what is missing.
pub fn replication_lag(metrics: &leafraft_state::typ::RaftMetrics, node_id: NodeId) -> Result<u64, String> {
    let Some(replication) = &metrics.replication else {
        return Err("cannot be judged: this node is not the leader".into());
    };
    let last = metrics.last_log_index.unwrap_or(0);
    match replication.get(&node_id) {
        None => Err("is not replicated to".into()),
        Some(None) => Err(format!("has replicated nothing of the leader's log (last index {last})")),
        Some(Some(matched)) => {
            let lag = last.saturating_sub(matched.index);
            if lag <= MAX_PROMOTION_LAG {
                Ok(lag)
            } else {
                Err(format!(
                    "has replicated up to index {} of {last} ({lag} behind, at most {MAX_PROMOTION_LAG})",
                    matched.index
                ))
            }
        }
    }
}

fn not_caught_up(node_id: NodeId, addr: &str, timeout: Duration) -> Attempt {
    Attempt::Failed(Error::no_leader(format!(
        "node {node_id} at {addr} has not caught up within {timeout:?}; it stays a learner and the voters are unchanged"
    )))
}

/// The refusal of a node ID the membership records with another disk.
pub fn rejoin_refusal(node_id: NodeId, recorded: &Node) -> String {
    format!(
        "node {node_id} is a member at {} with another data dir (incarnation {}): a wiped member must not rejoin as \
         itself; run `leafraft cluster remove --node-id {node_id}`, then start it with --join",
        recorded.addr,
        hex_id(recorded.incarnation)
    )
}
