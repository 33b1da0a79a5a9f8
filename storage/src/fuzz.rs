//! Fuzzing the stored values: arbitrary and mutated bytes through the store's own
//! decoding (format version byte, then the bounded bincode decode) for every persisted type, and
//! through `open` for a store whose values were overwritten with them. Decoding answers a value or
//! an error; `open` answers a store or an `OpenError`; nothing panics or aborts.
//!
//! `LEAFRAFT_FUZZ_CASES=N` sets the cases per property (see `scripts/fuzz.sh`).

use std::fmt::Debug;

use leafraft_state::typ;
use leafraft_state::IdStateMachine;
use leafraft_state::SnowflakeRegistry;
use leafraft_state::TagRecord;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;
use proptest::test_runner::TestRunner;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tempfile::TempDir;

use crate::codec;
use crate::engine::Batch;
use crate::engine::Engine;
use crate::engine::Keyspace;
use crate::fixtures::*;
use crate::snapshot_files::SnapshotFile;
use crate::state_machine_store::SnapshotRecord;

/// `default_cases`, or `LEAFRAFT_FUZZ_CASES / cost` when set (a property whose case costs `cost`
/// decoder cases runs that many times fewer).
fn config(default_cases: u32, cost: u32) -> Config {
    let cases = std::env::var("LEAFRAFT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(default_cases, |cases| (cases / cost).max(1));
    Config { cases, failure_persistence: None, ..Config::default() }
}

/// A valid stored value with one to four byte-level changes, or arbitrary bytes.
fn hostile(valid: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let change = (any::<Index>(), any::<u8>(), 0u8..4);
    let mutated = (proptest::sample::select(valid), vec(change, 1..5)).prop_map(|(mut bytes, changes)| {
        for (at, byte, kind) in changes {
            if bytes.len() < 9 {
                bytes.push(byte);
                continue;
            }
            let i = at.index(bytes.len() - 8);
            match kind {
                0 => bytes[i] ^= byte,
                // A length field claiming far more than there is.
                1 => bytes[i..i + 8].copy_from_slice(&(1u64 << (byte % 64)).to_le_bytes()),
                2 => bytes.truncate(i),
                _ => bytes.insert(i, byte),
            }
        }
        bytes
    });
    prop_oneof![1 => vec(any::<u8>(), 0..256), 4 => mutated]
}

fn stored<T: Serialize>(values: &[T]) -> Vec<Vec<u8>> {
    values.iter().map(|value| codec::encode(value).expect("encode")).collect()
}

fn fuzz_decode<T: DeserializeOwned + Debug>(valid: Vec<Vec<u8>>) {
    let mut runner = TestRunner::new(config(2000, 1));
    runner
        .run(&hostile(valid), |bytes| {
            let _ = codec::decode::<T>(&bytes);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

fn state_machine() -> IdStateMachine {
    let mut sm = IdStateMachine::default();
    let mut entries = vec![membership_entry(1, 1, &[1, 2, 3]), blank(1, 2)];
    entries.extend((3..).zip(every_request()).map(|(i, r)| normal(1, i, r)));
    for entry in &entries {
        sm.apply(entry);
    }
    sm
}

#[test]
fn fuzz_stored_values() {
    let entries = vec![membership_entry(1, 1, &[1, 2, 3]), blank(1, 2), normal(1, 3, create("t", 1, 10))];
    let sm = state_machine();
    let record = SnapshotRecord {
        meta: typ::SnapshotMeta {
            last_log_id: sm.last_applied,
            last_membership: sm.membership.clone(),
            snapshot_id: "1-1-10-0".into(),
        },
        seq: 0,
        len: 512,
        chunks: 1,
    };
    fuzz_decode::<typ::Vote>(stored(&[typ::Vote::new_committed(2, 1)]));
    fuzz_decode::<typ::LogId>(stored(&[log_id(2, 9)]));
    fuzz_decode::<typ::Entry>(stored(&entries));
    fuzz_decode::<typ::StoredMembership>(stored(std::slice::from_ref(&sm.membership)));
    fuzz_decode::<TagRecord>(stored(&sm.tags.values().cloned().collect::<Vec<_>>()));
    fuzz_decode::<SnowflakeRegistry>(stored(std::slice::from_ref(&sm.snowflake)));
    let file = SnapshotFile { meta: record.meta.clone(), seq: 3, len: 512, crc32: 0x1234_5678 };
    fuzz_decode::<SnapshotRecord>(stored(&[record]));
    fuzz_decode::<SnapshotFile>(stored(&[file]));
    fuzz_decode::<IdStateMachine>(stored(&[sm]));
    fuzz_decode::<()>(stored(&[()]));
}

/// Every key the store reads at open, with a valid value to mutate.
fn keys_read_at_open(dir: &TempDir) -> Vec<(Keyspace, Vec<u8>, Vec<u8>)> {
    let engine = Engine::open(dir.path(), &options(false)).expect("open engine");
    let mut keys = Vec::new();
    for keyspace in [Keyspace::Meta, Keyspace::Log, Keyspace::StateMachine] {
        for kv in engine.scan_prefix(keyspace, b"") {
            let (key, value) = kv.expect("scan");
            keys.push((keyspace, key, value));
        }
    }
    keys
}

/// A closed store with a vote, log entries, applied tags, the snowflake registry and a snapshot.
fn full_store() -> TempDir {
    use openraft::storage::RaftLogStorage;
    use openraft::storage::RaftLogStorageExt;
    use openraft::storage::RaftStateMachine;
    use openraft::RaftSnapshotBuilder;

    let (dir, store) = temp_store(false);
    let (mut log, mut sm) = (store.log.clone(), store.state_machine.clone());
    let mut entries = vec![membership_entry(1, 1, &[1, 2, 3]), blank(1, 2)];
    entries.extend((3..).zip(every_request()).map(|(i, r)| normal(1, i, r)));
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            log.save_vote(&typ::Vote::new_committed(1, 1)).await?;
            log.blocking_append(entries.clone()).await?;
            log.save_committed(Some(log_id(1, 10))).await?;
            sm.apply(entries).await?;
            sm.get_snapshot_builder().await.build_snapshot().await?;
            store.flush().await.map_err(|e| openraft::StorageIOError::write(&e))?;
            Ok::<_, typ::StorageError>(())
        })
        .expect("write a full store");
    drop((log, sm, store));
    dir
}

/// A stored value overwritten with hostile bytes: `open` answers a store or an error, never
/// panics (a sled open per case: fewer cases than the decoders).
#[test]
fn fuzz_store_open() {
    let dir = full_store();
    let keys = keys_read_at_open(&dir);
    let pristine = tempfile::tempdir().expect("temp dir");
    copy_dir(dir.path(), pristine.path());
    let valid: Vec<Vec<u8>> = keys.iter().map(|(_, _, value)| value.clone()).collect();
    // A sled open per case: a hundred times the cost of a decode.
    let mut runner = TestRunner::new(config(64, 100));
    runner
        .run(&(0..keys.len(), hostile(valid)), |(which, bytes)| {
            copy_dir(pristine.path(), dir.path());
            let (keyspace, key, _) = &keys[which];
            let engine = Engine::open(dir.path(), &options(false)).expect("open engine");
            let mut batch = Batch::default();
            batch.put(key.clone(), bytes);
            engine.write(*keyspace, batch).expect("write");
            engine.sync_blocking().expect("sync");
            drop(engine);
            let _ = crate::open(dir.path(), &options(false));
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).expect("create");
    for entry in std::fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

#[test]
fn every_key_of_a_full_store_is_fuzzed() {
    let dir = full_store();
    let keys = keys_read_at_open(&dir);
    assert!(keys.iter().any(|(keyspace, _, _)| *keyspace == Keyspace::Log), "no log entry");
    let names: Vec<String> =
        keys.iter().map(|(_, key, _)| String::from_utf8_lossy(key).chars().take(14).collect()).collect();
    for expected in ["vote", "committed", "last_applied", "membership", "tag/orders", "snowflake", "snapshot/meta"] {
        assert!(names.iter().any(|name| name.starts_with(expected)), "{expected} missing from {names:?}");
    }
}
