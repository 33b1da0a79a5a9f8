//! A one-way cut: a follower whose messages to the leader are blocked (its forwards never arrive)
//! while the leader still reaches it (it keeps following and applying).

use leafraft::error::ErrorCode;

use crate::fixtures;
use crate::fixtures::cluster::CATCH_UP_LIMIT;
use crate::fixtures::filter::Filter;
use crate::fixtures::filter::Kind;
use crate::fixtures::TestCluster;

const ALL: [u64; 3] = [1, 2, 3];

/// The follower serves from the segments it holds, then answers `SEGMENTS_NOT_READY` (no claim
/// can reach the leader), while the leader and the other follower keep serving; once the link is
/// back it serves again without a restart. No ID is served twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_cannot_reach_the_leader_serves_its_buffers_then_fails_cleanly() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", 50).await;
        cluster.converge(&ALL).await;
        let leader = cluster.leader().await;
        let follower = ALL.into_iter().find(|id| *id != leader).expect("a follower");
        let other = ALL.into_iter().find(|id| *id != leader && *id != follower).expect("another follower");
        cluster.serve_ids_within(follower, "orders", 1, CATCH_UP_LIMIT).await;

        tracing::info!(follower, leader, "--- the follower's forwards to the leader are blocked");
        cluster.router.add_filter("one way", Filter::block().from([follower]).to([leader]).kinds([Kind::Forward]));
        let mut served_after_cut = 0;
        let error = loop {
            match cluster.serve_ids(follower, "orders", 10).await {
                Ok(ranges) => served_after_cut += ranges.iter().map(|(s, e)| e - s).sum::<u64>(),
                Err(e) => break e,
            }
            assert!(served_after_cut <= 2 * 50, "the follower served {served_after_cut} IDs without a claim");
        };
        assert_eq!(error.code, ErrorCode::SegmentsNotReady, "{error:?}");
        println!("the cut-off follower served {served_after_cut} IDs from its buffers, then {error:?}");
        for id in [leader, other] {
            // Their first request may wait out one claim (the segment wait is 100 ms), so they
            // get until the deadline.
            cluster.serve_ids_within(id, "orders", 1, CATCH_UP_LIMIT).await;
        }
        // Snowflake needs no claim per ID: the follower still holds its worker and window (the
        // leader still reaches it), so it keeps serving those.
        let snowflakes = cluster.serve_snowflakes(follower, 100).await;
        println!("snowflake on the cut-off follower: {:?}", snowflakes.as_ref().map(Vec::len));

        tracing::info!("--- the link is back: the follower claims and serves again");
        cluster.router.remove_filter("one way");
        cluster.serve_ids_within(follower, "orders", 1, CATCH_UP_LIMIT).await;
        cluster.serve_ids_within(follower, "orders", 100, CATCH_UP_LIMIT).await;
        cluster.converge(&ALL).await;
        cluster.assert_max_id_covers_handed_out(&ALL, "orders");
        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
