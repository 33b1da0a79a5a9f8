//! Which appends may count before their sync, and when a wait for durability ends.

use std::sync::Arc;

use openraft::CommittedLeaderId;
use openraft::EntryPayload;

use super::*;

fn entry(term: u64, leader: NodeId, index: u64) -> typ::Entry {
    typ::Entry { log_id: typ::LogId::new(CommittedLeaderId::new(term, leader), index), payload: EntryPayload::Blank }
}

fn committed(term: u64, leader: NodeId) -> typ::Vote {
    let mut vote = typ::Vote::new(term, leader);
    vote.commit();
    vote
}

#[test]
fn only_this_nodes_own_entries_under_its_committed_vote_count_early() {
    let durability = LocalDurability::new(Some(1));
    let own = [entry(3, 1, 7), entry(3, 1, 8)];
    assert!(durability.is_own_leader_append(Some(&committed(3, 1)), &own));
    // Following another leader.
    assert!(!durability.is_own_leader_append(Some(&committed(3, 2)), &[entry(3, 2, 7)]));
    // A candidate (vote not committed) is not leader yet.
    assert!(!durability.is_own_leader_append(Some(&typ::Vote::new(3, 1)), &own));
    // Its own entries of an earlier term, replicated back to it by a later leader.
    assert!(!durability.is_own_leader_append(Some(&committed(4, 2)), &[entry(3, 1, 7)]));
    assert!(!durability.is_own_leader_append(Some(&committed(4, 1)), &[entry(3, 1, 7), entry(4, 1, 8)]));
    assert!(!durability.is_own_leader_append(None, &own));
    assert!(!durability.is_own_leader_append(Some(&committed(3, 1)), &[]));
    // The early path off.
    assert!(!LocalDurability::new(None).is_own_leader_append(Some(&committed(3, 1)), &own));
}

#[tokio::test]
async fn wait_returns_once_a_sync_covers_the_index_and_fails_after_a_failed_sync() {
    let durability = durable_below(5);
    durability.wait(4).await.expect("durable");
    durability.wrote(5);
    durability.wrote(6);
    let ticket = durability.ticket();
    durability.wrote(7);
    let waiter = {
        let durability = Arc::clone(&durability);
        tokio::spawn(async move { durability.wait(6).await })
    };
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished());
    durability.synced(ticket);
    waiter.await.expect("join").expect("index 6 durable");
    assert_eq!(durability.durable().end, 7, "index 7 was written after the sync began");

    let waiter = {
        let durability = Arc::clone(&durability);
        tokio::spawn(async move { durability.wait(7).await })
    };
    durability.failed();
    assert_eq!(waiter.await.expect("join"), Err(SyncFailed));
}

/// Node 1's log, durable below `end`.
fn durable_below(end: u64) -> Arc<LocalDurability> {
    let durability = Arc::new(LocalDurability::new(Some(1)));
    durability.wrote(end - 1);
    durability.synced(durability.ticket());
    durability
}
