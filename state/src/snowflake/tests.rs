//! Worker registry tests: the takeover rules table-tested, and a property test that no two
//! holdings of a worker ever share a timestamp, whatever the proposers' clocks say.

use std::collections::BTreeMap;

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;

const LEASE: u64 = 60_000;
const WINDOW: u64 = 10_000;

fn registry(worker_bits: u8) -> SnowflakeRegistry {
    let mut registry = SnowflakeRegistry::default();
    let layout =
        SnowflakeLayout { worker_bits, time_bits: 53 - worker_bits, sequence_bits: 10, ..SnowflakeLayout::LEAF };
    assert_eq!(registry.set_layout(layout), Response::SnowflakeLayout(layout));
    registry
}

fn acquired(response: Response) -> (u32, u64, u64, u64) {
    match response {
        Response::WorkerAcquired { worker, epoch, floor_ms, window_end_ms } => (worker, epoch, floor_ms, window_end_ms),
        other => panic!("expected an acquired worker, got {other:?}"),
    }
}

#[test]
fn layouts_are_validated_and_recorded_once() {
    let mut registry = SnowflakeRegistry::default();
    assert!(SnowflakeLayout::LEAF.validate().is_ok());
    for bad in [
        SnowflakeLayout { time_bits: 42, ..SnowflakeLayout::LEAF },
        SnowflakeLayout { time_bits: 39, worker_bits: 12, ..SnowflakeLayout::LEAF },
        SnowflakeLayout { worker_bits: 0, sequence_bits: 22, ..SnowflakeLayout::LEAF },
    ] {
        assert!(matches!(registry.set_layout(bad), Response::Rejected(Rejection::InvalidArgument(_))), "{bad:?}");
    }
    assert_eq!(registry.layout, None);
    assert_eq!(registry.set_layout(SnowflakeLayout::LEAF), Response::SnowflakeLayout(SnowflakeLayout::LEAF));
    let other = SnowflakeLayout { time_bits: 42, worker_bits: 9, ..SnowflakeLayout::LEAF };
    assert_eq!(registry.set_layout(other), Response::SnowflakeLayout(SnowflakeLayout::LEAF), "the first layout stays");
}

#[test]
fn acquire_needs_a_layout() {
    let mut registry = SnowflakeRegistry::default();
    assert_eq!(registry.acquire(1, 1000, LEASE, WINDOW), Response::Rejected(Rejection::LayoutMissing));
}

#[test]
fn a_node_gets_its_own_worker_back_and_starts_above_its_old_window() {
    let mut registry = registry(10);
    let (worker, epoch, floor, end) = acquired(registry.acquire(7, 1_000_000, LEASE, WINDOW));
    assert_eq!((worker, epoch, floor, end), (0, 1, 0, 1_010_000));
    // Restarted with its clock 10 s behind: same worker, new epoch, above the old window.
    let (again, epoch2, floor2, end2) = acquired(registry.acquire(7, 990_000, LEASE, WINDOW));
    assert_eq!((again, epoch2), (0, 2));
    assert_eq!(floor2, 1_010_001);
    assert_eq!(end2, 1_020_001);
    assert_eq!(registry.extend(0, epoch, 2_000_000, 1_990_000), Response::Rejected(Rejection::LeaseLost));
}

#[test]
fn after_a_takeover_the_old_holder_cannot_extend() {
    let mut registry = registry(1); // two workers
    let (w1, e1, _, _) = acquired(registry.acquire(1, 1000, LEASE, WINDOW));
    let (w2, _, _, _) = acquired(registry.acquire(2, 1000, LEASE, WINDOW));
    assert_ne!(w1, w2);
    assert_eq!(registry.acquire(3, 1000 + LEASE - 1, LEASE, WINDOW), Response::Rejected(Rejection::NoWorkerAvailable));
    // Node 2 keeps extending; node 1 does not, and its lease expires.
    assert!(matches!(registry.extend(w2, 1, 40_000, 30_000), Response::WorkerExtended { .. }));
    let (taken, e3, floor, _) = acquired(registry.acquire(3, 1000 + LEASE, LEASE, WINDOW));
    assert_eq!(taken, w1);
    assert_eq!(floor, 1000 + WINDOW + 1, "the new holder starts above the old window");
    assert_eq!(registry.extend(w1, e1, 70_000, 61_000), Response::Rejected(Rejection::LeaseLost));
    assert!(matches!(registry.extend(w1, e3, 80_000, 71_000), Response::WorkerExtended { window_end_ms: 80_000 }));
}

#[test]
fn the_new_holder_starts_above_the_old_window_whatever_the_clocks_say() {
    let mut registry = registry(1);
    acquired(registry.acquire(1, 5_000_000, LEASE, WINDOW));
    acquired(registry.acquire(2, 5_000_000, LEASE, WINDOW));
    // Node 3's clock is far behind, but far enough past node 1's last extension to take over.
    // (Only a wildly wrong clock can do that; the peer clock check refuses such nodes first.)
    let (_, _, floor, end) = acquired(registry.acquire(3, 5_000_000 + LEASE, LEASE, WINDOW));
    assert_eq!(floor, 5_010_001);
    assert!(end >= floor + WINDOW);
}

#[test]
fn two_nodes_racing_for_the_last_free_worker_never_both_hold_it() {
    let mut registry = registry(1);
    acquired(registry.acquire(1, 1000, LEASE, WINDOW));
    let (last, _, _, _) = acquired(registry.acquire(2, 1000, LEASE, WINDOW));
    assert_eq!(registry.acquire(3, 1001, LEASE, WINDOW), Response::Rejected(Rejection::NoWorkerAvailable));
    let holders: Vec<_> = registry.workers.values().filter_map(|lease| lease.holder).collect();
    assert_eq!(holders, vec![1, 2]);
    assert_eq!(registry.workers[&last].holder, Some(2));
}

#[test]
fn a_released_worker_is_reused_above_what_was_used() {
    let mut registry = registry(1);
    let (worker, epoch, _, _) = acquired(registry.acquire(1, 1000, LEASE, WINDOW));
    acquired(registry.acquire(2, 1000, LEASE, WINDOW));
    assert_eq!(registry.release(worker, epoch + 1, Some(1500)), Response::WorkerReleased { applied: false });
    assert_eq!(registry.release(worker, epoch, Some(1500)), Response::WorkerReleased { applied: true });
    assert_eq!(registry.workers[&worker].window_end_ms, 1500);
    assert_eq!(registry.release(worker, epoch, Some(1200)), Response::WorkerReleased { applied: false }, "once");
    let (again, _, floor, _) = acquired(registry.acquire(3, 900, LEASE, WINDOW));
    assert_eq!((again, floor), (worker, 1501));
    assert_eq!(registry.extend(worker, epoch, 9_000, 2000), Response::Rejected(Rejection::LeaseLost));
}

#[test]
fn a_node_gets_its_own_released_worker_back_after_a_clean_restart() {
    let mut registry = registry(10);
    let (mine, epoch, _, _) = acquired(registry.acquire(1, 1000, LEASE, WINDOW));
    acquired(registry.acquire(2, 1000, LEASE, WINDOW));
    assert_eq!(registry.release(mine, epoch, Some(1200)), Response::WorkerReleased { applied: true });
    // Another node prefers a never-used worker over one a node released...
    let (other, _, _, _) = acquired(registry.acquire(3, 1250, LEASE, WINDOW));
    assert_ne!(other, mine);
    // ...so the releasing node gets its own back, right after what it used.
    let (again, _, floor, _) = acquired(registry.acquire(1, 1300, LEASE, WINDOW));
    assert_eq!((again, floor), (mine, 1201));
}

#[test]
fn windows_cannot_run_far_past_the_proposers_clock() {
    let mut registry = registry(10);
    let (worker, epoch, _, _) = acquired(registry.acquire(1, 1000, LEASE, WINDOW));
    let too_far = 1000 + MAX_WINDOW_MS + 1;
    assert!(matches!(registry.extend(worker, epoch, too_far, 1000), Response::Rejected(Rejection::InvalidArgument(_))));
    assert!(matches!(
        registry.acquire(2, 1000, LEASE, MAX_WINDOW_MS + 1),
        Response::Rejected(Rejection::InvalidArgument(_))
    ));
}

#[test]
fn no_holding_starts_below_the_registry_floor_used_worker_or_not() {
    let mut registry = registry(1);
    let (used, epoch, _, _) = acquired(registry.acquire(1, 1000, LEASE, WINDOW));
    assert_eq!(registry.release(used, epoch, Some(1500)), Response::WorkerReleased { applied: true });
    registry.floor_ms = 900_000;
    // The never-used worker and the released one both start at the floor, not at 0 or 1501.
    let (never_used, _, floor, end) = acquired(registry.acquire(2, 1000, LEASE, WINDOW));
    assert_ne!(never_used, used);
    assert_eq!((floor, end), (900_000, 900_000 + WINDOW));
    let (again, again_epoch, floor, _) = acquired(registry.acquire(3, 1000, LEASE, WINDOW));
    assert_eq!((again, floor), (used, 900_000));
    // Above the floor, the previous window still rules.
    assert!(matches!(registry.extend(again, again_epoch, 990_000, 985_000), Response::WorkerExtended { .. }));
    let (_, _, floor, _) = acquired(registry.acquire(3, 1001, LEASE, WINDOW));
    assert_eq!(floor, 990_001);
}

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        node: u64,
        clock: u64,
    },
    Extend {
        node: u64,
        clock: u64,
        ahead: u64,
    },
    /// The node issues IDs up to its clock, within its committed window.
    Use {
        node: u64,
        clock: u64,
    },
    Release {
        node: u64,
        clean: bool,
    },
    OperatorRelease {
        worker: u32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let node = 1u64..5;
    let clock = 0u64..200_000;
    prop_oneof![
        (node.clone(), clock.clone()).prop_map(|(node, clock)| Op::Acquire { node, clock }),
        (node.clone(), clock.clone(), 1u64..30_000).prop_map(|(node, clock, ahead)| Op::Extend { node, clock, ahead }),
        (node.clone(), clock).prop_map(|(node, clock)| Op::Use { node, clock }),
        (node, any::<bool>()).prop_map(|(node, clean)| Op::Release { node, clean }),
        (0u32..2).prop_map(|worker| Op::OperatorRelease { worker }),
    ]
}

/// What a node believes it holds: the committed answers it got, nothing more.
#[derive(Debug, Clone)]
struct Held {
    worker: u32,
    epoch: u64,
    floor: u64,
    window_end: u64,
    last_used: Option<u64>,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Nodes with arbitrary, unrelated clocks acquire, extend, use, release and lose workers in
    /// any order; each node uses only timestamps inside the window it was answered. No two
    /// holdings of one worker ever use the same timestamp.
    #[test]
    fn holdings_of_a_worker_never_share_a_timestamp(ops in vec(op(), 1..120)) {
        let mut registry = registry(1);
        let mut held: BTreeMap<u64, Held> = BTreeMap::new();
        // (worker, epoch) -> timestamps used in that holding, as [min, max].
        let mut used: BTreeMap<(u32, u64), (u64, u64)> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Acquire { node, clock } => {
                    if let Response::WorkerAcquired { worker, epoch, floor_ms, window_end_ms } =
                        registry.acquire(node, clock, LEASE, WINDOW)
                    {
                        held.insert(node, Held { worker, epoch, floor: floor_ms, window_end: window_end_ms, last_used: None });
                    }
                }
                Op::Extend { node, clock, ahead } => {
                    if let Some(h) = held.get_mut(&node) {
                        if let Response::WorkerExtended { window_end_ms } =
                            registry.extend(h.worker, h.epoch, clock + ahead, clock)
                        {
                            prop_assert!(window_end_ms >= h.window_end, "a window went down");
                            h.window_end = window_end_ms;
                        }
                    }
                }
                Op::Use { node, clock } => {
                    // A stale holder keeps using its last committed window: that is allowed.
                    if let Some(h) = held.get_mut(&node) {
                        let ts = clock.max(h.floor).max(h.last_used.map_or(0, |t| t + 1));
                        if ts <= h.window_end {
                            h.last_used = Some(ts);
                            let entry = used.entry((h.worker, h.epoch)).or_insert((ts, ts));
                            entry.1 = entry.1.max(ts);
                        }
                    }
                }
                Op::Release { node, clean } => {
                    if let Some(h) = held.remove(&node) {
                        let used_until = if clean { Some(h.last_used.unwrap_or(h.floor.saturating_sub(1))) } else { None };
                        registry.release(h.worker, h.epoch, used_until);
                    }
                }
                Op::OperatorRelease { worker } => {
                    if let Some(lease) = registry.workers.get(&worker) {
                        let epoch = lease.epoch;
                        registry.release(worker, epoch, None);
                    }
                }
            }
            for lease in registry.workers.values() {
                prop_assert!(lease.floor_ms <= lease.window_end_ms.saturating_add(1));
            }
        }
        let mut by_worker: BTreeMap<u32, Vec<(u64, u64, u64)>> = BTreeMap::new();
        for ((worker, epoch), (lo, hi)) in used {
            by_worker.entry(worker).or_default().push((epoch, lo, hi));
        }
        for (worker, mut holdings) in by_worker {
            holdings.sort();
            for pair in holdings.windows(2) {
                let (e1, _, hi1) = pair[0];
                let (e2, lo2, _) = pair[1];
                prop_assert!(hi1 < lo2, "worker {worker}: holding {e1} used up to {hi1}, holding {e2} from {lo2}");
            }
        }
    }
}
