//! The time-sequence registry's two layouts: what each apply writes, the switch from one to the
//! other, installs, and a store read back after every apply (both layouts and across the switch)
//! that never hands out a sequence twice.

use std::collections::BTreeSet;
use std::sync::Arc;

use leafraft_state::timeseq::RETENTION_S;
use leafraft_state::Claim;
use leafraft_state::IdStateMachine;
use leafraft_state::Request;
use leafraft_state::Response;
use leafraft_state::SharedBlock;
use openraft::storage::RaftStateMachine;
use openraft::RaftSnapshotBuilder;
use proptest::prelude::*;

use super::*;
use crate::fixtures::*;
use crate::StateMachineStore;

const T0_S: u64 = 1_800_000_000;

fn create_namespace(name: &str) -> Request {
    Request::CreateNamespace { namespace: name.into(), record: namespace_record() }
}

fn claim_timeseq(name: &str, second: u64, count: u64, now_ms: u64) -> Request {
    Request::ClaimTimeseq { namespace: name.into(), second, count, now_ms }
}

fn raise_to_claim_batches() -> Request {
    Request::SetClusterVersion { version: Version::CLAIM_BATCHES }
}

/// Every key of the registry in the store, in either layout, as text (seconds in hex).
fn registry_keys(sm: &StateMachineStore) -> Vec<String> {
    sm.shared
        .engine
        .scan_prefix(Keyspace::StateMachine, keys::TIMESEQ)
        .map(|kv| {
            let key = kv.expect("read").0;
            if let Some((last, record)) = keys::timeseq_window(&key) {
                return format!("timeseq/win/{last:x}/{record}");
            }
            match keys::timeseq_second(&key) {
                Some((second, shard)) => format!("timeseq/seq/{second:x}/{shard}"),
                None => String::from_utf8(key).expect("utf-8"),
            }
        })
        .collect()
}

/// The text `registry_keys` shows for the shard of `name` in `second`.
fn second_key(second: u64, name: &str) -> String {
    format!("timeseq/seq/{second:x}/{}", shard_of(name))
}

fn reopened(sm: &StateMachineStore) -> StateMachineStore {
    StateMachineStore::open(Arc::clone(&sm.shared.engine)).expect("load")
}

fn is_split(sm: &StateMachineStore) -> bool {
    sm.shared.timeseq_split.load(std::sync::atomic::Ordering::SeqCst)
}

/// Before the cluster version reaches 0.3.0 the registry is the one value release 0.1.0 reads;
/// the apply that raises it removes that value and writes every key of the split layout, and from
/// then on an apply writes the seconds it claimed and removes the seconds it forgot.
#[tokio::test]
async fn the_registry_is_split_by_the_apply_that_reaches_claim_batches() {
    let (_dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    let now_ms = T0_S * 1000;
    let entries = [normal(1, 1, create_namespace("orders")), normal(1, 2, claim_timeseq("orders", T0_S, 5, now_ms))];
    sm.apply(entries).await.expect("apply");
    assert_eq!(registry_keys(&sm), ["timeseq"]);
    assert!(!is_split(&sm));

    let batch = Request::ClaimBatch {
        claims: vec![
            Claim::Timeseq { namespace: "orders".into(), second: T0_S + 1, count: 3, now_ms },
            Claim::Timeseq { namespace: "missing".into(), second: T0_S + 1, count: 3, now_ms },
        ],
    };
    let entries = [normal(1, 3, raise_to_claim_batches()), normal(1, 4, batch), normal(1, 5, create_namespace("b"))];
    sm.apply(entries).await.expect("apply");
    let split = [
        "timeseq/clock".to_string(),
        "timeseq/ns/b".into(),
        "timeseq/ns/orders".into(),
        second_key(T0_S, "orders"),
        second_key(T0_S + 1, "orders"),
    ];
    assert_eq!(registry_keys(&sm), split, "the whole value is gone and every key is written");
    assert!(is_split(&sm));
    assert_eq!(reopened(&sm).read(Clone::clone), sm.read(Clone::clone));

    // Past the retention: T0_S is forgotten, in memory and on disk.
    let later_ms = (T0_S + RETENTION_S + 1) * 1000;
    sm.apply([normal(1, 6, claim_timeseq("b", T0_S + RETENTION_S + 1, 1, later_ms))]).await.expect("apply");
    let split = [
        "timeseq/clock".to_string(),
        "timeseq/ns/b".into(),
        "timeseq/ns/orders".into(),
        second_key(T0_S + 1, "orders"),
        second_key(T0_S + RETENTION_S + 1, "b"),
    ];
    assert_eq!(registry_keys(&sm), split);
    let reopened = reopened(&sm);
    assert_eq!(reopened.read(Clone::clone), sm.read(Clone::clone));
    assert!(is_split(&reopened));
    assert_eq!(reopened.read(|s| s.timeseq.next_seq["orders"].clone()), [(T0_S + 1, 3)].into());
}

/// A store that reached 0.3.0 before this layout existed (the whole value at 0.3.0: a build of
/// the release in progress) is split by its first apply, whatever that apply holds.
#[tokio::test]
async fn a_whole_registry_at_claim_batches_is_split_by_the_next_apply() {
    let (_dir, store) = temp_store(false);
    let sm = store.state_machine.clone();
    let mut registry = leafraft_state::TimeseqRegistry { newest_now_ms: T0_S * 1000, ..Default::default() };
    registry.namespaces.insert("orders".into(), namespace_record());
    registry.next_seq.insert("orders".into(), [(T0_S, 7)].into());
    let mut batch = Batch::default();
    batch.put(keys::TIMESEQ, codec::encode(&registry).expect("encode"));
    batch.put(keys::CLUSTER_VERSION, codec::encode(&Version::CLAIM_BATCHES).expect("encode"));
    sm.shared.engine.write(Keyspace::StateMachine, batch).expect("write");
    let mut sm = reopened(&sm);
    assert!(!is_split(&sm), "the store holds the whole value");
    assert_eq!(sm.read(|s| s.timeseq.clone()), registry);

    sm.apply([normal(1, 1, Request::Noop)]).await.expect("apply");
    assert!(is_split(&sm));
    assert_eq!(
        registry_keys(&sm),
        ["timeseq/clock".to_string(), "timeseq/ns/orders".into(), second_key(T0_S, "orders")]
    );
    assert_eq!(reopened(&sm).read(|s| s.timeseq.clone()), registry);
}

/// A store never holds both layouts (the switch is one batch); one that does is refused by name
/// rather than read as either.
#[test]
fn a_store_holding_both_layouts_is_refused() {
    let (_dir, store) = temp_store(false);
    let sm = store.state_machine.clone();
    let mut batch = Batch::default();
    batch.put(keys::TIMESEQ, codec::encode(&leafraft_state::TimeseqRegistry::default()).expect("encode"));
    batch.put(keys::timeseq_namespace_key("orders"), codec::encode(&namespace_record()).expect("encode"));
    sm.shared.engine.write(Keyspace::StateMachine, batch).expect("write");
    let Err((what, error)) = StateMachineStore::open(Arc::clone(&sm.shared.engine)) else {
        panic!("a store with both layouts opened");
    };
    assert_eq!(what, "time-sequence registry");
    assert!(error.to_string().contains("both layouts"), "{error}");
}

/// An installed snapshot is stored in the layout of its own cluster version, replacing the other.
#[tokio::test]
async fn an_installed_snapshot_is_stored_in_the_layout_of_its_cluster_version() {
    let (_dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    let entries = [
        membership_entry(1, 1, &[1]),
        normal(1, 2, create_namespace("orders")),
        normal(1, 3, claim_timeseq("orders", T0_S, 5, T0_S * 1000)),
    ];
    sm.apply(entries).await.expect("apply");
    let at_baseline = sm.get_snapshot_builder().await.build_snapshot().await.expect("build");
    sm.apply([normal(1, 4, raise_to_claim_batches())]).await.expect("apply");
    let split = sm.get_snapshot_builder().await.build_snapshot().await.expect("build");

    let (_other_dir, other) = temp_store(false);
    let mut other_sm = other.state_machine.clone();
    for (snapshot, keys, layout) in [(&split, 3, true), (&at_baseline, 1, false), (&split, 3, true)] {
        let data = Box::new(std::io::Cursor::new(snapshot.snapshot.get_ref().clone()));
        other_sm.install_snapshot(&snapshot.meta, data).await.expect("install");
        assert_eq!(registry_keys(&other_sm).len(), keys, "{:?}", registry_keys(&other_sm));
        assert_eq!(is_split(&other_sm), layout);
        let read_back = reopened(&other_sm);
        assert_eq!(is_split(&read_back), layout);
        assert_eq!(read_back.read(Clone::clone), other_sm.read(Clone::clone));
    }
    assert_eq!(other_sm.read(Clone::clone), sm.read(Clone::clone));
}

/// The data directory release 0.1.0 wrote opens with the whole value, and is split by the apply
/// that reaches 0.3.0.
#[tokio::test]
async fn the_baseline_data_directory_opens_in_either_layout() {
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/0.1.0/node1");
    let dir = tempfile::TempDir::new().expect("temp dir");
    for file in std::fs::read_dir(&golden).expect("the golden directory") {
        let file = file.expect("entry");
        std::fs::copy(file.path(), dir.path().join(file.file_name())).expect("copy");
    }
    let store = crate::open(dir.path(), &options(false)).expect("open the baseline's store");
    let mut sm = store.state_machine.clone();
    assert!(sm.read(|s| s.timeseq.namespaces.contains_key("golden-ts")));
    assert_eq!(registry_keys(&sm), ["timeseq"]);
    let before = sm.read(Clone::clone);

    let index = before.last_applied.map_or(0, |id| id.index) + 1;
    let now_ms = before.timeseq.newest_now_ms.max(T0_S * 1000);
    let entries = [
        normal(9, index, raise_to_claim_batches()),
        normal(9, index + 1, claim_timeseq("golden-ts", now_ms / 1000, 4, now_ms)),
    ];
    let responses = sm.apply(entries).await.expect("apply");
    assert!(matches!(responses[1], Response::TimeseqRange { start: 0, end: 4, .. }), "{responses:?}");
    assert!(is_split(&sm));
    assert!(!registry_keys(&sm).contains(&"timeseq".to_string()));
    drop((sm, store));
    let store = crate::open(dir.path(), &options(false)).expect("reopen");
    let after = store.state_machine.read(Clone::clone);
    assert_eq!(after.timeseq.namespaces, before.timeseq.namespaces);
    assert_eq!(after.tags, before.tags);
    assert_eq!(after.timeseq.next_seq["golden-ts"][&(now_ms / 1000)], 4);
}

/// One step of the property test: a few requests applied together, then maybe a reopen.
#[derive(Debug, Clone)]
struct Step {
    requests: Vec<Request>,
    reopen: bool,
}

/// "a", a namespace of the same shard (so one stored value holds both), "b" (created by a step,
/// if any) and one never created.
fn namespaces() -> [String; 4] {
    let twin = (0..).map(|i| format!("twin-{i}")).find(|name| shard_of(name) == shard_of("a"));
    ["a".into(), twin.expect("a name in a's shard"), "b".into(), "missing".into()]
}

/// A claim of a node whose clock runs `skew_s` off at real second `at_s`, for the second `ahead_s`
/// past its clock (negative: late). Most claims fall in a few seconds, so namespaces of one
/// shard meet in one stored value across applies; clocks jump by up to 25 minutes now and then,
/// so seconds are forgotten and some claims are refused.
/// Now and then a window claim instead: up to 61 seconds (61 is refused) from a first second
/// up to 12 past the clock (past 10 is refused).
fn timeseq_claim() -> impl Strategy<Value = Claim> {
    let at_s = prop_oneof![3 => 0u64..8, 1 => 0u64..1500];
    let skew_s = prop_oneof![3 => Just(0i64), 1 => -700i64..700];
    // A window is shared by `members` (0: a window claim of its own).
    let window = prop_oneof![2 => Just(None), 1 => (1u64..62, -2i64..13, 0u64..4).prop_map(Some)];
    (0..4usize, at_s, skew_s, -2i64..4, 1u64..40, window).prop_map(|(ns, at_s, skew_s, ahead_s, count, window)| {
        let clock_s = (T0_S + at_s).saturating_add_signed(skew_s);
        let namespace = namespaces()[ns].clone();
        let now_ms = clock_s * 1000 + 500;
        match window {
            None => Claim::Timeseq { namespace, second: clock_s.saturating_add_signed(ahead_s), count, now_ms },
            Some((seconds, ahead_s, 0)) => Claim::TimeseqWindow {
                namespace,
                first_second: clock_s.saturating_add_signed(ahead_s),
                seconds,
                count,
                now_ms,
            },
            Some((seconds, ahead_s, members)) => Claim::TimeseqSharedWindow {
                namespace,
                first_second: clock_s.saturating_add_signed(ahead_s),
                seconds,
                now_ms,
                blocks: (1..=members).map(|member| SharedBlock { member, count: count + member }).collect(),
            },
        }
    })
}

/// The ranges one claim's answer hands out, as (namespace, second, start, end).
fn claim_ranges(claim: &Claim, answer: &Response) -> Vec<(String, u64, u64, u64)> {
    match (claim, answer) {
        (Claim::Timeseq { namespace, .. }, Response::TimeseqRange { second, start, end }) => {
            vec![(namespace.clone(), *second, *start, *end)]
        }
        (Claim::TimeseqWindow { namespace, .. }, Response::TimeseqWindow { first_second, seconds, start, end }) => {
            (*first_second..first_second + seconds).map(|second| (namespace.clone(), second, *start, *end)).collect()
        }
        (Claim::TimeseqSharedWindow { namespace, .. }, Response::Batch(blocks)) => blocks
            .iter()
            .flat_map(|block| match block {
                Response::TimeseqWindow { first_second, seconds, start, end } => (*first_second
                    ..first_second + seconds)
                    .map(|second| (namespace.clone(), second, *start, *end))
                    .collect(),
                _ => Vec::new(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        6 => timeseq_claim().prop_map(|claim| claim.request().unwrap_or(Request::ClaimBatch { claims: vec![claim] })),
        4 => prop::collection::vec(timeseq_claim(), 1..6).prop_map(|claims| Request::ClaimBatch { claims }),
        1 => Just(create_namespace("b")),
        1 => Just(raise_to_claim_batches()),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (prop::collection::vec(request(), 1..5), prop::bool::weighted(0.3))
        .prop_map(|(requests, reopen)| Step { requests, reopen })
}

/// Every range a response hands out, as (namespace, second, start, end).
fn ranges(request: &Request, response: &Response) -> Vec<(String, u64, u64, u64)> {
    match (request, response) {
        (Request::ClaimTimeseq { namespace, .. }, Response::TimeseqRange { second, start, end }) => {
            vec![(namespace.clone(), *second, *start, *end)]
        }
        (Request::ClaimBatch { claims }, Response::Batch(answers)) => {
            claims.iter().zip(answers).flat_map(|(claim, answer)| claim_ranges(claim, answer)).collect()
        }
        _ => Vec::new(),
    }
}

fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    runtime.block_on(async {
        let (_dir, store) = temp_store(false);
        let mut sm = store.state_machine.clone();
        let mut memory = IdStateMachine::default();
        let [a, twin, ..] = namespaces();
        let creates = [normal(1, 1, create_namespace(&a)), normal(1, 2, create_namespace(&twin))];
        sm.apply(creates.clone()).await.expect("apply");
        for entry in &creates {
            memory.apply(entry);
        }
        let mut index = 2;
        let mut handed_out: BTreeSet<(String, u64, u64)> = BTreeSet::new();
        for step in steps {
            let entries: Vec<_> = step
                .requests
                .iter()
                .map(|r| {
                    index += 1;
                    normal(1, index, r.clone())
                })
                .collect();
            let responses = sm.apply(entries.clone()).await.expect("apply");
            for (entry, response) in entries.iter().zip(&responses) {
                prop_assert_eq!(&memory.apply(entry), response, "the store answers as the state machine");
            }
            for (request, response) in step.requests.iter().zip(&responses) {
                for (namespace, second, start, end) in ranges(request, response) {
                    for seq in start..end {
                        prop_assert!(
                            handed_out.insert((namespace.clone(), second, seq)),
                            "{namespace} {second} {seq} twice"
                        );
                    }
                }
            }
            let read_back = reopened(&sm);
            prop_assert_eq!(read_back.read(Clone::clone), sm.read(Clone::clone), "the store differs from memory");
            prop_assert_eq!(is_split(&read_back), split_at(memory.cluster_version));
            let keys = registry_keys(&sm);
            prop_assert_eq!(keys.contains(&"timeseq".to_string()), !is_split(&sm), "{:?}", keys);
            if step.reopen {
                // Claims after a reopen never overlap those before it: go on with the store read back.
                sm = read_back;
            }
        }
        prop_assert_eq!(sm.read(Clone::clone), memory);
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// After every apply the store reads back as the memory, in the whole layout, the split one
    /// and across the switch; going on from a store read back, no sequence is handed out twice.
    #[test]
    fn a_store_read_back_after_any_apply_equals_memory_and_never_hands_out_twice(
        steps in prop::collection::vec(step(), 1..16),
    ) {
        run(steps)?;
    }
}

proptest! {
    /// A shard read in place and updated writes the bytes the owned value would: the same
    /// pairs, the same name order, so stores written either way read back alike.
    #[test]
    fn a_shard_updated_in_place_encodes_as_the_owned_value_would(
        stored in prop::collection::btree_map("[a-z]{1,6}", 0u64..1_000, 0..40),
        updates in prop::collection::vec(("[a-z]{1,6}", 0u64..1_000), 0..40),
    ) {
        let bytes = codec::encode(&stored).expect("encode");
        let mut in_place: BorrowedShard = codec::decode_borrowed(&bytes).expect("decode in place");
        let mut owned: ShardValue = stored.clone();
        for (name, next) in &updates {
            let changed = in_place.set(name, *next);
            prop_assert_eq!(changed, owned.get(name) != Some(next));
            owned.insert(name.clone(), *next);
        }
        prop_assert_eq!(
            codec::encode(&SortedShard(&in_place.0)).expect("encode in place"),
            codec::encode(&owned).expect("encode owned")
        );
    }
}

/// A stored shard naming a namespace twice is corrupt and refused, not searched wrongly.
#[test]
fn a_shard_naming_a_namespace_twice_is_refused() {
    let twice = codec::encode(&SortedShard(&[("b", 1), ("a", 2), ("b", 3)])).expect("encode");
    assert!(codec::decode_borrowed::<BorrowedShard>(&twice).is_err());
    let unordered = codec::encode(&SortedShard(&[("b", 1), ("a", 2)])).expect("encode");
    let read: BorrowedShard = codec::decode_borrowed(&unordered).expect("decode");
    assert_eq!(read.0, vec![("a", 2), ("b", 1)]);
}

/// Window records are read back in key order (latest last second first), not in the order they
/// were written: a window named again by a later apply, in a record keyed by an earlier last
/// second, keeps its highest end, and a claim after the reopen starts above it.
#[tokio::test]
async fn a_window_raised_after_a_record_with_a_later_window_reads_back_at_its_highest_end() {
    let (_dir, store) = temp_store(false);
    let mut sm = store.state_machine.clone();
    let now_ms = T0_S * 1000;
    let window = |name: &str, seconds| Claim::TimeseqWindow {
        namespace: name.into(),
        first_second: T0_S + 1,
        seconds,
        count: 10,
        now_ms,
    };
    let batch = |claims| Request::ClaimBatch { claims };
    let entries = [
        normal(1, 1, create_namespace("a")),
        normal(1, 2, create_namespace("b")),
        normal(1, 3, raise_to_claim_batches()),
    ];
    sm.apply(entries).await.expect("apply");
    let entries = [
        // One record, keyed by b's last second: a's short window and b's long one.
        normal(1, 4, batch(vec![window("a", 10), window("b", 60)])),
    ];
    sm.apply(entries).await.expect("apply");
    // A record keyed by a's earlier last second, with a's window raised.
    sm.apply([normal(1, 5, batch(vec![window("a", 10)]))]).await.expect("apply");
    let keys = registry_keys(&sm);
    let records: Vec<_> = keys.iter().filter(|key| key.starts_with("timeseq/win/")).collect();
    assert_eq!(
        records,
        [&format!("timeseq/win/{:x}/5", T0_S + 10), &format!("timeseq/win/{:x}/4", T0_S + 60)],
        "{keys:?}"
    );
    let mut read_back = reopened(&sm);
    assert_eq!(read_back.read(Clone::clone), sm.read(Clone::clone), "the store differs from memory");
    let answers = read_back.apply([normal(1, 6, batch(vec![window("a", 10)]))]).await.expect("apply");
    assert_eq!(
        answers,
        [Response::Batch(vec![Response::TimeseqWindow { first_second: T0_S + 1, seconds: 10, start: 20, end: 30 }])],
        "the third block of a's window starts above the two before the reopen"
    );
}
