//! Graceful stop: SIGTERM makes a node stop in order and exit 0, and it rejoins on restart.

use std::time::Duration;

use crate::harness::new_tag;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);

/// The order `node::RunningNode::stop` logs in.
const SHUTDOWN_LINES: [&str; 4] =
    ["shutting down: no new requests", "requests drained", "raft stopped", "store flushed; stopped"];

/// SIGTERM to the leader: it exits with status 0 within 5 s, its log shows the ordered shutdown
/// lines (stop accepting, drain, Raft down, store flushed), the others elect a new leader, and the
/// node restarted on its data directory rejoins and applies a tag written while it was down.
#[tokio::test]
async fn sigterm_stops_a_node_in_order_with_status_zero() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    cluster.client(leader).create_tag(&new_tag("order", None, None, None)).await.expect("create a tag");

    let took = cluster.terminate(leader, Duration::from_secs(5)).await;
    println!("node {leader} stopped {took:?} after SIGTERM");
    let log = cluster.log(leader);
    let mut from = 0;
    for line in SHUTDOWN_LINES {
        let at =
            log[from..].find(line).unwrap_or_else(|| panic!("'{line}' missing or out of order in the log:\n{log}"));
        from += at + line.len();
    }
    assert!(!log.contains("panicked"), "{log}");

    let next = cluster.wait_leader(TIMEOUT).await;
    assert_ne!(next, leader);
    cluster
        .client(next)
        .create_tag(&new_tag("while-down", None, None, None))
        .await
        .expect("write while the node is down");
    cluster.restart(leader);
    cluster.wait_ready(leader, TIMEOUT).await;
    let client = cluster.client(leader);
    crate::harness::wait_until(TIMEOUT, "the restarted node to apply the tag written while it was down", || async {
        client.get_tag("while-down").await.map(|_| ()).map_err(|e| e.to_string())
    })
    .await;
}
