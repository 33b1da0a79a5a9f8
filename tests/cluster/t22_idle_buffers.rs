//! Idle buffers dropped while requests use them: a request that loaded a buffer just before it
//! was closed, the tail given back through Raft, and the claims of the tag's next buffer race, and
//! the oracle sees every ID served.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::fixtures;
use crate::fixtures::cluster::running;
use crate::fixtures::cluster::Nodes;
use crate::fixtures::TestCluster;
use crate::fixtures::Traffic;

/// The pause between two sweeps of the dropper: a pace, so Raft keeps a core.
const DROP_PACE: Duration = Duration::from_millis(5);

/// Tails given back (and applied) over all running nodes.
fn tails_given_back(nodes: &Nodes) -> u64 {
    let applied = |node: &fixtures::cluster::Running| {
        let stats = node.segments.stats();
        stats.idle_releases.iter().filter(|(result, _)| *result == "applied").map(|(_, n)| n).sum::<u64>()
    };
    running(nodes).iter().map(|(_, node)| applied(node)).sum()
}

/// With ID traffic on every node, each node drops all its buffers again and again (an idle time
/// of zero: whatever their use, claims in flight included) and gives their tails back, racing the
/// requests that hold them and the next buffers' claims. No ID is handed out twice, tails are
/// given back (`max_id` went down), `max_id` still covers every ID served, and serving goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffers_dropped_under_load_never_serve_an_id_twice() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", 10).await;
        let mut traffic = Traffic::spawn(&cluster, "orders", false);
        traffic.wait_for_more(30, Duration::from_secs(20), "IDs before the drops").await;

        tracing::info!("--- every node drops its buffers over and over while serving");
        let stop = Arc::new(AtomicBool::new(false));
        let dropper = tokio::spawn({
            let (nodes, stop) = (cluster.nodes(), Arc::clone(&stop));
            async move {
                let mut pace = tokio::time::interval(DROP_PACE);
                let mut dropped = 0;
                while !stop.load(Ordering::SeqCst) {
                    pace.tick().await;
                    for (_, node) in running(&nodes) {
                        dropped += node.segments.drop_idle(tokio::time::Instant::now(), Duration::ZERO).await;
                    }
                }
                dropped
            }
        });
        let nodes = cluster.nodes();
        fixtures::wait_until(Duration::from_secs(40), "ten tails given back", || {
            (tails_given_back(&nodes) >= 10).then_some(())
        })
        .await;
        traffic.wait_for_more(30, Duration::from_secs(20), "IDs while buffers are dropped").await;
        stop.store(true, Ordering::SeqCst);
        let dropped = dropper.await.expect("the dropper");
        let served = traffic.stop().await;
        tracing::info!(dropped, served, given_back = tails_given_back(&nodes), "buffers dropped under load");
        assert!(dropped >= 10, "only {dropped} buffers dropped");

        tracing::info!("--- serving goes on with fresh buffers");
        for id in cluster.running_ids() {
            let ranges = cluster.serve_ids_within(id, "orders", 25, Duration::from_secs(20)).await;
            assert_eq!(ranges.iter().map(|(s, e)| e - s).sum::<u64>(), 25);
        }
        cluster.converge(&cluster.running_ids()).await;
        cluster.assert_max_id_covers_handed_out(&cluster.running_ids(), "orders");
        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}

/// Many tags' buffers dropped at once: their tails go back in `ReleaseBatch` entries, a few for
/// the lot instead of one per tail, and each release is judged as its own `ReleaseSegment`: of
/// the three nodes' tails of a tag only the last claimer's applies, though it is given back first
/// (the nodes drop in the reverse order of their claims). The tags' next buffers then serve more
/// than a segment on every node, and the oracle sees no ID served twice: a release that applied
/// without matching `max_id` would have the next claims run over IDs served before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tails_go_back_in_a_few_entries_and_no_id_is_served_twice() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        let leader = cluster.leader().await;
        let raise = leafraft_state::Request::SetClusterVersion { version: leafraft_state::Version::CLAIM_BATCHES };
        cluster.raft(leader).client_write(raise).await.expect("the cluster version is raised");
        let tags: Vec<String> = (0..40).map(|i| format!("tag-{i:02}")).collect();
        for tag in &tags {
            cluster.create_tag(tag, 100).await;
        }
        let ids = cluster.running_ids();
        for &id in &ids {
            for tag in &tags {
                cluster.serve_ids_within(id, tag, 3, Duration::from_secs(20)).await;
            }
        }
        let (_, before) = cluster.converge(&ids).await;
        for &id in &ids {
            assert!(cluster.cluster(id).cluster_version() >= leafraft_state::Version::CLAIM_BATCHES);
        }
        let nodes = cluster.nodes();
        let given_back_before = tails_given_back(&nodes);

        tracing::info!("--- every node drops all its buffers at once");
        let mut dropped = 0;
        for &id in ids.iter().rev() {
            dropped += cluster.running(id).segments.drop_idle(tokio::time::Instant::now(), Duration::ZERO).await;
        }
        assert_eq!(dropped, ids.len() * tags.len());
        let (_, after) = cluster.converge(&ids).await;
        let entries = after - before;
        assert!(entries * 10 <= dropped as u64, "{entries} entries for {dropped} tails: not batched");
        assert_eq!(tails_given_back(&nodes) - given_back_before, tags.len() as u64, "one applied tail per tag");

        tracing::info!("--- every tag serves again on every node, above what was served");
        for &id in &ids {
            for tag in &tags {
                cluster.serve_ids_within(id, tag, 150, Duration::from_secs(20)).await;
            }
        }
        cluster.converge(&ids).await;
        for tag in &tags {
            cluster.assert_max_id_covers_handed_out(&ids, tag);
        }
        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
