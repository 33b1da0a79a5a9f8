//! Membership changes under load: a learner is added and promoted, and a voter (a follower, or
//! the leader itself) is removed, while a background claimer keeps claiming through the leader.

use std::time::Duration;

use crate::fixtures;
use crate::fixtures::Claimer;
use crate::fixtures::TestCluster;
use crate::fixtures::Traffic;

/// How many claims must succeed after each membership step, and how long they may take.
const CLAIMS_PER_STEP: u64 = 5;
const STEP_LIMIT: Duration = Duration::from_secs(20);

/// With claims running all along, node 4 joins as a learner, is promoted to voter, and a follower
/// is removed; claims keep succeeding after every step, the remaining members converge, and no
/// two handed-out segments overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_is_replaced_while_claims_run() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", 100).await;
        let mut claimer = Claimer::spawn(&cluster, "orders", 100);
        let traffic = Traffic::spawn(&cluster, "orders", true);
        claimer.wait_for_more(CLAIMS_PER_STEP, STEP_LIMIT, "claims before any change").await;

        tracing::info!("--- add node 4 as a learner");
        cluster.add_learner(4).await;
        claimer.wait_for_more(CLAIMS_PER_STEP, STEP_LIMIT, "claims after adding the learner").await;

        tracing::info!("--- promote node 4 to voter");
        cluster.change_membership(&[1, 2, 3, 4]).await;
        claimer.wait_for_more(CLAIMS_PER_STEP, STEP_LIMIT, "claims after the promotion").await;

        let leader = cluster.leader().await;
        let removed = [2, 3, 1].into_iter().find(|id| *id != leader).expect("a follower to remove");
        let remaining: Vec<u64> = [1, 2, 3, 4].into_iter().filter(|id| *id != removed).collect();
        tracing::info!(removed, leader, "--- remove a follower");
        cluster.change_membership(&remaining).await;
        cluster.kill(removed).await;
        claimer.wait_for_more(CLAIMS_PER_STEP, STEP_LIMIT, "claims after the removal").await;

        tracing::info!("--- stop claiming; the members converge");
        let n_ok = claimer.stop().await;
        let served = traffic.stop().await;
        assert!(0 < served && 0 < cluster.oracle.n_snowflakes(), "the nodes' services served IDs");
        let (_, index) = cluster.converge(&remaining).await;
        let voters = cluster.metrics(4).membership_config.membership().voter_ids().collect::<Vec<_>>();
        assert_eq!(voters, remaining, "node 4 sees the final voters");
        tracing::info!(n_ok, n_unknown = cluster.oracle.n_unknown(), index, "claims during the changes");
        cluster.assert_max_id_covers_handed_out(&remaining, "orders");

        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}

/// Removing the leader itself while claims run hands leadership to a remaining voter; claims go on
/// through the new leader and no two handed-out segments overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_leader_hands_over_while_claims_run() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        cluster.create_tag("orders", 100).await;
        let mut claimer = Claimer::spawn(&cluster, "orders", 100);
        let traffic = Traffic::spawn(&cluster, "orders", true);
        claimer.wait_for_more(CLAIMS_PER_STEP, STEP_LIMIT, "claims before the change").await;

        let old = cluster.leader().await;
        let remaining: Vec<u64> = [1, 2, 3].into_iter().filter(|id| *id != old).collect();
        tracing::info!(old, ?remaining, "--- remove the leader from the voters");
        cluster.change_membership(&remaining).await;
        let new = cluster.leader_other_than(old).await;
        assert!(remaining.contains(&new), "the new leader {new} is a remaining voter");
        cluster.kill(old).await;
        claimer.wait_for_more(CLAIMS_PER_STEP, STEP_LIMIT, "claims through the new leader").await;

        tracing::info!(new, "--- stop claiming; the remaining voters converge");
        claimer.stop().await;
        assert!(0 < traffic.stop().await, "the nodes' services served IDs");
        cluster.converge(&remaining).await;
        cluster.assert_max_id_covers_handed_out(&remaining, "orders");

        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
