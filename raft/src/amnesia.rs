//! Detecting a member whose log went back in time, as etcd's Raft does ("raft log corrupted,
//! truncated, or lost"): a follower whose log ends below an index it acknowledged.
//!
//! Raft assumes a voter never forgets what it acknowledged. A member whose data directory was
//! restored from a volume snapshot (or lost writes with `--fsync false`) keeps its identity, so the
//! identity check cannot tell it from itself; with a shorter log it can vote for a stale leader,
//! which then re-claims a range already handed out.
//!
//! The leader's network records, per follower, the highest log index it saw that follower match
//! under its current leadership ([`AmnesiaGuard::record`]) and sends it with every append (the
//! `x-leafraft-matched` header; the in-process test network passes it along). A follower whose
//! own log ends below it refuses the append before openraft sees it ([`AmnesiaGuard::admit`]): 409
//! `MEMBER_AMNESIAC`, one ERROR line naming both indexes, and the node stops (fail-stop) and must
//! be rebuilt. The leader counts the refusal (`leafraft_amnesiac_refusals_total`).
//!
//! Why this never refuses a healthy follower: under one leader (one `LeaderId`), a follower's log
//! never shrinks below what it matched, because that leader never sends entries that conflict with
//! its own log; only a leader of a higher term truncates it, and openraft saves that leader's vote
//! before it truncates. So the check reads the log's end first and the saved vote's term second,
//! and applies only to appends whose term is at least the saved one: an append of an older leader
//! after such a truncation is left to openraft, which refuses it with the higher vote. A recorded
//! index is dropped when the leadership changes, and only entries the follower itself appended
//! (never a heartbeat's `prev_log_id`, which a snapshot may cover) raise it.
//!
//! Why the window before the first append is closed while the leader that saw the match lives:
//! openraft's followers refuse vote requests for `election_timeout_max` after a restart (and after
//! every append they take in), while that leader sends a heartbeat every heartbeat interval, well
//! within that time; the first one carries the index and stops the member before it can vote.
//! What stays open: if that leader is gone too (its record lives only in its memory), nothing can
//! tell the member what it forgot, and it may vote for a candidate whose log is as short as its
//! own. No check on the log alone can see that (etcd's has the same limit); this is why restoring a
//! member's volume from a snapshot is never a repair (docs/operations.md).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;

use openraft::raft::AppendEntriesResponse;
use tokio::sync::watch;

use leafraft_durability::LocalDurability;
use leafraft_state::typ;
use leafraft_state::NodeId;

/// The error code of the refusal, in the API's error shape.
pub const AMNESIAC_CODE: &str = "MEMBER_AMNESIAC";

/// A follower whose log ends below an index its leader saw it match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this member's log ends at index {} but the leader saw it match index {matched}: its log went back in time \
     (a data dir restored from a snapshot, or writes lost without fsync); it must be rebuilt: run `leafraft cluster \
     remove --node-id <ID>`, empty its data dir and start it with --join",
    last.map_or_else(|| "none (empty)".to_string(), |last| last.to_string())
)]
pub struct Amnesia {
    pub matched: u64,
    pub last: Option<u64>,
}

/// Both ends of the check on one node: what it saw its followers match as leader, and whether its
/// own log covers what its leader saw it match.
#[derive(Debug)]
pub struct AmnesiaGuard {
    durability: Arc<LocalDurability>,
    /// Per follower (node ID and the incarnation the membership records for it): the leadership
    /// the index was seen under, and the index. Keyed by incarnation too, so that a member removed
    /// and rebuilt on a new disk under the same leader starts afresh.
    matched: Mutex<BTreeMap<(NodeId, u64), (typ::LeaderId, u64)>>,
    /// Appends this node sent as leader that a follower refused as amnesiac.
    refusals: AtomicU64,
    /// Set once this node found itself amnesiac: the reason it must stop.
    tripped: watch::Sender<Option<String>>,
}

impl AmnesiaGuard {
    /// The guard of the node whose log `durability` describes.
    pub fn new(durability: Arc<LocalDurability>) -> AmnesiaGuard {
        AmnesiaGuard {
            durability,
            matched: Mutex::new(BTreeMap::new()),
            refusals: AtomicU64::new(0),
            tripped: watch::Sender::new(None),
        }
    }

    /// The index to send with an append of `rpc`'s leadership to `target` (the node ID and its
    /// recorded incarnation), if this node saw it match one under that leadership.
    pub fn matched(&self, target: (NodeId, u64), rpc: &typ::AppendEntriesRequest) -> Option<u64> {
        let matched = self.matched.lock().unwrap_or_else(PoisonError::into_inner);
        matched.get(&target).filter(|(leader, _)| leader == rpc.vote.leader_id()).map(|(_, index)| *index)
    }

    /// Forgets every follower not in `members` (node ID, recorded incarnation): one removed and
    /// added again (a rebuilt member, maybe recorded with incarnation 0 both times) starts afresh.
    pub fn retain_members(&self, members: &BTreeMap<NodeId, u64>) {
        let mut matched = self.matched.lock().unwrap_or_else(PoisonError::into_inner);
        matched.retain(|(id, incarnation), _| members.get(id) == Some(incarnation));
    }

    /// Records what `target` answered to `rpc`: the last entry it appended, on success.
    pub fn record(&self, target: (NodeId, u64), rpc: &typ::AppendEntriesRequest, answer: &typ::AppendEntriesResponse) {
        let appended = match answer {
            AppendEntriesResponse::Success => rpc.entries.last().map(|entry| entry.log_id.index),
            AppendEntriesResponse::PartialSuccess(Some(log_id)) => {
                Some(log_id.index).filter(|_| rpc.entries.iter().any(|entry| entry.log_id == *log_id))
            }
            _ => None,
        };
        let Some(index) = appended else { return };
        let leader = *rpc.vote.leader_id();
        let mut matched = self.matched.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = matched.entry(target).or_insert((leader, index));
        if entry.0 != leader {
            *entry = (leader, index);
        }
        entry.1 = entry.1.max(index);
    }

    /// Counts an append a follower refused as amnesiac.
    pub fn refused(&self, target: NodeId, reason: &str) {
        self.refusals.fetch_add(1, Ordering::Relaxed);
        tracing::error!(target, "a follower refused an append as amnesiac: {reason}");
    }

    /// Appends refused as amnesiac so far (`leafraft_amnesiac_refusals_total`).
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    /// Whether this node may take in an append of `vote` whose leader saw it match `matched`. A
    /// refusal trips the guard: the node must stop ([`AmnesiaGuard::tripped`]).
    pub fn admit(&self, vote: &typ::Vote, matched: Option<u64>) -> Result<(), Amnesia> {
        let Some(matched) = matched else { return Ok(()) };
        // The log's end first, the vote second (see the module documentation).
        let last = self.durability.last_index();
        if vote.leader_id().get_term() < self.durability.vote_term() || last.is_some_and(|last| last >= matched) {
            return Ok(());
        }
        let amnesia = Amnesia { matched, last };
        tracing::error!("refusing an append and stopping: {amnesia}");
        self.tripped.send_if_modified(|tripped| {
            let first = tripped.is_none();
            tripped.get_or_insert_with(|| amnesia.to_string());
            first
        });
        Err(amnesia)
    }

    /// Turns to the reason once this node found its own log went back in time.
    pub fn tripped(&self) -> watch::Receiver<Option<String>> {
        self.tripped.subscribe()
    }
}

/// Keeps `guard`'s records to the members of `raft`'s latest membership (see
/// [`AmnesiaGuard::retain_members`]), until Raft stops.
pub async fn forget_removed_members(guard: Arc<AmnesiaGuard>, raft: crate::Raft) {
    let mut rx = raft.metrics();
    let mut seen = None;
    loop {
        let (log_id, members) = {
            let metrics = rx.borrow_and_update();
            let membership = metrics.membership_config.membership();
            let members: BTreeMap<NodeId, u64> = membership.nodes().map(|(id, node)| (*id, node.incarnation)).collect();
            (*metrics.membership_config.log_id(), members)
        };
        if seen != Some(log_id) {
            guard.retain_members(&members);
            seen = Some(log_id);
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
