//! leafraft's durable storage: the Raft log and vote ([`LogStore`]) and the replicated state
//! machine with its snapshots ([`StateMachineStore`]), both on one sled database per node.
//!
//! # Layout
//! - `engine`: the small key-value interface the stores use; the only module that knows sled.
//! - `log_store`: openraft's `RaftLogStorage` + `RaftLogReader`.
//! - `state_machine_store`: openraft's `RaftStateMachine` + `RaftSnapshotBuilder`.
//! - `codec`: every persisted value is `[FORMAT_VERSION] ++ leafraft_state::codec::encode(value)`.
//! - `keys`: the keys of each keyspace (big-endian `u64` log keys).
//! - [`identity`]: the member identity file (node ID and disk incarnation), created before the store.
//! - `error`: [`OpenError`] and the errors behind openraft's `StorageError`.
//!
//! A follower acknowledges an append only once it is on disk (`engine::Engine::sync`). The leader
//! writes its own log in parallel with replication (Raft's §10.2.1): its entry counts towards a
//! commit only once its own flush completed (`raft::DurableCommitNetwork`), so nothing commits
//! on a quorum that has not written it.

use std::io;
use std::path::Path;
use std::sync::Arc;

use tracing::info;

mod codec;
mod engine;
mod error;
pub mod identity;
mod keys;
mod log_store;
pub mod private;
mod snapshot_files;
mod state_machine_store;
mod sync_latency;

pub use codec::FORMAT_VERSION;
pub use error::OpenError;
pub use log_store::LogStore;
pub use state_machine_store::AppliedWatcher;
pub use state_machine_store::SnapshotBuilder;
pub use state_machine_store::StateMachineStore;
pub use sync_latency::sync_latency;
pub use sync_latency::SyncLatency;
pub use sync_latency::SYNC_BOUNDS;

use crate::engine::Batch;
use crate::engine::Engine;
use crate::engine::Keyspace;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// `fdatasync` sled's data file after every flush (power-loss safety). Off only in tests that
    /// do not need it.
    pub fsync: bool,
    /// sled's page cache size in bytes.
    pub cache_capacity_bytes: u64,
    /// This node's ID, when it runs as a member: its own appends as leader then count before
    /// their sync and replicate while it runs (`leafraft_durability`). `None`: every append is synced
    /// before it counts.
    pub local_node: Option<u64>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { fsync: true, cache_capacity_bytes: 64 * 1024 * 1024, local_node: None }
    }
}

/// One node's storage: the two openraft stores over one shared database.
pub struct Store {
    pub log: LogStore,
    pub state_machine: StateMachineStore,
    engine: Arc<Engine>,
    /// This open created the store: the directory never held one before.
    created: bool,
}

/// The bytes of a snapshot of `state`, as this store builds and installs them, for tools and
/// benches that build a state in memory and load it into a store with `install_snapshot`.
pub fn snapshot_data(state: &leafraft_state::IdStateMachine) -> Result<Vec<u8>, String> {
    codec::encode_snapshot(state).map_err(|e| e.to_string())
}

/// Opens (or creates) the store in `dir`. Only one `Store` may be open per directory: sled holds a
/// lock on it until every clone of the stores is dropped (after `Raft::shutdown`).
pub fn open(dir: &Path, options: &StoreOptions) -> Result<Store, OpenError> {
    let engine = Arc::new(Engine::open(dir, options).map_err(|e| OpenError::from_engine(dir.into(), e))?);
    let created = check_format(dir, &engine)?;
    private::restrict(dir).map_err(|source| OpenError::Io { dir: dir.into(), source })?;
    let log = LogStore::open(Arc::clone(&engine), options.local_node)
        .map_err(|(what, e)| OpenError::from_load(dir.into(), what, e))?;
    let state_machine =
        StateMachineStore::open(Arc::clone(&engine)).map_err(|(what, e)| OpenError::from_load(dir.into(), what, e))?;
    let (tags, applied, cluster_version) =
        state_machine.read(|state| (state.tags.len(), state.last_applied, state.cluster_version));
    // A member rolled back past the cluster version would meet entries it cannot decode.
    if cluster_version > leafraft_state::Version::OWN {
        return Err(OpenError::ClusterVersionAhead { dir: dir.into(), found: cluster_version });
    }
    info!(
        dir = %dir.display(),
        fsync = options.fsync,
        last_applied = applied.map(|id| id.index),
        tags,
        "store opened"
    );
    Ok(Store { log, state_machine, engine, created })
}

/// A file beside sled's, created once the new store's format marker is durable. sled 0.34 opens a
/// data file it cannot parse as an empty database; this file tells that apart from a new store.
pub(crate) const MARKER_FILE: &str = "leafraft-store";

/// Refuses a store whose format marker is from a newer binary or has vanished, and marks a new
/// store (answering `true` then). The format marker is the versioned encoding of `()`, that is the
/// version byte alone.
fn check_format(dir: &Path, engine: &Engine) -> Result<bool, OpenError> {
    let load_error = |e: error::Error| OpenError::from_load(dir.into(), "format marker", e);
    let marker = dir.join(MARKER_FILE);
    match engine.get(Keyspace::Meta, keys::FORMAT).map_err(|e| load_error(e.into()))? {
        Some(bytes) => codec::decode::<()>(&bytes).map(|()| false).map_err(|e| load_error(e.into())),
        None if marker.exists() => Err(OpenError::Corrupt {
            dir: dir.into(),
            detail: format!("sled's data is gone: the database is empty although {MARKER_FILE} shows it held a store"),
        }),
        None => {
            let mut batch = Batch::default();
            batch.put(keys::FORMAT, codec::encode(&()).map_err(|e| load_error(e.into()))?);
            engine.write(Keyspace::Meta, batch).map_err(|e| load_error(e.into()))?;
            // The marker only after the format key is durable: a crash in between leaves a store
            // that is new again, never one that looks emptied.
            engine.sync_blocking().map_err(|e| load_error(e.into()))?;
            create_marker(&marker).map_err(|source| OpenError::Io { dir: dir.into(), source })?;
            info!(dir = %dir.display(), "new store created");
            Ok(true)
        }
    }
}

fn create_marker(marker: &Path) -> io::Result<()> {
    let mut file = private::create_file(marker)?;
    io::Write::write_all(&mut file, b"leafraft store; sled 0.34 keeps the data in ./db\n")?;
    file.sync_all()?;
    // The marker's directory entry must be durable too.
    std::fs::File::open(marker.parent().unwrap_or(Path::new(".")))?.sync_all()
}

impl Store {
    /// Whether this open created the store (the directory held none): such a node has answered
    /// nothing from this directory before.
    pub fn created_at_open(&self) -> bool {
        self.created
    }

    /// The member incarnation this store records it was created for (`None`: a store from before
    /// stores recorded one, or one not bound yet).
    pub(crate) fn recorded_incarnation(&self, dir: &Path) -> Result<Option<u64>, OpenError> {
        let load_error = |e: error::Error| OpenError::from_load(dir.into(), "incarnation", e);
        let bytes = self.engine.get(Keyspace::Meta, keys::INCARNATION).map_err(|e| load_error(e.into()))?;
        bytes.map(|bytes| codec::decode::<u64>(&bytes).map_err(|e| load_error(e.into()))).transpose()
    }

    /// Records durably that this store belongs to `incarnation`.
    pub(crate) fn record_incarnation(&self, dir: &Path, incarnation: u64) -> Result<(), OpenError> {
        let load_error = |e: error::Error| OpenError::from_load(dir.into(), "incarnation", e);
        let mut batch = Batch::default();
        batch.put(keys::INCARNATION, codec::encode(&incarnation).map_err(|e| load_error(e.into()))?);
        self.engine.write(Keyspace::Meta, batch).map_err(|e| load_error(e.into()))?;
        self.engine.sync_blocking().map_err(|e| load_error(e.into()))
    }

    /// Makes everything written so far durable (flush plus `fdatasync`); used at shutdown.
    pub async fn flush(&self) -> io::Result<()> {
        self.engine.sync().await.map_err(|e| match e {
            engine::EngineError::Io(e) => e,
            other => io::Error::other(other.to_string()),
        })
    }
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
