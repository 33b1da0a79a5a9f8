//! Forming a cluster from `--initial-cluster`, whatever order the members start in.

use std::time::Duration;

use crate::harness::ProcessCluster;
use crate::harness::Timing;

/// Three members started one by one in the order 3, 1, 2 — with the binary's default Raft timing —
/// form one cluster: a lone member elects nobody, a majority elects a leader, and once the third
/// has joined all three name the same leader and voters [1, 2, 3] at the addresses given.
#[tokio::test]
async fn three_members_started_out_of_order_form_one_cluster() {
    let mut cluster = ProcessCluster::new().with_timing(Timing::Default);
    let members = [1, 2, 3];
    let initial = cluster.initial_cluster(&members);

    cluster.start_node(3, &["--initial-cluster", &initial]);
    let alone = cluster
        .wait_status(3, Duration::from_secs(20), "node 3 to answer with its initial membership", |s| {
            if s.voters == [1, 2, 3] {
                Ok(())
            } else {
                Err("not initialised yet".into())
            }
        })
        .await;
    assert_eq!(alone.leader_id, None, "one member of three cannot have elected a leader: {alone:?}");

    cluster.start_node(1, &["--initial-cluster", &initial]);
    let first = cluster.wait_leader(Duration::from_secs(20)).await;
    assert!([1, 3].contains(&first), "leader {first} is not one of the running members");

    cluster.start_node(2, &["--initial-cluster", &initial]);
    let leader = cluster.wait_leader(Duration::from_secs(20)).await;
    for id in members {
        cluster.wait_ready(id, Duration::from_secs(10)).await;
        let status = cluster.status(id).await.unwrap();
        assert_eq!(status.leader_id, Some(leader), "node {id}: {status:?}");
        assert_eq!(status.voters, [1, 2, 3], "node {id}: {status:?}");
        assert!(status.learners.is_empty(), "node {id}: {status:?}");
        for other in members {
            assert_eq!(status.nodes.get(&other.to_string()), Some(&cluster.addr(other)), "node {id}: {status:?}");
        }
        let expected_role = if id == leader { "leader" } else { "follower" };
        assert_eq!(status.role, expected_role, "node {id}: {status:?}");
    }
}
