//! `LocalDurability`: how much of this node's Raft log is on disk, so that a leader can send its
//! own new entries to the followers while they are still being synced locally.
//!
//! openraft 0.9 waits for the leader's own append to be durable before it replicates the entry
//! (`RaftCore::append_to_log` awaits the flush callback), so every claim paid two disk syncs in
//! series: the leader's, then a follower's. Raft only needs the leader's copy to be durable before
//! the leader *counts* it, which is what the paper's §10.2.1 parallel write relies on. The log
//! store therefore reports the leader's own appends flushed as soon as they are readable and syncs
//! them in the background; what the early report would otherwise allow is closed here:
//!
//! - openraft then counts the leader towards a quorum before its copy is durable, so a commit it
//!   computes may rest on one durable copy too few. Such a commit must not become visible until the
//!   leader's copy is durable too: the log store's `save_committed`, which openraft calls before
//!   it applies (and so before any client hears of the entry), waits for [`LocalDurability::wait`];
//!   the network wrapper `raft::DurableCommitNetwork` holds back every append whose `leader_commit` is
//!   beyond what is durable here, so no follower applies it earlier either.
//! - Only the leader's own entries take this path: a follower's (or a deposed leader's)
//!   acknowledgement is an answer to another node and is sent only after its sync, as before. A
//!   node stops being leader only through a new vote, and `save_vote` syncs everything written
//!   before it, so no entry written early is ever acknowledged to another leader before it is
//!   durable.
//!
//! If the entries were lost in a crash before their sync, nothing outside the old leader ever
//! learned that they were committed, so they may be overwritten like any uncommitted entry.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::sync::PoisonError;

use leafraft_state::typ;
use leafraft_state::NodeId;
use tokio::sync::watch;

/// What is on disk of this node's log: every entry below index `end`, or a failed sync after which
/// nothing more ever becomes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durable {
    pub end: u64,
    pub failed: bool,
}

/// A sync in progress: when it completes, everything written before it started is durable, unless
/// the log was truncated meanwhile (the epoch changed), which leaves what it covered in doubt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncTicket {
    epoch: u64,
    end: u64,
}

#[derive(Debug, Default)]
struct Written {
    /// Bumped by every truncation: a sync begun before it may cover entries that are gone.
    epoch: u64,
    /// One past the highest log index written (readable) so far.
    end: u64,
}

/// Shared by the log store (which writes and syncs) and the network (which sends commits).
#[derive(Debug)]
pub struct LocalDurability {
    /// This node's ID: its own entries as leader may replicate before they are durable. `None`
    /// turns the early path off (every append is synced before it counts, as openraft expects).
    node_id: Option<NodeId>,
    written: Mutex<Written>,
    durable: watch::Sender<Durable>,
    /// The term of the latest vote this log saved (`raft::amnesia` reads it after the log's end).
    vote_term: AtomicU64,
    /// The latest vote this log saved, set before the save returns to openraft: openraft grants a
    /// vote, or follows a leader, only after saving it, so a vote read here is one this node has
    /// not yet moved past in anything it answered (a leader's term confirmation reads it).
    saved_vote: Mutex<Option<typ::Vote>>,
}

/// The wait for durability ended with a failed sync: the node must stop (fail-stop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a sync of the Raft log failed: entries written before it are not known to be on disk")]
pub struct SyncFailed;

impl LocalDurability {
    /// Starts with an empty log; the store records what it found at open like any write and sync.
    pub fn new(node_id: Option<NodeId>) -> LocalDurability {
        LocalDurability {
            node_id,
            written: Mutex::new(Written::default()),
            durable: watch::Sender::new(Durable { end: 0, failed: false }),
            vote_term: AtomicU64::new(0),
            saved_vote: Mutex::new(None),
        }
    }

    /// Whether `entries` (non-empty) are this node's own, appended as the leader of `vote`: only
    /// then may the append count before its sync.
    pub fn is_own_leader_append(&self, vote: Option<&typ::Vote>, entries: &[typ::Entry]) -> bool {
        let (Some(node_id), Some(vote)) = (self.node_id, vote) else {
            return false;
        };
        let leader = vote.leader_id();
        vote.is_committed()
            && leader.node_id == node_id
            && !entries.is_empty()
            && entries.iter().all(|entry| &entry.log_id.leader_id == leader)
    }

    /// Records that the log now holds entries up to `index`. Call after the write, before its sync.
    pub fn wrote(&self, index: u64) {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        written.end = written.end.max(index.saturating_add(1));
    }

    /// Records a truncation of `[since, ∞)`; entries below `since` keep their state. Call before
    /// the truncation's own sync, then [`LocalDurability::synced`] with a ticket taken after it.
    pub fn truncated(&self, since: u64) {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        written.epoch += 1;
        written.end = since;
        self.durable.send_if_modified(|durable| {
            let lowered = durable.end > since;
            durable.end = durable.end.min(since);
            lowered
        });
    }

    /// Records that the log saved `vote` (at open, and after every vote it saves, before the save
    /// returns; before any truncation that vote's leader causes).
    pub fn voted(&self, vote: &typ::Vote) {
        *self.saved_vote.lock().unwrap_or_else(PoisonError::into_inner) = Some(*vote);
        self.vote_term.fetch_max(vote.leader_id.term, Ordering::SeqCst);
    }

    /// The latest vote the log saved (`None` before any).
    pub fn saved_vote(&self) -> Option<typ::Vote> {
        *self.saved_vote.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The term of the latest vote saved.
    pub fn vote_term(&self) -> u64 {
        self.vote_term.load(Ordering::SeqCst)
    }

    /// The index of the last entry the log holds (purged entries included), `None` when empty.
    pub fn last_index(&self) -> Option<u64> {
        self.written.lock().unwrap_or_else(PoisonError::into_inner).end.checked_sub(1)
    }

    /// Call right before a sync starts: what it will cover.
    pub fn ticket(&self) -> SyncTicket {
        let written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        SyncTicket { epoch: written.epoch, end: written.end }
    }

    /// Call when the sync that took `ticket` completed successfully.
    pub fn synced(&self, ticket: SyncTicket) {
        let written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        if written.epoch != ticket.epoch {
            return;
        }
        self.durable.send_if_modified(|durable| {
            let raised = ticket.end > durable.end;
            durable.end = durable.end.max(ticket.end);
            raised
        });
    }

    /// Call when a sync failed: nothing written before it may ever be counted as durable.
    pub fn failed(&self) {
        self.durable.send_modify(|durable| durable.failed = true);
    }

    pub fn durable(&self) -> Durable {
        *self.durable.borrow()
    }

    /// Waits until every entry up to `index` is on disk.
    pub async fn wait(&self, index: u64) -> Result<(), SyncFailed> {
        let mut rx = self.durable.subscribe();
        let reached = rx.wait_for(|durable| durable.failed || durable.end > index).await;
        match reached {
            Ok(durable) if !durable.failed => Ok(()),
            _ => Err(SyncFailed),
        }
    }
}

#[cfg(test)]
mod tests;
