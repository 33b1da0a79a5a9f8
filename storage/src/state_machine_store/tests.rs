//! Applying, snapshot building and installing, checked against the engine's contents.

use leafraft_state::Rejection;
use openraft::RaftSnapshotBuilder;

use super::*;
use crate::engine::BLOB_DIR;
use crate::fixtures::*;

fn tag_keys(sm: &StateMachineStore) -> Vec<String> {
    sm.shared
        .engine
        .scan_prefix(Keyspace::StateMachine, keys::TAG_PREFIX)
        .map(|kv| String::from_utf8(kv.expect("read").0).expect("utf-8"))
        .collect()
}

fn stored_tag(sm: &StateMachineStore, tag: &str) -> Option<TagRecord> {
    let bytes = sm.shared.engine.get(Keyspace::StateMachine, &keys::tag_key(tag)).expect("get")?;
    Some(codec::decode(&bytes).expect("decode"))
}

#[tokio::test]
async fn apply_answers_every_entry_and_persists_changed_tags() {
    let (_dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    let mut entries = vec![blank(1, 1), membership_entry(1, 2, &[1, 2, 3])];
    entries.extend((3..).zip(every_request()).map(|(i, r)| normal(1, i, r)));
    let next = entries.len() as u64 + 1;
    entries.push(normal(1, next, create("x y", 1, 10))); // an invalid name: rejected, nothing stored
    entries.push(normal(1, next + 1, claim("missing", 10)));

    let responses = sm.apply(entries.clone()).await.expect("apply");
    let mut expected = IdStateMachine::default();
    let expected_responses: Vec<Response> = entries.iter().map(|e| expected.apply(e)).collect();
    assert_eq!(responses, expected_responses);
    assert_eq!(responses.len(), entries.len());
    let n = responses.len();
    assert!(matches!(responses[n - 2], Response::Rejected(Rejection::InvalidArgument(_))));
    assert_eq!(responses[n - 1], Response::Rejected(Rejection::TagNotFound));
    assert_eq!(sm.read(Clone::clone), expected);

    assert_eq!(tag_keys(&sm), ["tag/coupons", "tag/orders", "tag/ticks"]);
    assert_eq!(expected.scramble_keys.len(), 1, "the scrambled tag has its key");
    assert_eq!(
        StateMachineStore::open(store.engine.clone()).expect("reopen").read(|state| state.scramble_keys.clone()),
        expected.scramble_keys,
        "the key is stored"
    );
    assert_eq!(stored_tag(&sm, "orders").as_ref(), expected.tags.get("orders"));
    assert!(expected.snowflake.layout.is_some(), "the worker requests were applied");
    assert_eq!(sm.applied_state().await.expect("applied"), (Some(log_id(1, next + 1)), expected.membership.clone()));
}

/// The watcher hears of every request applied, in order, with its log index and its answer;
/// blank and membership entries carry no request and are not told.
#[tokio::test]
async fn the_watcher_hears_of_every_request_applied_with_its_index_and_answer() {
    let (_dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    let heard: Arc<Mutex<Vec<(u64, Request, Response)>>> = Arc::default();
    let log = Arc::clone(&heard);
    sm.watch_applied(Arc::new(move |index, request, response| {
        log.lock().expect("lock").push((index, request.clone(), response.clone()))
    }));
    let entries = vec![blank(1, 1), membership_entry(1, 2, &[1, 2, 3]), normal(1, 3, create("orders", 1, 10))];
    let mut more = vec![normal(1, 4, claim("orders", 10)), normal(1, 5, claim("missing", 10))];
    let mut responses = sm.apply(entries).await.expect("apply");
    responses.extend(sm.apply(more.clone()).await.expect("apply"));
    more.insert(0, normal(1, 3, create("orders", 1, 10)));
    let expected: Vec<(u64, Request, Response)> = more
        .iter()
        .zip(&responses[2..])
        .map(|(entry, response)| match &entry.payload {
            EntryPayload::Normal(request) => (entry.log_id.index, request.clone(), response.clone()),
            _ => unreachable!("normal entries"),
        })
        .collect();
    assert_eq!(*heard.lock().expect("lock"), expected);
    assert_eq!(expected[2].2, Response::Rejected(Rejection::TagNotFound), "a refusal is told too");
}

/// After every apply the stored keyspace decodes to exactly the in-memory state.
#[tokio::test]
async fn reopened_state_equals_memory_after_each_apply() {
    let (dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    let mut index = 0;
    let mut next = |request| {
        index += 1;
        normal(1, index, request)
    };
    let batches = vec![
        vec![next(create("b", 1, 10)), next(create("a", 100, 10))],
        vec![next(claim("a", 10)), next(claim("a", 5)), next(claim("b", 3))],
        vec![next(Request::ReleaseSegment { tag: "a".into(), from: 112, expected_max_id: 115 })],
        vec![next(Request::SetClusterVersion { version: leafraft_state::Version::new(0, 2, 0) }), next(Request::Noop)],
        // A claim batch changes the tags it names and the time-sequence registry.
        vec![
            next(Request::CreateNamespace { namespace: "orders".into(), record: namespace_record() }),
            next(Request::ClaimBatch {
                claims: vec![
                    leafraft_state::Claim::Segment { tag: "a".into(), step: 7 },
                    leafraft_state::Claim::Timeseq {
                        namespace: "orders".into(),
                        second: 1_700_000_001,
                        count: 5,
                        now_ms: 1_700_000_000_500,
                    },
                    leafraft_state::Claim::Segment { tag: "b".into(), step: 2 },
                ],
            }),
        ],
        // The switch to the split time-sequence layout, and a claim batch stored in it.
        vec![
            next(Request::SetClusterVersion { version: leafraft_state::Version::CLAIM_BATCHES }),
            next(Request::ClaimBatch {
                claims: vec![leafraft_state::Claim::Timeseq {
                    namespace: "orders".into(),
                    second: 1_700_000_002,
                    count: 3,
                    now_ms: 1_700_000_001_500,
                }],
            }),
        ],
        // A release batch lowers each tag whose release matches it, and only those.
        vec![next(Request::ReleaseBatch {
            releases: vec![
                leafraft_state::Release { tag: "a".into(), from: 116, expected_max_id: 119 },
                leafraft_state::Release { tag: "b".into(), from: 4, expected_max_id: 5 },
            ],
        })],
    ];
    for batch in batches {
        sm.apply(batch).await.expect("apply");
        let reopened = StateMachineStore::open(Arc::clone(&sm.shared.engine)).expect("load");
        assert_eq!(reopened.read(Clone::clone), sm.read(Clone::clone));
    }
    assert_eq!(sm.read(|s| s.tags["a"].max_id), 116, "released to 112, 7 claimed in a batch, released to 116");
    assert_eq!(sm.read(|s| s.tags["b"].max_id), 6, "b's release expected 5: refused");
    assert_eq!(sm.read(|s| s.timeseq.next_seq["orders"][&1_700_000_001]), 5);
    drop((sm, store));
    let store = crate::open(dir.path(), &options(false)).expect("reopen");
    assert_eq!(store.state_machine.applied_at_open(), Some(log_id(1, 13)));
    assert_eq!(store.state_machine.read(|s| s.cluster_version), leafraft_state::Version::CLAIM_BATCHES);
    assert_eq!(store.state_machine.read(|s| s.timeseq.next_seq["orders"][&1_700_000_002]), 3);
}

/// The cluster version only rises, is stored as its own key once past the baseline, travels in
/// snapshots (version 3 only once past the baseline) and a store holding one newer than this
/// binary is refused by name: that member was upgraded past this release.
#[tokio::test]
async fn the_cluster_version_rises_persists_and_travels_in_snapshots() {
    let (dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    let baseline_build = sm.get_snapshot_builder().await.build_snapshot().await.expect("build");
    assert_eq!(baseline_build.snapshot.get_ref()[0], codec::FORMAT_VERSION, "the baseline's own snapshot format");
    assert_eq!(sm.shared.engine.get(Keyspace::StateMachine, keys::CLUSTER_VERSION).expect("get"), None);

    let set = |version| Request::SetClusterVersion { version };
    let entries = [
        normal(1, 1, set(leafraft_state::Version::new(0, 2, 0))),
        normal(1, 2, set(leafraft_state::Version::new(0, 1, 5))),
    ];
    let responses = sm.apply(entries).await.expect("apply");
    let at = |version| Response::ClusterVersion { version };
    assert_eq!(
        responses,
        [at(leafraft_state::Version::new(0, 2, 0)), at(leafraft_state::Version::new(0, 2, 0))],
        "never lowered"
    );
    let snapshot = sm.get_snapshot_builder().await.build_snapshot().await.expect("build");
    let data = snapshot.snapshot.get_ref();
    assert_eq!(data[0], codec::SNAPSHOT_WITH_CLUSTER_VERSION);
    assert_eq!(codec::decode_snapshot(data).expect("decode").cluster_version, leafraft_state::Version::new(0, 2, 0));

    let (_other_dir, other) = temp_store(false);
    let mut other_sm = other.state_machine.clone();
    let installed = Box::new(Cursor::new(data.clone()));
    other_sm.install_snapshot(&snapshot.meta, installed).await.expect("install");
    let reopened = StateMachineStore::open(Arc::clone(&other_sm.shared.engine)).expect("load");
    assert_eq!(reopened.read(|s| s.cluster_version), leafraft_state::Version::new(0, 2, 0));

    let ahead = leafraft_state::Version::new(leafraft_state::Version::OWN.major + 1, 0, 0);
    sm.apply([normal(1, 3, set(ahead))]).await.expect("apply");
    drop((sm, store));
    let refused = crate::open(dir.path(), &options(false)).err().expect("a store of a newer cluster is refused");
    assert!(matches!(refused, crate::OpenError::ClusterVersionAhead { found, .. } if found == ahead), "{refused}");
    assert!(refused.to_string().contains(&format!("run leafraft {ahead} or newer")), "{refused}");
}

/// A restore stores every tag and the registry's floor, also when a later entry of the same batch
/// leaves a restored tag unchanged (a claim refused on an exhausted tag).
#[tokio::test]
async fn a_restore_is_stored_whole() {
    let (_dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    let entries = [
        normal(1, 1, claim("orders", 10)),
        normal(1, 2, restore()),
        normal(1, 3, claim("coupons", 10)),
        normal(1, 4, claim("orders", 10)),
    ];
    let responses = sm.apply(entries).await.expect("apply");
    assert_eq!(responses[0], Response::Rejected(Rejection::TagNotFound));
    assert_eq!(responses[1], Response::Restored { tags: 2 });
    assert_eq!(responses[2], Response::Rejected(Rejection::TagExhausted));
    assert_eq!(responses[3], Response::Segment { start: 7_000, end: 7_010 });
    assert_eq!(tag_keys(&sm), ["tag/coupons", "tag/orders"]);
    let reopened = StateMachineStore::open(Arc::clone(&sm.shared.engine)).expect("load");
    assert_eq!(reopened.read(Clone::clone), sm.read(Clone::clone));
    assert_eq!(reopened.read(|s| s.snowflake.floor_ms), 1_700_000_700_000);
}

/// A builder snapshots the state as it was when it was made, while applies continue.
#[tokio::test]
async fn snapshot_is_point_in_time() {
    let (_dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    sm.apply([membership_entry(1, 1, &[1]), normal(1, 2, create("t", 1, 100)), normal(1, 3, claim("t", 100))])
        .await
        .expect("apply");
    let at_builder = sm.read(Clone::clone);
    let mut builder = sm.get_snapshot_builder().await;

    sm.apply([normal(1, 4, claim("t", 100)), normal(1, 5, create("u", 1, 1)), membership_entry(1, 6, &[1, 2])])
        .await
        .expect("apply more");

    let snapshot = builder.build_snapshot().await.expect("build");
    assert_eq!(snapshot.meta.last_log_id, Some(log_id(1, 3)));
    assert_eq!(snapshot.meta.last_membership, at_builder.membership);
    let data: IdStateMachine = codec::decode(snapshot.snapshot.get_ref()).expect("decode data");
    assert_eq!(data, at_builder);
    assert_eq!(data.tags["t"].max_id, 101);
    assert_ne!(sm.read(Clone::clone), at_builder);

    let current = sm.get_current_snapshot().await.expect("current").expect("stored");
    assert_eq!(current.meta, snapshot.meta);
    assert_eq!(current.snapshot.into_inner(), snapshot.snapshot.into_inner());
}

/// A builder that finishes after a newer snapshot was stored does not replace it.
#[tokio::test]
async fn an_older_build_never_replaces_a_newer_snapshot() {
    let (_dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    sm.apply([normal(1, 1, create("t", 1, 100))]).await.expect("apply");
    let mut old = sm.get_snapshot_builder().await;
    sm.apply([normal(1, 2, claim("t", 100))]).await.expect("apply");
    let newer = sm.get_snapshot_builder().await.build_snapshot().await.expect("build newer");
    let older = old.build_snapshot().await.expect("build older");
    assert_ne!(older.meta.snapshot_id, newer.meta.snapshot_id);
    let current = sm.get_current_snapshot().await.expect("current").expect("stored");
    assert_eq!(current.meta, newer.meta);
}

#[tokio::test]
async fn install_replaces_the_state_and_the_snapshot() {
    let (_leader_dir, leader) = temp_store(false);
    let mut leader_sm = leader.state_machine.clone();
    leader_sm
        .apply([
            membership_entry(1, 1, &[1, 2]),
            normal(1, 2, create("kept", 1, 10)),
            normal(1, 3, claim("kept", 10)),
            normal(1, 4, leafraft_state::Request::SetClusterId { cluster_id: 77 }),
            normal(
                1,
                5,
                leafraft_state::Request::CreateNamespace { namespace: "n".into(), record: namespace_record() },
            ),
            normal(
                1,
                6,
                leafraft_state::Request::ClaimTimeseq {
                    namespace: "n".into(),
                    second: 1_700_000_001,
                    count: 9,
                    now_ms: 1_700_000_000_000,
                },
            ),
        ])
        .await
        .expect("apply");
    let snapshot = leader_sm.get_snapshot_builder().await.build_snapshot().await.expect("build");

    let (follower_dir, follower) = temp_store(true);
    let mut sm = follower.state_machine.clone();
    sm.apply([blank(1, 1), normal(1, 2, create("gone", 1, 10))]).await.expect("apply");
    let stale = sm.get_snapshot_builder().await.build_snapshot().await.expect("build stale");
    assert_ne!(stale.meta, snapshot.meta);
    let syncs = sm.shared.engine.probe.syncs();

    let mut received = sm.begin_receiving_snapshot().await.expect("begin");
    *received = Cursor::new(snapshot.snapshot.get_ref().clone());
    sm.install_snapshot(&snapshot.meta, received).await.expect("install");
    assert_eq!(sm.shared.engine.probe.syncs(), syncs + 1, "install is synced");

    let expected = leader_sm.read(Clone::clone);
    assert_eq!(sm.read(Clone::clone), expected);
    assert_eq!(tag_keys(&sm), ["tag/kept"]);
    assert_eq!(sm.get_current_snapshot().await.expect("current").expect("stored").meta, snapshot.meta);
    drop((sm, follower));

    let reopened = crate::open(follower_dir.path(), &options(false)).expect("reopen");
    assert_eq!(reopened.state_machine.read(Clone::clone), expected);
    assert_eq!(reopened.state_machine.read(|state| state.cluster_id), 77);
    assert_eq!(reopened.state_machine.applied_at_open(), Some(log_id(1, 6)));
    assert_eq!(reopened.state_machine.read(|state| state.timeseq.next_seq["n"][&1_700_000_001]), 9);
    let mut sm = reopened.state_machine.clone();
    let current = sm.get_current_snapshot().await.expect("current").expect("stored");
    assert_eq!(current.meta, snapshot.meta);
    assert_eq!(current.snapshot.into_inner(), snapshot.snapshot.into_inner());
}

#[tokio::test]
async fn install_refuses_data_that_does_not_match_its_meta() {
    let (_dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    let state = IdStateMachine { last_applied: Some(log_id(1, 5)), ..Default::default() };
    let meta = typ::SnapshotMeta {
        last_log_id: Some(log_id(1, 9)),
        last_membership: Default::default(),
        snapshot_id: "1-9-0".into(),
    };
    let data = Box::new(Cursor::new(codec::encode(&state).expect("encode")));
    assert!(sm.install_snapshot(&meta, data).await.is_err());
    let garbage = Box::new(Cursor::new(vec![1, 2, 3]));
    assert!(sm.install_snapshot(&meta, garbage).await.is_err());
    assert_eq!(sm.read(Clone::clone), IdStateMachine::default());
    assert!(sm.get_current_snapshot().await.expect("current").is_none());
}

/// Thousands of tags with long descriptions: the snapshot is chunked, so sled writes no blob file
/// (blobs would need extra syncs), and it reads back whole.
#[tokio::test]
async fn large_snapshot_stays_inline() {
    let (dir, store) = temp_store(true);
    let mut sm = store.state_machine.clone();
    let entries: Vec<typ::Entry> = (1..=3000)
        .map(|i| {
            let request = Request::CreateTag {
                tag: format!("tag-{i:05}"),
                max_id: i,
                step: 1000,
                description: "d".repeat(1024),
                now_ms: i,
            };
            normal(1, i, request)
        })
        .collect();
    sm.apply(entries).await.expect("apply");
    let snapshot = sm.get_snapshot_builder().await.build_snapshot().await.expect("build");
    assert!(snapshot.snapshot.get_ref().len() > 3_000_000);
    store.flush().await.expect("flush");

    let blobs = std::fs::read_dir(dir.path().join(BLOB_DIR)).expect("list blobs").count();
    assert_eq!(blobs, 0, "sled moved a value into a blob file");
    let current = sm.get_current_snapshot().await.expect("current").expect("stored");
    assert_eq!(current.snapshot.into_inner(), snapshot.snapshot.into_inner());
}

/// The snapshot files in the store in `dir`, by name.
fn snapshot_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join(crate::private::SNAPSHOT_DIR))
        .expect("list snapshots")
        .map(|entry| entry.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    names.sort();
    names
}

/// The keys of the chunk layout (`snapshot/meta`, `snapshot/data/*`) in the keyspace.
fn chunk_keys(sm: &StateMachineStore) -> usize {
    let engine = &sm.shared.engine;
    let meta = engine.get(Keyspace::StateMachine, keys::SNAPSHOT_META).expect("get").into_iter().count();
    meta + engine.scan_prefix(Keyspace::StateMachine, keys::SNAPSHOT_DATA_PREFIX).count()
}

/// Applies, at `index` and the next, entries that raise the cluster version to
/// `Version::SNAPSHOT_FILES` and create tag `orders`.
async fn apply_past_the_baseline(sm: &mut StateMachineStore, index: u64) {
    let raise = Request::SetClusterVersion { version: Version::SNAPSHOT_FILES };
    sm.apply([normal(1, index, raise), normal(1, index + 1, create("orders", 1, 100))]).await.expect("apply");
}

/// At the baseline a snapshot is chunks in sled (what the baseline release reads back after a
/// rollback). From `Version::SNAPSHOT_FILES` on it is one file named by `snapshot/file`: the next
/// build removes the chunks in the batch that names the file, a build after it removes the
/// earlier file once its own record is synced, and a reopened store reads the same snapshot.
#[tokio::test]
async fn snapshots_move_from_chunks_to_one_file_once_past_the_baseline() {
    let (dir, store) = temp_store(true);
    let mut sm = store.state_machine.clone();
    sm.apply([normal(1, 1, create("t", 1, 100))]).await.expect("apply");
    sm.get_snapshot_builder().await.build_snapshot().await.expect("build at the baseline");
    assert!(chunk_keys(&sm) >= 2, "the baseline's layout: a meta and its chunks");
    assert_eq!(snapshot_files(dir.path()), Vec::<String>::new());

    apply_past_the_baseline(&mut sm, 2).await;
    let first = sm.get_snapshot_builder().await.build_snapshot().await.expect("build past the baseline");
    assert_eq!(chunk_keys(&sm), 0, "the chunks go with the record that names the file");
    let files = snapshot_files(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let current = sm.get_current_snapshot().await.expect("current").expect("stored");
    assert_eq!((current.meta, current.snapshot.into_inner()), (first.meta.clone(), first.snapshot.into_inner()));

    sm.apply([normal(1, 4, claim("orders", 10))]).await.expect("apply");
    let second = sm.get_snapshot_builder().await.build_snapshot().await.expect("build again");
    let after = snapshot_files(dir.path());
    assert_eq!(after.len(), 1, "the replaced file is removed: {after:?}");
    assert_ne!(after, files);

    let reopened = StateMachineStore::open(Arc::clone(&sm.shared.engine)).expect("reopen");
    let mut reopened_sm = reopened.clone();
    let current = reopened_sm.get_current_snapshot().await.expect("current").expect("stored");
    assert_eq!((current.meta, current.snapshot.into_inner()), (second.meta, second.snapshot.into_inner()));
    assert_eq!(snapshot_files(dir.path()), after, "open keeps the named file");
}

/// A file a crash left unnamed (written before its record, or replaced before its removal) is
/// removed when the store opens; the named one and files that are not snapshots stay.
#[tokio::test]
async fn files_no_record_names_are_removed_at_open() {
    let (dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    apply_past_the_baseline(&mut sm, 1).await;
    sm.get_snapshot_builder().await.build_snapshot().await.expect("build");
    let named = snapshot_files(dir.path());
    let folder = dir.path().join(crate::private::SNAPSHOT_DIR);
    std::fs::write(folder.join("00000000000000000099.snapshot"), b"half a snapshot").expect("write");
    std::fs::write(folder.join("operator-notes.txt"), b"mine").expect("write");
    StateMachineStore::open(Arc::clone(&sm.shared.engine)).expect("reopen");
    let mut expected = named.clone();
    expected.push("operator-notes.txt".into());
    assert_eq!(snapshot_files(dir.path()), expected);
}

/// A snapshot file changed on disk is refused by name, never handed to openraft (which would
/// send it to a follower as this node's state).
#[tokio::test]
async fn a_damaged_snapshot_file_is_refused() {
    let (dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    apply_past_the_baseline(&mut sm, 1).await;
    sm.get_snapshot_builder().await.build_snapshot().await.expect("build");
    let path = dir.path().join(crate::private::SNAPSHOT_DIR).join(&snapshot_files(dir.path())[0]);
    let mut bytes = std::fs::read(&path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&path, &bytes).expect("damage");
    let error = sm.get_current_snapshot().await.expect_err("a damaged snapshot is refused");
    assert!(error.to_string().contains("do not match"), "{error}");
    std::fs::remove_file(&path).expect("remove");
    let error = sm.get_current_snapshot().await.expect_err("a missing snapshot file is refused");
    assert!(error.to_string().contains("cannot read"), "{error}");
}

/// A build that finishes after a newer snapshot was stored leaves no file behind; an install
/// replaces the file of the snapshot before it.
#[tokio::test]
async fn a_refused_build_and_an_install_leave_one_file() {
    let (dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    apply_past_the_baseline(&mut sm, 1).await;
    let mut old = sm.get_snapshot_builder().await;
    sm.apply([normal(1, 3, claim("orders", 10))]).await.expect("apply");
    let newer = sm.get_snapshot_builder().await.build_snapshot().await.expect("build newer");
    old.build_snapshot().await.expect("build older");
    assert_eq!(snapshot_files(dir.path()).len(), 1);
    assert_eq!(sm.get_current_snapshot().await.expect("current").expect("stored").meta, newer.meta);

    let (other_dir, other) = temp_store(false);
    let mut other_sm = other.state_machine.clone();
    apply_past_the_baseline(&mut other_sm, 1).await;
    other_sm.get_snapshot_builder().await.build_snapshot().await.expect("build");
    let before = snapshot_files(other_dir.path());
    let data = newer.snapshot.get_ref().clone();
    other_sm.install_snapshot(&newer.meta, Box::new(Cursor::new(data.clone()))).await.expect("install");
    let after = snapshot_files(other_dir.path());
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, before);
    assert_eq!(chunk_keys(&other_sm), 0);
    let current = other_sm.get_current_snapshot().await.expect("current").expect("stored");
    assert_eq!((current.meta, current.snapshot.into_inner()), (newer.meta, data));
}
