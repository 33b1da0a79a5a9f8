//! The handle itself: [`Cluster`], the operations callers use and the retry loop that takes each
//! one to the leader (`submit`). The other files of `cluster` add operations to it; it names
//! only the protocol (`forward`), the attempt outcome (`attempt`) and the retry rules (`retry`).

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use leafraft_state::typ;
use leafraft_state::Node;
use leafraft_state::NodeId;
use raft::Raft;
use tokio::time::Instant;

use super::attempt::Attempt;
use super::forward::ForwardError;
use super::forward::Forwarded;
use super::forward::ForwardedReply;
use super::forward::Peers;
use super::forward::TakeServer;
use super::retry;
use crate::error::Error;
use crate::error::ErrorCode;
use raft::network::IdentityCheck;
use raft::network::PostError;

/// Whether an operation may be sent again after an attempt whose fate is unknown to us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resend {
    /// Applying it twice is harmless.
    Allowed,
    /// Submit at most once; only an attempt that surely sent nothing may be repeated.
    Never,
}

/// How long cluster operations may take.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// A write, a read index or a membership change: reaching the leader and committing.
    pub write: Duration,
    /// Adding a learner: until it has caught up.
    pub learner: Duration,
}

pub struct Cluster {
    pub(super) node_id: NodeId,
    pub(super) raft: Raft,
    pub(super) store: storage::Store,
    pub(super) peers: Arc<dyn Peers>,
    pub(super) write_timeout: Duration,
    pub(super) learner_timeout: Duration,
    pub(super) identity: Arc<IdentityCheck>,
    /// Latched once the node has been ready: from then on it serves from its buffers whatever
    /// the leadership does (the ranges in them are its own).
    pub(super) has_been_ready: AtomicBool,
    /// Latched by [`Cluster::catch_up`] once one linearizable read has completed since start; set
    /// from the start when the store is new.
    pub(super) caught_up: AtomicBool,
    /// Serves the monotonic takes that reach this node while it leads (the monotonic service).
    pub(super) takes: Arc<dyn TakeServer>,
    /// Whether this node knows it is no longer a member (`removal`).
    pub(super) removal: Removal,
    /// `--hold-cluster-version` on this node: nothing waits for the version to rise.
    pub(super) version_held: AtomicBool,
}

impl Cluster {
    pub fn new(
        node_id: NodeId,
        raft: Raft,
        store: storage::Store,
        peers: Arc<dyn Peers>,
        timeouts: Timeouts,
        identity: Arc<IdentityCheck>,
        takes: Arc<dyn TakeServer>,
    ) -> Cluster {
        // A store created by this start has answered nothing before: nothing to catch up with.
        let caught_up = AtomicBool::new(store.created_at_open());
        Cluster {
            node_id,
            raft,
            store,
            peers,
            write_timeout: timeouts.write,
            learner_timeout: timeouts.learner,
            identity,
            has_been_ready: AtomicBool::new(false),
            caught_up,
            takes,
            removal: Removal::default(),
            version_held: AtomicBool::new(false),
        }
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    pub fn store(&self) -> &storage::Store {
        &self.store
    }

    pub fn peers(&self) -> &dyn Peers {
        self.peers.as_ref()
    }

    /// The vote this node's log has saved: what `POST /raft/confirm` answers a leader.
    pub fn saved_vote(&self) -> Option<typ::Vote> {
        self.store.log.durability().saved_vote()
    }

    /// This node's identity and what it knows of the others' (see `raft::network::identity`).
    pub fn identity(&self) -> &Arc<IdentityCheck> {
        &self.identity
    }

    pub fn metrics(&self) -> typ::RaftMetrics {
        self.raft.metrics().borrow().clone()
    }

    /// Reads the applied state of this replica.
    pub fn read<R>(&self, f: impl FnOnce(&leafraft_state::IdStateMachine) -> R) -> R {
        self.store.state_machine.read(f)
    }

    /// The other members of the cluster, as this node's membership lists them.
    pub fn other_members(&self) -> Vec<(NodeId, Node)> {
        let metrics = self.raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership();
        membership.nodes().filter(|(id, _)| **id != self.node_id).map(|(id, node)| (*id, node.clone())).collect()
    }

    // --- Writes

    /// Proposes a request, through the leader, and answers what applying it gave.
    pub async fn write(&self, request: leafraft_state::Request) -> Result<leafraft_state::Response, Error> {
        self.check_cluster_version(&request, false)?;
        let resend = match request {
            // A redelivered release could apply after a later claim of its tag (see
            // `leafraft_state::Request::ReleaseSegment`).
            leafraft_state::Request::ReleaseSegment { .. } | leafraft_state::Request::ReleaseBatch { .. } => {
                Resend::Never
            }
            _ => Resend::Allowed,
        };
        match self.submit(Forwarded::Write(request), resend, self.write_timeout).await? {
            ForwardedReply::Written(response) => Ok(response),
            other => Err(Error::no_leader(format!("unexpected reply to a write: {other:?}"))),
        }
    }

    /// Adds a learner and answers once it has caught up; `incarnation` is 0 when unknown.
    pub async fn add_learner(&self, node_id: NodeId, addr: String, incarnation: u64) -> Result<(), Error> {
        let op = Forwarded::AddLearner { node_id, addr, incarnation };
        // The leader waits `learner_timeout` for the learner; the slack lets its answer (a 503
        // that says why) reach a forwarding node before that node gives up.
        self.submit(op, Resend::Allowed, self.learner_timeout + self.write_timeout).await?;
        Ok(())
    }

    pub async fn promote_voter(&self, node_id: NodeId) -> Result<(), Error> {
        self.submit(Forwarded::PromoteVoter { node_id }, Resend::Allowed, self.write_timeout).await?;
        Ok(())
    }

    pub async fn remove_member(&self, node_id: NodeId) -> Result<(), Error> {
        self.submit(Forwarded::RemoveMember { node_id }, Resend::Allowed, self.write_timeout).await?;
        Ok(())
    }

    /// The mode of `tag` in this replica (`None`: no such tag here).
    pub fn tag_mode(&self, tag: &str) -> Option<leafraft_state::TagMode> {
        self.read(|state| state.tags.get(tag).map(|record| record.mode))
    }

    /// Runs `op`, which may be sent twice, on the leader wherever it is (a monotonic take: IDs of
    /// an answer nobody receives are a gap), within the write timeout.
    pub async fn on_leader(&self, op: Forwarded) -> Result<ForwardedReply, Error> {
        self.submit(op, Resend::Allowed, self.write_timeout).await
    }

    /// Waits until this replica has applied everything committed before the call (read index
    /// obtained from the leader), so a read that follows is linearizable.
    pub async fn linearize(&self) -> Result<(), Error> {
        let Some(index) = self.read_index().await? else {
            return Ok(());
        };
        self.raft
            .wait(Some(self.write_timeout))
            .applied_index_at_least(Some(index), "linearizable read")
            .await
            .map_err(|e| Error::no_leader(format!("this node did not catch up for a consistent read: {e}")))?;
        Ok(())
    }

    /// The leader's commit index once it confirmed its leadership (`None`: nothing committed
    /// yet): every entry committed before the call lies at or below it.
    pub async fn read_index(&self) -> Result<Option<u64>, Error> {
        match self.submit(Forwarded::ReadIndex, Resend::Allowed, self.write_timeout).await? {
            ForwardedReply::ReadIndex(index) => Ok(index),
            other => Err(Error::no_leader(format!("unexpected answer to a read index: {other:?}"))),
        }
    }

    /// Runs `op` on the leader, wherever it is, until it succeeds, fails for good, or the
    /// deadline passes (`NO_LEADER`).
    pub(super) async fn submit(
        &self,
        op: Forwarded,
        resend: Resend,
        timeout: Duration,
    ) -> Result<ForwardedReply, Error> {
        let deadline = Instant::now() + timeout;
        // Set once an attempt reached a node that lost leadership before answering: that node
        // may have committed the operation.
        let mut maybe_applied = false;
        loop {
            let metrics = self.metrics();
            if let Err(fatal) = &metrics.running_state {
                return Err(Error::no_leader(format!("raft stopped on this node: {fatal}")));
            }
            // A leader that stalls (paused, cut off) would hold a forward until the deadline even
            // after the others elected a new one. A write or read index that may be sent twice
            // goes to the new leader instead (a claim abandoned this way is a gap). Membership
            // changes are not raced: a resend after an unseen success would answer an error.
            let race = resend == Resend::Allowed
                && matches!(
                    op,
                    Forwarded::Write(_)
                        | Forwarded::ReadIndex
                        | Forwarded::TakeMonotonic { .. }
                        | Forwarded::TakeMonotonicBatch { .. }
                        | Forwarded::TakeMonotonicVouched { .. }
                );
            let attempt = match metrics.current_leader {
                Some(leader) if leader == self.node_id => Some(self.execute(op.clone(), deadline).await),
                Some(leader) => match metrics.membership_config.membership().get_node(&leader) {
                    Some(node) if race => tokio::select! {
                        reply = self.forward(leader, node, &op, deadline) => Some(reply),
                        () = self.leader_other_than(leader) => Some(Err(Attempt::NotLeader)),
                    },
                    Some(node) => Some(self.forward(leader, node, &op, deadline).await),
                    None => None,
                },
                None => None,
            };
            match attempt {
                Some(Ok(reply)) => return Ok(reply),
                Some(Err(Attempt::Failed(error))) => {
                    let membership = self.metrics().membership_config.membership().clone();
                    if maybe_applied && retry::effect_already_holds(&op, &error, &membership) {
                        tracing::info!(op = ?op, answer = %error, "an earlier attempt took effect");
                        return Ok(ForwardedReply::Done);
                    }
                    return Err(error);
                }
                Some(Err(Attempt::NotLeader)) if resend == Resend::Never => {
                    return Err(Error::no_leader("leadership moved while the request was in flight; not resent"));
                }
                Some(Err(Attempt::NotLeader)) => maybe_applied = true,
                Some(Err(Attempt::NotSent)) | None => {}
            }
            if Instant::now() >= deadline {
                return Err(Error::no_leader("no leader could be reached in time"));
            }
            self.wait_for_leader_change(metrics.current_leader, deadline).await;
        }
    }

    /// One attempt at the leader through [`Peers::forward`], classified by what it says about
    /// delivery.
    pub(super) async fn forward(
        &self,
        leader: NodeId,
        node: &Node,
        op: &Forwarded,
        deadline: Instant,
    ) -> Result<ForwardedReply, Attempt> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match self.peers.forward(leader, node, op, remaining).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(ForwardError::NotLeader)) => Err(Attempt::NotLeader),
            Ok(Err(ForwardError::Failed(error))) => Err(Attempt::Failed(error)),
            // Refused before it was applied by a member of this cluster: nothing to retry until
            // an operator acts.
            Err(PostError::Refused(reason)) => Err(Attempt::Failed(Error::new(ErrorCode::ClusterMismatch, reason))),
            Err(e) if e.is_connect() => {
                tracing::debug!(leader, error = %e, "leader unreachable; retrying");
                Err(Attempt::NotSent)
            }
            Err(e) => Err(Attempt::Failed(Error::no_leader(format!(
                "forwarding to leader {leader} failed; the request may or may not have been applied: {e}"
            )))),
        }
    }

    /// Completes once this node knows a leader other than `leader` (never if Raft stops).
    pub(super) async fn leader_other_than(&self, leader: NodeId) {
        let mut rx = self.raft.metrics();
        if rx.wait_for(|m| m.current_leader.is_some_and(|known| known != leader)).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    pub(super) async fn wait_for_leader_change(&self, seen: Option<NodeId>, deadline: Instant) {
        // Bounded: when the leader stays the same (it may be restarting) we try it again.
        let wait = deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
        let mut rx = self.raft.metrics();
        let changed = async {
            // A closed channel (Raft stopped) answers at once: wait the whole period instead.
            if rx.wait_for(|m| m.current_leader.is_some() && m.current_leader != seen).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let _ = tokio::time::timeout(wait, changed).await;
    }
}

/// Why this node believes it is no longer a member, if it does.
#[derive(Debug, Default)]
pub struct Removal {
    /// Read on every ID request, so an atomic beside the reason.
    pub(super) removed: AtomicBool,
    pub(super) reason: Mutex<Option<String>>,
}

impl Removal {
    /// The reason, when this node was removed.
    pub fn reason(&self) -> Option<String> {
        self.reason.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records the verdict; answers whether it changed.
    pub(super) fn set(&self, reason: Option<String>) -> bool {
        let mut current = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        let changed = current.is_some() != reason.is_some();
        self.removed.store(reason.is_some(), Ordering::Relaxed);
        *current = reason;
        changed
    }
}
