//! Time sequences in the in-process suite: each node's `Timeseq`, built by
//! `leafraft::services::IdServices` exactly as `serve` builds it, serves (second, shard, sequence)
//! triples from ranges claimed through the cluster, and no two nodes (nor two requests) ever get
//! the same one.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::fixtures::TestCluster;

/// How long the three nodes together may take to serve what this test asks.
const SERVE_LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_nodes_time_sequences_are_unique_across_the_cluster() {
    let cluster = TestCluster::new(3).await;
    cluster.create_namespace("orders").await;

    let mut seen = BTreeSet::new();
    let mut served = 0;
    let served_all = tokio::time::timeout(SERVE_LIMIT, async {
        for round in 0..5 {
            for id in 1..=3 {
                let timeseq = cluster.running_timeseq(id);
                let parts = timeseq.next_ids("orders", 7, 200).await;
                let parts = parts.unwrap_or_else(|e| panic!("node {id}, round {round}: {e}"));
                assert_eq!(parts.len(), 200, "node {id} served what was asked");
                for part in parts {
                    assert_eq!(part.shard, 7);
                    assert!(seen.insert((part.second, part.sequence)), "{part:?} served twice (node {id})");
                    served += 1;
                }
            }
        }
    })
    .await;
    assert!(served_all.is_ok(), "the nodes served only {served} time sequences in {SERVE_LIMIT:?}");
    assert_eq!(served, 3000);
    cluster.shutdown().await;
}
