//! Forming a cluster from `--initial-cluster`, whatever order the members start in.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::harness::Timing;

const TIMEOUT: Duration = Duration::from_secs(20);

/// Three members started one by one in the order 3, 1, 2 — with the binary's default Raft timing —
/// form one cluster. A member initialises only once every initial member has answered (so all of
/// them record the same membership, every member's disk incarnation included): with 3 and 1
/// running, both say they wait for 2 and neither has a membership. Once 2 runs, all three name
/// the same leader, voters [1, 2, 3] at the addresses given, the same three distinct
/// incarnations and the same cluster ID.
#[tokio::test]
async fn three_members_started_out_of_order_form_one_cluster() {
    let mut cluster = ProcessCluster::new().with_timing(Timing::Default);
    let members = [1, 2, 3];
    let initial = cluster.initial_cluster(&members);

    cluster.start_node(3, &["--initial-cluster", &initial]);
    cluster.start_node(1, &["--initial-cluster", &initial]);
    for id in [3, 1] {
        let log_says_waiting_for_2 = || {
            let log = cluster.log(id);
            let waiting = log
                .lines()
                .rev()
                .find(|l| l.contains("forming the cluster once every initial member answers"))
                .map(str::to_string);
            async move {
                match waiting {
                    Some(line) if line.contains("waiting_for={2}") => Ok(()),
                    other => Err(format!("last waiting line: {other:?}")),
                }
            }
        };
        wait_until(TIMEOUT, &format!("node {id} to wait for node 2 alone"), log_says_waiting_for_2).await;
        let status = cluster.status(id).await.unwrap();
        assert!(status.voters.is_empty() && status.leader_id.is_none(), "node {id} must not have formed: {status:?}");
    }

    cluster.start_node(2, &["--initial-cluster", &initial]);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let mut cluster_ids = BTreeSet::new();
    let mut incarnations = BTreeSet::new();
    for id in members {
        cluster.wait_ready(id, Duration::from_secs(10)).await;
        let status = cluster
            .wait_status(id, TIMEOUT, "the cluster ID to be committed", |s| match &s.cluster_id {
                Some(_) => Ok(()),
                None => Err("no cluster ID yet".into()),
            })
            .await;
        assert_eq!(status.leader_id, Some(leader), "node {id}: {status:?}");
        assert_eq!(status.voters, [1, 2, 3], "node {id}: {status:?}");
        assert!(status.learners.is_empty(), "node {id}: {status:?}");
        for other in members {
            assert_eq!(status.nodes.get(&other.to_string()), Some(&cluster.addr(other)), "node {id}: {status:?}");
        }
        let expected_role = if id == leader { "leader" } else { "follower" };
        assert_eq!(status.role, expected_role, "node {id}: {status:?}");
        cluster_ids.insert(status.cluster_id.clone());
        incarnations.insert(status.incarnations.clone());
    }
    assert_eq!(cluster_ids.len(), 1, "one cluster ID: {cluster_ids:?}");
    assert_eq!(incarnations.len(), 1, "one record of the incarnations: {incarnations:?}");
    let recorded = incarnations.into_iter().next().unwrap();
    let distinct: BTreeSet<&String> = recorded.values().collect();
    assert_eq!((recorded.len(), distinct.len()), (3, 3), "three distinct disks: {recorded:?}");
    for id in members {
        let created = format!("incarnation=\"{}\"", recorded[&id.to_string()]);
        assert!(cluster.log(id).contains(&created), "node {id}'s own incarnation {created} is the recorded one");
    }
}

/// The embedded default (no `--initial-cluster`, no `--join`) initialises alone at once and
/// commits its cluster ID; after a restart it keeps its cluster ID and its disk's incarnation.
#[tokio::test]
async fn a_single_node_without_flags_serves_at_once_and_keeps_its_identity() {
    let mut cluster = ProcessCluster::new();
    cluster.start_node(1, &[]);
    cluster.wait_ready(1, TIMEOUT).await;
    let has_cluster_id = |s: &leafraft_client::ClusterStatus| match (&s.cluster_id, s.voters.as_slice()) {
        (Some(_), [1]) => Ok(()),
        _ => Err("no cluster ID yet".to_string()),
    };
    let first = cluster.wait_status(1, TIMEOUT, "the cluster ID", has_cluster_id).await;
    assert_ne!(first.incarnations["1"], "0000000000000000", "{first:?}");
    cluster.client(1).create_tag(&new_tag("t", None, None, None)).await.expect("create a tag");

    cluster.terminate(1, TIMEOUT).await;
    cluster.restart(1);
    cluster.wait_ready(1, TIMEOUT).await;
    let again = cluster.status(1).await.unwrap();
    assert_eq!((&again.cluster_id, &again.incarnations), (&first.cluster_id, &first.incarnations));
}
