//! Replaying a survivor's log tail: values at their highest, the copy time from the committed
//! part only; and a directory a process holds is refused.

use leafraft_ids::snowflake::Layout as SnowflakeLayout;
use openraft::CommittedLeaderId;

use super::*;

fn entry(index: u64, request: Request) -> typ::Entry {
    typ::Entry { log_id: typ::LogId::new(CommittedLeaderId::new(1, 1), index), payload: EntryPayload::Normal(request) }
}

fn base() -> IdStateMachine {
    let mut state = IdStateMachine::default();
    let create =
        Request::CreateTag { tag: "t".into(), max_id: 1, step: 100, description: String::new(), now_ms: 1_000 };
    state.apply(&entry(1, create));
    state.apply(&entry(2, Request::ClaimSegment { tag: "t".into(), step: 100 }));
    state.apply(&entry(3, Request::SetSnowflakeLayout { layout: SnowflakeLayout::LEAF }));
    state.apply(&entry(4, Request::AcquireWorker { node: 1, now_ms: 2_000, lease_ms: 60_000, window_ms: 10_000 }));
    state
}

#[test]
fn a_release_in_the_tail_lowers_nothing_and_a_claim_raises() {
    let state = base();
    assert_eq!(state.tags["t"].max_id, 101);
    let tail = [
        entry(5, Request::ClaimSegment { tag: "t".into(), step: 100 }),
        entry(6, Request::ReleaseSegment { tag: "t".into(), from: 120, expected_max_id: 201 }),
        entry(7, Request::ReleaseWorker { worker: 0, epoch: 1, used_until_ms: Some(2_500) }),
    ];
    let (replayed, _) = replay(&state, &tail, Some(7));
    assert_eq!(replayed.tags["t"].max_id, 201, "the highest max_id the tail reached");
    assert_eq!(replayed.snowflake.workers[&0].window_end_ms, 12_000, "the highest window end");
    assert_eq!(replayed.last_applied.map(|id| id.index), Some(7));
}

/// A release batch in the tail lowers nothing either: the recovered `max_id` is the highest the
/// tail reached, above the IDs served from the released claim before it was given back.
#[test]
fn a_release_batch_in_the_tail_lowers_nothing() {
    let state = base();
    let release = leafraft_state::Release { tag: "t".into(), from: 120, expected_max_id: 201 };
    let tail = [
        entry(5, Request::ClaimSegment { tag: "t".into(), step: 100 }),
        entry(6, Request::ReleaseBatch { releases: vec![release] }),
    ];
    let (replayed, _) = replay(&state, &tail, Some(6));
    assert_eq!(replayed.tags["t"].max_id, 201, "the highest max_id the tail reached");
}

/// An import in the survivor's unapplied tail creates and raises tags like any other command:
/// left out, the recovered cluster would serve an imported tag's IDs from its old `max_id`.
#[test]
fn regression_every_row_of_an_import_in_the_tail_is_counted() {
    let state = base();
    let row = |tag: &str, max_id| leafraft_state::ImportRow { tag: tag.into(), max_id, step: 100, description: None };
    let import = Request::ImportTags { rows: vec![row("imported", 5_000), row("t", 10_000)], now_ms: 3_000 };
    let (replayed, copy_time) = replay(&state, &[entry(5, import)], Some(5));
    assert_eq!(replayed.tags.get("imported").map(|r| r.max_id), Some(5_000), "a tag the import created");
    assert_eq!(replayed.tags["t"].max_id, 10_000, "a tag the import raised");
    assert_eq!(copy_time, Some(3_000), "the import's clock, committed");
}

#[test]
fn the_copy_time_comes_from_committed_entries_only() {
    let state = base();
    assert_eq!(replay(&state, &[], None).1, Some(2_000));
    let extend = |index, now_ms| {
        entry(index, Request::ExtendWorker { worker: 0, epoch: 1, window_end_ms: now_ms + 10_000, now_ms })
    };
    let tail = [extend(5, 3_000), extend(6, 9_000)];
    assert_eq!(replay(&state, &tail, Some(5)).1, Some(3_000), "entry 6 may be a deposed leader's");
    assert_eq!(replay(&state, &tail, Some(6)).1, Some(9_000));
    assert_eq!(replay(&state, &tail, None).1, Some(2_000));
    assert_eq!(replay(&state, &tail, None).0.snowflake.workers[&0].window_end_ms, 19_000);
}

#[test]
fn a_directory_a_running_store_holds_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = storage::StoreOptions { fsync: false, cache_capacity_bytes: 1 << 20, local_node: None };
    let store = storage::open(dir.path(), &options).expect("open a store");
    let copy = tempfile::tempdir().expect("temp dir");
    let err = copy_locked(dir.path(), copy.path()).expect_err("locked");
    assert!(err.0.contains("in use by a running leafraft process"), "{err}");
    drop(store);
    let empty = tempfile::tempdir().expect("temp dir");
    let err = copy_locked(empty.path(), copy.path()).expect_err("no store");
    assert!(err.0.contains("holds no leafraft store"), "{err}");
}
