//! A follower's batching of the monotonic takes it forwards: concurrent takes become
//! one `Forwarded::TakeMonotonicBatch`, whose one answer is split back in arrival order. One batch
//! is in flight at a time; the next forms meanwhile, as PD's TSO proxy and tsoracle do it (the
//! mechanism is `batch_queue`'s).
//!
//! Real-time order per take: a take answered before another take arrived was in a batch whose
//! answer had come back before that take joined a batch, and a take joins only a batch not sent
//! yet. So the later take's batch reaches the leader after the earlier one was cut, and the
//! leader's sequencer (or a newer leader, above every range of the older) cuts it higher.
//!
//! One driver task per node does the sending (`monotonic::ThroughLeader` in production);
//! it ends when the batcher is dropped.

use crate::cluster::forward::MonotonicTake;
use crate::services::batch_queue::BatchQueue;
use crate::services::batch_queue::Limits;
use crate::services::batch_queue::SendBatch;
use leafraft_ids::IdRange;

/// The most takes in one forwarded batch.
const MAX_TAKES: usize = 1024;
/// The most bytes one batch's takes may take on the wire: the forward route accepts
/// `MAX_FORWARD_BYTES`, and a take is its tag and 17 bytes (fixed-width bincode) besides.
const MAX_BATCH_BYTES: usize = crate::cluster::forward::MAX_FORWARD_BYTES / 2;

/// Each take's IDs or error, in the order of the takes; `Err` when the batch got no answer.
pub type BatchAnswer = crate::services::batch_queue::BatchAnswer<Vec<IdRange>>;

pub type TakeBatcher = BatchQueue<MonotonicTake, Vec<IdRange>>;

/// Starts a follower's batcher, which sends every batch through `sender`.
pub fn start(sender: impl SendBatch<Item = MonotonicTake, Answer = Vec<IdRange>>) -> TakeBatcher {
    // One batch in flight: the next forms meanwhile, and a take never overtakes the batch before it.
    BatchQueue::start(sender, Limits { items: MAX_TAKES, bytes: MAX_BATCH_BYTES, size: wire_bytes, in_flight: 1 })
}

/// An upper bound of what `take` adds to the encoded batch.
fn wire_bytes(take: &MonotonicTake) -> usize {
    take.tag.len() + 32
}

#[cfg(test)]
mod tests;
