//! `LogStore`: openraft's log and vote storage (`RaftLogStorage` + `RaftLogReader`) on the [`Engine`].
//!
//! Durability: a vote, an append (before its callback), a truncate and the `last_purged` mark of a
//! purge are synced before they are acknowledged; see `Engine::sync` for what sync means. The one
//! exception is the leader's own append, which counts at once and syncs while it replicates; what
//! makes that safe is in `leafraft_durability` (here: `save_committed` waits for the sync).

use std::fmt::Debug;
use std::io;
use std::ops::Bound;
use std::ops::RangeBounds;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;

use leafraft_durability::LocalDurability;
use leafraft_state::typ;
use leafraft_state::TypeConfig;
use openraft::storage::LogFlushed;
use openraft::storage::RaftLogStorage;
use openraft::LogState;
use openraft::RaftLogReader;
use openraft::StorageIOError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::info;

use crate::codec;
use crate::engine::Batch;
use crate::engine::Engine;
use crate::engine::Keyspace;
use crate::error::Error;
use crate::keys;

type Result<T, E = typ::StorageError> = std::result::Result<T, E>;

/// The Raft log and vote. Clones share one engine; a clone is also the log reader that openraft
/// hands to replication tasks.
#[derive(Clone)]
pub struct LogStore {
    engine: Arc<Engine>,
    durability: Arc<LocalDurability>,
    /// The vote last saved: whether an append is this node's own as leader depends on it.
    vote: Arc<Mutex<Option<typ::Vote>>>,
}

impl LogStore {
    /// Wraps `engine` after checking that every stored log value decodes, so a store written by a
    /// newer binary is refused at open rather than at the first read. `local_node`: see
    /// `StoreOptions::local_node`.
    pub(crate) fn open(engine: Arc<Engine>, local_node: Option<u64>) -> Result<LogStore, (&'static str, Error)> {
        let saved = get_meta::<typ::Vote>(&engine, keys::VOTE).map_err(|e| ("vote", e))?;
        let resigned = saved.and_then(|vote| resign_own_leadership(vote, local_node));
        let vote = resigned.or(saved);
        let store = LogStore {
            engine,
            durability: Arc::new(LocalDurability::new(local_node)),
            vote: Arc::new(Mutex::new(vote)),
        };
        if let Some(vote) = &vote {
            store.durability.voted(vote);
        }
        if let Some(resigned) = &resigned {
            // Synced below with the rest of what the store found, before Raft starts.
            store.put_meta(keys::VOTE, resigned).map_err(|e| ("vote", e))?;
            info!(
                term = resigned.leader_id.term,
                "this node led before it stopped: it starts as a follower and stands for election"
            );
        }
        store.get_meta::<typ::LogId>(keys::COMMITTED).map_err(|e| ("committed log id", e))?;
        let purged = store.get_meta::<typ::LogId>(keys::LAST_PURGED).map_err(|e| ("last purged log id", e))?;
        let last = store.last_entry().map_err(|e| ("last log entry", e))?;
        store.finish_purge().map_err(|e| ("log", e))?;
        // What a crash left in the file may not be on disk yet (a leader's entries written before
        // their sync): sync it now, so that everything found counts as durable from here on.
        if let Some(index) = last.map(|entry| entry.log_id.index).max(purged.map(|id| id.index)) {
            store.durability.wrote(index);
        }
        let ticket = store.durability.ticket();
        store.engine.sync_blocking().map_err(|e| ("log", e.into()))?;
        store.durability.synced(ticket);
        Ok(store)
    }

    /// What this log has on disk; the node's network waits on it before it sends a commit.
    pub fn durability(&self) -> Arc<LocalDurability> {
        Arc::clone(&self.durability)
    }

    /// Syncs everything written so far and records it durable.
    async fn sync(&self) -> Result<(), crate::engine::EngineError> {
        sync_and_record(&self.engine, &self.durability).await
    }

    /// The last committed log index openraft saved (a hint; `None` before the first commit).
    pub fn committed_index(&self) -> Option<u64> {
        self.get_meta::<typ::LogId>(keys::COMMITTED).ok().flatten().map(|id| id.index)
    }

    /// Deletes entries a crash left behind below `last_purged` (purge records it before deleting).
    fn finish_purge(&self) -> Result<(), Error> {
        if let Some(purged) = self.get_meta::<typ::LogId>(keys::LAST_PURGED)? {
            let to = Bound::Included(keys::log_key(purged.index).to_vec());
            let removed = self.engine.remove_range(Keyspace::Log, (Bound::Unbounded, to))?;
            if removed > 0 {
                info!(index = purged.index, removed, "finished an interrupted log purge");
            }
        }
        Ok(())
    }

    fn get_meta<T: DeserializeOwned>(&self, key: &[u8]) -> Result<Option<T>, Error> {
        get_meta(&self.engine, key)
    }

    fn put_meta<T: Serialize>(&self, key: &[u8], value: &T) -> Result<(), Error> {
        let mut batch = Batch::default();
        batch.put(key, codec::encode(value)?);
        Ok(self.engine.write(Keyspace::Meta, batch)?)
    }

    fn last_entry(&self) -> Result<Option<typ::Entry>, Error> {
        match self.engine.last(Keyspace::Log)? {
            Some((_, bytes)) => Ok(Some(codec::decode(&bytes)?)),
            None => Ok(None),
        }
    }

    fn entries(&self, start: u64, end: Option<u64>) -> Result<Vec<typ::Entry>, Error> {
        let from = Bound::Included(keys::log_key(start).to_vec());
        let to = match end {
            Some(end) if end <= start => return Ok(Vec::new()),
            Some(end) => Bound::Excluded(keys::log_key(end).to_vec()),
            None => Bound::Unbounded,
        };
        self.engine.range(Keyspace::Log, (from, to)).map(|kv| Ok(codec::decode(&kv?.1)?)).collect()
    }

    fn write_entries(&self, entries: impl IntoIterator<Item = typ::Entry>) -> Result<(), Error> {
        let mut batch = Batch::default();
        for entry in entries {
            batch.put(keys::log_key(entry.log_id.index), codec::encode(&entry)?);
        }
        self.engine.write(Keyspace::Log, batch)?;
        Ok(())
    }
}

/// The vote a restarted node must start with instead of `vote`, if `vote` is its own as an
/// elected leader (`None`: keep `vote`).
///
/// openraft 0.9 restores such a node as leader at once, in the same term, with no election
/// (`Engine::startup`). After a crash that is unsafe twice over: its log may have lost entries its
/// followers hold (a leader counts its own entries before they are synced), and it would write
/// other entries under those same log ids, which the followers skip as already present, so the
/// state machines part; and it reads with its saved committed index, which may lag what it had
/// committed, so a consistent read goes back in time (both in `tests/cluster/t23_power_cut.rs`).
///
/// The same vote, not committed, makes it start as a follower: a leader then has to win an
/// election in a new term, append a blank entry reads wait for, and its log ids are new. The
/// lowered vote grants nothing a committed one refuses, except this node's own leadership of
/// that term, which no one but this node can ask for.
fn resign_own_leadership(vote: typ::Vote, local_node: Option<u64>) -> Option<typ::Vote> {
    let own = local_node == Some(vote.leader_id.node_id);
    (own && vote.is_committed()).then(|| typ::Vote::new(vote.leader_id.term, vote.leader_id.node_id))
}

fn get_meta<T: DeserializeOwned>(engine: &Engine, key: &[u8]) -> Result<Option<T>, Error> {
    match engine.get(Keyspace::Meta, key)? {
        Some(bytes) => Ok(Some(codec::decode(&bytes)?)),
        None => Ok(None),
    }
}

/// Syncs everything written so far and records in `durability` what that covered.
async fn sync_and_record(engine: &Engine, durability: &LocalDurability) -> Result<(), crate::engine::EngineError> {
    let ticket = durability.ticket();
    match engine.sync().await {
        Ok(()) => {
            durability.synced(ticket);
            Ok(())
        }
        Err(e) => {
            durability.failed();
            Err(e)
        }
    }
}

/// `[start, end)` of a range of log indexes; `end == None` is unbounded.
fn index_range(range: &impl RangeBounds<u64>) -> (u64, Option<u64>) {
    let start = match range.start_bound() {
        Bound::Included(&i) => i,
        Bound::Excluded(&i) => i.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&i) => i.checked_add(1),
        Bound::Excluded(&i) => Some(i),
        Bound::Unbounded => None,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<typ::Entry>> {
        let (start, end) = index_range(&range);
        self.entries(start, end).map_err(|e| StorageIOError::read_logs(&e).into())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>> {
        let last_purged_log_id =
            self.get_meta::<typ::LogId>(keys::LAST_PURGED).map_err(|e| StorageIOError::read_logs(&e))?;
        let last = self.last_entry().map_err(|e| StorageIOError::read_logs(&e))?;
        // An empty log (everything purged) ends where the purge ended.
        let last_log_id = last.map(|entry| entry.log_id).max(last_purged_log_id);
        Ok(LogState { last_purged_log_id, last_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &typ::Vote) -> Result<()> {
        self.put_meta(keys::VOTE, vote).map_err(|e| StorageIOError::write_vote(&e))?;
        // Also makes every entry written before it durable: a leader that steps down acknowledges
        // nothing to the next one before its early-counted entries are on disk.
        self.sync().await.map_err(|e| StorageIOError::write_vote(&e))?;
        *self.vote.lock().unwrap_or_else(PoisonError::into_inner) = Some(*vote);
        self.durability.voted(vote);
        info!(term = vote.leader_id.term, node = vote.leader_id.node_id, committed = vote.committed, "vote saved");
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<typ::Vote>> {
        self.get_meta(keys::VOTE).map_err(|e| StorageIOError::read_vote(&e).into())
    }

    /// Not synced: the committed log id is a hint that lets a restarted node re-apply up to it
    /// before serving; losing the latest one only delays that.
    ///
    /// Waits until this log is on disk up to `committed`: openraft calls this right before it
    /// applies, and a leader counted its own entries before their sync (`leafraft_durability`).
    async fn save_committed(&mut self, committed: Option<typ::LogId>) -> Result<()> {
        if let Some(log_id) = &committed {
            self.durability.wait(log_id.index).await.map_err(|e| StorageIOError::write_logs(&e))?;
        }
        let result = match committed {
            Some(log_id) => self.put_meta(keys::COMMITTED, &log_id),
            None => {
                let mut batch = Batch::default();
                batch.remove(keys::COMMITTED);
                self.engine.write(Keyspace::Meta, batch).map_err(Error::from)
            }
        };
        result.map_err(|e| StorageIOError::write(&e).into())
    }

    async fn read_committed(&mut self) -> Result<Option<typ::LogId>> {
        self.get_meta(keys::COMMITTED).map_err(|e| StorageIOError::read(&e).into())
    }

    /// The entries are readable when this returns; `callback` reports them durable only after the
    /// sync, and reports a failed sync as an I/O error, except for this node's own entries as
    /// leader: those are reported at once and synced in the background (`leafraft_durability`).
    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<()>
    where
        I: IntoIterator<Item = typ::Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<typ::Entry> = entries.into_iter().collect();
        let Some(last) = entries.last().map(|entry| entry.log_id.index) else {
            callback.log_io_completed(Ok(()));
            return Ok(());
        };
        let vote = *self.vote.lock().unwrap_or_else(PoisonError::into_inner);
        let early = self.durability.is_own_leader_append(vote.as_ref(), &entries);
        self.write_entries(entries).map_err(|e| StorageIOError::write_logs(&e))?;
        self.durability.wrote(last);
        if early && !self.durability.durable().failed {
            callback.log_io_completed(Ok(()));
            let (engine, durability) = (Arc::clone(&self.engine), Arc::clone(&self.durability));
            tokio::spawn(async move {
                if let Err(e) = sync_and_record(&engine, &durability).await {
                    // `save_committed` and the network refuse to go on from here; Raft stops on
                    // the storage error of the next commit.
                    tracing::error!(error = %e, "syncing the leader's log failed");
                }
            });
            return Ok(());
        }
        let synced = self.sync().await.map_err(|e| io::Error::other(e.to_string()));
        callback.log_io_completed(synced);
        Ok(())
    }

    /// Removes `[log_id.index, ∞)` in one atomic batch, synced: a node must never come back with
    /// entries it was told to drop behind entries it appended since.
    async fn truncate(&mut self, log_id: typ::LogId) -> Result<()> {
        let from = Bound::Included(keys::log_key(log_id.index).to_vec());
        self.durability.truncated(log_id.index);
        let removed = self
            .engine
            .remove_range(Keyspace::Log, (from, Bound::Unbounded))
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.sync().await.map_err(|e| StorageIOError::write_logs(&e))?;
        info!(index = log_id.index, removed, "log truncated");
        Ok(())
    }

    /// Records `last_purged` durably first, then deletes `(-∞, log_id.index]`: after a crash
    /// in between, the leftover entries lie below `last_purged` and are never read, so the log
    /// never shows a hole.
    async fn purge(&mut self, log_id: typ::LogId) -> Result<()> {
        self.put_meta(keys::LAST_PURGED, &log_id).map_err(|e| StorageIOError::write_logs(&e))?;
        // A purge follows a snapshot, which holds (durably) everything up to it.
        self.durability.wrote(log_id.index);
        self.sync().await.map_err(|e| StorageIOError::write_logs(&e))?;
        let to = Bound::Included(keys::log_key(log_id.index).to_vec());
        let removed = self
            .engine
            .remove_range(Keyspace::Log, (Bound::Unbounded, to))
            .map_err(|e| StorageIOError::write_logs(&e))?;
        info!(index = log_id.index, removed, "log purged");
        Ok(())
    }
}

#[cfg(test)]
mod tests;
