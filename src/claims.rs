//! `ClaimBatcher`: every claim this node needs at one moment, in one Raft entry.
//!
//! Segment refills and time-sequence claims used to be one Raft entry each, so the entries a
//! cluster committed grew with the tags and namespaces in use (1,000 namespaces on three nodes:
//! 3,000 entries a second). Here they queue, and one driver task per node sends whatever is
//! queued as one `Request::ClaimBatch` (issue 29), one batch in flight at a time, the next one
//! forming meanwhile: under load a batch holds what arrived while the previous one committed.
//!
//! Each claim's answer is what its own command would have answered (`ClaimBatch` applies them
//! one by one and judges each on its own), so the services treat a batched answer exactly like
//! a single one. A batch sent again after an attempt whose fate is unknown only burns IDs, as a
//! single claim does (`Cluster::write` resends claims).
//!
//! Below cluster version `Version::CLAIM_BATCHES` (a member may still run a release that cannot
//! decode the batch), the queued claims go as their own commands, concurrently, as before.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use raft::Claim;
use raft::Request;
use raft::Response;
use tokio::sync::mpsc;
use tokio::sync::oneshot;

use crate::cluster::Cluster;
use crate::error::Error;

/// The most claims one entry carries.
const MAX_CLAIMS: usize = 4096;

/// The most bytes one batch's claims may take encoded: a proposed request must stay within
/// `MAX_REQUEST_BYTES`; the rest is room for the entry's own framing.
const MAX_BATCH_BYTES: usize = raft::codec::MAX_REQUEST_BYTES - 1024;

pub type WriteFuture<'a> = Pin<Box<dyn Future<Output = Result<Response, Error>> + Send + 'a>>;

/// Where claims are committed: the node's `Cluster` (through its leader), or a stand-in in the
/// tests.
pub trait ClaimWriter: Send + Sync + 'static {
    /// Proposes `request` and answers what applying it gave.
    fn write(&self, request: Request) -> WriteFuture<'_>;
    /// Whether every member decodes `ClaimBatch` (the cluster version allows it).
    fn batches_allowed(&self) -> bool;
}

impl ClaimWriter for Cluster {
    fn write(&self, request: Request) -> WriteFuture<'_> {
        Box::pin(Cluster::write(self, request))
    }

    fn batches_allowed(&self) -> bool {
        self.cluster_version() >= raft::Version::CLAIM_BATCHES
    }
}

/// How claims went out, for `/metrics` and the benchmarks.
#[derive(Debug, Default)]
pub struct ClaimCounters {
    /// Claims sent, batched or not.
    pub claims: AtomicU64,
    /// Entries proposed for them: one per batch, one per claim sent on its own.
    pub entries: AtomicU64,
    /// `ClaimBatch` entries among them (none before cluster version 0.3.0).
    pub batches: AtomicU64,
}

struct Pending {
    claim: Claim,
    reply: oneshot::Sender<Result<Response, Error>>,
}

/// The handle the ID services claim through; the driver ends when every handle is dropped.
pub struct ClaimBatcher {
    queue: mpsc::UnboundedSender<Pending>,
    counters: Arc<ClaimCounters>,
}

impl ClaimBatcher {
    /// Starts the driver on the current tokio runtime.
    pub fn start(writer: Arc<dyn ClaimWriter>) -> ClaimBatcher {
        let (queue, pending) = mpsc::unbounded_channel();
        let counters = Arc::new(ClaimCounters::default());
        tokio::spawn(drive(writer, pending, counters.clone()));
        ClaimBatcher { queue, counters }
    }

    /// Commits `claim` (in a batch with whatever else is queued) and answers what its own command
    /// would have answered: `Segment`, `TimeseqRange` or `Rejected`.
    pub async fn claim(&self, claim: Claim) -> Result<Response, Error> {
        let (reply, answer) = oneshot::channel();
        if self.queue.send(Pending { claim, reply }).is_err() {
            return Err(Error::no_leader("this node is shutting down"));
        }
        answer.await.unwrap_or_else(|_| Err(Error::no_leader("this node is shutting down")))
    }

    pub fn counters(&self) -> &ClaimCounters {
        &self.counters
    }

    /// `/metrics`' `leafraft_claim_events`: claims sent and the entries they took, by kind.
    pub fn event_counts(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("claims", self.counters.claims.load(Ordering::Relaxed)),
            ("entries", self.counters.entries.load(Ordering::Relaxed)),
            ("batches", self.counters.batches.load(Ordering::Relaxed)),
        ]
    }
}

/// Takes whatever is queued, up to one entry's worth, and sends it; one batch at a time.
async fn drive(
    writer: Arc<dyn ClaimWriter>,
    mut pending: mpsc::UnboundedReceiver<Pending>,
    counters: Arc<ClaimCounters>,
) {
    let mut carried: Option<Pending> = None;
    loop {
        let first = match carried.take() {
            Some(first) => first,
            None => match pending.recv().await {
                Some(first) => first,
                None => return,
            },
        };
        let mut bytes = encoded_len(&first.claim);
        let mut batch = vec![first];
        while batch.len() < MAX_CLAIMS {
            let Ok(next) = pending.try_recv() else { break };
            let len = encoded_len(&next.claim);
            if bytes + len > MAX_BATCH_BYTES {
                carried = Some(next);
                break;
            }
            bytes += len;
            batch.push(next);
        }
        send(&writer, batch, &counters).await;
    }
}

async fn send(writer: &Arc<dyn ClaimWriter>, batch: Vec<Pending>, counters: &ClaimCounters) {
    counters.claims.fetch_add(batch.len() as u64, Ordering::Relaxed);
    if batch.len() == 1 || !writer.batches_allowed() {
        // Each as its own command, all at once, as before batching; the next batch waits for them.
        counters.entries.fetch_add(batch.len() as u64, Ordering::Relaxed);
        let mut singles = tokio::task::JoinSet::new();
        for Pending { claim, reply } in batch {
            let writer = Arc::clone(writer);
            singles.spawn(async move {
                let _ = reply.send(writer.write(claim.request()).await);
            });
        }
        while singles.join_next().await.is_some() {}
        return;
    }
    counters.entries.fetch_add(1, Ordering::Relaxed);
    counters.batches.fetch_add(1, Ordering::Relaxed);
    let (claims, replies): (Vec<Claim>, Vec<_>) = batch.into_iter().map(|p| (p.claim, p.reply)).unzip();
    let count = claims.len();
    match writer.write(Request::ClaimBatch { claims }).await {
        Ok(Response::Batch(answers)) if answers.len() == count => {
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(Ok(answer));
            }
        }
        Ok(other) => {
            let error = Error::no_leader(format!("unexpected answer to a claim batch of {count}: {other:?}"));
            replies.into_iter().for_each(|reply| drop(reply.send(Err(error.clone()))));
        }
        Err(error) => replies.into_iter().for_each(|reply| drop(reply.send(Err(error.clone())))),
    }
}

/// The bytes `claim` takes in a batch (fixed-width integers: see `raft::codec`).
fn encoded_len(claim: &Claim) -> usize {
    const VARIANT: usize = 4;
    const LEN: usize = 8;
    const INT: usize = 8;
    match claim {
        Claim::Segment { tag, .. } | Claim::Monotonic { tag, .. } => VARIANT + LEN + tag.len() + INT,
        Claim::Timeseq { namespace, .. } => VARIANT + LEN + namespace.len() + 3 * INT,
    }
}

#[cfg(test)]
mod tests;
