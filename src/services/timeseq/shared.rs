//! Shared window claims: one claim renews a namespace's windows for every member, so a
//! namespace in steady use costs one claim a window, not one per member.
//!
//! The namespace's home member (`schedule::home_member`) claims, for the next window, one block
//! per member (`Claim::TimeseqSharedWindow`). Every member serves its own block from its own
//! apply of that entry (`Timeseq::on_applied`), never from the claim's answer, and the claimer
//! only records the window for its schedule. A member the claim did not reach in time claims
//! the window itself (`schedule::FALLBACK_AHEAD_MS`).
//!
//! Why no block is served twice:
//! 1. The state machine gives each block as its own window claim: no (namespace, second,
//!    sequence) is in two blocks, or in a block and any other claim (`leafraft_state::timeseq`).
//! 2. A block is served only by the member it names, only from an entry this process applied,
//!    and a process applies each entry once.
//! 3. A process serves no block of an entry at or below its fence (`fence.rs`): the leader's commit index
//!    read after the process began. Every entry an earlier process of this member (before a
//!    crash, a restart or a lost disk) applied was committed before it stopped, so before this
//!    process began: at or below the fence. An entry applied again after a restart (the state
//!    machine's last writes were not yet on disk, or the disk is new) serves nothing.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use leafraft_state::Claim;
use leafraft_state::NodeId;
use leafraft_state::Request;
use leafraft_state::Response;
use leafraft_state::SharedBlock;

use super::NamespaceHolder;
use super::Timeseq;
use crate::clock::now_ms;

/// The members a shared claim gives a block to, sorted.
pub(super) type Members = Arc<[NodeId]>;

/// How long a node waits before it asks for the fence again after the leader did not answer.
const FENCE_RETRY: Duration = Duration::from_secs(1);

/// How long a node waits before it tries a shared window claim again after one failed.
const SHARED_RETRY_MS: u64 = 1_000;

impl Timeseq {
    /// The members that share windows (every voter and learner, sorted) when this node is one of
    /// at least two; else `None`, and every window is claimed by the node that serves it.
    pub(super) fn sharing_members(&self) -> Option<Members> {
        let metrics = self.cluster.metrics();
        let members: Vec<NodeId> = metrics.membership_config.membership().nodes().map(|(id, _)| *id).collect();
        (members.len() >= 2 && members.contains(&self.cluster.node_id())).then(|| members.into())
    }

    /// Learns the fence: the leader's commit index, read once after this process began; retries
    /// until a leader answers or `stop` changes.
    pub(super) async fn learn_fence(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            match self.cluster.read_index().await {
                Ok(index) => {
                    self.fence.learn(index);
                    tracing::debug!(fence = ?index, "shared window blocks are served from entries past the fence");
                    return;
                }
                Err(error) => tracing::debug!(%error, "no read index for the shared window fence yet"),
            }
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(FENCE_RETRY) => {}
            }
        }
    }

    /// As the namespace's home: claims the window from `first_second` with a block of `block`
    /// for each of `members`, and records it for this node's schedule. The blocks, this node's
    /// too, are installed by each member's apply (`on_applied`).
    pub(super) async fn claim_shared_window(
        &self,
        ns: &NamespaceHolder,
        first_second: u64,
        seconds: u64,
        block: u64,
        members: &[NodeId],
        now: u64,
    ) {
        let me = self.cluster.node_id();
        let claim = Claim::TimeseqSharedWindow {
            namespace: ns.name.clone(),
            first_second,
            seconds,
            now_ms: now,
            blocks: members.iter().map(|&member| SharedBlock { member, count: block }).collect(),
        };
        let mine = members.iter().position(|&member| member == me);
        match self.claims.claim(claim).await {
            Ok(Response::Batch(answers)) => {
                let own = mine.and_then(|i| answers.get(i));
                if let Some(Response::TimeseqWindow { first_second: first, seconds, start, end }) = own {
                    self.counters.window_claims.fetch_add(1, Ordering::Relaxed);
                    self.counters.shared_window_claims.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(namespace = %ns.name, first, seconds, start, end, members = members.len(), "shared time-sequence window committed");
                    ns.record_window(*first, *seconds, block);
                    return;
                }
                tracing::debug!(namespace = %ns.name, first_second, ?answers, "shared time-sequence window refused");
            }
            answer => {
                tracing::debug!(namespace = %ns.name, first_second, ?answer, "shared time-sequence window failed")
            }
        }
        ns.window_retry_ms.store(now_ms().saturating_add(SHARED_RETRY_MS), Ordering::Relaxed);
    }

    /// From now on, hears of every entry this node applies (`storage`'s watcher): the only
    /// way a shared window's blocks reach the members that serve them. Holds the service weakly.
    pub fn watch_applied(self: &Arc<Self>) {
        let service = Arc::downgrade(self);
        self.cluster.store().state_machine.watch_applied(Arc::new(move |index, request, response| {
            if let Some(service) = service.upgrade() {
                service.on_applied(index, request, response);
            }
        }));
    }

    /// Installs this node's blocks of the shared windows the entry at `index` gave, if the fence
    /// admits the entry and the namespace is in use here (else they are a gap). A block smaller
    /// than what this node served in its last second (the home sized it by its own load) is
    /// topped up at once with a window claim of this node's own, sized by its own load.
    fn on_applied(self: &Arc<Self>, index: u64, request: &Request, response: &Response) {
        let (Request::ClaimBatch { claims }, Response::Batch(answers)) = (request, response) else {
            return;
        };
        let me = self.cluster.node_id();
        for (claim, answer) in claims.iter().zip(answers) {
            let (Claim::TimeseqSharedWindow { namespace, blocks, .. }, Response::Batch(block_answers)) =
                (claim, answer)
            else {
                continue;
            };
            for (block, answer) in blocks.iter().zip(block_answers) {
                let Response::TimeseqWindow { first_second, seconds, start, end } = *answer else {
                    continue;
                };
                if block.member != me {
                    continue;
                }
                if !self.fence.admits(index) {
                    self.counters.shared_blocks_fenced.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let Some(ns) = self.holders.get(namespace) else {
                    continue;
                };
                ns.holder.install_block(
                    first_second,
                    first_second.saturating_add(seconds).saturating_sub(1),
                    start,
                    end,
                );
                ns.record_window(first_second, seconds, block.count);
                self.counters.shared_blocks_installed.fetch_add(1, Ordering::Relaxed);
                ns.claimed.notify_waiters();
                if ns.last_second_ids.load(Ordering::Relaxed) > end.saturating_sub(start) {
                    self.start_window_claim(&ns, first_second, None);
                }
            }
        }
    }
}
