//! Snapshot data in files of their own, `<store>/snapshots/<seq>.snapshot`, named by the stored
//! [`SnapshotFile`] record (from cluster version 0.3.0 on; see `state_machine_store`).
//!
//! Why not in sled: all of sled's trees share one write-ahead log, so a snapshot stored as chunks
//! there is flushed with the log's appends and votes, and every sync waits for it. Beside the
//! build of a 92 MiB snapshot a one-entry apply and sync waited up to 0.7–1.9 s; with the data
//! in a file of its own, 0.1–0.2 s, and the build took 0.7–0.8 s instead of 1.3–4.0 s
//! (`cargo bench -p storage --bench apply_claim_batch`). sled also rewrites a page whole once ten
//! updates chain to it, so each snapshot was written several times over.
//!
//! Durability: a file is written, `fdatasync`ed and its directory entry synced before any record
//! names it, and removed only after a record naming another one is synced. A crash leaves at most
//! files no record names, which [`SnapshotFiles::remove_unnamed`] deletes when the store opens.

use std::fs;
use std::io;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use leafraft_state::typ;
use serde::Deserialize;
use serde::Serialize;

use crate::engine::sync_dir;
use crate::error::Error;
use crate::private;
use crate::private::SNAPSHOT_DIR;

const SUFFIX: &str = ".snapshot";

/// The stored description of the current snapshot when its data is a file. A type of its own,
/// not a change of `SnapshotRecord` (whose chunks the baseline release reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotFile {
    pub meta: typ::SnapshotMeta,
    /// The local build counter when this snapshot was stored; it names the file.
    pub seq: u64,
    /// The file's length in bytes.
    pub len: u64,
    /// CRC-32 of the file's bytes: a file damaged on disk is refused, never installed elsewhere.
    pub crc32: u32,
}

/// The snapshot folder of one store.
#[derive(Debug)]
pub struct SnapshotFiles {
    dir: PathBuf,
    /// `fdatasync` files and the folder (off only in tests that do not need it).
    fsync: bool,
}

impl SnapshotFiles {
    /// The snapshot folder of the store in `store_dir`, created (mode 0700) if missing.
    pub fn open(store_dir: &Path, fsync: bool) -> io::Result<SnapshotFiles> {
        let dir = store_dir.join(SNAPSHOT_DIR);
        if !dir.is_dir() {
            private::create_dir(&dir)?;
            if fsync {
                sync_dir(store_dir)?;
            }
        }
        Ok(SnapshotFiles { dir, fsync })
    }

    fn path(&self, seq: u64) -> PathBuf {
        self.dir.join(format!("{seq:020}{SUFFIX}"))
    }

    /// Writes `data` as the file of snapshot `seq`, durable (data and directory entry) when this
    /// returns. Blocking. Answers the record to store for it.
    pub fn write(&self, meta: typ::SnapshotMeta, seq: u64, data: &[u8]) -> io::Result<SnapshotFile> {
        let path = self.path(seq);
        let mut file = private::create_file(&path)?;
        file.write_all(data)?;
        if self.fsync {
            file.sync_data()?;
            sync_dir(&self.dir)?;
        }
        Ok(SnapshotFile { meta, seq, len: data.len() as u64, crc32: crc32fast::hash(data) })
    }

    /// The data of the snapshot `record` names, checked against its length and CRC.
    pub fn read(&self, record: &SnapshotFile) -> Result<Vec<u8>, Error> {
        let path = self.path(record.seq);
        let data = fs::read(&path)
            .map_err(|e| Error::Invalid(format!("snapshot {}: cannot read {}: {e}", record.meta, path.display())))?;
        if data.len() as u64 != record.len || crc32fast::hash(&data) != record.crc32 {
            return Err(Error::Invalid(format!(
                "snapshot {}: {} holds {} bytes that do not match the {} bytes and CRC {:08x} stored for it",
                record.meta,
                path.display(),
                data.len(),
                record.len,
                record.crc32
            )));
        }
        Ok(data)
    }

    /// Removes the file of snapshot `seq`, if it is there.
    pub fn remove(&self, seq: u64) -> io::Result<()> {
        match fs::remove_file(self.path(seq)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Removes every snapshot file but that of `named` (the snapshot the stored record names):
    /// what a crash left between writing a file and naming it, or between naming another one and
    /// removing this one. Only at open, before any build or install. Other files are left alone.
    pub fn remove_unnamed(&self, named: Option<u64>) -> io::Result<()> {
        let named = named.map(|seq| self.path(seq));
        for entry in fs::read_dir(&self.dir)? {
            let path = entry?.path();
            let stem = path.file_name().and_then(|name| name.to_str()).and_then(|name| name.strip_suffix(SUFFIX));
            if stem.is_some_and(|seq| seq.parse::<u64>().is_ok()) && Some(&path) != named.as_ref() {
                fs::remove_file(&path)?;
            }
        }
        Ok(())
    }
}
