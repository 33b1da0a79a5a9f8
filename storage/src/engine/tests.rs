//! The engine on a real directory: batches, ranges, and what `sync` makes durable.

use std::os::unix::fs::MetadataExt;

use tempfile::TempDir;

use super::*;
use crate::fixtures::options;

fn engine(fsync: bool) -> (TempDir, Engine) {
    let dir = TempDir::new().expect("temp dir");
    let engine = Engine::open(dir.path(), &options(fsync)).expect("open");
    (dir, engine)
}

fn keys(engine: &Engine, keyspace: Keyspace) -> Vec<Vec<u8>> {
    engine.range(keyspace, ..).map(|kv| kv.expect("read").0).collect()
}

#[test]
fn batch_last_write_wins_and_keyspaces_are_separate() {
    let (_dir, engine) = engine(false);
    let mut batch = Batch::default();
    batch.put(b"a".to_vec(), b"1".to_vec());
    batch.remove(b"a".to_vec());
    batch.put(b"b".to_vec(), b"1".to_vec());
    batch.remove(b"b".to_vec());
    batch.put(b"b".to_vec(), b"2".to_vec());
    engine.write(Keyspace::Meta, batch).expect("write");
    assert_eq!(engine.get(Keyspace::Meta, b"a").expect("get"), None);
    assert_eq!(engine.get(Keyspace::Meta, b"b").expect("get"), Some(b"2".to_vec()));
    assert_eq!(engine.get(Keyspace::Log, b"b").expect("get"), None);
    assert_eq!(engine.get(Keyspace::StateMachine, b"b").expect("get"), None);
}

#[test]
fn ranges_are_ordered_and_remove_range_is_exact() {
    let (_dir, engine) = engine(false);
    let mut batch = Batch::default();
    for i in [5u64, 1, 300, 2, 256] {
        batch.put(i.to_be_bytes().to_vec(), vec![i as u8]);
    }
    engine.write(Keyspace::Log, batch).expect("write");
    let all: Vec<u64> = keys(&engine, Keyspace::Log)
        .iter()
        .map(|k| u64::from_be_bytes(k.as_slice().try_into().expect("8 bytes")))
        .collect();
    assert_eq!(all, [1, 2, 5, 256, 300]);
    assert_eq!(engine.last(Keyspace::Log).expect("last").map(|(k, _)| k), Some(300u64.to_be_bytes().to_vec()));

    let removed = engine.remove_range(Keyspace::Log, 2u64.to_be_bytes().to_vec()..256u64.to_be_bytes().to_vec());
    assert_eq!(removed.expect("remove"), 2);
    assert_eq!(
        keys(&engine, Keyspace::Log),
        [1u64.to_be_bytes().to_vec(), 256u64.to_be_bytes().to_vec(), 300u64.to_be_bytes().to_vec()]
    );
    assert_eq!(engine.remove_range(Keyspace::Log, 400u64.to_be_bytes().to_vec()..).expect("remove"), 0);
}

#[test]
fn scan_prefix_stays_inside_the_prefix() {
    let (_dir, engine) = engine(false);
    let mut batch = Batch::default();
    for key in ["tag/b", "tag/a", "tagx", "snapshot/meta", "ta"] {
        batch.put(key.as_bytes().to_vec(), Vec::new());
    }
    engine.write(Keyspace::StateMachine, batch).expect("write");
    let found: Vec<Vec<u8>> =
        engine.scan_prefix(Keyspace::StateMachine, b"tag/").map(|kv| kv.expect("read").0).collect();
    assert_eq!(found, [b"tag/a".to_vec(), b"tag/b".to_vec()]);
}

/// The file kept for `fdatasync` is sled's data file: the same inode as `<dir>/db`, and the file
/// that sled's writes land in.
#[tokio::test]
async fn the_synced_file_is_sleds_data_file() {
    let (dir, engine) = engine(true);
    let files = engine.files.as_ref().expect("fsync on keeps the data file open");
    let path = dir.path().join(DATA_FILE);
    assert_eq!(files.data.metadata().expect("stat").ino(), std::fs::metadata(&path).expect("stat db").ino());

    let before = std::fs::metadata(&path).expect("stat db").len();
    let mut batch = Batch::default();
    for i in 0u64..2000 {
        batch.put(i.to_be_bytes().to_vec(), vec![7; 512]);
    }
    engine.write(Keyspace::Log, batch).expect("write");
    engine.sync().await.expect("sync");
    let after = std::fs::metadata(&path).expect("stat db").len();
    assert!(after >= before + 1_000_000, "sled wrote {before} -> {after} bytes into {}", path.display());
    assert_eq!(engine.probe.syncs(), 1);
}

#[tokio::test]
async fn without_fsync_nothing_is_fdatasynced() {
    let (_dir, engine) = engine(false);
    let mut batch = Batch::default();
    batch.put(b"k".to_vec(), b"v".to_vec());
    engine.write(Keyspace::Meta, batch).expect("write");
    engine.sync().await.expect("sync");
    assert!(engine.files.is_none());
    assert_eq!(engine.probe.syncs(), 0);
}

/// sled writes a value too large for its log into `blobs/` without syncing it; `sync` must.
#[tokio::test]
async fn blob_files_are_synced() {
    let (dir, engine) = engine(true);
    let mut batch = Batch::default();
    batch.put(b"big".to_vec(), vec![1; 512 * 1024]);
    engine.write(Keyspace::Meta, batch).expect("write");
    engine.sync().await.expect("sync");
    let blobs: HashSet<OsString> = std::fs::read_dir(dir.path().join(BLOB_DIR))
        .expect("list blobs")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(!blobs.is_empty(), "a 512 KiB value is expected to become a blob");
    let files = engine.files.as_ref().expect("fsync on");
    let synced = files.synced_blobs.lock().expect("lock").clone();
    assert!(blobs.is_subset(&synced), "blobs {blobs:?}, synced {synced:?}");
}
