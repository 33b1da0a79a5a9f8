//! Monotonic tags, the fourth ID service beside segments, snowflakes and time sequences: IDs of a
//! tag in real-time order across the whole cluster, each one larger than every ID of the tag any
//! client received before it asked.
//!
//! - this file: [`Monotonic`], takes as any node asks for them: the leader's sequencer serves
//!   every one; a follower forwards them, batched ([`take_batcher`]) once the cluster version
//!   allows the batch message, one by one before; and [`LeaderTakes`], the leader's side, to
//!   which `Cluster` hands every take that reaches this node while it leads;
//! - [`sequencer`]: how the leader serves them, in real-time order ([`lane`]: how its ranges are
//!   cut; [`confirm`]: how it confirms its term for each batch);
//! - [`take_batcher`]: how a follower batches the takes it forwards.

mod confirm;
mod lane;
mod sequencer;
mod take_batcher;

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::Weak;
use std::time::Duration;

use leafraft_ids::IdRange;
use leafraft_state::NodeId;
use leafraft_state::Version;
use raft::Raft;
use tokio::time::Instant;

use crate::cluster::forward::BoxFuture;
use crate::cluster::forward::ForwardError;
use crate::cluster::forward::Forwarded;
use crate::cluster::forward::ForwardedReply;
use crate::cluster::forward::MonotonicTake;
use crate::cluster::forward::TakeServer;
use crate::cluster::forward::Vouch;
use crate::cluster::Cluster;
use crate::cluster::Peers;
use crate::error::Error;
use crate::services::batch_queue::BatchFuture;
use crate::services::batch_queue::SendBatch;
use crate::services::monotonic::confirm::Confirmer;
use crate::services::monotonic::sequencer::Refused;
use crate::services::monotonic::sequencer::Sequencer;
use crate::services::monotonic::take_batcher::BatchAnswer;
use crate::services::monotonic::take_batcher::TakeBatcher;

/// Monotonic takes as this node's clients ask for them.
pub struct Monotonic {
    cluster: Arc<Cluster>,
    /// Started on the first monotonic take this node forwards in a batch.
    take_batcher: OnceLock<TakeBatcher>,
}

impl Monotonic {
    pub fn new(cluster: Arc<Cluster>) -> Monotonic {
        Monotonic { cluster, take_batcher: OnceLock::new() }
    }

    /// `count` IDs of a monotonic tag from the leader, larger than every ID of it any client
    /// received before the call. A take is sent again after an attempt whose fate is unknown:
    /// IDs of an answer nobody receives are a gap.
    pub async fn take(&self, tag: &str, count: u64) -> Result<Vec<IdRange>, Error> {
        if self.cluster.cluster_version() < Version::CLAIM_BATCHES {
            return self.take_alone(tag, count).await;
        }
        self.take_batched(MonotonicTake { tag: tag.to_string(), count, contiguous: false }).await
    }

    /// One range of `count` consecutive IDs of a monotonic tag (`/ranges`), above every ID of it
    /// any client received before the call. 409 `FEATURE_NOT_ENABLED` below cluster version
    /// `CLAIM_BATCHES`: a follower forwards it in the batch message, which older leaders cannot
    /// decode.
    pub async fn take_range(&self, tag: &str, count: u64) -> Result<IdRange, Error> {
        self.cluster.await_cluster_version(Version::CLAIM_BATCHES, "a range of a monotonic tag").await?;
        let ranges = self.take_batched(MonotonicTake { tag: tag.to_string(), count, contiguous: true }).await?;
        match ranges.as_slice() {
            [range] if range.len() == count => Ok(*range),
            other => {
                Err(Error::no_leader(format!("the leader answered {other:?} to a take of {count} consecutive IDs")))
            }
        }
    }

    /// Before cluster version `CLAIM_BATCHES`: each take forwarded on its own, as 0.1.0 does.
    async fn take_alone(&self, tag: &str, count: u64) -> Result<Vec<IdRange>, Error> {
        let op = Forwarded::TakeMonotonic { tag: tag.to_string(), count };
        match self.cluster.on_leader(op).await? {
            ForwardedReply::Taken(ranges) => {
                Ok(ranges.into_iter().map(|(start, end)| IdRange { start, end }).collect())
            }
            other => Err(Error::no_leader(format!("unexpected reply to a take: {other:?}"))),
        }
    }

    /// The leader hands the take to its sequencer (which batches what arrives together); a
    /// follower adds it to its next forwarded batch.
    async fn take_batched(&self, take: MonotonicTake) -> Result<Vec<IdRange>, Error> {
        let cluster = &self.cluster;
        let leads = cluster.raft().metrics().borrow().current_leader == Some(cluster.node_id());
        if !leads {
            let batcher = self.take_batcher.get_or_init(|| take_batcher::start(ThroughLeader(Arc::downgrade(cluster))));
            return batcher.submit(take).await;
        }
        let mut answers = forward_batch(cluster, vec![take]).await?;
        match (answers.pop(), answers.is_empty()) {
            (Some(answer), true) => answer,
            _ => Err(Error::no_leader("the sequencer answered a take of one with another number of answers")),
        }
    }
}

/// The batcher's sender in production: the cluster's own forward to the leader, resent as a
/// take is. Weak: the batcher's task must not keep the cluster alive.
pub struct ThroughLeader(pub Weak<Cluster>);

impl SendBatch for ThroughLeader {
    type Item = MonotonicTake;
    type Answer = Vec<IdRange>;

    fn send(&self, takes: Vec<MonotonicTake>) -> BatchFuture<'_, Vec<IdRange>> {
        Box::pin(async move {
            let Some(cluster) = self.0.upgrade() else {
                return Err(Error::no_leader("this node is shutting down"));
            };
            forward_batch(&cluster, takes).await
        })
    }
}

/// Runs `takes` on the leader (this node when it leads) as one `Forwarded::TakeMonotonicVouched`:
/// the vote this node has saved is read now, after every take of the batch reached it, so the
/// leader may count it as this voter's confirmation for them (a leader ignores its own).
async fn forward_batch(cluster: &Cluster, takes: Vec<MonotonicTake>) -> BatchAnswer {
    let vouch = Vouch { voter: cluster.node_id(), saved: cluster.saved_vote() };
    let op = Forwarded::TakeMonotonicVouched { takes, vouch };
    match cluster.on_leader(op).await? {
        ForwardedReply::TakenBatch(answers) => Ok(answers
            .into_iter()
            .map(|answer| answer.map(|ranges| ranges.into_iter().map(|(start, end)| IdRange { start, end }).collect()))
            .collect()),
        other => Err(Error::no_leader(format!("unexpected reply to a batch of takes: {other:?}"))),
    }
}

/// The leader's side: every take that reaches this node while it leads (its own clients' or a
/// follower's forward) goes to its sequencer, which confirms leadership per batch.
pub struct LeaderTakes {
    node_id: NodeId,
    raft: Raft,
    /// How the sequencer's term confirmation reaches the voters (`confirm`).
    peers: Arc<dyn Peers>,
    store: storage::StateMachineStore,
    /// Bounds each claim and confirmation of the sequencer.
    timeout: Duration,
    /// Started on the first monotonic take this node serves as leader.
    sequencer: OnceLock<Sequencer>,
}

impl LeaderTakes {
    pub fn new(
        node_id: NodeId,
        raft: Raft,
        store: storage::StateMachineStore,
        peers: Arc<dyn Peers>,
        timeout: Duration,
    ) -> LeaderTakes {
        LeaderTakes { node_id, raft, peers, store, timeout, sequencer: OnceLock::new() }
    }

    fn sequencer(&self) -> &Sequencer {
        self.sequencer.get_or_init(|| {
            let confirmer = Confirmer::new(self.node_id, self.raft.clone(), Arc::clone(&self.peers));
            Sequencer::start(self.raft.clone(), self.store.clone(), confirmer, self.timeout)
        })
    }

    /// A follower's batch of takes goes to the sequencer as one unit: one confirmation for all of
    /// them (which may count the follower's `vouch`), cut in the order the follower sent them,
    /// each answered on its own.
    async fn take_batch(
        &self,
        takes: Vec<MonotonicTake>,
        vouch: Option<Vouch>,
        deadline: Instant,
    ) -> Result<ForwardedReply, ForwardError> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let taken = tokio::time::timeout(remaining, self.sequencer().take_batch(takes, vouch))
            .await
            .map_err(|_| timed_out())?;
        let answers = taken.map_err(refused)?;
        Ok(ForwardedReply::TakenBatch(
            answers
                .into_iter()
                .map(|answer| answer.map(|ranges| ranges.iter().map(|r| (r.start, r.end)).collect()))
                .collect(),
        ))
    }

    /// One take, as a leader of a cluster below `CLAIM_BATCHES` is sent them.
    async fn take(&self, tag: &str, count: u64, deadline: Instant) -> Result<ForwardedReply, ForwardError> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let taken =
            tokio::time::timeout(remaining, self.sequencer().take(tag, count)).await.map_err(|_| timed_out())?;
        let ranges = taken.map_err(refused)?;
        Ok(ForwardedReply::Taken(ranges.iter().map(|r| (r.start, r.end)).collect()))
    }
}

impl TakeServer for LeaderTakes {
    fn execute(&self, op: Forwarded, deadline: Instant) -> BoxFuture<'_, Result<ForwardedReply, ForwardError>> {
        Box::pin(async move {
            match op {
                Forwarded::TakeMonotonic { tag, count } => self.take(&tag, count, deadline).await,
                Forwarded::TakeMonotonicBatch { takes } => self.take_batch(takes, None, deadline).await,
                Forwarded::TakeMonotonicVouched { takes, vouch } => self.take_batch(takes, Some(vouch), deadline).await,
                other => Err(ForwardError::Failed(Error::no_leader(format!("not a monotonic take: {other:?}")))),
            }
        })
    }
}

fn timed_out() -> ForwardError {
    ForwardError::Failed(Error::no_leader("timed out; no ID of this request was handed out"))
}

fn refused(refused: Refused) -> ForwardError {
    match refused {
        Refused::NotLeader => ForwardError::NotLeader,
        Refused::Failed(error) => ForwardError::Failed(error),
    }
}
