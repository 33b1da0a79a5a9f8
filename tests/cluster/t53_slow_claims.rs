//! Claims that take longer than the segment wait: a follower whose forwards to the leader are
//! slow (a busy cluster, the first IDs of 100,000 tags).

use std::time::Duration;
use std::time::Instant;

use leafraft::error::ErrorCode;

use crate::fixtures;
use crate::fixtures::filter::Filter;
use crate::fixtures::filter::Kind;
use crate::fixtures::TestCluster;

const ALL: [u64; 3] = [1, 2, 3];

/// Longer than the segment wait (100 ms), shorter than a first segment's wait (1 s).
const FORWARD_DELAY: Duration = Duration::from_millis(300);

/// A tag's first ID on a node is answered although its first claim takes longer than the segment
/// wait: the first segment is Leaf's synchronous initial load, not an exhaustion. (It answered
/// `SEGMENTS_NOT_READY`, Leaf's -3, after 100 ms, which failed first IDs of imported tags on a busy
/// cluster.) A buffer used up later still fails after the segment wait, as `docs/semantics.md#double-buffer-and-dynamic-step` says. No ID twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_first_id_whose_claim_outlasts_the_segment_wait_is_answered() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", 50).await;
        cluster.converge(&ALL).await;
        let leader = cluster.leader().await;
        let follower = ALL.into_iter().find(|id| *id != leader).expect("a follower");

        tracing::info!(follower, leader, "--- the follower's forwards take {FORWARD_DELAY:?}");
        let slow = Filter::delay(FORWARD_DELAY).from([follower]).to([leader]).kinds([Kind::Forward]);
        cluster.router.add_filter("slow forwards", slow);
        let started = Instant::now();
        let first = cluster.serve_ids(follower, "orders", 1).await;
        let took = started.elapsed();
        let first = first.unwrap_or_else(|e| panic!("the first ID, after {took:?}: {e:?}"));
        assert!(took >= FORWARD_DELAY, "the first claim went through the slow link: {took:?}");
        println!("the first ID {first:?} took {took:?}");

        // The rest of the first segment passes its 10 % mark: the next claim starts, slow.
        cluster.serve_ids(follower, "orders", 49).await.expect("the rest of the first segment");
        let started = Instant::now();
        let error = cluster.serve_ids(follower, "orders", 1).await.expect_err("both segments used up");
        let took = started.elapsed();
        assert_eq!(error.code, ErrorCode::SegmentsNotReady, "{error:?}");
        assert!(took < FORWARD_DELAY, "a used-up buffer waits the segment wait, not a first segment's: {took:?}");

        cluster.router.remove_filter("slow forwards");
        cluster.serve_ids_within(follower, "orders", 10, fixtures::cluster::CATCH_UP_LIMIT).await;
        cluster.converge(&ALL).await;
        cluster.assert_max_id_covers_handed_out(&ALL, "orders");
        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
