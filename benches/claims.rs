//! `cargo bench --bench claims`: one claimer's Raft claims on 1 and on 3 nodes with no network at
//! all, the floor under what any transport between the nodes can reach.
//!
//! The nodes are the cluster suite's (`tests/cluster/fixtures`): real sled stores with fsync,
//! each assembled as `serve` assembles a node (`leafraft::node::assembly`: leafraft's own state machine,
//! network wrappers, `Cluster` and ID services), joined by the test router, which delivers each
//! Raft RPC as a function call (through the wire codec). So a claim here pays what openraft and the
//! stores cost on each node (the leader's proposal, append and apply, a follower's append and sync,
//! the commit notification) and nothing for sockets or HTTP. `scripts/bench-claims.sh` measures
//! the same claim over loopback HTTP and next to MariaDB; the difference between the two is the
//! transport's share.
//!
//! Rounds alternate 1 and 3 nodes so both see the same machine load; each round checks that the
//! claimed segments only go up (a duplicate would fail the bench).

use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use leafraft::cluster::Cluster;
use leafraft_state::Request;
use leafraft_state::Response;

// The in-process benches' helpers; this one times whole rounds, not `N` calls.
#[allow(dead_code)]
mod common;
// The cluster suite's fixtures; this bench uses the cluster and not the traffic helpers or filters.
#[allow(dead_code, unused_imports)]
#[path = "../tests/cluster/fixtures/mod.rs"]
mod fixtures;

use common::median;
use fixtures::TestCluster;

const ROUNDS: usize = 3;
const ROUND: Duration = Duration::from_secs(3);
const STEP: u64 = 1000;
const TAG: &str = "bench";

/// One round on a fresh cluster of `nodes`: (claims/s, p50 µs, p99 µs) of back-to-back claims on
/// the leader.
async fn round(nodes: u64) -> Result<(f64, u64, u64), String> {
    let cluster = TestCluster::new(nodes).await;
    cluster.create_tag(TAG, STEP).await;
    let leader: Arc<Cluster> = cluster.cluster(cluster.leader().await);
    let claim = || leader.write(Request::ClaimSegment { tag: TAG.to_string(), step: STEP });
    // Warm up: the first claims pay for the tag's first reads and the runtime's threads.
    for _ in 0..200 {
        claim().await.map_err(|e| e.to_string())?;
    }
    let mut latencies = Vec::new();
    let mut last_start = 0;
    let started = Instant::now();
    while started.elapsed() < ROUND {
        let sent = Instant::now();
        match claim().await {
            Ok(Response::Segment { start, .. }) if start > last_start => last_start = start,
            other => return Err(format!("a claim after one at {last_start} was answered {other:?}")),
        }
        latencies.push(sent.elapsed().as_micros() as u64);
    }
    let per_sec = latencies.len() as f64 / started.elapsed().as_secs_f64();
    cluster.shutdown().await;
    latencies.sort_unstable();
    Ok((per_sec, latencies[latencies.len() / 2], latencies[latencies.len() * 99 / 100]))
}

fn main() -> Result<(), String> {
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    println!("one claimer on the leader, no network (the test router), sled with fsync, {ROUNDS} rounds of {ROUND:?}");
    println!("{:>6} {:>8} {:>10} {:>8} {:>8}", "round", "nodes", "claims/s", "p50 µs", "p99 µs");
    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for i in 0..ROUNDS {
        for (slot, nodes) in [1, 3].into_iter().enumerate() {
            let (per_sec, p50, p99) = runtime.block_on(round(nodes))?;
            println!("{:>6} {nodes:>8} {per_sec:>10.0} {p50:>8} {p99:>8}", i + 1);
            rates[slot].push(per_sec);
        }
    }
    let [one, three] = rates.map(median);
    println!("median: 1 node {one:.0} claims/s, 3 nodes {three:.0} claims/s ({:.2}× of one node)", three / one);
    Ok(())
}
