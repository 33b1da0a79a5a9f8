//! Regression: a member whose data dir went back in time (a volume restored
//! from a snapshot) came back as itself with a shorter log: its identity is unchanged, so nothing
//! noticed, and it could vote for a stale leader that re-claims a range already handed out.
//!
//! The leader now sends each follower, with every append, the highest index it saw that follower
//! match (`raft::amnesia`); a follower whose log ends below it refuses the append before openraft
//! sees it, and trips (a real node then stops: fail-stop), and the leader counts the refusal.

use crate::fixtures;
use crate::fixtures::cluster::CATCH_UP_LIMIT;
use crate::fixtures::wait_until;
use crate::fixtures::TestCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_follower_restored_from_an_older_copy_is_refused_as_amnesiac() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", 10).await;
        cluster.claim_n("orders", 10, 5).await;
        let leader = cluster.leader().await;
        let victim = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");

        tracing::info!(victim, "--- a copy of the follower's volume, then more claims it takes in");
        cluster.converge(&[1, 2, 3]).await;
        let copied_last = cluster.metrics(victim).last_log_index.expect("a log");
        cluster.kill(victim).await;
        let copy = cluster.copy_dir(victim);
        cluster.restart(victim).await;
        cluster.claim_n("orders", 10, 20).await;
        let (_, last) = cluster.converge(&[1, 2, 3]).await;
        assert!(last > copied_last, "the log grew past the copy: {last} > {copied_last}");

        tracing::info!(victim, copied_last, last, "--- the follower comes back on the old copy");
        cluster.kill(victim).await;
        cluster.restart_on(victim, copy).await;
        let guard = cluster.running(victim).amnesia;
        let reason = wait_until(CATCH_UP_LIMIT, "the restored follower to refuse an append as amnesiac", || {
            guard.tripped().borrow().clone()
        })
        .await;
        assert!(reason.contains(&format!("ends at index {copied_last}")), "{reason}");
        assert!(reason.contains("must be rebuilt"), "{reason}");
        let leader = cluster.leader().await;
        assert!(cluster.running(leader).amnesia.refusals() >= 1, "the leader counts the refusal");

        tracing::info!("--- the member stops (fail-stop); the other two serve on");
        cluster.kill(victim).await;
        cluster.claim("orders", 10).await.expect_segment("a claim on the two intact members");
        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
