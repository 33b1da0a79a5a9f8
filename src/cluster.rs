//! `Cluster`: this node's handle on the Raft group.
//!
//! It proposes writes (forwarded to the leader when this node is not it), changes the membership,
//! answers reads of the replicated state and says whether this node is ready. Every write any
//! node accepts ends up here; `api` only translates HTTP.
//!
//! Retries: a write is retried only while it certainly was not appended anywhere, or when
//! applying it twice is harmless (a second claim only burns IDs; creates and updates are
//! idempotent). `ReleaseSegment` is submitted exactly once: see `raft::Request::ReleaseSegment`.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::ChangeMembershipError;
use openraft::error::ClientWriteError;
use openraft::error::RaftError;
use openraft::ChangeMembers;
use openraft::ServerState;
use serde::Deserialize;
use serde::Serialize;
use tokio::time::Instant;

use crate::error::Error;
use crate::error::ErrorCode;
use raft::typ;
use raft::Node;
use raft::NodeId;
use raft::Raft;

/// An operation a node sends to the leader over `/raft/forward`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Forwarded {
    Write(raft::Request),
    AddLearner {
        node_id: NodeId,
        addr: String,
    },
    PromoteVoter {
        node_id: NodeId,
    },
    RemoveMember {
        node_id: NodeId,
    },
    /// Confirm leadership and answer the index a linearizable read must wait for.
    ReadIndex,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardedReply {
    Written(raft::Response),
    Done,
    ReadIndex(Option<u64>),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardError {
    /// The receiving node is not the leader: ask again elsewhere.
    NotLeader,
    Failed(Error),
}

/// Whether an operation may be sent again after an attempt whose fate is unknown to us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resend {
    /// Applying it twice is harmless.
    Allowed,
    /// Submit at most once; only an attempt that surely sent nothing may be repeated.
    Never,
}

/// The `/v1/cluster` answer.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClusterStatus {
    #[schema(value_type = u64)]
    pub node_id: NodeId,
    pub role: String,
    #[schema(value_type = Option<u64>)]
    pub leader_id: Option<NodeId>,
    pub term: u64,
    #[schema(value_type = Vec<u64>)]
    pub voters: Vec<NodeId>,
    #[schema(value_type = Vec<u64>)]
    pub learners: Vec<NodeId>,
    pub nodes: BTreeMap<String, String>,
    pub commit_index: Option<u64>,
    pub applied_index: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<BTreeMap<String, ReplicationStatus>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReplicationStatus {
    pub matched_index: Option<u64>,
    pub lag: u64,
}

pub struct Cluster {
    node_id: NodeId,
    raft: Raft,
    store: storage::Store,
    http: reqwest::Client,
    secret: Option<Arc<str>>,
    write_timeout: Duration,
    /// Latched once the node has been ready: from then on it serves from its buffers whatever
    /// the leadership does (the ranges in them are its own).
    has_been_ready: AtomicBool,
}

/// How long adding a learner may wait for it to catch up.
const LEARNER_CATCH_UP_TIMEOUT: Duration = Duration::from_secs(60);

impl Cluster {
    pub fn new(
        node_id: NodeId,
        raft: Raft,
        store: storage::Store,
        http: reqwest::Client,
        secret: Option<Arc<str>>,
        write_timeout: Duration,
    ) -> Cluster {
        Cluster { node_id, raft, store, http, secret, write_timeout, has_been_ready: AtomicBool::new(false) }
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

    pub fn secret(&self) -> Option<&str> {
        self.secret.as_deref()
    }

    pub fn metrics(&self) -> typ::RaftMetrics {
        self.raft.metrics().borrow().clone()
    }

    /// Reads the applied state of this replica.
    pub fn read<R>(&self, f: impl FnOnce(&raft::IdStateMachine) -> R) -> R {
        self.store.state_machine.read(f)
    }

    // --- Writes

    /// Proposes a request, through the leader, and answers what applying it gave.
    pub async fn write(&self, request: raft::Request) -> Result<raft::Response, Error> {
        let resend = match request {
            raft::Request::ReleaseSegment { .. } => Resend::Never,
            _ => Resend::Allowed,
        };
        match self.submit(Forwarded::Write(request), resend, self.write_timeout).await? {
            ForwardedReply::Written(response) => Ok(response),
            other => Err(Error::no_leader(format!("unexpected reply to a write: {other:?}"))),
        }
    }

    pub async fn add_learner(&self, node_id: NodeId, addr: String) -> Result<(), Error> {
        self.submit(Forwarded::AddLearner { node_id, addr }, Resend::Allowed, LEARNER_CATCH_UP_TIMEOUT).await?;
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

    /// Waits until this replica has applied everything committed before the call (read index
    /// obtained from the leader), so a read that follows is linearizable.
    pub async fn linearize(&self) -> Result<(), Error> {
        let reply = self.submit(Forwarded::ReadIndex, Resend::Allowed, self.write_timeout).await?;
        let ForwardedReply::ReadIndex(Some(index)) = reply else {
            return Ok(());
        };
        self.raft
            .wait(Some(self.write_timeout))
            .applied_index_at_least(Some(index), "linearizable read")
            .await
            .map_err(|e| Error::no_leader(format!("this node did not catch up for a consistent read: {e}")))?;
        Ok(())
    }

    /// Runs `op` on the leader, wherever it is, until it succeeds, fails for good, or the
    /// deadline passes (`NO_LEADER`).
    async fn submit(&self, op: Forwarded, resend: Resend, timeout: Duration) -> Result<ForwardedReply, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let metrics = self.metrics();
            // A leader that stalls (paused, cut off) would hold a forward until the deadline even
            // after the others elected a new one. A write or read index that may be sent twice
            // goes to the new leader instead (a claim abandoned this way is a gap). Membership
            // changes are not raced: a resend after an unseen success would answer an error.
            let race = resend == Resend::Allowed && matches!(op, Forwarded::Write(_) | Forwarded::ReadIndex);
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
                Some(Err(Attempt::Failed(error))) => return Err(error),
                Some(Err(Attempt::NotLeader)) if resend == Resend::Never => {
                    return Err(Error::no_leader("leadership moved while the request was in flight; not resent"));
                }
                Some(Err(Attempt::NotLeader | Attempt::NotSent)) | None => {}
            }
            if Instant::now() >= deadline {
                return Err(Error::no_leader("no leader could be reached in time"));
            }
            self.wait_for_leader_change(metrics.current_leader, deadline).await;
        }
    }

    async fn forward(
        &self,
        leader: NodeId,
        node: &Node,
        op: &Forwarded,
        deadline: Instant,
    ) -> Result<ForwardedReply, Attempt> {
        let url = format!("http://{}/raft/forward", node.addr);
        let remaining = deadline.saturating_duration_since(Instant::now());
        let res: Result<Result<ForwardedReply, ForwardError>, _> =
            raft::network::post_bincode(&self.http, &url, self.secret(), op, remaining).await;
        match res {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(ForwardError::NotLeader)) => Err(Attempt::NotLeader),
            Ok(Err(ForwardError::Failed(error))) => Err(Attempt::Failed(error)),
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
    async fn leader_other_than(&self, leader: NodeId) {
        let mut rx = self.raft.metrics();
        if rx.wait_for(|m| m.current_leader.is_some_and(|known| known != leader)).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    async fn wait_for_leader_change(&self, seen: Option<NodeId>, deadline: Instant) {
        // Bounded: when the leader stays the same (it may be restarting) we try it again.
        let wait = deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
        let mut rx = self.raft.metrics();
        let _ =
            tokio::time::timeout(wait, rx.wait_for(|m| m.current_leader.is_some() && m.current_leader != seen)).await;
    }

    /// Runs a forwarded operation on this node, which believes it is the leader.
    pub async fn execute_forwarded(&self, op: Forwarded) -> Result<ForwardedReply, ForwardError> {
        let deadline = Instant::now()
            + match op {
                Forwarded::AddLearner { .. } => LEARNER_CATCH_UP_TIMEOUT,
                _ => self.write_timeout,
            };
        self.execute(op, deadline).await.map_err(|attempt| match attempt {
            Attempt::NotLeader | Attempt::NotSent => ForwardError::NotLeader,
            Attempt::Failed(error) => ForwardError::Failed(error),
        })
    }

    async fn execute(&self, op: Forwarded, deadline: Instant) -> Result<ForwardedReply, Attempt> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let timed_out = || Attempt::Failed(Error::no_leader("timed out; the request may or may not have been applied"));
        match op {
            Forwarded::Write(request) => {
                let res =
                    tokio::time::timeout(remaining, self.raft.client_write(request)).await.map_err(|_| timed_out())?;
                res.map(|resp| ForwardedReply::Written(resp.data)).map_err(from_write_error)
            }
            Forwarded::AddLearner { node_id, addr } => {
                let membership = self.metrics().membership_config.membership().clone();
                if let Some(node) = membership.get_node(&node_id) {
                    if node.addr != addr {
                        return Err(Attempt::Failed(Error::invalid(format!(
                            "node {node_id} is already a member at {}; remove it first",
                            node.addr
                        ))));
                    }
                    if membership.voter_ids().any(|id| id == node_id) {
                        return Ok(ForwardedReply::Done);
                    }
                }
                tracing::info!(node_id, addr = %addr, "adding learner");
                let res = tokio::time::timeout(remaining, self.raft.add_learner(node_id, Node::new(addr), true))
                    .await
                    .map_err(|_| timed_out())?;
                res.map(|_| ForwardedReply::Done).map_err(from_write_error)
            }
            Forwarded::PromoteVoter { node_id } => {
                let membership = self.metrics().membership_config.membership().clone();
                if membership.voter_ids().any(|id| id == node_id) {
                    return Err(Attempt::Failed(Error::new(
                        ErrorCode::NotALearner,
                        format!("node {node_id} is already a voter"),
                    )));
                }
                if membership.get_node(&node_id).is_none() {
                    return Err(Attempt::Failed(Error::new(
                        ErrorCode::NotALearner,
                        format!("node {node_id} is not a member; add it as a learner first"),
                    )));
                }
                tracing::info!(node_id, "promoting learner to voter");
                let change = ChangeMembers::AddVoterIds(BTreeSet::from([node_id]));
                self.change_membership(change, remaining).await
            }
            Forwarded::RemoveMember { node_id } => {
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
                self.change_membership(change, remaining).await
            }
            Forwarded::ReadIndex => loop {
                let heartbeat = Duration::from_millis(self.raft.config().heartbeat_interval);
                let remaining = deadline.saturating_duration_since(Instant::now());
                let res =
                    tokio::time::timeout(remaining, self.raft.get_read_log_id()).await.map_err(|_| timed_out())?;
                match res {
                    Ok((read_log_id, _applied)) => {
                        return Ok(ForwardedReply::ReadIndex(read_log_id.map(|id| id.index)))
                    }
                    Err(RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(_))) => {
                        return Err(Attempt::NotLeader)
                    }
                    // A leader just elected, or one whose followers answer late under load, can
                    // miss one heartbeat round. A read index changes nothing, so it is asked
                    // again, a heartbeat later, until the deadline.
                    Err(RaftError::APIError(openraft::error::CheckIsLeaderError::QuorumNotEnough(e)))
                        if Instant::now() + heartbeat < deadline =>
                    {
                        tracing::debug!(error = %e, "leadership not confirmed by a quorum; asking again");
                        tokio::time::sleep(heartbeat).await;
                    }
                    Err(e) => return Err(Attempt::Failed(Error::no_leader(format!("cannot confirm leadership: {e}")))),
                }
            },
        }
    }

    async fn change_membership(
        &self,
        change: ChangeMembers<NodeId, Node>,
        remaining: Duration,
    ) -> Result<ForwardedReply, Attempt> {
        // `retain = false`: a removed voter leaves the cluster instead of staying as a learner.
        let res = tokio::time::timeout(remaining, self.raft.change_membership(change, false))
            .await
            .map_err(|_| Attempt::Failed(Error::no_leader("membership change timed out; it may still complete")))?;
        res.map(|_| ForwardedReply::Done).map_err(from_write_error)
    }

    // --- Reads

    /// `Ok` when this node knows a leader and has applied at least what it had applied before
    /// its last restart; otherwise the reason.
    pub fn readiness(&self) -> Result<(), String> {
        let metrics = self.raft.metrics().borrow().clone();
        if let Err(fatal) = &metrics.running_state {
            return Err(format!("raft stopped: {fatal}"));
        }
        if metrics.membership_config.membership().get_node(&self.node_id).is_none() {
            return Err("this node is not a member of a cluster yet".into());
        }
        if metrics.current_leader.is_none() {
            return Err("no leader known".into());
        }
        let applied = metrics.last_applied.map(|id| id.index);
        let needed = self.store.state_machine.applied_at_open().map(|id| id.index);
        if applied < needed {
            return Err(format!("replaying the log: applied {applied:?} of {needed:?}"));
        }
        Ok(())
    }

    pub fn ensure_ready(&self) -> Result<(), Error> {
        self.readiness().map_err(Error::not_ready)?;
        self.has_been_ready.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// For ID requests: ready now, or ready at some point since this process started. A node
    /// that lost its leader keeps serving from its buffers until they run out.
    pub fn ensure_serving(&self) -> Result<(), Error> {
        if self.has_been_ready.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.ensure_ready()
    }

    /// The offset of a peer's wall clock from this node's (peer minus local), compensated for
    /// half the round trip; `None` when the peer does not answer within a second.
    pub async fn peer_clock_offset(&self, addr: &str) -> Option<i64> {
        #[derive(Deserialize)]
        struct Clock {
            now_ms: u64,
        }
        let sent = crate::clock::now_ms();
        let response =
            self.http.get(format!("http://{addr}/v1/clock")).timeout(Duration::from_secs(1)).send().await.ok()?;
        let clock: Clock = response.json().await.ok()?;
        let received = crate::clock::now_ms();
        let local_mid = i128::from(sent) + (i128::from(received) - i128::from(sent)) / 2;
        i64::try_from(i128::from(clock.now_ms) - local_mid).ok()
    }

    pub fn status(&self) -> ClusterStatus {
        let metrics = self.metrics();
        let membership = metrics.membership_config.membership();
        let voters: Vec<NodeId> = membership.voter_ids().collect();
        let learners: Vec<NodeId> = membership.learner_ids().collect();
        let nodes = membership.nodes().map(|(id, node)| (id.to_string(), node.addr.clone())).collect();
        let role = match metrics.state {
            ServerState::Leader => "leader",
            ServerState::Candidate => "candidate",
            ServerState::Follower if voters.contains(&self.node_id) => "follower",
            ServerState::Follower | ServerState::Learner => "learner",
            ServerState::Shutdown => "shutdown",
        };
        let last_log_index = metrics.last_log_index.unwrap_or(0);
        let replication = metrics.replication.as_ref().map(|replication| {
            replication
                .iter()
                .filter(|(id, _)| **id != self.node_id)
                .map(|(id, matched)| {
                    let matched_index = matched.map(|log_id| log_id.index);
                    let lag = last_log_index.saturating_sub(matched_index.unwrap_or(0));
                    (id.to_string(), ReplicationStatus { matched_index, lag })
                })
                .collect()
        });
        ClusterStatus {
            node_id: self.node_id,
            role: role.to_string(),
            leader_id: metrics.current_leader,
            term: metrics.current_term,
            voters,
            learners,
            nodes,
            commit_index: self.store.log.committed_index().max(metrics.last_applied.map(|id| id.index)),
            applied_index: metrics.last_applied.map(|id| id.index),
            replication,
        }
    }
}

/// The outcome of one attempt to run an operation on the node believed to lead.
enum Attempt {
    /// That node is not the leader (the request may have been appended before it lost that).
    NotLeader,
    /// Nothing was sent.
    NotSent,
    Failed(Error),
}

fn from_write_error(e: typ::RaftError<typ::ClientWriteError>) -> Attempt {
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
