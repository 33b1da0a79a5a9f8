//! Restarts from disk: committed claims survive killing every node, a restarted follower comes
//! back with its own data and catches up, and a whole-cluster restart keeps every `max_id`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::fixtures;
use crate::fixtures::Claimer;
use crate::fixtures::TestCluster;

const ALL: [u64; 3] = [1, 2, 3];

/// A claim whose segment was handed out is never lost: with claims in flight, every node is
/// killed; after all restart on their directories, every node's `max_id` is at or above the end of
/// every handed-out segment, and new claims start there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_out_claim_survives_killing_every_node() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", 10).await;

        tracing::info!("--- claims run while every node is killed");
        let mut claimer = Claimer::spawn(&cluster, "orders", 10);
        claimer.wait_for_more(30, Duration::from_secs(20), "claims before the crash").await;
        // The network goes first, so no node hears of the others' deaths in an orderly way.
        for id in ALL {
            cluster.router.unregister(id);
        }
        for id in ALL {
            cluster.kill(id).await;
        }
        let n_ok = claimer.abort();
        let handed_out_end = cluster.oracle.max_end("orders").expect("claims were handed out");
        tracing::info!(n_ok, handed_out_end, "claims handed out before the crash");

        tracing::info!("--- every node restarts from its directory");
        for id in ALL {
            cluster.restart(id).await;
        }
        cluster.converge(&ALL).await;
        cluster.assert_max_id_covers_handed_out(&ALL, "orders");

        tracing::info!("--- new claims start at or above every handed-out ID");
        let (start, _) = cluster.claim("orders", 10).await.expect_segment("claim after the restart");
        assert!(handed_out_end <= start, "claim after restart starts at {start}, below {handed_out_end}");

        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}

/// A killed follower restarts with the data it had (not as an empty node), then catches up with
/// what was committed while it was down, until its state machine equals the leader's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_follower_rejoins_from_its_data() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", 100).await;
        cluster.claim_n("orders", 100, 10).await;
        let (leader, _) = cluster.converge(&ALL).await;
        let follower = ALL.into_iter().find(|id| *id != leader).expect("a follower");

        tracing::info!(follower, "--- kill a follower, then claim without it");
        let before = cluster.state(follower, |sm| sm.clone());
        cluster.kill(follower).await;
        cluster.claim_n("orders", 100, 20).await;

        tracing::info!(follower, "--- restarted while cut off, it has exactly its own data");
        cluster.router.isolate(follower);
        cluster.restart(follower).await;
        let reopened = cluster.state(follower, |sm| sm.clone());
        assert!(before.last_applied <= reopened.last_applied, "node {follower} lost applied entries");
        assert_eq!(reopened.tags, before.tags, "node {follower} reopened with other tags than it had");

        tracing::info!(follower, "--- reconnected, it catches up with the leader");
        cluster.router.restore(follower);
        cluster.converge(&ALL).await;
        assert_eq!(cluster.oracle.n_segments("orders"), 30);
        cluster.assert_max_id_covers_handed_out(&ALL, "orders");
        if cluster.oracle.n_unknown() == 0 {
            // Every claim was handed out, so max_id is exact: the restart neither lost nor replayed one.
            assert_eq!(cluster.max_id(follower, "orders"), Some(1 + 30 * 100));
        }

        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}

/// Stopping and restarting the whole cluster keeps every tag's `max_id` exactly, and claims after
/// the restart never overlap the ones before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_cluster_restart_keeps_every_max_id() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        let tags = [("orders", 1000), ("coupons", 7), ("messages", 50_000)];
        for (tag, step) in tags {
            cluster.create_tag(tag, step).await;
        }
        for (i, (tag, step)) in tags.into_iter().enumerate() {
            cluster.claim_n(tag, step, 5 + i).await;
        }
        let (_, index) = cluster.converge(&ALL).await;
        let before: BTreeMap<String, u64> =
            cluster.state(1, |sm| sm.tags.iter().map(|(tag, record)| (tag.clone(), record.max_id)).collect());
        assert_eq!(before.len(), tags.len());

        tracing::info!(index, "--- stop every node");
        for id in ALL {
            cluster.kill(id).await;
        }

        tracing::info!("--- restart every node and wait for a leader");
        for id in ALL {
            cluster.restart(id).await;
        }
        let leader = cluster.agreed_leader(&ALL).await;
        cluster.converge(&ALL).await;
        for id in ALL {
            let after: BTreeMap<String, u64> =
                cluster.state(id, |sm| sm.tags.iter().map(|(tag, record)| (tag.clone(), record.max_id)).collect());
            assert_eq!(after, before, "node {id}: max_id per tag after the restart");
        }

        tracing::info!("--- claims after the restart start where the old ones ended");
        for (tag, step) in tags {
            let (start, _) = cluster.claim(tag, step).await.expect_segment("claim after the restart");
            assert!(before[tag] <= start, "{tag}: a claim after the restart starts at {start}, below {}", before[tag]);
            if cluster.oracle.n_unknown() == 0 {
                assert_eq!(start, before[tag], "{tag}: the first claim after the restart wastes no ID");
            }
            cluster.assert_max_id_covers_handed_out(&[leader], tag);
        }

        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
