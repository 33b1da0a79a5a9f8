//! `Engine`: the small ordered key-value interface the stores are written against, on sled 0.34.
//!
//! This is the only module that knows sled. The openraft trait impls see keyspaces, atomic
//! batches, ordered ranges and a durable `sync`, so the log could move to another engine (an
//! append-only file, redb) by rewriting this file alone.
//!
//! # Durability
//! sled 0.34's `flush` ends in `sync_file_range(2)` on Linux, which does not flush the drive's
//! write cache (sled#1452, #1351). [`Engine::sync`] therefore follows every `flush_async` with an
//! `fdatasync` of sled's data file `<dir>/db` (and of any blob file sled wrote for a value too large
//! to inline), unless the store was opened with `fsync: false`.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::ops::RangeBounds;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;
use std::time::Instant;

use crate::StoreOptions;

/// The name of sled 0.34's data file inside its directory (`Config::db_path` in sled's
/// `config.rs`). All trees of a `Db` share one write-ahead log in this file.
pub const DATA_FILE: &str = "db";

/// The folder where sled 0.34 writes values too large to inline into its log (`Config::blob_path`),
/// one file per value, written without any sync.
pub const BLOB_DIR: &str = "blobs";

/// The groups of keys the stores use; each is one sled tree. A batch is atomic within one keyspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyspace {
    /// Vote, committed log id, last purged log id, the store's format marker.
    Meta,
    /// Log entries under big-endian index keys.
    Log,
    /// Tags, last applied log id, membership and the current snapshot.
    StateMachine,
}

/// Writes applied atomically by [`Engine::write`]. Later operations on the same key win.
#[derive(Debug, Default)]
pub struct Batch {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Batch {
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: Vec<u8>) {
        self.ops.push((key.into(), Some(value)));
    }

    pub fn remove(&mut self, key: impl Into<Vec<u8>>) {
        self.ops.push((key.into(), None));
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("corrupted data: {0}")]
    Corrupt(String),
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Engine(String),
    #[error("{} is locked by another store", .0.display())]
    Locked(PathBuf),
}

impl From<sled::Error> for EngineError {
    fn from(e: sled::Error) -> Self {
        match e {
            sled::Error::Io(e) => EngineError::Io(e),
            sled::Error::Corruption { at, .. } => EngineError::Corrupt(match at {
                Some(at) => format!("sled reports corruption at {at}"),
                None => "sled reports corruption".to_string(),
            }),
            other => EngineError::Engine(format!("sled: {other}")),
        }
    }
}

pub type Entry = (Vec<u8>, Vec<u8>);

pub struct Engine {
    db: sled::Db,
    meta: sled::Tree,
    log: sled::Tree,
    state_machine: sled::Tree,
    /// Present when `fsync` is on: what [`Engine::sync`] makes power-loss safe after sled's flush.
    files: Option<Arc<DataFiles>>,
    /// The store's directory: files kept beside sled's (`snapshot_files`) live in it.
    dir: PathBuf,
    #[cfg(test)]
    pub probe: Arc<probe::SyncProbe>,
}

/// sled's data file and blob folder, kept open for `fdatasync`.
struct DataFiles {
    data: File,
    blob_dir: PathBuf,
    /// Blob files already synced: each is written once and never changes, so it needs one sync.
    synced_blobs: Mutex<HashSet<OsString>>,
}

impl Engine {
    /// Opens (or creates) the sled database in `dir`. sled holds an exclusive lock on `<dir>/db`
    /// until the last handle is dropped.
    pub fn open(dir: &Path, options: &crate::StoreOptions) -> Result<Engine, EngineError> {
        let db = open_db(dir, options)?;
        let meta = db.open_tree("meta")?;
        let log = db.open_tree("log")?;
        let state_machine = db.open_tree("state_machine")?;
        let files = if options.fsync {
            let data = File::open(dir.join(DATA_FILE))?;
            // The directory entries of `db`, `conf` and `blobs` must survive power loss too; they
            // were created (if new) by the open above.
            sync_dir(dir)?;
            Some(Arc::new(DataFiles { data, blob_dir: dir.join(BLOB_DIR), synced_blobs: Mutex::new(HashSet::new()) }))
        } else {
            None
        };
        Ok(Engine {
            db,
            meta,
            log,
            state_machine,
            files,
            dir: dir.to_path_buf(),
            #[cfg(test)]
            probe: Arc::default(),
        })
    }

    fn tree(&self, keyspace: Keyspace) -> &sled::Tree {
        match keyspace {
            Keyspace::Meta => &self.meta,
            Keyspace::Log => &self.log,
            Keyspace::StateMachine => &self.state_machine,
        }
    }

    pub fn get(&self, keyspace: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.tree(keyspace).get(key)?.map(|v| v.to_vec()))
    }

    /// Applies `batch` atomically: after a crash either all of it or none of it is there.
    /// Not durable until the next [`Engine::sync`].
    pub fn write(&self, keyspace: Keyspace, mut batch: Batch) -> Result<(), EngineError> {
        // One operation is atomic without a sled batch, and a sled batch costs more than its
        // writes: it takes sled's process-wide concurrency lock exclusively, which waits for every
        // flush in progress (sled holds that lock shared while it writes and syncs a buffer). A
        // one-entry log append behind a flush of the state machine paid ~90 µs for it.
        if batch.ops.len() == 1 {
            if let Some((key, value)) = batch.ops.pop() {
                let tree = self.tree(keyspace);
                match value {
                    Some(value) => tree.insert(key, value)?,
                    None => tree.remove(key)?,
                };
                return Ok(());
            }
        }
        let mut sled_batch = sled::Batch::default();
        for (key, value) in batch.ops {
            match value {
                Some(value) => sled_batch.insert(key, value),
                None => sled_batch.remove(key),
            }
        }
        self.tree(keyspace).apply_batch(sled_batch)?;
        Ok(())
    }

    /// Key-value pairs in `range`, in ascending key order.
    pub fn range<R>(&self, keyspace: Keyspace, range: R) -> impl Iterator<Item = Result<Entry, EngineError>> + '_
    where
        R: RangeBounds<Vec<u8>>,
    {
        self.tree(keyspace).range(range).map(|kv| {
            let (k, v) = kv?;
            Ok((k.to_vec(), v.to_vec()))
        })
    }

    /// Key-value pairs whose key starts with `prefix`, in ascending key order.
    pub fn scan_prefix(
        &self,
        keyspace: Keyspace,
        prefix: &[u8],
    ) -> impl Iterator<Item = Result<Entry, EngineError>> + '_ {
        self.tree(keyspace).scan_prefix(prefix).map(|kv| {
            let (k, v) = kv?;
            Ok((k.to_vec(), v.to_vec()))
        })
    }

    /// The pair with the largest key.
    pub fn last(&self, keyspace: Keyspace) -> Result<Option<Entry>, EngineError> {
        Ok(self.tree(keyspace).last()?.map(|(k, v)| (k.to_vec(), v.to_vec())))
    }

    /// Removes every key in `range` in one atomic batch; returns how many were removed.
    pub fn remove_range<R>(&self, keyspace: Keyspace, range: R) -> Result<usize, EngineError>
    where
        R: RangeBounds<Vec<u8>>,
    {
        let mut batch = sled::Batch::default();
        let mut removed = 0;
        for kv in self.tree(keyspace).range(range) {
            let (key, _) = kv?;
            batch.remove(key);
            removed += 1;
        }
        if removed > 0 {
            self.tree(keyspace).apply_batch(batch)?;
        }
        Ok(removed)
    }

    /// Makes every write so far durable: sled's flush, then `fdatasync` of its files, both in one
    /// task on tokio's blocking pool, so no tokio worker ever waits on the disk. (sled's own
    /// `flush_async` would run the flush on sled's thread pool first: a second thread hand-off,
    /// measured at a tenth of a claim's time on a 1-node cluster.)
    pub async fn sync(&self) -> Result<(), EngineError> {
        let Some(files) = &self.files else {
            self.db.flush_async().await?;
            return Ok(());
        };
        let db = self.db.clone();
        let files = Arc::clone(files);
        #[cfg(test)]
        let probe = Arc::clone(&self.probe);
        tokio::task::spawn_blocking(move || -> Result<(), EngineError> {
            let started = Instant::now();
            db.flush()?;
            files.data.sync_data()?;
            files.sync_new_blobs()?;
            crate::sync_latency::observe(started.elapsed());
            #[cfg(test)]
            probe.synced()?;
            Ok(())
        })
        .await
        .map_err(io::Error::other)??;
        Ok(())
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether [`Engine::sync`] ends in `fdatasync` (the store was opened with `fsync: true`).
    pub fn fsyncs(&self) -> bool {
        self.files.is_some()
    }

    /// The blocking form of [`Engine::sync`], for `open` only: opening blocks on sled's recovery
    /// anyway, and no async context is needed there.
    pub fn sync_blocking(&self) -> Result<(), EngineError> {
        self.db.flush()?;
        if let Some(files) = &self.files {
            files.data.sync_data()?;
            files.sync_new_blobs()?;
        }
        Ok(())
    }
}

impl DataFiles {
    /// Syncs blob files sled wrote since the last call (normally none: the stores keep values
    /// small, see `state_machine_store::SNAPSHOT_CHUNK_LEN`), then the folder holding them.
    fn sync_new_blobs(&self) -> io::Result<()> {
        let mut synced = self.synced_blobs.lock().unwrap_or_else(PoisonError::into_inner);
        let mut present = HashSet::new();
        let mut new = false;
        for entry in std::fs::read_dir(&self.blob_dir)? {
            let entry = entry?;
            let name = entry.file_name();
            if !synced.contains(&name) {
                match File::open(entry.path()) {
                    Ok(file) => file.sync_data()?,
                    // sled collected it between the listing and the open: nothing to make durable.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                }
                new = true;
            }
            present.insert(name);
        }
        if new {
            sync_dir(&self.blob_dir)?;
        }
        // Forget blobs sled has collected, so the set does not grow forever.
        *synced = present;
        Ok(())
    }
}

/// How long `open` waits for sled's lock on `<dir>/db`. A dropped `Db` releases the lock only when
/// sled's background I/O threads have dropped their handles too, a few milliseconds later; a lock
/// still held after this long belongs to another live store.
const LOCK_WAIT: Duration = if cfg!(test) { Duration::from_secs(1) } else { Duration::from_secs(3) };

fn open_db(dir: &Path, options: &StoreOptions) -> Result<sled::Db, EngineError> {
    let deadline = Instant::now() + LOCK_WAIT;
    let mut pause = Duration::from_millis(1);
    loop {
        match try_open_db(dir, options) {
            Err(EngineError::Io(e)) if is_lock_conflict(&e) => {
                if Instant::now() >= deadline {
                    return Err(EngineError::Locked(dir.join(DATA_FILE)));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            result => return result,
        }
    }
}

/// sled 0.34 reports a held lock as an `Other` I/O error with this text (`Config::try_lock`).
fn is_lock_conflict(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Other && e.to_string().starts_with("could not acquire lock")
}

fn try_open_db(dir: &Path, options: &StoreOptions) -> Result<sled::Db, EngineError> {
    let config = sled::Config::new().path(dir).cache_capacity(options.cache_capacity_bytes);
    // sled 0.34's recovery path has `unwrap`s on what it reads back (e.g. `pagecache/snapshot.rs`),
    // so a malformed file can panic rather than return an error. Either way the store is unusable
    // and `open` must say so, not crash.
    // `AssertUnwindSafe`: after a panic nothing of sled's state is used again, only the message.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || config.open())) {
        // sled answers `Unsupported` when its `conf` file does not parse (for instance bytes that
        // are not UTF-8): for a directory this node created, that is damage, not an old version.
        Ok(Err(sled::Error::Unsupported(detail))) => {
            Err(EngineError::Corrupt(format!("sled cannot read its configuration file: {detail}")))
        }
        Ok(result) => Ok(result?),
        Err(panic) => {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(EngineError::Corrupt(format!("sled panicked while opening: {detail}")))
        }
    }
}

/// `fsync` of a directory, so the files created in it survive power loss.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
pub mod probe;

#[cfg(test)]
mod tests;
