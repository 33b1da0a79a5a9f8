//! Monotonic takes as any node asks for them: the leader's sequencer serves every one; a
//! follower forwards them, batched ([`take_batcher`](super::take_batcher)) once the cluster
//! version allows the batch message, one by one before.

use std::sync::Arc;
use std::sync::Weak;

use leafraft_state::Version;

use crate::batch_queue::BatchFuture;
use crate::batch_queue::SendBatch;
use crate::cluster::forward::MonotonicTake;
use crate::cluster::take_batcher;
use crate::cluster::take_batcher::BatchAnswer;
use crate::cluster::Cluster;
use crate::cluster::Forwarded;
use crate::cluster::ForwardedReply;
use crate::cluster::Resend;
use crate::error::Error;
use leafraft_ids::IdRange;

impl Cluster {
    /// `count` IDs of a monotonic tag from the leader, larger than every ID of it any client
    /// received before the call. A take is sent again after an attempt whose fate is unknown:
    /// IDs of an answer nobody receives are a gap.
    pub async fn take_monotonic(self: &Arc<Self>, tag: &str, count: u64) -> Result<Vec<IdRange>, Error> {
        if self.cluster_version() < Version::CLAIM_BATCHES {
            return self.take_monotonic_alone(tag, count).await;
        }
        self.take_batched(MonotonicTake { tag: tag.to_string(), count, contiguous: false }).await
    }

    /// One range of `count` consecutive IDs of a monotonic tag (`/ranges`), above every ID of it
    /// any client received before the call. 409 `FEATURE_NOT_ENABLED` below cluster version
    /// `CLAIM_BATCHES`: a follower forwards it in the batch message, which older leaders cannot
    /// decode.
    pub async fn take_monotonic_range(self: &Arc<Self>, tag: &str, count: u64) -> Result<IdRange, Error> {
        self.await_cluster_version(Version::CLAIM_BATCHES, "a range of a monotonic tag").await?;
        let ranges = self.take_batched(MonotonicTake { tag: tag.to_string(), count, contiguous: true }).await?;
        match ranges.as_slice() {
            [range] if range.len() == count => Ok(*range),
            other => {
                Err(Error::no_leader(format!("the leader answered {other:?} to a take of {count} consecutive IDs")))
            }
        }
    }

    /// Before cluster version `CLAIM_BATCHES`: each take forwarded on its own, as 0.1.0 does.
    async fn take_monotonic_alone(&self, tag: &str, count: u64) -> Result<Vec<IdRange>, Error> {
        let op = Forwarded::TakeMonotonic { tag: tag.to_string(), count };
        match self.submit(op, Resend::Allowed, self.write_timeout).await? {
            ForwardedReply::Taken(ranges) => {
                Ok(ranges.into_iter().map(|(start, end)| IdRange { start, end }).collect())
            }
            other => Err(Error::no_leader(format!("unexpected reply to a take: {other:?}"))),
        }
    }

    /// The leader hands the take to its sequencer (which batches what arrives together); a
    /// follower adds it to its next forwarded batch.
    async fn take_batched(self: &Arc<Self>, take: MonotonicTake) -> Result<Vec<IdRange>, Error> {
        let leads = self.raft.metrics().borrow().current_leader == Some(self.node_id);
        if !leads {
            let batcher = self.take_batcher.get_or_init(|| take_batcher::start(ThroughLeader(Arc::downgrade(self))));
            return batcher.submit(take).await;
        }
        let mut answers = forward_batch(self, vec![take]).await?;
        match (answers.pop(), answers.is_empty()) {
            (Some(answer), true) => answer,
            _ => Err(Error::no_leader("the sequencer answered a take of one with another number of answers")),
        }
    }
}

/// The batcher's sender in production: the cluster's own forward to the leader, resent as a
/// take is. Weak: the cluster owns the batcher, whose task would otherwise keep it alive.
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

/// Runs `takes` on the leader (this node when it leads) as one `Forwarded::TakeMonotonicBatch`.
async fn forward_batch(cluster: &Cluster, takes: Vec<MonotonicTake>) -> BatchAnswer {
    let op = Forwarded::TakeMonotonicBatch { takes };
    match cluster.submit(op, Resend::Allowed, cluster.write_timeout).await? {
        ForwardedReply::TakenBatch(answers) => Ok(answers
            .into_iter()
            .map(|answer| answer.map(|ranges| ranges.into_iter().map(|(start, end)| IdRange { start, end }).collect()))
            .collect()),
        other => Err(Error::no_leader(format!("unexpected reply to a batch of takes: {other:?}"))),
    }
}
