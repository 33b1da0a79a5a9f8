//! Claims batched across tags: every node refills many tags at once, so its claims
//! share Raft entries, while the leader is killed and comes back. No ID is handed out twice, the
//! claims did go out in batches, and `max_id` covers everything served.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::fixtures;
use crate::fixtures::TestCluster;

const TAGS: usize = 40;
/// Small, so that every few requests a tag needs its next segment.
const STEP: u64 = 5;
/// How long one request may wait for a claim (a leader change included).
const REQUEST_LIMIT: Duration = Duration::from_secs(20);

fn tag(i: usize) -> String {
    format!("batched-{i}")
}

/// One round: on every running node, three IDs of every tag, all tags at once.
async fn round(cluster: &Arc<TestCluster>) {
    let mut requests = tokio::task::JoinSet::new();
    for id in cluster.running_ids() {
        for i in 0..TAGS {
            let cluster = Arc::clone(cluster);
            requests.spawn(async move { cluster.serve_ids_within(id, &tag(i), 3, REQUEST_LIMIT).await });
        }
    }
    while let Some(done) = requests.join_next().await {
        done.expect("a request task");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_batched_across_tags_never_hand_out_an_id_twice() {
    fixtures::run(async {
        let cluster = Arc::new(TestCluster::new(3).await);
        for i in 0..TAGS {
            cluster.create_tag(&tag(i), STEP).await;
        }
        for _ in 0..4 {
            round(&cluster).await;
        }

        tracing::info!("--- the leader is killed between rounds, and comes back");
        let leader = cluster.leader().await;
        cluster.kill(leader).await;
        for _ in 0..3 {
            round(&cluster).await;
        }
        cluster.restart(leader).await;
        for _ in 0..3 {
            round(&cluster).await;
        }

        for id in cluster.running_ids() {
            let running = cluster.running(id);
            let counters = running.segments.claim_batcher().counters();
            let (claims, entries) = (counters.claims.load(Ordering::Relaxed), counters.entries.load(Ordering::Relaxed));
            tracing::info!(id, claims, entries, "claims and the entries they took");
            assert!(claims >= TAGS as u64, "node {id} claimed only {claims} times");
            assert!(entries * 2 <= claims, "node {id}: {claims} claims took {entries} entries; they were not batched");
        }
        let ids = cluster.running_ids();
        cluster.converge(&ids).await;
        for i in 0..TAGS {
            cluster.assert_max_id_covers_handed_out(&ids, &tag(i));
        }
        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
