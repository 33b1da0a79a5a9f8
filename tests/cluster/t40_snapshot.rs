//! Snapshots: a learner that joins after the leader purged its log receives the state machine as
//! a snapshot (in several chunks through the router) and keeps it across a restart.

use crate::fixtures;
use crate::fixtures::cluster::CATCH_UP_LIMIT;
use crate::fixtures::TestCluster;

/// After the leader builds a snapshot and purges its log, a new learner can only be brought up by
/// a snapshot install; its state then equals the leader's, survives the learner's restart, and it
/// keeps following new claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_learner_is_brought_up_by_a_snapshot() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        for tag in ["orders", "coupons", "messages"] {
            cluster.create_tag(tag, 100).await;
            cluster.claim_n(tag, 100, 8).await;
        }
        let (leader, index) = cluster.converge(&[1, 2, 3]).await;

        tracing::info!(leader, index, "--- the leader snapshots and purges its log");
        let raft = cluster.raft(leader);
        raft.trigger().snapshot().await.expect("trigger a snapshot");
        raft.wait(Some(CATCH_UP_LIMIT))
            .metrics(|m| m.snapshot.is_some_and(|id| index <= id.index), "a snapshot up to the applied index")
            .await
            .expect("the leader builds a snapshot");
        raft.trigger().purge_log(index).await.expect("trigger a purge");
        let purged = raft
            .wait(Some(CATCH_UP_LIMIT))
            .metrics(|m| m.purged.is_some_and(|id| index <= id.index), "the log purged up to the snapshot")
            .await
            .expect("the leader purges its log")
            .purged
            .expect("checked above")
            .index;

        tracing::info!(purged, "--- a fresh learner joins and receives the snapshot");
        let chunks_before = cluster.router.stats().delivered_snapshot_chunks;
        cluster.add_learner(4).await;
        let learner = cluster
            .raft(4)
            .wait(Some(CATCH_UP_LIMIT))
            .metrics(|m| m.snapshot.is_some_and(|id| purged <= id.index), "the learner installs a snapshot")
            .await
            .expect("the learner receives a snapshot");
        assert!(learner.purged.is_some_and(|id| purged <= id.index), "the learner's log starts after the snapshot");
        let n_chunks = cluster.router.stats().delivered_snapshot_chunks - chunks_before;
        let snapshot_len =
            cluster.state(leader, leafraft_state::codec::encode).expect("the state machine encodes").len();
        tracing::info!(n_chunks, snapshot_len, "snapshot delivered");
        assert!(2 <= n_chunks, "the snapshot ({snapshot_len} bytes) came in {n_chunks} chunks through the router");
        cluster.converge(&[1, 2, 3, 4]).await;

        tracing::info!("--- the installed snapshot survives the learner's restart");
        let installed = cluster.state(4, |sm| sm.clone());
        cluster.kill(4).await;
        cluster.router.isolate(4);
        cluster.restart(4).await;
        assert_eq!(cluster.state(4, |sm| sm.clone()), installed, "the learner reopens with the installed state");
        cluster.router.restore(4);

        tracing::info!("--- the learner follows new claims");
        cluster.claim_n("orders", 100, 3).await;
        cluster.converge(&[1, 2, 3, 4]).await;
        cluster.assert_max_id_covers_handed_out(&[4], "orders");

        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}

/// Snapshots the policy builds on its own (`LogsSinceLast`) are followed by log purges on every
/// node; after all nodes restart, each comes back from its snapshot plus the rest of its log with
/// the same state, and claims go on above every handed-out ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_restarts_from_its_snapshot_and_purged_log() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", 10).await;

        tracing::info!("--- enough claims for the snapshot policy to snapshot and purge on every node");
        cluster.claim_n("orders", 10, 100).await;
        let (_, index) = cluster.converge(&[1, 2, 3]).await;
        for id in [1, 2, 3] {
            cluster
                .raft(id)
                .wait(Some(CATCH_UP_LIMIT))
                .metrics(|m| m.snapshot.is_some() && m.purged.is_some(), "a policy snapshot and a purge")
                .await
                .unwrap_or_else(|e| panic!("node {id} never snapshotted and purged on its own: {e}"));
        }
        let before = cluster.state(1, |sm| sm.tags.clone());
        let handed_out_end = cluster.oracle.max_end("orders").expect("claims were handed out");

        tracing::info!(index, "--- restart every node");
        for id in [1, 2, 3] {
            cluster.kill(id).await;
        }
        for id in [1, 2, 3] {
            cluster.restart(id).await;
            cluster
                .raft(id)
                .wait(Some(CATCH_UP_LIMIT))
                .metrics(|m| m.purged.is_some() && m.snapshot.is_some(), "the reopened snapshot and purged log")
                .await
                .unwrap_or_else(|e| panic!("node {id} reopened without its snapshot or purge point: {e}"));
            assert_eq!(cluster.state(id, |sm| sm.tags.clone()), before, "node {id} reopened with its state");
        }
        cluster.converge(&[1, 2, 3]).await;

        tracing::info!("--- claims go on above every handed-out ID");
        let (start, _) = cluster.claim("orders", 10).await.expect_segment("claim after the restart");
        assert!(handed_out_end <= start, "claim after the restart starts at {start}, below {handed_out_end}");
        cluster.converge(&[1, 2, 3]).await;
        cluster.assert_max_id_covers_handed_out(&[1, 2, 3], "orders");

        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
