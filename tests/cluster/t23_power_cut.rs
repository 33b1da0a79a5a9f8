//! A leader's power cut, then a restart of the cluster (the CI run of the power-loss chaos
//! set: after a power cut of all three nodes a consistent read went back 51,200 IDs).
//!
//! What a power cut leaves on a leader's disk: its log up to its last sync (a leader counts its
//! own entries before they are synced, `leafraft_durability`, so entries its followers hold may be
//! missing), and a state machine and committed index that may lag that log (applies are never
//! synced: the log is). Each test builds that disk through the stores' own calls
//! ([`TestCluster::edit_killed_store`]) and restarts the node on it.
//!
//! openraft 0.9 restores a node whose saved vote is its own committed one as leader at once, in
//! the same term, with no election (`Engine::startup`). Such a leader reads with its saved
//! committed index (stale) and assigns log ids its followers may already hold for other entries.
//! A restarted node must win an election first: then it appends a new blank entry, which every
//! read waits for, and all its log ids are of a new term.

use leafraft_state::NodeId;
use leafraft_state::Request;
use openraft::storage::RaftLogStorage;
use openraft::storage::RaftStateMachine;
use openraft::RaftLogReader;

use crate::fixtures;
use crate::fixtures::cluster::CATCH_UP_LIMIT;
use crate::fixtures::filter::Filter;
use crate::fixtures::filter::Kind;
use crate::fixtures::TestCluster;

const ALL: [NodeId; 3] = [1, 2, 3];

fn others(leader: NodeId) -> (NodeId, NodeId) {
    let mut rest = ALL.into_iter().filter(|&id| id != leader);
    (rest.next().expect("a follower"), rest.next().expect("another follower"))
}

/// The CI failure: a consistent read after a restart answered the state of the leader's stale
/// committed index, below IDs already handed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_restarted_leader_never_answers_a_consistent_read_from_before_its_last_commit() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", 10).await;
        cluster.claim_n("orders", 10, 3).await;
        let (leader, _) = cluster.converge(&ALL).await;
        let (holder, lagging) = others(leader);

        tracing::info!(leader, "--- a snapshot on the leader: what its state machine will go back to");
        let raft = cluster.raft(leader);
        let applied = cluster.metrics(leader).last_applied.expect("applied").index;
        raft.trigger().snapshot().await.expect("trigger a snapshot");
        raft.wait(Some(CATCH_UP_LIMIT))
            .metrics(|m| m.snapshot.is_some_and(|id| applied <= id.index), "the leader's snapshot")
            .await
            .expect("the leader builds a snapshot");

        tracing::info!(leader, holder, lagging, "--- a claim committed by the leader and one follower only");
        let entries_to_lagging =
            Filter::block().from([leader]).to([lagging]).kinds([Kind::Append]).when(|m| m.entries > 0);
        cluster.router.add_filter("no entries to the lagging follower", entries_to_lagging);
        let (_, end) = cluster.claim("orders", 10).await.expect_segment("a claim on the leader and one follower");
        cluster.cluster(leader).linearize().await.expect("a consistent read");
        let max_id = cluster.max_id(leader, "orders").expect("the tag");
        assert!(max_id >= end, "the consistent read covers the claim: {max_id} >= {end}");

        tracing::info!(
            leader,
            "--- every node loses power; the leader's applies and committed index since the snapshot are gone"
        );
        for id in ALL {
            cluster.kill(id).await;
        }
        cluster
            .edit_killed_store(leader, async |store| {
                let snapshot = store.state_machine.get_current_snapshot().await.expect("read").expect("a snapshot");
                let meta = snapshot.meta.clone();
                store
                    .state_machine
                    .install_snapshot(&meta, snapshot.snapshot)
                    .await
                    .expect("state machine back to the snapshot");
                store.log.save_committed(meta.last_log_id).await.expect("committed index back to the snapshot");
            })
            .await;

        tracing::info!(
            leader,
            lagging,
            "--- the leader and the follower without the claim restart; the other stays down"
        );
        cluster.restart(leader).await;
        cluster.restart(lagging).await;
        // While the follower still cannot take entries, no read may answer below the claim:
        // it answers the claim or fails.
        match cluster.cluster(leader).linearize().await {
            Ok(()) => {
                let read = cluster.max_id(leader, "orders").expect("the tag");
                assert!(read >= end, "a consistent read after the restart went back: max_id {read} < {end} handed out");
            }
            Err(e) => tracing::info!(error = %e, "no consistent read while the claim cannot be committed again"),
        }

        tracing::info!("--- the link heals: reads answer the claim");
        cluster.router.heal();
        cluster.cluster(leader).linearize().await.expect("a consistent read once healed");
        let read = cluster.max_id(leader, "orders").expect("the tag");
        assert!(read >= end, "a consistent read after the restart went back: max_id {read} < {end} handed out");
        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}

/// A leader that lost entries its followers hold must not write other entries under the same
/// log ids: a follower skips an entry whose log id it already has, keeps its own, and the state
/// machines part (here: one claims `kept` where the others claim `lost`, and a later leader would
/// claim `kept`'s range again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_leader_that_lost_its_unsynced_tail_never_reuses_its_log_ids() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("lost", 10).await;
        cluster.create_tag("kept", 10).await;
        let (leader, committed) = cluster.converge(&ALL).await;
        let (a, b) = others(leader);
        let term = cluster.metrics(leader).current_term;

        tracing::info!(leader, "--- the followers take in a claim; the leader never hears that they did");
        cluster.router.add_filter("lost acks", Filter::lose_replies().from([leader]).kinds([Kind::Append]));
        let pending = {
            let node = cluster.cluster(leader);
            tokio::spawn(async move { node.write(Request::ClaimSegment { tag: "lost".into(), step: 10 }).await })
        };
        for id in [a, b] {
            cluster
                .raft(id)
                .wait(Some(CATCH_UP_LIMIT))
                .metrics(|m| m.last_log_index.is_some_and(|last| last > committed), "the follower appends the claim")
                .await
                .unwrap_or_else(|e| panic!("follower {id} did not take in the claim: {e}"));
        }

        tracing::info!(leader, committed, "--- power cut: the leader had not synced the claim");
        for id in ALL {
            cluster.kill(id).await;
        }
        pending.abort();
        cluster
            .edit_killed_store(leader, async |store| {
                let tail = store.log.try_get_log_entries(committed + 1..).await.expect("read the log");
                let first = tail.first().expect("the leader appended the claim").log_id;
                store.log.truncate(first).await.expect("lose the unsynced tail");
            })
            .await;
        cluster.router.heal();
        for id in ALL {
            cluster.restart(id).await;
        }

        tracing::info!("--- a new claim, then every state machine must be the same");
        cluster.claim("kept", 10).await.expect_segment("a claim after the restart");
        let (new_leader, _) = cluster.converge(&ALL).await;
        let new_term = cluster.metrics(new_leader).current_term;
        assert!(new_term > term, "the first leader after the restart was elected in a new term: {new_term} > {term}");
        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
