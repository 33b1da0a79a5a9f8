//! A follower's batching of the monotonic takes it forwards (issue 29): concurrent takes become
//! one `Forwarded::TakeMonotonicBatch`, whose one answer is split back in arrival order. One batch
//! is in flight at a time; the next forms meanwhile, as PD's TSO proxy and tsoracle do it.
//!
//! Real-time order per take: a take answered before another take arrived was in a batch whose
//! answer had come back before that take joined a batch, and a take joins only a batch not sent
//! yet. So the later take's batch reaches the leader after the earlier one was cut, and the
//! leader's sequencer (or a newer leader, above every range of the older) cuts it higher.
//!
//! One driver task per node does the sending ([`SendBatch`]: `cluster::monotonic::ThroughLeader`
//! in production); it ends when the batcher is dropped.

use tokio::sync::mpsc;
use tokio::sync::oneshot;

use crate::cluster::forward::BoxFuture;
use crate::cluster::forward::MonotonicTake;
use crate::engine::IdRange;
use crate::error::Error;

/// The most takes in one forwarded batch.
const MAX_TAKES: usize = 1024;
/// The most bytes one batch's takes may take on the wire: the forward route accepts
/// `MAX_FORWARD_BYTES`, and a take is its tag and 17 bytes (fixed-width bincode) besides.
const MAX_BATCH_BYTES: usize = crate::cluster::forward::MAX_FORWARD_BYTES / 2;

/// Each take's IDs or error, in the order of the takes; `Err` when the batch got no answer.
pub type BatchAnswer = Result<Vec<Result<Vec<IdRange>, Error>>, Error>;

/// How a batch reaches the leader: the cluster's forward in production, a stand-in in the tests.
pub trait SendBatch: Send + Sync + 'static {
    fn send(&self, takes: Vec<MonotonicTake>) -> BoxFuture<'_, BatchAnswer>;
}

/// A take waiting for its batch to be sent and answered.
struct Waiting {
    take: MonotonicTake,
    reply: oneshot::Sender<Result<Vec<IdRange>, Error>>,
}

pub struct TakeBatcher {
    waiting: mpsc::UnboundedSender<Waiting>,
}

impl TakeBatcher {
    /// Starts the driver, which sends every batch through `sender`.
    pub fn start(sender: impl SendBatch) -> TakeBatcher {
        let (waiting, rx) = mpsc::unbounded_channel();
        tokio::spawn(drive(rx, sender));
        TakeBatcher { waiting }
    }

    /// `take`'s IDs, from the next batch sent.
    pub async fn take(&self, take: MonotonicTake) -> Result<Vec<IdRange>, Error> {
        let (reply, answer) = oneshot::channel();
        if self.waiting.send(Waiting { take, reply }).is_err() {
            return Err(Error::no_leader("this node is shutting down"));
        }
        answer.await.unwrap_or_else(|_| Err(Error::no_leader("this node is shutting down")))
    }
}

/// Sends what waits as one batch, answers it, and goes on with what arrived meanwhile.
async fn drive(mut rx: mpsc::UnboundedReceiver<Waiting>, sender: impl SendBatch) {
    let mut carried: Option<Waiting> = None;
    loop {
        let first = match carried.take() {
            Some(first) => first,
            None => match rx.recv().await {
                Some(first) => first,
                None => return,
            },
        };
        let mut bytes = wire_bytes(&first.take);
        let mut batch = vec![first];
        while batch.len() < MAX_TAKES {
            let Ok(next) = rx.try_recv() else { break };
            bytes += wire_bytes(&next.take);
            if bytes > MAX_BATCH_BYTES {
                carried = Some(next);
                break;
            }
            batch.push(next);
        }
        // A caller that gave up (its request was cancelled) needs no IDs.
        batch.retain(|waiting| !waiting.reply.is_closed());
        if batch.is_empty() {
            continue;
        }
        let (takes, replies): (Vec<MonotonicTake>, Vec<_>) =
            batch.into_iter().map(|waiting| (waiting.take, waiting.reply)).unzip();
        split_back(sender.send(takes).await, replies);
    }
}

/// Answers each waiting take with its part of the batch's answer, in order.
fn split_back(answer: BatchAnswer, replies: Vec<oneshot::Sender<Result<Vec<IdRange>, Error>>>) {
    match answer {
        Ok(answers) if answers.len() == replies.len() => {
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(answer);
            }
        }
        Ok(answers) => {
            let error = Error::no_leader(format!(
                "the leader answered {} takes to a batch of {}; none of them is served",
                answers.len(),
                replies.len()
            ));
            for reply in replies {
                let _ = reply.send(Err(error.clone()));
            }
        }
        Err(error) => {
            for reply in replies {
                let _ = reply.send(Err(error.clone()));
            }
        }
    }
}

/// An upper bound of what `take` adds to the encoded batch.
fn wire_bytes(take: &MonotonicTake) -> usize {
    take.tag.len() + 32
}

#[cfg(test)]
#[path = "take_batcher_tests.rs"]
mod tests;
