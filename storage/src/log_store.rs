//! `LogStore`: openraft's log and vote storage (`RaftLogStorage` + `RaftLogReader`) on the [`Engine`].
//!
//! Durability: a vote, an append (before its callback), a truncate and the `last_purged` mark of a
//! purge are synced before they are acknowledged; see `Engine::sync` for what sync means.

use std::fmt::Debug;
use std::io;
use std::ops::Bound;
use std::ops::RangeBounds;
use std::sync::Arc;

use openraft::storage::LogFlushed;
use openraft::storage::RaftLogStorage;
use openraft::LogState;
use openraft::RaftLogReader;
use openraft::StorageIOError;
use raft::typ;
use raft::TypeConfig;
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
}

impl LogStore {
    /// Wraps `engine` after checking that every stored log value decodes, so a store written by a
    /// newer binary is refused at open rather than at the first read.
    pub(crate) fn open(engine: Arc<Engine>) -> Result<LogStore, (&'static str, Error)> {
        let store = LogStore { engine };
        store.get_meta::<typ::Vote>(keys::VOTE).map_err(|e| ("vote", e))?;
        store.get_meta::<typ::LogId>(keys::COMMITTED).map_err(|e| ("committed log id", e))?;
        store.get_meta::<typ::LogId>(keys::LAST_PURGED).map_err(|e| ("last purged log id", e))?;
        store.last_entry().map_err(|e| ("last log entry", e))?;
        store.finish_purge().map_err(|e| ("log", e))?;
        Ok(store)
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
        match self.engine.get(Keyspace::Meta, key)? {
            Some(bytes) => Ok(Some(codec::decode(&bytes)?)),
            None => Ok(None),
        }
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
        self.engine.sync().await.map_err(|e| StorageIOError::write_vote(&e))?;
        info!(term = vote.leader_id.term, node = vote.leader_id.node_id, committed = vote.committed, "vote saved");
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<typ::Vote>> {
        self.get_meta(keys::VOTE).map_err(|e| StorageIOError::read_vote(&e).into())
    }

    /// Not synced: the committed log id is a hint that lets a restarted node re-apply up to it
    /// before serving; losing the latest one only delays that.
    async fn save_committed(&mut self, committed: Option<typ::LogId>) -> Result<()> {
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
    /// sync, and reports a failed sync as an I/O error.
    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<()>
    where
        I: IntoIterator<Item = typ::Entry> + Send,
        I::IntoIter: Send,
    {
        self.write_entries(entries).map_err(|e| StorageIOError::write_logs(&e))?;
        let synced = self.engine.sync().await.map_err(|e| io::Error::other(e.to_string()));
        callback.log_io_completed(synced);
        Ok(())
    }

    /// Removes `[log_id.index, ∞)` in one atomic batch, synced: a node must never come back with
    /// entries it was told to drop behind entries it appended since.
    async fn truncate(&mut self, log_id: typ::LogId) -> Result<()> {
        let from = Bound::Included(keys::log_key(log_id.index).to_vec());
        let removed = self
            .engine
            .remove_range(Keyspace::Log, (from, Bound::Unbounded))
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.engine.sync().await.map_err(|e| StorageIOError::write_logs(&e))?;
        info!(index = log_id.index, removed, "log truncated");
        Ok(())
    }

    /// Records `last_purged` durably first, then deletes `(-∞, log_id.index]`: after a crash
    /// in between, the leftover entries lie below `last_purged` and are never read, so the log
    /// never shows a hole.
    async fn purge(&mut self, log_id: typ::LogId) -> Result<()> {
        self.put_meta(keys::LAST_PURGED, &log_id).map_err(|e| StorageIOError::write_logs(&e))?;
        self.engine.sync().await.map_err(|e| StorageIOError::write_logs(&e))?;
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
