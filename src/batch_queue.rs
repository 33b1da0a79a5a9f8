//! `BatchQueue`: callers' items sent in batches, one batch in flight, the next forming meanwhile,
//! and each batch's answers split back to the callers in order.
//!
//! The one mechanism behind the claim batcher (`claims`: a node's claims, one `ClaimBatch` entry)
//! and a follower's monotonic takes (`cluster::take_batcher`: one forwarded request). Under load a
//! batch holds what arrived while the previous one was answered. An item joins only a batch not
//! sent yet, so an item submitted after another's answer came back goes in a later batch, sent
//! after that answer: what real-time order of monotonic takes rests on.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::mpsc;
use tokio::sync::oneshot;

use crate::error::Error;

/// Each item's answer in the order of the items, or `Err` when the batch got no answer.
pub type BatchAnswer<A> = Result<Vec<Result<A, Error>>, Error>;

pub type BatchFuture<'a, A> = Pin<Box<dyn Future<Output = BatchAnswer<A>> + Send + 'a>>;

/// How a batch is sent: in production through Raft or the leader, a stand-in in the tests.
pub trait SendBatch: Send + Sync + 'static {
    type Item: Send + 'static;
    type Answer: Send + 'static;
    fn send(&self, items: Vec<Self::Item>) -> BatchFuture<'_, Self::Answer>;
}

/// How large a batch may grow: items, and the bytes `size` says they add to its encoding.
pub struct Limits<T> {
    pub items: usize,
    pub bytes: usize,
    pub size: fn(&T) -> usize,
}

struct Waiting<T, A> {
    item: T,
    reply: oneshot::Sender<Result<A, Error>>,
}

/// The handle callers submit through; the driver task ends when it is dropped.
pub struct BatchQueue<T, A> {
    waiting: mpsc::UnboundedSender<Waiting<T, A>>,
}

impl<T: Send + 'static, A: Send + 'static> BatchQueue<T, A> {
    /// Starts the driver on the current tokio runtime; it sends every batch through `sender`.
    pub fn start(sender: impl SendBatch<Item = T, Answer = A>, limits: Limits<T>) -> BatchQueue<T, A> {
        let (waiting, rx) = mpsc::unbounded_channel();
        tokio::spawn(drive(rx, sender, limits));
        BatchQueue { waiting }
    }

    /// `item`'s answer, from the next batch sent.
    pub async fn submit(&self, item: T) -> Result<A, Error> {
        let (reply, answer) = oneshot::channel();
        if self.waiting.send(Waiting { item, reply }).is_err() {
            return Err(Error::no_leader("this node is shutting down"));
        }
        answer.await.unwrap_or_else(|_| Err(Error::no_leader("this node is shutting down")))
    }
}

/// Sends what waits as one batch within `limits`, answers it, and goes on with what arrived
/// meanwhile.
async fn drive<S: SendBatch>(
    mut rx: mpsc::UnboundedReceiver<Waiting<S::Item, S::Answer>>,
    sender: S,
    limits: Limits<S::Item>,
) {
    let mut carried = None;
    loop {
        let first = match carried.take() {
            Some(first) => first,
            None => match rx.recv().await {
                Some(first) => first,
                None => return,
            },
        };
        let mut bytes = (limits.size)(&first.item);
        let mut batch = vec![first];
        while batch.len() < limits.items {
            let Ok(next) = rx.try_recv() else { break };
            let size = (limits.size)(&next.item);
            if bytes + size > limits.bytes {
                carried = Some(next);
                break;
            }
            bytes += size;
            batch.push(next);
        }
        // A caller that gave up (its request was cancelled) needs no answer.
        batch.retain(|waiting| !waiting.reply.is_closed());
        if batch.is_empty() {
            continue;
        }
        let (items, replies): (Vec<_>, Vec<_>) = batch.into_iter().map(|waiting| (waiting.item, waiting.reply)).unzip();
        split_back(sender.send(items).await, replies);
    }
}

/// Answers each caller with its part of the batch's answer, in order.
fn split_back<A>(answer: BatchAnswer<A>, replies: Vec<oneshot::Sender<Result<A, Error>>>) {
    let error = match answer {
        Ok(answers) if answers.len() == replies.len() => {
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(answer);
            }
            return;
        }
        Ok(answers) => {
            Error::no_leader(format!("{} answers to a batch of {}; none of them is used", answers.len(), replies.len()))
        }
        Err(error) => error,
    };
    for reply in replies {
        let _ = reply.send(Err(error.clone()));
    }
}
