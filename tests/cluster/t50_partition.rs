//! Partitions: a leader cut off in a minority cannot commit, the majority goes on without it, and
//! after healing the deposed leader discards its uncommitted claim.

use leafraft_state::Request;
use leafraft_state::Response;
use openraft::error::ClientWriteError;
use openraft::error::RaftError;

use crate::fixtures;
use crate::fixtures::cluster::CATCH_UP_LIMIT;
use crate::fixtures::TestCluster;
use crate::fixtures::Traffic;

const ALL: [u64; 3] = [1, 2, 3];
const STEP: u64 = 100;

/// A leader partitioned alone cannot commit a claim; the other two elect a new leader and commit
/// claims; after healing, the old leader's pending claim is answered "not the leader" (its entry
/// was truncated, never applied anywhere), every node's `max_id` converges to exactly the
/// majority's claims, and no two handed-out segments overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_in_a_minority_cannot_commit_a_claim() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", STEP).await;
        cluster.claim_n("orders", STEP, 3).await;
        let (old, _) = cluster.converge(&ALL).await;
        let majority: Vec<u64> = ALL.into_iter().filter(|id| *id != old).collect();
        // Every node's own services serve all along: the cut-off leader from its buffers and its
        // committed snowflake window, the majority from new claims.
        // On a tag of their own, so the claims checked exactly below are the test's alone.
        cluster.create_tag("served", 10).await;
        let mut traffic = Traffic::spawn(&cluster, "served", true);
        traffic.wait_for_more(20, CATCH_UP_LIMIT, "IDs served before the partition").await;
        let max_id_before = cluster.max_id(old, "orders").expect("the tag exists");

        tracing::info!(old, ?majority, "--- cut the leader off from both followers");
        cluster.router.partition(&[old], &majority);
        // Proposed straight to the old leader's Raft and kept running, so its final answer is seen.
        let minority_claim = tokio::spawn({
            let raft = cluster.raft(old);
            async move { raft.client_write(Request::ClaimSegment { tag: "orders".to_string(), step: STEP }).await }
        });
        cluster.oracle.record_unknown();

        tracing::info!("--- the majority elects a new leader and commits claims");
        let new = cluster.leader_other_than(old).await;
        cluster.claim_n("orders", STEP, 5).await;
        traffic.wait_for_more(20, CATCH_UP_LIMIT, "IDs served during the partition").await;
        assert!(!minority_claim.is_finished(), "the minority claim must not complete while partitioned");
        assert_eq!(cluster.max_id(old, "orders"), Some(max_id_before), "the old leader applied nothing new");

        tracing::info!(new, "--- heal: the old leader steps down and drops its entry");
        cluster.router.heal();
        let answer = tokio::time::timeout(CATCH_UP_LIMIT, minority_claim)
            .await
            .expect("the minority claim is answered after healing")
            .expect("the minority claim task did not panic");
        match answer {
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
                tracing::info!(leader = ?forward.leader_id, "the minority claim was discarded");
            }
            Ok(response) => {
                if let Response::Segment { start, end } = response.data {
                    cluster.oracle.record_segment("orders", start, end);
                }
                panic!("a claim proposed in a minority was committed: {:?}", response.data);
            }
            Err(e) => panic!("the minority claim failed otherwise than by being discarded: {e}"),
        }

        traffic.wait_for_more(20, CATCH_UP_LIMIT, "IDs served after healing").await;
        traffic.stop().await;
        tracing::info!("--- every node converges on the majority's claims");
        cluster.converge(&ALL).await;
        let expected = 1 + 8 * STEP;
        if cluster.oracle.n_unknown() == 1 {
            // Only the minority claim was unknown, and it was discarded: max_id is exact.
            for id in ALL {
                assert_eq!(cluster.max_id(id, "orders"), Some(expected), "node {id}'s max_id");
            }
        }
        cluster.assert_max_id_covers_handed_out(&ALL, "orders");
        assert_eq!(cluster.oracle.n_segments("orders"), 8);

        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
