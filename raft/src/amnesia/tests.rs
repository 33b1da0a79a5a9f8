//! The amnesia check: what the leader records, and when a follower refuses.

use openraft::CommittedLeaderId;
use openraft::EntryPayload;
use openraft::LogId;

use super::*;

fn append(term: u64, leader: NodeId, indexes: &[u64]) -> typ::AppendEntriesRequest {
    let log_id = |index| LogId::new(CommittedLeaderId::new(term, leader), index);
    typ::AppendEntriesRequest {
        vote: typ::Vote::new_committed(term, leader),
        prev_log_id: None,
        entries: indexes.iter().map(|&i| typ::Entry { log_id: log_id(i), payload: EntryPayload::Blank }).collect(),
        leader_commit: None,
    }
}

fn guard_with_log(last: Option<u64>, vote_term: u64) -> AmnesiaGuard {
    let durability = Arc::new(LocalDurability::new(None));
    if let Some(last) = last {
        durability.wrote(last);
    }
    durability.voted(&typ::Vote::new(vote_term, 1));
    AmnesiaGuard::new(durability)
}

#[test]
fn the_leader_records_appended_entries_per_leadership_not_heartbeats() {
    let guard = guard_with_log(None, 0);
    let ok = AppendEntriesResponse::Success;
    guard.record((2, 9), &append(3, 1, &[5, 6, 7]), &ok);
    assert_eq!(guard.matched((2, 9), &append(3, 1, &[])), Some(7));
    // A heartbeat (no entries) and a conflict raise nothing; a lower index never lowers it.
    guard.record((2, 9), &append(3, 1, &[]), &ok);
    guard.record((2, 9), &append(3, 1, &[4]), &ok);
    guard.record((2, 9), &append(3, 1, &[9]), &AppendEntriesResponse::Conflict);
    assert_eq!(guard.matched((2, 9), &append(3, 1, &[])), Some(7));
    assert_eq!(guard.matched((3, 9), &append(3, 1, &[])), None, "per follower");
    // Another leadership sends nothing of this one's record, and starts its own.
    assert_eq!(guard.matched((2, 9), &append(4, 1, &[])), None);
    guard.record((2, 9), &append(4, 1, &[2]), &ok);
    assert_eq!(guard.matched((2, 9), &append(4, 1, &[])), Some(2));
    // A member rebuilt on another disk, or removed from the membership, starts afresh.
    assert_eq!(guard.matched((2, 10), &append(4, 1, &[])), None);
    guard.retain_members(&BTreeMap::from([(3, 9)]));
    assert_eq!(guard.matched((2, 9), &append(4, 1, &[])), None);
}

#[test]
fn a_follower_whose_log_ends_below_what_it_matched_refuses_and_trips() {
    let healthy = guard_with_log(Some(7), 3);
    assert_eq!(healthy.admit(&typ::Vote::new_committed(3, 1), Some(7)), Ok(()));
    assert_eq!(healthy.admit(&typ::Vote::new_committed(3, 1), None), Ok(()));

    let restored = guard_with_log(Some(4), 3);
    let tripped = restored.tripped();
    let refusal = restored.admit(&typ::Vote::new_committed(3, 1), Some(7));
    assert_eq!(refusal, Err(Amnesia { matched: 7, last: Some(4) }));
    let reason = tripped.borrow().clone().expect("tripped");
    assert!(reason.contains("ends at index 4") && reason.contains("match index 7"), "{reason}");
    assert!(!reason.contains('\n'));
    let empty = guard_with_log(None, 0);
    assert!(empty.admit(&typ::Vote::new_committed(3, 1), Some(0)).is_err(), "an emptied log matched index 0");
}

/// A higher-term leader truncated the follower's log (after its vote was saved): a late append
/// of the old leader is openraft's to refuse, not amnesia.
#[test]
fn an_append_of_an_older_leader_after_a_truncation_is_not_amnesia() {
    let truncated = guard_with_log(Some(4), 4);
    assert_eq!(truncated.admit(&typ::Vote::new_committed(3, 1), Some(7)), Ok(()));
    assert!(truncated.tripped().borrow().is_none());
}
