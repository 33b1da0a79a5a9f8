//! A lossy, slow network: with a fifth of all messages lost, every message delayed and one forced
//! leader change, concurrent claims never get overlapping segments, and the cluster converges once
//! the network heals.

use std::time::Duration;

use crate::fixtures;
use crate::fixtures::wait_until;
use crate::fixtures::Claimer;
use crate::fixtures::TestCluster;

const ALL: [u64; 3] = [1, 2, 3];
const N_CLAIMERS: usize = 6;
const CLAIMS_EACH: usize = 40;

/// Many concurrent claimers on a network that drops 20 % of messages (before or after delivery)
/// and delays all of them, with the leader cut off once mid-load so claims cross a leader change:
/// no ID is handed out twice, most claims still succeed, and after healing every node's state
/// machine is identical with `max_id` above every handed-out ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_on_a_lossy_network_never_overlap() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", 10).await;

        tracing::info!(N_CLAIMERS, CLAIMS_EACH, "--- concurrent claims with 20 % loss and 20 ms delay");
        cluster.router.set_drop_rate(0.2);
        cluster.router.set_delay(Duration::from_millis(20));
        // Each claimer goes through the nodes' own `Cluster` in turn, so followers forward over
        // the lossy links too.
        let mut claimers: Vec<Claimer> = (0..N_CLAIMERS).map(|_| Claimer::spawn(&cluster, "orders", 10)).collect();

        tracing::info!("--- mid-load, the leader is cut off until another node leads");
        wait_until(Duration::from_secs(30), "a third of the claims", || {
            (N_CLAIMERS * CLAIMS_EACH / 3 <= cluster.oracle.n_segments("orders")).then_some(())
        })
        .await;
        let old = cluster.leader().await;
        cluster.router.isolate(old);
        let new = cluster.leader_other_than(old).await;
        cluster.router.restore(old);
        tracing::info!(old, new, "leader changed under load");

        for claimer in &mut claimers {
            claimer
                .wait_for_more(CLAIMS_EACH as u64 / 2, Duration::from_secs(60), "claims after the leader change")
                .await;
        }
        let mut n_ok = 0;
        for claimer in claimers {
            n_ok += claimer.stop().await as usize;
        }
        let stats = cluster.router.stats();
        let n_unknown = cluster.oracle.n_unknown();
        println!("lossy network: {n_ok} claims handed out, {n_unknown} unknown, router {stats:?}");
        assert!(0 < stats.dropped, "the router dropped messages");
        assert!(0 < stats.delivered_forwards, "followers forwarded claims over the lossy links");
        cluster.oracle.assert_no_violation();

        tracing::info!("--- heal; every node converges");
        cluster.router.heal();
        cluster.claim("orders", 10).await.expect_segment("claim after healing");
        cluster.converge(&ALL).await;
        cluster.assert_max_id_covers_handed_out(&ALL, "orders");

        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
