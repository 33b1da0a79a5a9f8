//! Whole-store tests: openraft's conformance suite, a full reopen, and stores that cannot open.

use std::time::Instant;

use leafraft_state::typ;
use leafraft_state::TypeConfig;
use openraft::storage::RaftLogStorage;
use openraft::storage::RaftLogStorageExt;
use openraft::storage::RaftStateMachine;
use openraft::testing::StoreBuilder;
use openraft::testing::Suite;
use openraft::RaftLogReader;
use openraft::RaftSnapshotBuilder;
use openraft::StorageIOError;
use tempfile::TempDir;

use super::*;
use crate::fixtures::*;

/// Stores as `leafraft serve` opens them when `local_node` is set: the node's own appends as
/// leader of a vote naming it count before their sync.
struct Builder {
    local_node: Option<u64>,
}

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachineStore), typ::StorageError> {
        let dir = TempDir::new().map_err(|e| StorageIOError::write(&e))?;
        let options = StoreOptions { local_node: self.local_node, ..StoreOptions::default() };
        let store = open(dir.path(), &options).map_err(|e| StorageIOError::write(&e))?;
        Ok((dir, store.log, store.state_machine))
    }
}

/// openraft's storage conformance suite, on fresh stores with fsync on. A plain `#[test]`: the
/// suite starts its own runtime for every case.
#[test]
fn openraft_suite() {
    let started = Instant::now();
    Suite::test_all(Builder { local_node: None }).expect("openraft storage suite");
    println!("openraft suite took {:?}", started.elapsed());
}

/// The suite again with the early path of a leader's own appends on (the suite's votes and
/// entries name node 0 and 1 as leader).
#[test]
fn openraft_suite_with_the_leaders_appends_counted_early() {
    Suite::test_all(Builder { local_node: Some(0) }).expect("openraft storage suite, node 0");
    Suite::test_all(Builder { local_node: Some(1) }).expect("openraft storage suite, node 1");
}

/// Everything a node persists comes back the same after all handles are dropped and the
/// directory is opened again in the same process.
#[tokio::test]
async fn everything_survives_a_reopen() {
    let (dir, store) = temp_store(true);
    let mut log = store.log.clone();
    let mut sm = store.state_machine.clone();

    let mut entries = vec![membership_entry(1, 1, &[1, 2, 3]), blank(1, 2)];
    entries.extend((3..).zip(every_request()).map(|(i, r)| normal(1, i, r)));
    let next = entries.len() as u64 + 1;
    entries.push(normal(2, next, create("users", 1, 10)));
    entries.extend((next + 1..next + 14).map(|i| normal(2, i, claim(if i % 2 == 0 { "users" } else { "orders" }, 10))));
    log.save_vote(&typ::Vote::new_committed(2, 1)).await.expect("vote");
    log.blocking_append(entries.clone()).await.expect("append");
    log.save_committed(Some(log_id(2, next + 6))).await.expect("committed");

    // The first term-2 entry is the snapshot's last; four more are applied after it.
    let (snapshot_at, applied) = (next as usize, next as usize + 4);
    sm.apply(entries[..snapshot_at].to_vec()).await.expect("apply");
    let snapshot = sm.get_snapshot_builder().await.build_snapshot().await.expect("build");
    assert_eq!(snapshot.meta.last_log_id, Some(log_id(2, next)));
    sm.apply(entries[snapshot_at..applied].to_vec()).await.expect("apply more");
    log.purge(log_id(1, 5)).await.expect("purge");

    let vote = log.read_vote().await.expect("vote");
    let committed = log.read_committed().await.expect("committed");
    let log_state = log.get_log_state().await.expect("log state");
    let kept = log.try_get_log_entries(..).await.expect("entries");
    assert_eq!(kept, entries[5..]);
    let state = sm.read(Clone::clone);
    assert_eq!(state.last_applied, Some(log_id(2, next + 4)));
    store.flush().await.expect("flush");
    drop((log, sm, store));

    let store = open(dir.path(), &options(true)).expect("reopen");
    let mut log = store.log.clone();
    let mut sm = store.state_machine.clone();
    assert_eq!(log.read_vote().await.expect("vote"), vote);
    assert_eq!(log.read_committed().await.expect("committed"), committed);
    assert_eq!(log.get_log_state().await.expect("log state"), log_state);
    assert_eq!(log.try_get_log_entries(..).await.expect("entries"), kept);
    assert_eq!(sm.read(Clone::clone), state);
    assert_eq!(sm.applied_state().await.expect("applied"), (state.last_applied, state.membership.clone()));
    assert_eq!(sm.applied_at_open(), Some(log_id(2, next + 4)));
    let current = sm.get_current_snapshot().await.expect("snapshot").expect("stored");
    assert_eq!(current.meta, snapshot.meta);
    assert_eq!(current.snapshot.into_inner(), snapshot.snapshot.into_inner());

    // Applying the rest continues exactly where a store that never restarted would be.
    let mut reference = leafraft_state::IdStateMachine::default();
    let reference_responses: Vec<_> = entries.iter().map(|e| reference.apply(e)).collect();
    let responses = sm.apply(entries[applied..].to_vec()).await.expect("apply rest");
    assert_eq!(responses, reference_responses[applied..]);
    assert_eq!(sm.read(Clone::clone), reference);

    // A new snapshot id never repeats one from before the restart.
    let next = sm.get_snapshot_builder().await.build_snapshot().await.expect("build");
    assert_ne!(next.meta.snapshot_id, snapshot.meta.snapshot_id);
}

#[test]
fn a_fresh_store_is_empty() {
    let (_dir, store) = temp_store(false);
    assert_eq!(store.state_machine.applied_at_open(), None);
    assert_eq!(store.state_machine.read(Clone::clone), leafraft_state::IdStateMachine::default());
}

fn closed_store() -> TempDir {
    let (dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            sm.apply([normal(1, 1, create("t", 1, 10))]).await?;
            store.flush().await.map_err(|e| StorageIOError::write(&e))?;
            Ok::<_, typ::StorageError>(())
        })
        .expect("write and flush");
    drop((sm, store));
    dir
}

fn open_err(dir: &TempDir) -> OpenError {
    match open(dir.path(), &options(false)) {
        Ok(_) => panic!("the store in {} opened", dir.path().display()),
        Err(e) => e,
    }
}

/// One line naming the directory and the rebuild procedure.
fn assert_rebuild_message(err: &OpenError, dir: &TempDir) {
    let message = err.to_string();
    assert!(!message.contains('\n'), "{message}");
    assert!(message.starts_with(&format!("cannot open the store in {}: ", dir.path().display())), "{message}");
    assert!(message.ends_with(error::REBUILD_HINT), "{message}");
}

#[test]
fn garbage_data_file_is_an_error() {
    let dir = closed_store();
    let len = std::fs::metadata(dir.path().join("db")).expect("stat").len();
    let garbage: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(dir.path().join("db"), garbage).expect("overwrite db");
    for name in std::fs::read_dir(dir.path()).expect("list") {
        let path = name.expect("entry").path();
        if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("snap.")) {
            std::fs::write(&path, b"garbage").expect("overwrite sled snapshot");
        }
    }
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::Corrupt { .. }), "{err:?}");
    println!("{err}");
    assert_rebuild_message(&err, &dir);
}

#[test]
fn garbage_config_file_is_an_error() {
    let dir = closed_store();
    std::fs::write(dir.path().join("conf"), b"segment_size: twelve\nuse_compression: maybe\n0000").expect("write conf");
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::Corrupt { .. }), "{err:?}");
    assert_rebuild_message(&err, &dir);
}

/// Bytes that are not UTF-8 make sled answer `Unsupported` ("created using a sled version
/// earlier than 0.29"); for our own directory that is damage and gets the rebuild message.
#[test]
fn binary_garbage_config_file_is_corruption() {
    let dir = closed_store();
    std::fs::write(
        dir.path().join("conf"),
        [0xff_u8, 0xfe, 0x00, 0x80, 0x81, 0xc3, 0x28, 0x9f, 0x92, 0x96, 0x00, 0x01],
    )
    .expect("write conf");
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::Corrupt { .. }), "{err:?}");
    assert_rebuild_message(&err, &dir);
}

/// sled treats a `conf` of 8 bytes or less as missing and writes it again; the data is untouched.
#[test]
fn a_truncated_config_file_keeps_the_data() {
    let dir = closed_store();
    std::fs::write(dir.path().join("conf"), b"x").expect("write conf");
    let store = open(dir.path(), &options(false)).expect("open");
    assert_eq!(store.state_machine.read(|state| state.tags["t"].max_id), 1);
}

/// sled 0.34 opens a data file it cannot parse as an empty database; the marker file catches it.
#[test]
fn an_emptied_store_is_an_error() {
    let dir = closed_store();
    std::fs::remove_file(dir.path().join("db")).expect("remove db");
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("sled's data is gone"), "{err}");
    assert_rebuild_message(&err, &dir);
}

fn overwrite(dir: &TempDir, keyspace: Keyspace, key: &[u8], value: Vec<u8>) {
    let engine = Engine::open(dir.path(), &options(false)).expect("open engine");
    let mut batch = Batch::default();
    batch.put(key, value);
    engine.write(keyspace, batch).expect("write");
    tokio::runtime::Runtime::new().expect("runtime").block_on(engine.sync()).expect("sync");
}

#[test]
fn a_newer_format_version_is_refused_clearly() {
    let dir = closed_store();
    overwrite(&dir, Keyspace::Meta, keys::FORMAT, vec![FORMAT_VERSION + 1]);
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::UnsupportedVersion { what: "format marker", found: 3, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "cannot open the store in {}: the stored format marker has format version 3, but this binary reads \
             only version 2; it was written by a newer leafraft, run that version",
            dir.path().display()
        )
    );
}

/// A store of version 1 (before member identities, never released) is refused by name, with the
/// rebuild procedure, not misread.
#[test]
fn an_older_format_version_is_refused_clearly() {
    let dir = closed_store();
    overwrite(&dir, Keyspace::Meta, keys::FORMAT, vec![1]);
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::OutdatedVersion { what: "format marker", found: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("has format version 1, written by an older leafraft"), "{err}");
    assert_rebuild_message(&err, &dir);
}

#[test]
fn a_newer_value_version_is_refused_clearly() {
    let dir = closed_store();
    let mut record = codec::encode(&leafraft_state::TagRecord {
        max_id: 1,
        step: 1,
        description: String::new(),
        created_at_ms: 0,
        updated_at_ms: 0,
        mode: leafraft_state::TagMode::Segment,
    })
    .expect("encode");
    record[0] = 9;
    overwrite(&dir, Keyspace::StateMachine, &keys::tag_key("t"), record);
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::UnsupportedVersion { what: "tag record", found: 9, .. }), "{err:?}");
}

#[test]
fn an_undecodable_value_is_corruption() {
    let dir = closed_store();
    overwrite(&dir, Keyspace::Meta, keys::VOTE, vec![FORMAT_VERSION, 1, 2]);
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("the stored vote cannot be read"), "{err}");
    assert_rebuild_message(&err, &dir);
}

/// A log entry of a command a newer release appended to `Request` (here variant 99) is not
/// corruption: the error says to run the newer release. It used to say the store was corrupt and
/// to rebuild the member, which would wipe a good replica of a member started on an old release.
#[test]
fn regression_an_unknown_command_in_the_log_advised_a_rebuild() {
    let dir = closed_store();
    let mut entry = codec::encode(&normal(1, 7, leafraft_state::Request::Noop)).expect("encode");
    let variant = entry.len() - 4;
    entry[variant..].copy_from_slice(&99u32.to_le_bytes());
    overwrite(&dir, Keyspace::Log, &keys::log_key(7), entry);
    let err = open_err(&dir);
    assert!(err.to_string().contains("written by a newer release"), "{err}");
    assert!(!err.to_string().contains("rebuild it:"), "{err}");
}

#[test]
fn a_second_open_of_one_directory_is_refused() {
    let (dir, _store) = temp_store(false);
    let err = open_err(&dir);
    assert!(matches!(err, OpenError::Locked { .. }), "{err:?}");
    assert!(err.to_string().contains("lock is held by another leafraft process"), "{err}");
}

#[test]
fn an_unusable_directory_is_an_io_error() {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    let err = match open(file.path(), &options(false)) {
        Ok(_) => panic!("a file opened as a store"),
        Err(e) => e,
    };
    assert!(matches!(err, OpenError::Io { .. }), "{err:?}");
    assert!(err.to_string().starts_with(&format!("cannot open the store in {}: ", file.path().display())), "{err}");
}

/// The 16-byte `/raft/forward` body found by fuzzing (variants 0 and 0, then a string claiming 2^50
/// bytes), and a tag record whose description claims 2^50 bytes: bincode without a limit
/// allocates the claim and aborts. Stored, they are a clear open error naming the value.
#[test]
fn hostile_bytes_in_a_stored_value_are_a_clear_open_error() {
    let mut issue_body = vec![0u8; 8];
    issue_body.extend_from_slice(&(1u64 << 50).to_le_bytes());
    let mut huge_description = vec![0u8; 16];
    huge_description.extend_from_slice(&(1u64 << 50).to_le_bytes());
    let cases: [(Keyspace, Vec<u8>, &str); 10] = [
        (Keyspace::Meta, keys::VOTE.to_vec(), "vote"),
        (Keyspace::Meta, keys::COMMITTED.to_vec(), "committed log id"),
        (Keyspace::Meta, keys::LAST_PURGED.to_vec(), "last purged log id"),
        (Keyspace::Log, keys::log_key(7).to_vec(), "last log entry"),
        (Keyspace::StateMachine, keys::LAST_APPLIED.to_vec(), "last applied log id"),
        (Keyspace::StateMachine, keys::MEMBERSHIP.to_vec(), "membership"),
        (Keyspace::StateMachine, keys::tag_key("t"), "tag record"),
        (Keyspace::StateMachine, keys::SNOWFLAKE.to_vec(), "snowflake registry"),
        (Keyspace::StateMachine, keys::SNAPSHOT_META.to_vec(), "snapshot meta"),
        (Keyspace::StateMachine, keys::SNAPSHOT_FILE.to_vec(), "snapshot file record"),
    ];
    let tag_record = (Keyspace::StateMachine, keys::tag_key("t"), "tag record");
    let cases = cases.into_iter().map(|case| (case, &issue_body)).chain([(tag_record, &huge_description)]);
    for ((keyspace, key, what), body) in cases {
        let dir = closed_store();
        overwrite(&dir, keyspace, &key, [&[FORMAT_VERSION][..], body].concat());
        let err = open_err(&dir);
        assert!(matches!(err, OpenError::Corrupt { .. }), "{what}: {err:?}");
        assert!(err.to_string().contains(&format!("the stored {what} cannot be read")), "{err}");
        assert_rebuild_message(&err, &dir);
    }
}
