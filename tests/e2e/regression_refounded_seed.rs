//! Regression: a seed member re-founded a cluster. A cluster grown with
//! `--join` from a node started with the default flags keeps that node's command line; on an empty
//! data directory the same command initialised a brand-new one-member cluster at the member's
//! address, which clients then reached (no tags, or re-created ones served from 1 again, and
//! snowflake worker 0 leased at once).
//!
//! Founding a cluster on an address other hosts reach is now an explicit act
//! (`--initial-cluster-state new`); without it such a node refuses to start on an empty data
//! directory, naming the flag, and `existing` waits to be added. The end-to-end suite runs on
//! loopback only, so the node advertises a non-loopback address it does not need to be reached at:
//! a lone voter elects itself without any network.

use std::time::Duration;

use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn regression_an_empty_node_off_loopback_founds_a_cluster_only_when_told_to() {
    let mut cluster = ProcessCluster::new();
    let advertise = format!("10.255.255.1:{}", cluster.port(1));

    // The default flags on an empty directory: refused, with one line naming the flag.
    cluster.start_node(1, &["--advertise", &advertise]);
    let exit = cluster.wait_exit(1, TIMEOUT).await;
    assert!(!exit.success(), "node 1 must refuse to found a cluster at {advertise}: {exit}");
    let log = cluster.log(1);
    let line = log.lines().find(|l| l.contains("refusing to found a new cluster")).unwrap_or_else(|| panic!("{log}"));
    assert!(line.contains("--initial-cluster-state new") && line.contains(&advertise), "{line}");

    // `existing`: it runs, founds nothing and waits to be added.
    cluster.start_node(1, &["--advertise", &advertise, "--initial-cluster-state", "existing"]);
    wait_until(TIMEOUT, "node 1 to wait to be added", || {
        let waiting = cluster.log(1).contains("waiting to be added");
        async move {
            if waiting {
                Ok(())
            } else {
                Err("not yet".to_string())
            }
        }
    })
    .await;
    let status = cluster.status(1).await.expect("node 1 answers");
    assert!(status.voters.is_empty() && status.cluster_id.is_none(), "nothing founded: {status:?}");
    cluster.terminate(1, TIMEOUT).await;

    // `new`: founds a one-member cluster and serves.
    cluster.start_node(1, &["--advertise", &advertise, "--initial-cluster-state", "new"]);
    cluster.wait_ready(1, TIMEOUT).await;
    let status = cluster.status(1).await.expect("node 1 answers");
    assert_eq!(status.voters, [1], "{status:?}");
}

/// Clients pin the cluster: `leafraft-client` learns the cluster ID from the first node that
/// answers and refuses a node of another cluster with `CLUSTER_MISMATCH`; any HTTP client can send
/// the ID in `x-leafraft-cluster-id`, and a node of another cluster answers 409 and serves nothing.
/// Before, a client whose node was replaced by a re-founded one simply went on with the new cluster.
#[tokio::test]
async fn regression_a_client_refuses_a_node_of_another_cluster() {
    let mut a = ProcessCluster::new();
    let mut b = ProcessCluster::new();
    a.start_node(1, &[]);
    b.start_node(1, &[]);
    let has_id = |s: &leafraft_client::ClusterStatus| s.cluster_id.clone().ok_or_else(|| "no ID yet".to_string());
    let a_id = a.wait_status(1, TIMEOUT, "A's cluster ID", |s| has_id(s).map(drop)).await.cluster_id.unwrap();
    let b_id = b.wait_status(1, TIMEOUT, "B's cluster ID", |s| has_id(s).map(drop)).await.cluster_id.unwrap();
    assert_ne!(a_id, b_id);

    let client = leafraft_client::Client::builder()
        .nodes([a.url(1), b.url(1)])
        .discover(false)
        .timeout(Duration::from_secs(3))
        .build()
        .expect("client");
    client.cluster_status().await.expect("node A answers first");
    assert_eq!(client.cluster_id().map(|id| format!("{id:016x}")), Some(a_id.clone()), "learnt on first contact");
    a.kill(1);
    let refused = client.cluster_status().await.expect_err("node B belongs to another cluster");
    assert_eq!(refused.code(), Some(leafraft_client::ErrorCode::ClusterMismatch), "{refused}");
    let ids = client.snowflake_ids(1).await.expect_err("no IDs from another cluster");
    assert_eq!(ids.code(), Some(leafraft_client::ErrorCode::ClusterMismatch), "{ids}");

    let http = reqwest::Client::new();
    let url = format!("{}/v1/cluster", b.url(1));
    let pinned = |id: &str| http.get(&url).header("x-leafraft-cluster-id", id.to_string()).send();
    let answer = pinned(&a_id).await.expect("node B answers");
    assert_eq!(answer.status(), 409, "pinned to A, node B serves nothing");
    let body: serde_json::Value = answer.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "CLUSTER_MISMATCH", "{body}");
    let answer = pinned(&b_id).await.expect("node B answers");
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["x-leafraft-cluster-id"], b_id.as_str(), "every answer names its cluster");
}
