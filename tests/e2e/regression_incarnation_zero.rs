//! Regression: members recorded with incarnation 0 were never checked. A
//! member added before it answered (or by a command from before member identity) stayed recorded
//! with 0, "unknown", so any disk at its address was taken for it, a wiped one included.
//!
//! Now the leader learns the incarnation of such a member once it answers at its address and
//! replicates in sync, and records it through Raft; from then on the member is checked.

use std::time::Duration;

use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(30);
const UNKNOWN: &str = "0000000000000000";

#[tokio::test]
async fn regression_a_member_recorded_with_incarnation_zero_gets_its_incarnation_recorded() {
    // A short learner timeout: adding a node that does not run yet answers soon, and the node
    // stays a learner recorded with incarnation 0.
    let mut cluster = ProcessCluster::new().start_members_with(&[1, 2, 3], &["--learner-timeout-ms", "500"]);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let addr = cluster.addr(4);
    let added = cluster.client(leader).add_learner(4, &addr).await;
    assert!(added.is_err(), "node 4 does not run, so it cannot have caught up: {added:?}");
    let status = cluster.status(leader).await.expect("status");
    assert_eq!(status.learners, [4], "{status:?}");
    assert_eq!(status.incarnations["4"], UNKNOWN, "added before it answered: {status:?}");

    // Node 4 starts empty; the running members list it (with 0, taken as itself), so it waits
    // to be replicated to. The leader then records its disk.
    let initial = cluster.initial_cluster(&[1, 2, 3, 4]);
    cluster.start_node(4, &["--initial-cluster", &initial]);
    let recorded = cluster
        .wait_status(leader, TIMEOUT, "node 4's incarnation to be recorded", |s| match s.incarnations.get("4") {
            Some(incarnation) if incarnation != UNKNOWN => Ok(()),
            other => Err(format!("node 4 is recorded with {other:?}")),
        })
        .await;
    let incarnation = &recorded.incarnations["4"];
    let created = format!("incarnation=\"{incarnation}\"");
    assert!(cluster.log(4).contains(&created), "the recorded incarnation is node 4's own disk ({created})");
    assert_eq!(recorded.learners, [4], "still a learner: {recorded:?}");
}
