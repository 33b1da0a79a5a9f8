//! Reading what a survivor's data directory knows, without ever writing into it.
//!
//! The directory's lock is taken (shared) first, so a directory a running node holds is refused,
//! and no node can start on it while it is copied. The copy is opened as a store in a temporary
//! directory; its applied state is the starting point, and the entries of its log past
//! `last_applied` are applied too:
//! - **values** (`max_id`, window ends) are the highest any of them reached, uncommitted entries
//!   included: an entry the old cluster never committed can only have raised them, and a release
//!   it holds lowers nothing here;
//! - **the copy time** is the latest clock in the committed part only (up to the commit index the
//!   log saved). A committed command proposed at `t` sits after every command committed before
//!   `t` (a later leader's majority would have refused it), so claims the copy lacks were committed
//!   after `t`. An uncommitted entry of a deposed leader promises nothing of the kind.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::Path;

use leafraft_state::typ;
use leafraft_state::IdStateMachine;
use leafraft_state::Node;
use leafraft_state::NodeId;
use leafraft_state::Request;
use leafraft_state::TagRecord;
use openraft::storage::RaftLogStorage;
use openraft::EntryPayload;
use openraft::RaftLogReader;

use crate::offline::recover::margin;
use crate::offline::recover::margin::OldState;
use crate::offline::recover::RecoverError;

/// What a survivor's directory holds.
#[derive(Debug, Clone)]
pub struct Survivor {
    pub state: OldState,
    /// The latest clock its committed state applied (Unix ms), if any command carried one.
    pub copy_time_ms: Option<u64>,
    pub cluster_id: u64,
    /// The members its log last recorded.
    pub members: BTreeMap<NodeId, Node>,
    pub applied_index: Option<u64>,
    pub last_log_index: Option<u64>,
}

/// Reads the store in `dir` through a temporary copy; refuses a directory a process holds.
pub async fn read(dir: &Path) -> Result<Survivor, RecoverError> {
    let copy = tempfile::Builder::new()
        .prefix("leafraft-recover-")
        .tempdir()
        .map_err(|e| RecoverError(format!("cannot create a temporary directory: {e}")))?;
    let source = dir.to_path_buf();
    let target = copy.path().to_path_buf();
    let store = tokio::task::spawn_blocking(move || -> Result<storage::Store, RecoverError> {
        copy_locked(&source, &target)?;
        let options = storage::StoreOptions { fsync: false, cache_capacity_bytes: 16 << 20, local_node: None };
        storage::open(&target, &options).map_err(|e| RecoverError(format!("the survivor's store: {e}")))
    })
    .await
    .map_err(|e| RecoverError(format!("reading the survivor failed: {e}")))??;
    let survivor = read_store(&store).await;
    drop(store);
    survivor
}

/// Copies `dir` into `to` while holding a shared lock on sled's data file, which a running node
/// holds exclusively.
fn copy_locked(dir: &Path, to: &Path) -> Result<(), RecoverError> {
    let data_file = dir.join("db");
    let lock = File::open(&data_file).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => {
            RecoverError(format!("{} holds no leafraft store (no {})", dir.display(), data_file.display()))
        }
        _ => RecoverError(format!("cannot open {}: {e}", data_file.display())),
    })?;
    fs2::FileExt::try_lock_shared(&lock).map_err(|_| {
        RecoverError(format!(
            "{} is in use by a running leafraft process (its store is locked); stop that process first",
            dir.display()
        ))
    })?;
    copy_dir(dir, to).map_err(|e| RecoverError(format!("cannot copy {}: {e}", dir.display())))
}

fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

async fn read_store(store: &storage::Store) -> Result<Survivor, RecoverError> {
    let read_error = |e: typ::StorageError| RecoverError(format!("cannot read the survivor's log: {e}"));
    let state = store.state_machine.read(IdStateMachine::clone);
    let mut log = store.log.clone();
    let last_log = log.get_log_state().await.map_err(read_error)?.last_log_id;
    let from = state.last_applied.map_or(0, |id| id.index + 1);
    let entries = match last_log {
        Some(last) if last.index >= from => log.try_get_log_entries(from..=last.index).await.map_err(read_error)?,
        _ => Vec::new(),
    };
    let committed = store.log.committed_index();
    let (replayed, copy_time_ms) = replay(&state, &entries, committed);
    Ok(Survivor {
        cluster_id: replayed.cluster_id,
        members: replayed.membership.membership().nodes().map(|(id, node)| (*id, node.clone())).collect(),
        applied_index: state.last_applied.map(|id| id.index),
        last_log_index: last_log.map(|id| id.index),
        state: OldState {
            tags: replayed.tags,
            snowflake: replayed.snowflake,
            timeseq: replayed.timeseq,
            scramble_keys: replayed.scramble_keys,
        },
        copy_time_ms,
    })
}

/// Applies `entries` (those past `state`'s last applied) to a copy of `state` and answers it with
/// every `max_id` and window end at the highest it reached, and the latest clock of the part up
/// to `committed` (inclusive).
pub fn replay(state: &IdStateMachine, entries: &[typ::Entry], committed: Option<u64>) -> (IdStateMachine, Option<u64>) {
    let mut replayed = state.clone();
    let mut highest = state.clone();
    let mut copy_time_ms = margin::latest_time_ms(&state.tags, &state.snowflake);
    for entry in entries {
        replayed.apply(entry);
        let EntryPayload::Normal(request) = &entry.payload else { continue };
        // What this request may have changed: its tags (every row of an import), every tag (a
        // restore) or the workers.
        let touched: BTreeMap<&String, &TagRecord> = match request {
            Request::Restore { .. } => replayed.tags.iter().collect(),
            _ => request.tags().into_iter().filter_map(|tag| replayed.tags.get_key_value(tag)).collect(),
        };
        for (name, record) in &touched {
            let kept = highest.tags.entry((*name).clone()).or_insert_with(|| (*record).clone());
            kept.max_id = kept.max_id.max(record.max_id);
        }
        if request.tags().is_empty() {
            for (id, lease) in &replayed.snowflake.workers {
                let kept = highest.snowflake.workers.entry(*id).or_insert_with(|| lease.clone());
                kept.window_end_ms = kept.window_end_ms.max(lease.window_end_ms);
            }
        }
        if committed.is_some_and(|committed| entry.log_id.index <= committed) {
            let touched_tags = touched.values().flat_map(|record| [record.created_at_ms, record.updated_at_ms]);
            let workers = replayed.snowflake.workers.values().map(|lease| lease.last_extend_ms);
            copy_time_ms = copy_time_ms.max(touched_tags.chain(workers).filter(|&ms| ms > 0).max());
        }
    }
    highest.snowflake.layout = highest.snowflake.layout.or(replayed.snowflake.layout);
    highest.snowflake.floor_ms = highest.snowflake.floor_ms.max(replayed.snowflake.floor_ms);
    highest.membership = replayed.membership;
    highest.cluster_id = replayed.cluster_id;
    // The registry's clock and floor only rise, so the replayed one is the highest it reached.
    highest.timeseq = replayed.timeseq;
    // Keys are only ever added.
    highest.scramble_keys = replayed.scramble_keys;
    highest.last_applied = replayed.last_applied;
    (highest, copy_time_ms)
}

#[cfg(test)]
mod tests;
