//! `BatchQueue`: callers' items sent in batches, the next forming while one is in flight, and
//! each batch's answers split back to the callers in order.
//!
//! The one mechanism behind the claim batcher (`claims`: a node's claims, one `ClaimBatch` entry)
//! and a follower's monotonic takes (`monotonic::take_batcher`: one forwarded request). Under load a
//! batch holds what arrived while the previous one was answered. An item joins only a batch not
//! sent yet, so an item submitted after another's answer came back goes in a later batch, sent
//! after that answer: what real-time order of monotonic takes rests on.
//!
//! While a batch is in flight, another goes out only if it is full (`Limits::in_flight` of them
//! at most): a wave of claims larger than one entry (a node's prefetch of the next second for
//! 10,000 namespaces is ten) then takes a few round trips instead of one each, while a trickle
//! still waits and gathers into one batch.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

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

/// How large a batch may grow: items, and the bytes `size` says they add to its encoding; and
/// how many batches may be in flight at once (at least one; past the first, only full ones).
pub struct Limits<T> {
    pub items: usize,
    pub bytes: usize,
    pub size: fn(&T) -> usize,
    pub in_flight: usize,
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
/// meanwhile; sends more full batches beside it, up to `limits.in_flight`.
async fn drive<S: SendBatch>(
    mut rx: mpsc::UnboundedReceiver<Waiting<S::Item, S::Answer>>,
    sender: S,
    limits: Limits<S::Item>,
) {
    let sender = Arc::new(sender);
    let mut pending = Pending { waiting: VecDeque::new(), limits };
    let mut in_flight = JoinSet::new();
    let mut open = true;
    loop {
        while let Ok(next) = rx.try_recv() {
            pending.waiting.push_back(next);
        }
        while in_flight.len() < pending.limits.in_flight.max(1) {
            let Some(batch) = pending.next_batch(in_flight.is_empty()) else { break };
            let sender = Arc::clone(&sender);
            let (items, replies): (Vec<_>, Vec<_>) =
                batch.into_iter().map(|waiting| (waiting.item, waiting.reply)).unzip();
            in_flight.spawn(async move { split_back(sender.send(items).await, replies) });
        }
        if !open && pending.waiting.is_empty() && in_flight.is_empty() {
            return;
        }
        tokio::select! {
            next = rx.recv(), if open => match next {
                Some(next) => pending.waiting.push_back(next),
                None => open = false,
            },
            Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
        }
    }
}

/// What waits for a batch, oldest first.
struct Pending<T, A> {
    waiting: VecDeque<Waiting<T, A>>,
    limits: Limits<T>,
}

impl<T, A> Pending<T, A> {
    /// The oldest items that fit in one batch, or `None` when nothing waits or, unless `any`, when
    /// what waits does not fill a batch. Callers that gave up (their requests were cancelled) are
    /// dropped here: they need no answer.
    fn next_batch(&mut self, any: bool) -> Option<Vec<Waiting<T, A>>> {
        self.waiting.retain(|waiting| !waiting.reply.is_closed());
        let mut bytes = 0;
        let mut fits = 0;
        for waiting in &self.waiting {
            let size = (self.limits.size)(&waiting.item);
            // A lone item over the byte limit still goes, alone, as it did before batching.
            if fits == self.limits.items || (fits > 0 && bytes + size > self.limits.bytes) {
                break;
            }
            bytes += size;
            fits += 1;
        }
        let full = fits < self.waiting.len();
        if fits == 0 || !(any || full) {
            return None;
        }
        Some(self.waiting.drain(..fits).collect())
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
