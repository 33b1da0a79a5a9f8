//! A stand-in leader: node 1 restarts believing node 2 leads (its persisted vote, and an election
//! timeout long enough to keep believing), while the test serves node 2's address and decides what
//! a forwarded operation gets. For behaviours that depend on what a leader does at an instant no
//! test can time from outside (commits, then loses leadership before answering; never answers).

use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use leafraft::cluster::ForwardError;
use leafraft::cluster::Forwarded;
use leafraft::cluster::ForwardedReply;

use crate::harness::ProcessCluster;
use crate::harness::Timing;

const TIMEOUT: Duration = Duration::from_secs(20);

/// Forms nodes 1 and 2 with node 2 leading (node 2 alone, then node 1 joins), stops both, serves `answer` at node 2's address and
/// restarts node 1, which then forwards its writes there. `answer` gets every forwarded operation.
pub async fn with_stand_in_leader<F, Fut>(answer: F) -> ProcessCluster
where
    F: Fn(Forwarded) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<ForwardedReply, ForwardError>> + Send,
{
    let mut cluster = ProcessCluster::new().with_timing(Timing::Default);
    // Node 2 forms the cluster alone and node 1 joins it; node 1 never campaigns (an initial member
    // would start an election as it initialises), and keeps believing in node 2 after a restart.
    let initial = cluster.initial_cluster(&[2]);
    cluster.start_node(2, &["--initial-cluster", &initial]);
    cluster.wait_ready(2, TIMEOUT).await;
    let seed = cluster.addr(2);
    cluster.start_node(1, &["--join", &seed, "--election-timeout-ms", "60000"]);
    cluster
        .wait_status(2, TIMEOUT, "node 1 to be a voter", |s| match s.voters == [1, 2] {
            true => Ok(()),
            false => Err(format!("voters {:?}", s.voters)),
        })
        .await;
    assert_eq!(cluster.wait_leader(TIMEOUT).await, 2);
    cluster.kill(1);
    cluster.kill(2);

    let listener = tokio::net::TcpListener::bind(("127.0.0.1", cluster.port(2))).await.expect("bind node 2's port");
    let app = axum::Router::new().route(
        "/raft/forward",
        post(move |body: Bytes| {
            let answer = answer.clone();
            async move {
                let op: Forwarded = leafraft_state::codec::decode(&body).expect("a forwarded operation");
                leafraft_state::codec::encode(&answer(op).await).expect("encode")
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    cluster.restart(1);
    cluster
        .wait_status(1, TIMEOUT, "node 1 to believe in leader 2", |s| match s.leader_id {
            Some(2) => Ok(()),
            other => Err(format!("leader {other:?}")),
        })
        .await;
    cluster
}
