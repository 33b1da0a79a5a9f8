//! Cluster identity: two clusters on the same hosts never mix. A node of another
//! cluster cannot be added, its votes and appends are refused with an error naming its cluster,
//! and a node of another cluster answering at a member's address never counts toward a quorum.

use std::time::Duration;

use leafraft_client::ClusterStatus;
use reqwest::Method;

use crate::harness::assert_error;
use crate::harness::error_code;
use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::ids::metric;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Waits until `id` knows its committed cluster ID; answers it and the node's status.
async fn cluster_id(cluster: &mut ProcessCluster, id: u64) -> (String, ClusterStatus) {
    let status = cluster
        .wait_status(id, TIMEOUT, "the cluster ID to be committed", |s| match s.cluster_id {
            Some(_) => Ok(()),
            None => Err("none yet".into()),
        })
        .await;
    (status.cluster_id.clone().expect("checked"), status)
}

/// How many identity refusals of `kind` node `id` counted.
async fn refusals(cluster: &mut ProcessCluster, id: u64, kind: &str) -> f64 {
    let (_, text) = cluster.get_text(id, "/metrics").await;
    metric(&text, "leafraft_identity_refusals_total", &[("kind", kind)]).unwrap_or(0.0)
}

/// Two 3-node clusters, A and B, on loopback. Cluster A refuses (1) to add a node of B as a
/// learner, (2) a vote and an append that carry B's identity, each with 409 `CLUSTER_MISMATCH`
/// naming B's cluster; and (3) when B's node 3 runs at A's node 3's address, A's members refuse
/// its answers and it refuses theirs (both count it), so with A's node 2 gone too, A's node 1
/// cannot commit anything: the impostor never counts toward A's quorum.
#[tokio::test]
async fn a_second_cluster_on_the_same_hosts_cannot_join_vote_or_append() {
    let mut a = ProcessCluster::new().start_members_with(&[1, 2, 3], &["--write-timeout-ms", "1000"]);
    let mut b = ProcessCluster::start(3);
    let a_leader = a.wait_leader(TIMEOUT).await;
    b.wait_leader(TIMEOUT).await;
    let (a_id, _) = cluster_id(&mut a, a_leader).await;
    let (b_id, b_status) = cluster_id(&mut b, 3).await;
    assert_ne!(a_id, b_id);
    // B's node 1 must know its cluster ID too, or it refuses A's hello as meant for another node
    // (node 4) before it can compare clusters, and the refusal names no cluster.
    cluster_id(&mut b, 1).await;

    // (1) Join.
    let body = format!(r#"{{"node_id":4,"addr":"{}"}}"#, b.addr(1));
    let answer = a.request(a_leader, Method::POST, "/v1/cluster/learners", Some(&body), None).await;
    assert_error(&answer, 409, "CLUSTER_MISMATCH", "adding a node of another cluster");
    let message = answer.1.to_string();
    assert!(message.contains(&b_id) && message.contains(&a_id), "names both clusters: {message}");
    let status = a.status(a_leader).await.unwrap();
    assert_eq!((status.voters.as_slice(), status.learners.len()), (&[1, 2, 3][..], 0), "{status:?}");

    // (2) Vote and append with B's identity.
    let http = reqwest::Client::new();
    for path in ["/raft/vote", "/raft/append"] {
        let response = http
            .post(format!("{}{path}", a.url(1)))
            .header("x-leafraft-cluster-id", &b_id)
            .header("x-leafraft-node-id", "3")
            .header("x-leafraft-incarnation", &b_status.incarnations["3"])
            .body(Vec::new())
            .send()
            .await
            .expect("POST");
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.expect("a JSON error");
        assert_eq!((status, error_code(&body)), (409, "CLUSTER_MISMATCH"), "{path}: {body}");
        assert!(body.to_string().contains(&format!("belongs to cluster {b_id}")), "{path} names B's cluster: {body}");
    }

    // (3) B's node 3 at A's node 3's address.
    a.kill(3);
    b.kill(3);
    let a3 = a.addr(3);
    b.start_node(3, &["--listen", &a3]);
    let others: Vec<u64> = [1, 2].into_iter().collect();
    wait_until(TIMEOUT, "A's members and B's node 3 to refuse each other", || {
        let (mut a_counts, mut b_count) = (0.0, 0.0);
        let urls: Vec<String> = others.iter().map(|&id| a.url(id)).collect();
        let b3 = b.url(3).replace(&b.addr(3), &a3);
        async move {
            for url in urls {
                let text = reqwest::get(format!("{url}/metrics")).await.map_err(|e| e.to_string())?;
                let text = text.text().await.map_err(|e| e.to_string())?;
                a_counts += metric(&text, "leafraft_identity_refusals_total", &[("kind", "cluster_id")]).unwrap_or(0.0);
            }
            let text = reqwest::get(format!("{b3}/metrics")).await.map_err(|e| e.to_string())?;
            let text = text.text().await.map_err(|e| e.to_string())?;
            b_count += metric(&text, "leafraft_identity_refusals_total", &[("kind", "cluster_id")]).unwrap_or(0.0);
            match a_counts >= 1.0 && b_count >= 1.0 {
                true => Ok(()),
                false => Err(format!("refusals: A {a_counts}, B's node 3 {b_count}")),
            }
        }
    })
    .await;
    // A's members say so: a gauge per member on /metrics, and /v1/cluster.
    wait_until(TIMEOUT, "an A member to report another cluster at node 3's address", || {
        let urls: Vec<String> = others.iter().map(|&id| a.url(id)).collect();
        let b_id = b_id.clone();
        async move {
            for url in urls {
                let text = reqwest::get(format!("{url}/metrics")).await.map_err(|e| e.to_string())?;
                let text = text.text().await.map_err(|e| e.to_string())?;
                let gauge = metric(&text, "leafraft_member_foreign_cluster", &[("node_id", "3")]).unwrap_or(0.0);
                let status = reqwest::get(format!("{url}/v1/cluster")).await.map_err(|e| e.to_string())?;
                let status: serde_json::Value = status.json().await.map_err(|e| e.to_string())?;
                if gauge == 1.0 && status["foreign_clusters"]["3"] == b_id.as_str() {
                    return Ok(());
                }
            }
            Err("no A member reports it yet".to_string())
        }
    })
    .await;
    let gone = if a_leader == 2 { 1 } else { 2 };
    let left = 3 - gone;
    a.kill(gone);
    let client = a.client(left);
    let write = client.create_tag(&new_tag("after-split", None, None, None)).await;
    assert!(write.is_err(), "node {left} alone with an impostor must not commit: {write:?}");
    assert!(refusals(&mut a, left, "cluster_id").await >= 1.0);
}
