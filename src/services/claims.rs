//! `ClaimBatcher`: every claim this node needs at one moment, in one Raft entry.
//!
//! Segment refills and time-sequence claims used to be one Raft entry each, so the entries a
//! cluster committed grew with the tags and namespaces in use (1,000 namespaces on three nodes:
//! 3,000 entries a second). Here they queue (`batch_queue`), and one driver task per node sends
//! whatever is queued as one `Request::ClaimBatch`, the next one forming while one is
//! in flight: under load a batch holds what arrived while the previous one committed. Beside it
//! only full batches go, up to `MAX_BATCHES_IN_FLIGHT`.
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

use leafraft_state::Claim;
use leafraft_state::Request;
use leafraft_state::Response;

use crate::cluster::Cluster;
use crate::error::Error;
use crate::services::batch_queue::BatchAnswer;
use crate::services::batch_queue::BatchFuture;
use crate::services::batch_queue::BatchQueue;
use crate::services::batch_queue::Limits;
use crate::services::batch_queue::SendBatch;

/// The most claims one entry carries.
const MAX_CLAIMS: usize = 4096;

/// The most claim batches one node has in flight: past the first, only full ones go, so a wave
/// of claims (the prefetch of the next second for every namespace) is not sent one entry per
/// round trip, which at 10,000 namespaces took longer than the prefetch had.
const MAX_BATCHES_IN_FLIGHT: usize = 4;

/// The most bytes one batch's claims may take encoded: a proposed request must stay within
/// `MAX_REQUEST_BYTES`; the rest is room for the entry's own framing.
const MAX_BATCH_BYTES: usize = leafraft_state::codec::MAX_REQUEST_BYTES - 1024;

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
        self.cluster_version() >= leafraft_state::Version::CLAIM_BATCHES
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

/// The handle the ID services claim through; the driver ends when every handle is dropped.
pub struct ClaimBatcher {
    queue: BatchQueue<Claim, Response>,
    counters: Arc<ClaimCounters>,
}

impl ClaimBatcher {
    /// Starts the driver on the current tokio runtime.
    pub fn start(writer: Arc<dyn ClaimWriter>) -> ClaimBatcher {
        let counters = Arc::new(ClaimCounters::default());
        let limits =
            Limits { items: MAX_CLAIMS, bytes: MAX_BATCH_BYTES, size: encoded_len, in_flight: MAX_BATCHES_IN_FLIGHT };
        let queue = BatchQueue::start(ThroughRaft { writer, counters: counters.clone() }, limits);
        ClaimBatcher { queue, counters }
    }

    /// Commits `claim` (in a batch with whatever else is queued) and answers what its own command
    /// would have answered: `Segment`, `TimeseqRange` or `Rejected`.
    pub async fn claim(&self, claim: Claim) -> Result<Response, Error> {
        self.queue.submit(claim).await
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

/// The batcher's sender: one `ClaimBatch`, or each claim as its own command.
struct ThroughRaft {
    writer: Arc<dyn ClaimWriter>,
    counters: Arc<ClaimCounters>,
}

impl SendBatch for ThroughRaft {
    type Item = Claim;
    type Answer = Response;

    fn send(&self, claims: Vec<Claim>) -> BatchFuture<'_, Response> {
        Box::pin(self.send_claims(claims))
    }
}

impl ThroughRaft {
    async fn send_claims(&self, claims: Vec<Claim>) -> BatchAnswer<Response> {
        let count = claims.len();
        self.counters.claims.fetch_add(count as u64, Ordering::Relaxed);
        let alone = count == 1 && claims[0].request().is_some();
        if alone || !self.writer.batches_allowed() {
            return Ok(self.send_one_by_one(claims).await);
        }
        self.counters.entries.fetch_add(1, Ordering::Relaxed);
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        match self.writer.write(Request::ClaimBatch { claims }).await? {
            Response::Batch(answers) => Ok(answers.into_iter().map(Ok).collect()),
            other => Err(Error::no_leader(format!("unexpected answer to a claim batch of {count}: {other:?}"))),
        }
    }

    /// Each claim as its own command, all at once, as before batching.
    async fn send_one_by_one(&self, claims: Vec<Claim>) -> Vec<Result<Response, Error>> {
        self.counters.entries.fetch_add(claims.len() as u64, Ordering::Relaxed);
        let mut singles = tokio::task::JoinSet::new();
        for (i, claim) in claims.into_iter().enumerate() {
            let writer = Arc::clone(&self.writer);
            singles.spawn(async move {
                let answer = match claim.request() {
                    Some(request) => writer.write(request).await,
                    // Only inside a batch, which this cluster version does not allow yet.
                    None => Err(Error::new(
                        crate::error::ErrorCode::FeatureNotEnabled,
                        "a window claim needs cluster version 0.3.0",
                    )),
                };
                (i, answer)
            });
        }
        let mut answers: Vec<Result<Response, Error>> = Vec::new();
        answers.resize_with(singles.len(), || Err(Error::no_leader("the claim's task failed")));
        while let Some(done) = singles.join_next().await {
            if let Ok((i, answer)) = done {
                answers[i] = answer;
            }
        }
        answers
    }
}

/// The bytes `claim` takes in a batch (fixed-width integers: see `leafraft_state::codec`).
fn encoded_len(claim: &Claim) -> usize {
    const VARIANT: usize = 4;
    const LEN: usize = 8;
    const INT: usize = 8;
    match claim {
        Claim::Segment { tag, .. } | Claim::Monotonic { tag, .. } => VARIANT + LEN + tag.len() + INT,
        Claim::Timeseq { namespace, .. } => VARIANT + LEN + namespace.len() + 3 * INT,
        Claim::TimeseqWindow { namespace, .. } => VARIANT + LEN + namespace.len() + 4 * INT,
        Claim::TimeseqSharedWindow { namespace, blocks, .. } => {
            VARIANT + LEN + namespace.len() + 3 * INT + LEN + blocks.len() * 2 * INT
        }
    }
}

#[cfg(test)]
mod tests;
