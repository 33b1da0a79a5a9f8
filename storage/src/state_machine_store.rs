//! `StateMachineStore`: openraft's state machine and snapshot storage (`RaftStateMachine`) on the
//! [`Engine`], with an in-memory [`IdStateMachine`] kept equal to what is on disk.
//!
//! # Layout of the `StateMachine` keyspace
//! - `tag/<name>` → `TagRecord`, one key per tag, so an apply writes only the tags it changed;
//! - `last_applied` → `LogId`, `membership` → `StoredMembership`, `snowflake` → the registry,
//!   `cluster_id` → `u64` (once set), `cluster_version` → `leafraft_state::Version` (once past the baseline);
//! - the time-sequence registry (once used): `timeseq` → the whole registry until the cluster
//!   version reaches 0.3.0, then `timeseq/clock`, `timeseq/ns/<name>` and
//!   `timeseq/seq/<second><name>`, one key per claimed second (see `timeseq`); and the window
//!   blocks, `timeseq/win/<last second><record>`, in either layout;
//! - the current snapshot: `snapshot/file` → [`SnapshotFile`], naming a file of
//!   `snapshot_files`, from cluster version 0.3.0 on (`Version::SNAPSHOT_FILES`); before it,
//!   `snapshot/meta` → [`SnapshotRecord`] and `snapshot/data/<n>` → chunks of the snapshot bytes,
//!   the layout the baseline release reads.
//!
//! An apply writes its changed tags with `last_applied` (and membership) in one atomic batch, and an
//! installed snapshot replaces the whole keyspace in one batch, so a crash never leaves the data and
//! `last_applied` out of step. The record of the current snapshot is in the same batch; a snapshot
//! file is durable before a record names it, and removed only once another record is durable.

use std::collections::BTreeMap;
use std::io;
use std::io::Cursor;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::PoisonError;
use std::sync::RwLock;

use leafraft_state::typ;
use leafraft_state::IdStateMachine;
use leafraft_state::Request;
use leafraft_state::Response;
use leafraft_state::ScrambleKey;
use leafraft_state::SnowflakeRegistry;
use leafraft_state::TagRecord;
use leafraft_state::TimeseqRegistry;
use leafraft_state::TypeConfig;
use leafraft_state::Version;
use openraft::storage::RaftStateMachine;
use openraft::EntryPayload;
use openraft::RaftSnapshotBuilder;
use openraft::StorageIOError;
use serde::Deserialize;
use serde::Serialize;
use tracing::info;
use tracing::warn;

use crate::codec;
use crate::engine::Batch;
use crate::engine::Engine;
use crate::engine::EngineError;
use crate::engine::Keyspace;
use crate::error::Error;
use crate::keys;
use crate::snapshot_files::SnapshotFile;
use crate::snapshot_files::SnapshotFiles;
use timeseq::TimeseqChanges;
use timeseq::TimeseqKeys;
use timeseq::TimeseqLoader;

type Result<T, E = typ::StorageError> = std::result::Result<T, E>;

/// The largest piece of snapshot data stored under one key. sled 0.34 moves a log record over
/// about 128 KiB (a quarter of its 512 KiB segment) into a separate blob file, and a leaf node
/// holds up to 17 values, so values of 4 KiB keep every node inline in sled's data file.
pub const SNAPSHOT_CHUNK_LEN: usize = 4096;

/// The stored description of the current snapshot; its data follows in `SNAPSHOT_CHUNK_LEN` chunks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    pub meta: typ::SnapshotMeta,
    /// The local build counter when this snapshot was stored, so ids stay unique across restarts.
    pub seq: u64,
    /// Total length of the snapshot data in bytes.
    pub len: u64,
    /// Number of data chunks.
    pub chunks: u32,
}

/// The replicated state machine. Clones share one state and one engine.
#[derive(Clone)]
pub struct StateMachineStore {
    shared: Arc<Shared>,
}

struct Shared {
    engine: Arc<Engine>,
    /// Equal to the persisted state after every apply and install. A std lock: never held across
    /// an `.await`.
    state: RwLock<IdStateMachine>,
    /// The time-sequence registry is stored split (`timeseq` module). Changed only by an apply or
    /// an install, which openraft never runs concurrently, under the state's write lock.
    timeseq_split: AtomicBool,
    /// Held while the current snapshot is read or replaced: builders persist from their own tasks,
    /// concurrently with installs and reads.
    snapshot: Mutex<()>,
    next_snapshot_seq: AtomicU64,
    /// The snapshot files of the layout from `Version::SNAPSHOT_FILES` on.
    files: SnapshotFiles,
    applied_at_open: Option<typ::LogId>,
    /// Told of every request applied, after its apply is stored (`StateMachineStore::watch_applied`).
    watcher: RwLock<Option<AppliedWatcher>>,
}

/// What `StateMachineStore::watch_applied` calls with each request applied: its log index, the
/// request and its answer. Runs on Raft's apply task: it must not block.
pub type AppliedWatcher = Arc<dyn Fn(u64, &Request, &Response) + Send + Sync>;

/// Builds a snapshot of the state as it was when the builder was made, while applies go on.
pub struct SnapshotBuilder {
    shared: Arc<Shared>,
    state: Arc<IdStateMachine>,
    seq: u64,
}

impl StateMachineStore {
    /// Loads the state machine from `engine`. Errors name the value that failed to load.
    pub(crate) fn open(engine: Arc<Engine>) -> Result<StateMachineStore, (&'static str, Error)> {
        let mut last_applied = None;
        let mut membership = typ::StoredMembership::default();
        let mut tags = BTreeMap::new();
        let mut snowflake = SnowflakeRegistry::default();
        let mut cluster_id = 0;
        let mut timeseq = TimeseqLoader::default();
        let mut cluster_version = Version::BASELINE;
        let mut scramble_keys = BTreeMap::new();
        let mut seq = 0;
        let mut named_file = None;
        for kv in engine.scan_prefix(Keyspace::StateMachine, b"") {
            let (key, value) = kv.map_err(|e| ("state machine", e.into()))?;
            if key == keys::LAST_APPLIED {
                last_applied = Some(codec::decode(&value).map_err(|e| ("last applied log id", e.into()))?);
            } else if key == keys::MEMBERSHIP {
                membership = codec::decode(&value).map_err(|e| ("membership", e.into()))?;
            } else if let Some(name) = keys::tag_name(&key) {
                let record: TagRecord = codec::decode(&value).map_err(|e| ("tag record", e.into()))?;
                tags.insert(name.to_string(), record);
            } else if let Some(name) = keys::scramble_tag(&key) {
                let key: ScrambleKey = codec::decode(&value).map_err(|e| ("scramble key", e.into()))?;
                scramble_keys.insert(name.to_string(), key);
            } else if key == keys::SNOWFLAKE {
                snowflake = codec::decode(&value).map_err(|e| ("snowflake registry", e.into()))?;
            } else if key == keys::CLUSTER_ID {
                cluster_id = codec::decode(&value).map_err(|e| ("cluster id", e.into()))?;
            } else if timeseq.load(&key, &value)? {
                // One of the time-sequence registry's keys, in either layout.
            } else if key == keys::CLUSTER_VERSION {
                cluster_version = codec::decode(&value).map_err(|e| ("cluster version", e.into()))?;
            } else if key == keys::SNAPSHOT_META {
                let record: SnapshotRecord = codec::decode(&value).map_err(|e| ("snapshot meta", e.into()))?;
                seq = seq.max(record.seq + 1);
            } else if key == keys::SNAPSHOT_FILE {
                let record: SnapshotFile = codec::decode(&value).map_err(|e| ("snapshot file record", e.into()))?;
                seq = seq.max(record.seq + 1);
                named_file = Some(record.seq);
            } else if !key.starts_with(keys::SNAPSHOT_DATA_PREFIX) {
                warn!(key = %String::from_utf8_lossy(&key), "unknown key in the state machine keyspace, ignored");
            }
        }
        let (timeseq, timeseq_split) = timeseq.finish(cluster_version)?;
        let files = SnapshotFiles::open(engine.dir(), engine.fsyncs())
            .and_then(|files| files.remove_unnamed(named_file).map(|()| files))
            .map_err(|e| ("snapshot folder", Error::Engine(e.into())))?;
        // A struct literal on purpose: a new field in `IdStateMachine` must be loaded here.
        let state = IdStateMachine {
            last_applied,
            membership,
            tags,
            snowflake,
            cluster_id,
            timeseq,
            cluster_version,
            scramble_keys,
        };
        Ok(StateMachineStore {
            shared: Arc::new(Shared {
                engine,
                state: RwLock::new(state),
                timeseq_split: AtomicBool::new(timeseq_split),
                snapshot: Mutex::new(()),
                next_snapshot_seq: AtomicU64::new(seq),
                files,
                applied_at_open: last_applied,
                watcher: RwLock::new(None),
            }),
        })
    }

    /// From now on, tells `watcher` of every request applied (replacing the watcher before, if
    /// any): what a member serves from an entry applied rather than from its answer (a shared
    /// window's block) learns of it here.
    pub fn watch_applied(&self, watcher: AppliedWatcher) {
        *self.shared.watcher.write().unwrap_or_else(PoisonError::into_inner) = Some(watcher);
    }

    /// Runs `f` on the current applied state.
    pub fn read<R>(&self, f: impl FnOnce(&IdStateMachine) -> R) -> R {
        f(&self.shared.state.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The last applied log id found on disk when the store was opened (None for a fresh store).
    pub fn applied_at_open(&self) -> Option<typ::LogId> {
        self.shared.applied_at_open
    }

    /// Applies `entries` in memory and writes what changed in one batch; one response per entry.
    fn apply_entries(&self, entries: impl IntoIterator<Item = typ::Entry>) -> Result<Vec<Response>, Error> {
        // Collected so that what each entry touched can be borrowed from it until the write.
        let entries: Vec<typ::Entry> = entries.into_iter().collect();
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let mut responses = Vec::with_capacity(entries.len());
        let mut batch = Batch::default();
        let switched_to_split;
        let cluster_version;
        {
            let mut state = self.shared.state.write().unwrap_or_else(PoisonError::into_inner);
            let mut changes = Changes::before(&state);
            for entry in &entries {
                changes.note(&state, &entry.payload);
                responses.push(state.apply(entry));
            }
            changes.write_tags(&state, &mut batch)?;
            let split = self.shared.timeseq_split.load(Ordering::SeqCst);
            switched_to_split = !split && timeseq::split_at(state.cluster_version);
            if switched_to_split {
                batch.remove(keys::TIMESEQ);
                // Window blocks are written in either layout; `put_split` writes those kept.
                for kv in self.shared.engine.scan_prefix(Keyspace::StateMachine, keys::TIMESEQ_WINDOW_PREFIX) {
                    batch.remove(kv?.0);
                }
                timeseq::put_split(&state.timeseq, &mut batch)?;
            } else {
                // The index of the batch's last entry numbers its record of windows.
                let record = state.last_applied.map_or(0, |id| id.index);
                changes.timeseq.write(&state.timeseq, split, record, &self.shared.engine, &mut batch)?;
            }
            if let Some(last_applied) = &state.last_applied {
                batch.put(keys::LAST_APPLIED, codec::encode(last_applied)?);
            }
            cluster_version = state.cluster_version;
        }
        if !batch.is_empty() {
            self.shared.engine.write(Keyspace::StateMachine, batch)?;
        }
        if switched_to_split {
            self.shared.timeseq_split.store(true, Ordering::SeqCst);
            info!(%cluster_version, "time-sequence registry now stored one key per namespace and claimed second");
        }
        let watcher = self.shared.watcher.read().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some(watcher) = watcher {
            for (entry, response) in entries.iter().zip(&responses) {
                if let EntryPayload::Normal(request) = &entry.payload {
                    watcher(entry.log_id.index, request, response);
                }
            }
        }
        Ok(responses)
    }

    /// Replaces the whole state-machine keyspace with the state in `data` and the snapshot it
    /// came from. Decoding and storing a large snapshot takes seconds of CPU (92 MiB: 3 to 6 s),
    /// so a blocking thread does it while the runtime's workers go on answering.
    async fn install(&self, meta: &typ::SnapshotMeta, data: Vec<u8>) -> Result<(), Error> {
        let (store, meta) = (self.clone(), meta.clone());
        let replaced = tokio::task::spawn_blocking(move || store.install_blocking(&meta, &data))
            .await
            .map_err(|e| Error::Engine(io::Error::other(e).into()))??;
        self.shared.engine.sync().await?;
        if let Some(seq) = replaced {
            self.shared.remove_snapshot_file(seq);
        }
        Ok(())
    }

    /// What `install` does before its sync; answers the file of the snapshot it replaced, if any.
    fn install_blocking(&self, meta: &typ::SnapshotMeta, data: &[u8]) -> Result<Option<u64>, Error> {
        let state = codec::decode_snapshot(data)?;
        if state.cluster_version > Version::OWN {
            return Err(Error::Invalid(format!(
                "snapshot {meta} is of a cluster at version {}, newer than this binary (leafraft {}): run leafraft {} \
                 or newer on this node",
                state.cluster_version,
                Version::OWN,
                state.cluster_version
            )));
        }
        if state.last_applied != meta.last_log_id || state.membership != meta.last_membership {
            return Err(Error::Invalid(format!(
                "snapshot {} does not match its data: data applied up to {:?} with membership {:?}",
                meta, state.last_applied, state.membership
            )));
        }
        let seq = self.shared.next_snapshot_seq.fetch_add(1, Ordering::SeqCst);
        // Durable before the batch below names it.
        let file = if snapshot_in_file(state.cluster_version) {
            Some(self.shared.files.write(meta.clone(), seq, data).map_err(EngineError::from)?)
        } else {
            None
        };
        let stored = (|| -> Result<Option<u64>, Error> {
            let _guard = self.shared.lock_snapshot();
            let replaced = self.shared.stored_snapshot()?.and_then(|stored| stored.file);
            let mut batch = Batch::default();
            for kv in self.shared.engine.scan_prefix(Keyspace::StateMachine, b"") {
                batch.remove(kv?.0);
            }
            for (name, record) in &state.tags {
                batch.put(keys::tag_key(name), codec::encode(record)?);
            }
            for (name, key) in &state.scramble_keys {
                batch.put(keys::scramble_key(name), codec::encode(key)?);
            }
            batch.put(keys::MEMBERSHIP, codec::encode(&state.membership)?);
            batch.put(keys::SNOWFLAKE, codec::encode(&state.snowflake)?);
            let timeseq_split = timeseq::split_at(state.cluster_version);
            if timeseq_split {
                timeseq::put_split(&state.timeseq, &mut batch)?;
            } else {
                if state.timeseq != TimeseqRegistry::default() {
                    batch.put(keys::TIMESEQ, codec::encode(&state.timeseq)?);
                }
                timeseq::put_windows(&state.timeseq, &mut batch)?;
            }
            if state.cluster_id != 0 {
                batch.put(keys::CLUSTER_ID, codec::encode(&state.cluster_id)?);
            }
            if state.cluster_version != Version::BASELINE {
                batch.put(keys::CLUSTER_VERSION, codec::encode(&state.cluster_version)?);
            }
            if let Some(last_applied) = &state.last_applied {
                batch.put(keys::LAST_APPLIED, codec::encode(last_applied)?);
            }
            match &file {
                Some(file) => batch.put(keys::SNAPSHOT_FILE, codec::encode(file)?),
                None => put_snapshot(&mut batch, &SnapshotRecord::new(meta.clone(), seq, data)?, data)?,
            }
            self.shared.engine.write(Keyspace::StateMachine, batch)?;
            let mut current = self.shared.state.write().unwrap_or_else(PoisonError::into_inner);
            *current = state;
            self.shared.timeseq_split.store(timeseq_split, Ordering::SeqCst);
            Ok(replaced)
        })();
        if stored.is_err() && file.is_some() {
            self.shared.remove_snapshot_file(seq);
        }
        stored
    }
}

/// What the entries of one apply may have changed, with the values before them where a value
/// is compared, so that only what changed is written.
struct Changes<'a> {
    /// Each touched tag's record before the first entry that touched it.
    tags: BTreeMap<&'a str, Option<TagRecord>>,
    /// A restore may write every tag; it applies only to a state without tags.
    restored: bool,
    membership: bool,
    snowflake_before: Option<SnowflakeRegistry>,
    cluster_id_before: u64,
    cluster_version_before: Version,
    timeseq: TimeseqChanges<'a>,
    /// The scrambled tags' keys before the first request that may add one (they are few, and
    /// only ever added): every key not in it is written.
    scramble_before: Option<BTreeMap<String, ScrambleKey>>,
}

impl<'a> Changes<'a> {
    fn before(state: &IdStateMachine) -> Changes<'a> {
        Changes {
            tags: BTreeMap::new(),
            restored: false,
            membership: false,
            snowflake_before: None,
            cluster_id_before: state.cluster_id,
            cluster_version_before: state.cluster_version,
            timeseq: TimeseqChanges::before(&state.timeseq),
            scramble_before: None,
        }
    }

    /// Notes what `payload` may change, before it is applied to `state`.
    fn note(&mut self, state: &IdStateMachine, payload: &'a EntryPayload<TypeConfig>) {
        let request = match payload {
            EntryPayload::Normal(request) => request,
            EntryPayload::Membership(_) => {
                self.membership = true;
                return;
            }
            EntryPayload::Blank => return,
        };
        let Touched { tags, snowflake, restore, timeseq, scramble } = what_changes(request);
        if scramble && self.scramble_before.is_none() {
            self.scramble_before = Some(state.scramble_keys.clone());
        }
        for tag in tags {
            self.tags.entry(tag).or_insert_with(|| state.tags.get(tag).cloned());
        }
        if (snowflake || restore) && self.snowflake_before.is_none() {
            self.snowflake_before = Some(state.snowflake.clone());
        }
        self.restored |= restore;
        if let Some(keys) = timeseq {
            self.timeseq.note(keys);
        }
    }

    /// Adds every changed value but the time-sequence registry to `batch`.
    fn write_tags(&self, state: &IdStateMachine, batch: &mut Batch) -> Result<(), Error> {
        if self.restored {
            // Every tag as it is now; no request removes a tag, so none is left to delete.
            for (tag, record) in &state.tags {
                batch.put(keys::tag_key(tag), codec::encode(record)?);
            }
        } else {
            for (&tag, before) in &self.tags {
                let after = state.tags.get(tag);
                if after == before.as_ref() {
                    continue;
                }
                match after {
                    Some(record) => batch.put(keys::tag_key(tag), codec::encode(record)?),
                    None => batch.remove(keys::tag_key(tag)),
                }
            }
        }
        if self.membership {
            batch.put(keys::MEMBERSHIP, codec::encode(&state.membership)?);
        }
        if self.snowflake_before.as_ref().is_some_and(|before| *before != state.snowflake) {
            batch.put(keys::SNOWFLAKE, codec::encode(&state.snowflake)?);
        }
        if let Some(before) = &self.scramble_before {
            // Keys are only ever added, never changed or removed.
            for (name, key) in &state.scramble_keys {
                if !before.contains_key(name) {
                    batch.put(keys::scramble_key(name), codec::encode(key)?);
                }
            }
        }
        if state.cluster_id != self.cluster_id_before {
            batch.put(keys::CLUSTER_ID, codec::encode(&state.cluster_id)?);
        }
        if state.cluster_version != self.cluster_version_before {
            batch.put(keys::CLUSTER_VERSION, codec::encode(&state.cluster_version)?);
        }
        Ok(())
    }
}

/// The persisted values a request may change. The cluster ID and version are compared before
/// and after every apply (each a `u64`-sized value), so no request names them.
#[derive(Default)]
struct Touched<'a> {
    tags: Vec<&'a str>,
    /// The snowflake registry (one value).
    snowflake: bool,
    /// Any tag and the snowflake registry (a restore).
    restore: bool,
    /// The time-sequence keys it names.
    timeseq: Option<TimeseqKeys<'a>>,
    /// The scrambled tags' keys (a few at most: they are written when added).
    scramble: bool,
}

/// What `request` may change. No wildcard on purpose: a new request kind must decide here what
/// it changes, or its effect would not be persisted.
fn what_changes(request: &Request) -> Touched<'_> {
    match request {
        Request::CreateTag { tag, .. }
        | Request::UpdateTag { tag, .. }
        | Request::ClaimSegment { tag, .. }
        | Request::ReleaseSegment { tag, .. }
        | Request::CreateTagInMode { tag, .. }
        | Request::SetTagMode { tag, .. }
        | Request::ClaimMonotonic { tag, .. } => Touched { tags: vec![tag], ..Touched::default() },
        Request::SetSnowflakeLayout { .. }
        | Request::AcquireWorker { .. }
        | Request::ExtendWorker { .. }
        | Request::ReleaseWorker { .. } => Touched { snowflake: true, ..Touched::default() },
        Request::Restore { .. } => Touched { restore: true, ..Touched::default() },
        Request::ImportTags { rows, .. } => {
            Touched { tags: rows.iter().map(|row| row.tag.as_str()).collect(), ..Touched::default() }
        }
        Request::CreateNamespace { namespace, .. } => {
            Touched { timeseq: Some(TimeseqKeys::namespaces([namespace.as_str()])), ..Touched::default() }
        }
        Request::ClaimTimeseq { namespace, second, .. } => {
            Touched { timeseq: Some(TimeseqKeys::second(*second, namespace)), ..Touched::default() }
        }
        Request::RestoreTimeseq { namespaces, .. } => Touched {
            timeseq: Some(TimeseqKeys::namespaces(namespaces.keys().map(String::as_str))),
            ..Touched::default()
        },
        Request::SetClusterId { .. } | Request::SetClusterVersion { .. } | Request::Noop => Touched::default(),
        Request::ReleaseBatch { releases } => {
            Touched { tags: releases.iter().map(|release| release.tag.as_str()).collect(), ..Touched::default() }
        }
        Request::CreateScrambledTag { tag, .. } => Touched { tags: vec![tag], scramble: true, ..Touched::default() },
        Request::RestoreScrambleKeys { .. } => Touched { scramble: true, ..Touched::default() },
        Request::ClaimBatch { claims } => {
            let timeseq = TimeseqKeys::claims(claims);
            Touched {
                tags: claims.iter().filter_map(leafraft_state::Claim::tag).collect(),
                timeseq: (!timeseq.is_empty()).then_some(timeseq),
                ..Touched::default()
            }
        }
    }
}

impl SnapshotRecord {
    fn new(meta: typ::SnapshotMeta, seq: u64, data: &[u8]) -> Result<SnapshotRecord, Error> {
        let chunks = u32::try_from(data.len().div_ceil(SNAPSHOT_CHUNK_LEN))
            .map_err(|_| Error::Invalid(format!("snapshot of {} bytes is too large", data.len())))?;
        Ok(SnapshotRecord { meta, seq, len: data.len() as u64, chunks })
    }
}

/// Whether a snapshot of a state at `cluster_version` keeps its data in a file
/// (`Version::SNAPSHOT_FILES`), else as chunks in the keyspace.
fn snapshot_in_file(cluster_version: Version) -> bool {
    cluster_version >= Version::SNAPSHOT_FILES
}

/// The current snapshot as its stored record describes it.
struct StoredSnapshot {
    last_log_id: Option<typ::LogId>,
    /// The seq naming its file, when its data is one (else chunks).
    file: Option<u64>,
}

/// What storing a built snapshot gave.
struct BuiltSnapshot {
    meta: typ::SnapshotMeta,
    data: Vec<u8>,
    /// False when a newer snapshot was stored first.
    stored: bool,
    /// The file of the snapshot it replaced, removed once the store is synced.
    replaced_file: Option<u64>,
}

/// Adds the snapshot's meta and chunks to `batch`; the caller has removed the previous chunks.
fn put_snapshot(batch: &mut Batch, record: &SnapshotRecord, data: &[u8]) -> Result<(), Error> {
    for (n, chunk) in (0u32..).zip(data.chunks(SNAPSHOT_CHUNK_LEN)) {
        batch.put(keys::snapshot_chunk_key(n), chunk.to_vec());
    }
    batch.put(keys::SNAPSHOT_META, codec::encode(record)?);
    Ok(())
}

impl Shared {
    fn lock_snapshot(&self) -> MutexGuard<'_, ()> {
        self.snapshot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current snapshot's meta and data, from the layout that holds it.
    fn read_snapshot(&self) -> Result<Option<(typ::SnapshotMeta, Vec<u8>)>, Error> {
        let _guard = self.lock_snapshot();
        if let Some(bytes) = self.engine.get(Keyspace::StateMachine, keys::SNAPSHOT_FILE)? {
            let record: SnapshotFile = codec::decode(&bytes)?;
            let data = self.files.read(&record)?;
            return Ok(Some((record.meta, data)));
        }
        let Some(bytes) = self.engine.get(Keyspace::StateMachine, keys::SNAPSHOT_META)? else {
            return Ok(None);
        };
        let record: SnapshotRecord = codec::decode(&bytes)?;
        let mut data = Vec::new();
        let mut chunks = 0u32;
        for kv in self.engine.scan_prefix(Keyspace::StateMachine, keys::SNAPSHOT_DATA_PREFIX) {
            let (key, chunk) = kv?;
            if key != keys::snapshot_chunk_key(chunks) {
                return Err(Error::Invalid(format!("snapshot {}: chunk {chunks} is missing", record.meta)));
            }
            data.extend_from_slice(&chunk);
            chunks += 1;
        }
        if chunks != record.chunks || data.len() as u64 != record.len {
            return Err(Error::Invalid(format!(
                "snapshot {}: found {chunks} chunks and {} bytes, expected {} and {}",
                record.meta,
                data.len(),
                record.chunks,
                record.len
            )));
        }
        Ok(Some((record.meta, data)))
    }

    /// What the record of the current snapshot says, in either layout.
    fn stored_snapshot(&self) -> Result<Option<StoredSnapshot>, Error> {
        if let Some(bytes) = self.engine.get(Keyspace::StateMachine, keys::SNAPSHOT_FILE)? {
            let record: SnapshotFile = codec::decode(&bytes)?;
            return Ok(Some(StoredSnapshot { last_log_id: record.meta.last_log_id, file: Some(record.seq) }));
        }
        let Some(bytes) = self.engine.get(Keyspace::StateMachine, keys::SNAPSHOT_META)? else {
            return Ok(None);
        };
        let record: SnapshotRecord = codec::decode(&bytes)?;
        Ok(Some(StoredSnapshot { last_log_id: record.meta.last_log_id, file: None }))
    }

    /// Removes the file of snapshot `seq`: one a newer record replaced (once that record is
    /// synced, so a crash before leaves the old record naming a file still there), or one no
    /// record names (a build that lost to a newer snapshot, a store that failed).
    fn remove_snapshot_file(&self, seq: u64) {
        if let Err(error) = self.files.remove(seq) {
            warn!(seq, %error, "cannot remove a snapshot file; the next open removes it");
        }
    }

    /// Encodes `state` as snapshot number `seq` and stores it unless a newer one is stored; not
    /// yet synced. Blocking. Answers also whether it was stored and the file it replaced, to
    /// remove once synced.
    fn store_snapshot_of(&self, state: &IdStateMachine, seq: u64) -> Result<BuiltSnapshot, Error> {
        let data = codec::encode_snapshot(state)?;
        let snapshot_id = match &state.last_applied {
            Some(log_id) => format!("{}-{}-{}", log_id.leader_id.term, log_id.index, seq),
            None => format!("none-{seq}"),
        };
        let meta = typ::SnapshotMeta {
            last_log_id: state.last_applied,
            last_membership: state.membership.clone(),
            snapshot_id,
        };
        // The file is written outside the lock (the long part), durable before a record names it.
        let file = if snapshot_in_file(state.cluster_version) {
            Some(self.files.write(meta.clone(), seq, &data).map_err(EngineError::from)?)
        } else {
            None
        };
        let stored = self.store_built_snapshot(&meta, seq, &data, file.as_ref());
        if file.is_some() && !matches!(stored, Ok(Some(_))) {
            // Never named: a newer snapshot was stored first, or storing failed.
            self.remove_snapshot_file(seq);
        }
        let replaced = stored?;
        Ok(BuiltSnapshot { meta, data, stored: replaced.is_some(), replaced_file: replaced.flatten() })
    }

    /// Stores a built snapshot (its record, with the data as chunks or, when `file` is given, in
    /// that file) unless a newer one is already stored (an install or a later build that finished
    /// first). Answers `None` when not stored, else the seq of the file it replaced, if any.
    fn store_built_snapshot(
        &self,
        meta: &typ::SnapshotMeta,
        seq: u64,
        data: &[u8],
        file: Option<&SnapshotFile>,
    ) -> Result<Option<Option<u64>>, Error> {
        let _guard = self.lock_snapshot();
        let stored = self.stored_snapshot()?;
        if stored.as_ref().is_some_and(|stored| stored.last_log_id > meta.last_log_id) {
            return Ok(None);
        }
        let replaced = stored.and_then(|stored| stored.file);
        // Whatever layout held the current snapshot, its keys go.
        let mut batch = Batch::default();
        batch.remove(keys::SNAPSHOT_META);
        batch.remove(keys::SNAPSHOT_FILE);
        for kv in self.engine.scan_prefix(Keyspace::StateMachine, keys::SNAPSHOT_DATA_PREFIX) {
            batch.remove(kv?.0);
        }
        match file {
            Some(file) => batch.put(keys::SNAPSHOT_FILE, codec::encode(file)?),
            None => put_snapshot(&mut batch, &SnapshotRecord::new(meta.clone(), seq, data)?, data)?,
        }
        self.engine.write(Keyspace::StateMachine, batch)?;
        Ok(Some(replaced))
    }
}

impl SnapshotBuilder {
    async fn build(&self) -> Result<typ::Snapshot, Error> {
        // Encoding and storing the snapshot of a large registry (10,000 namespaces: 2 MB) takes
        // tens of milliseconds of CPU: a blocking thread does it, so that the runtime's workers
        // go on answering requests and Raft messages meanwhile.
        let (shared, state, seq) = (Arc::clone(&self.shared), Arc::clone(&self.state), self.seq);
        let BuiltSnapshot { meta, data, stored, replaced_file } =
            tokio::task::spawn_blocking(move || shared.store_snapshot_of(&state, seq))
                .await
                .map_err(|e| Error::Engine(io::Error::other(e).into()))??;
        self.shared.engine.sync().await?;
        if let Some(seq) = replaced_file {
            self.shared.remove_snapshot_file(seq);
        }
        info!(
            index = meta.last_log_id.map(|id| id.index),
            id = %meta.snapshot_id,
            bytes = data.len(),
            stored,
            "snapshot built"
        );
        Ok(typ::Snapshot { meta, snapshot: Box::new(Cursor::new(data)) })
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<typ::Snapshot> {
        self.build().await.map_err(|e| StorageIOError::write_snapshot(None, &e).into())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<typ::LogId>, typ::StoredMembership)> {
        Ok(self.read(|state| (state.last_applied, state.membership.clone())))
    }

    /// Not synced: the applied entries are durable in the log and are applied again after a crash;
    /// the single batch keeps the state and `last_applied` in step.
    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>>
    where
        I: IntoIterator<Item = typ::Entry> + Send,
        I::IntoIter: Send,
    {
        self.apply_entries(entries).map_err(|e| StorageIOError::write_state_machine(&e).into())
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        let state = Arc::new(self.read(IdStateMachine::clone));
        let seq = self.shared.next_snapshot_seq.fetch_add(1, Ordering::SeqCst);
        SnapshotBuilder { shared: Arc::clone(&self.shared), state, seq }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(&mut self, meta: &typ::SnapshotMeta, snapshot: Box<Cursor<Vec<u8>>>) -> Result<()> {
        let data = snapshot.into_inner();
        let bytes = data.len();
        self.install(meta, data).await.map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        info!(index = meta.last_log_id.map(|id| id.index), id = %meta.snapshot_id, bytes, "snapshot installed");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<typ::Snapshot>> {
        let stored = self.shared.read_snapshot().map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(stored.map(|(meta, data)| typ::Snapshot { meta, snapshot: Box::new(Cursor::new(data)) }))
    }
}

#[cfg(test)]
mod tests;
pub(crate) mod timeseq;
