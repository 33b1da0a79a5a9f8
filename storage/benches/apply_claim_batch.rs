//! `cargo bench -p storage --bench apply_claim_batch`: what applying one `ClaimBatch` of time-sequence
//! claims costs through `StateMachineStore::apply` (memory and disk) against a registry holding
//! `NAMESPACES` namespaces with `RETENTION_S` claimed seconds each (10,000 namespaces
//! claiming every second on 3 nodes). Prints figures, judges nothing: a slow machine only prints
//! larger numbers.
//!
//! Each round is one second: three batches (one per node) each claim that second for every
//! namespace. The first batch of a second raises the horizon (and forgets a second of every
//! namespace), the other two do not; both kinds are reported. `LEAFRAFT_BENCH_NAMESPACES`,
//! `LEAFRAFT_BENCH_SECONDS` and `LEAFRAFT_BENCH_ROUNDS` scale it down;
//! `LEAFRAFT_BENCH_LAYOUT=whole` measures the registry stored as one value (a cluster before
//! 0.3.0) instead of split.
//!
//! Then it builds two snapshots of the registry, and applies and syncs one-claim entries alone
//! and beside a snapshot build, on a store that `fdatasync`s: how long a build holds up the log.
//!
//! A counting allocator measures the registry's memory (live bytes after building it, minus
//! before) and the peak of live bytes above the resting state during an apply.

use std::alloc::GlobalAlloc;
use std::alloc::Layout;
use std::alloc::System;
use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Instant;

use leafraft_state::typ;
use leafraft_state::Claim;
use leafraft_state::IdStateMachine;
use leafraft_state::NamespaceRecord;
use leafraft_state::Request;
use leafraft_state::Version;
use openraft::storage::RaftStateMachine;
use openraft::CommittedLeaderId;
use openraft::EntryPayload;
use openraft::Membership;

const T0_S: u64 = 1_800_000_000;
const NODES: u64 = 3;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= layout.size() {
            let live = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size - layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn log_id(index: u64) -> typ::LogId {
    typ::LogId::new(CommittedLeaderId::new(1, 1), index)
}

fn namespace_name(n: u64) -> String {
    format!("ns-{n:05}")
}

fn record() -> NamespaceRecord {
    NamespaceRecord {
        epoch_s: leafraft_state::timeseq::DEFAULT_EPOCH_S,
        utc_offset_s: 0,
        shard_bits: 12,
        seq_bits: 19,
        description: String::new(),
        created_at_ms: 1,
    }
}

/// A state whose registry holds `namespaces` namespaces, each with the last `seconds` seconds
/// up to `T0_S` claimed, at `cluster_version`.
fn full_state(namespaces: u64, seconds: u64, cluster_version: Version) -> IdStateMachine {
    let membership =
        Membership::new(vec![[1u64].into()], BTreeMap::from([(1, leafraft_state::Node::new("127.0.0.1:1", 1))]));
    let mut state = IdStateMachine {
        last_applied: Some(log_id(1)),
        membership: typ::StoredMembership::new(Some(log_id(1)), membership),
        cluster_version,
        ..Default::default()
    };
    let first_s = T0_S - seconds + 1;
    for n in 0..namespaces {
        let name = namespace_name(n);
        state.timeseq.namespaces.insert(name.clone(), record());
        state.timeseq.next_seq.insert(name, (first_s..=T0_S).map(|second| (second, 30)).collect());
    }
    state.timeseq.newest_now_ms = T0_S * 1000;
    state
}

/// One node's batch: `second` claimed for every namespace.
fn batch(index: u64, namespaces: u64, second: u64, node: u64) -> typ::Entry {
    let now_ms = second * 1000 + node;
    let claims =
        (0..namespaces).map(|n| Claim::Timeseq { namespace: namespace_name(n), second, count: 10, now_ms }).collect();
    typ::Entry { log_id: log_id(index), payload: EntryPayload::Normal(Request::ClaimBatch { claims }) }
}

/// How a snapshot being built delays the node's other syncs (the log's appends wait on the same
/// sled log): a one-claim apply and a sync, over and over, alone and while a snapshot of the
/// registry in `data` is built, on a store that `fdatasync`s.
async fn syncs_beside_a_snapshot(meta: &typ::SnapshotMeta, data: Vec<u8>, namespaces: u64) {
    let dir = tempfile::TempDir::new().expect("temp dir");
    let store = storage::open(dir.path(), &storage::StoreOptions::default()).expect("open a synced store");
    let sm = store.state_machine.clone();
    sm.clone().install_snapshot(meta, Box::new(Cursor::new(data))).await.expect("install");
    let mut index = meta.last_log_id.map_or(0, |id| id.index);
    let mut apply_and_sync = || {
        index += 1;
        let entry = batch(index, namespaces.min(1), T0_S + 1, index % NODES);
        let mut sm = sm.clone();
        let store = &store;
        async move {
            let started = Instant::now();
            sm.apply([entry]).await.expect("apply");
            store.flush().await.expect("sync");
            started.elapsed().as_secs_f64() * 1000.0
        }
    };
    let mut alone = Vec::new();
    for _ in 0..30 {
        alone.push(apply_and_sync().await);
    }
    let mut builder = store.state_machine.clone().get_snapshot_builder().await;
    let started = Instant::now();
    let build = tokio::spawn(async move { openraft::RaftSnapshotBuilder::build_snapshot(&mut builder).await });
    let mut beside = Vec::new();
    while !build.is_finished() {
        beside.push(apply_and_sync().await);
    }
    let build_ms = started.elapsed().as_secs_f64() * 1000.0;
    build.await.expect("the build's task").expect("build a snapshot");
    let max = |values: &[f64]| values.iter().copied().fold(0.0, f64::max);
    println!(
        "one-claim apply + sync (fdatasync): {:.1} ms median, {:.1} ms max alone; {:.1} ms median, {:.1} ms max \
         during a {build_ms:.0} ms snapshot build ({} of them)",
        median(alone.clone()),
        max(&alone),
        median(beside.clone()),
        max(&beside),
        beside.len()
    );
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let namespaces = env_or("LEAFRAFT_BENCH_NAMESPACES", 10_000);
    let rounds = env_or("LEAFRAFT_BENCH_ROUNDS", 5);
    // Fewer seconds per namespace: a registry of window blocks holds only the last few.
    let seconds = env_or("LEAFRAFT_BENCH_SECONDS", leafraft_state::timeseq::RETENTION_S).max(1);
    // The registry's layout follows the cluster version: `whole` is the one value of a cluster
    // before 0.3.0 (every apply rewrites it), the default the split layout of 0.3.0.
    let whole = std::env::var("LEAFRAFT_BENCH_LAYOUT").is_ok_and(|layout| layout == "whole");
    let cluster_version = if whole { Version::new(0, 2, 0) } else { Version::CLAIM_BATCHES };
    println!("layout: {}", if whole { "whole (cluster version 0.2.0)" } else { "split (cluster version 0.3.0)" });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let before = LIVE.load(Ordering::Relaxed);
        let state = full_state(namespaces, seconds, cluster_version);
        let registry_bytes = LIVE.load(Ordering::Relaxed) - before;
        println!(
            "registry: {namespaces} namespaces x {} seconds: {:.1} MiB live in memory",
            seconds,
            mib(registry_bytes)
        );

        let dir = tempfile::TempDir::new().expect("temp dir");
        let options = storage::StoreOptions { fsync: false, ..Default::default() };
        let store = storage::open(dir.path(), &options).expect("open a store");
        let mut sm = store.state_machine.clone();
        let data = storage::snapshot_data(&state).expect("encode the snapshot");
        let meta = typ::SnapshotMeta {
            last_log_id: state.last_applied,
            last_membership: state.membership.clone(),
            snapshot_id: "bench".into(),
        };
        println!("snapshot: {:.1} MiB", mib(data.len()));
        // The same entries applied to a copy in memory: what the state machine alone costs.
        let mut memory = state.clone();
        drop(state);
        let resting = LIVE.load(Ordering::Relaxed);
        PEAK.store(resting, Ordering::Relaxed);
        let started = Instant::now();
        sm.install_snapshot(&meta, Box::new(Cursor::new(data.clone()))).await.expect("install");
        println!(
            "install: {:.2} s, peak extra memory {:.1} MiB",
            started.elapsed().as_secs_f64(),
            mib(PEAK.load(Ordering::Relaxed) - resting)
        );

        let (mut rising, mut steady, mut peaks, mut in_memory) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut index = 1;
        for round in 1..=rounds {
            for node in 0..NODES {
                index += 1;
                let entry = batch(index, namespaces, T0_S + round, node);
                let started = Instant::now();
                memory.apply(&entry);
                in_memory.push(started.elapsed().as_secs_f64() * 1000.0);
                let resting = LIVE.load(Ordering::Relaxed);
                PEAK.store(resting, Ordering::Relaxed);
                let started = Instant::now();
                let answers = sm.apply([entry]).await.expect("apply");
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                peaks.push(mib(PEAK.load(Ordering::Relaxed) - resting));
                assert!(matches!(&answers[0], leafraft_state::Response::Batch(claims) if claims.len() == namespaces as usize));
                if node == 0 {
                    rising.push(ms)
                } else {
                    steady.push(ms)
                }
            }
        }
        println!(
            "apply one ClaimBatch of {namespaces} claims: {:.1} ms when it raises the horizon, {:.1} ms otherwise \
             (medians of {rounds} and {} batches); peak extra memory during an apply: {:.1} MiB (median)",
            median(rising),
            median(steady),
            rounds * (NODES - 1),
            median(peaks)
        );
        println!("  of which the state machine alone (IdStateMachine::apply): {:.1} ms (median)", median(in_memory));
        // A snapshot of the registry, built twice: the second replaces the first (its file, or
        // its chunks before 0.3.0), as every snapshot after a node's first does.
        for build in ["first", "second"] {
            let started = Instant::now();
            let mut builder = sm.get_snapshot_builder().await;
            let cloned_ms = started.elapsed().as_secs_f64() * 1000.0;
            let started = Instant::now();
            let snapshot = openraft::RaftSnapshotBuilder::build_snapshot(&mut builder).await.expect("build a snapshot");
            println!(
                "{build} snapshot build ({:.1} MiB): copying the state {cloned_ms:.1} ms (blocks applies), encoding \
                 and storing {:.1} ms",
                mib(snapshot.snapshot.get_ref().len()),
                started.elapsed().as_secs_f64() * 1000.0
            );
        }
        syncs_beside_a_snapshot(&meta, data, namespaces).await;
        let applied = sm.read(Clone::clone);
        drop((sm, store));
        let started = Instant::now();
        let reopened = storage::open(dir.path(), &options).expect("reopen");
        println!("reopen: {:.2} s", started.elapsed().as_secs_f64());
        assert!(reopened.state_machine.read(|state| *state == applied), "the reopened state differs");
        assert!(applied == memory, "the store's state differs from the one applied in memory");
    });
}
