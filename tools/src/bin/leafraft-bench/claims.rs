//! Claims per second and commit latency of `ClaimSegment` on a local cluster: every claim is a
//! Raft entry replicated over loopback HTTP and fsynced by a majority before it answers.
//!
//! By default claimers are spread over all nodes, so most claims are forwarded to the leader, as
//! in a real deployment where every node refills its own buffers; `--claimers-on leader` and
//! `followers` separate the forward hop from the rest of a claim's cost.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use tokio::net::TcpListener;

use crate::report::Percentiles;
use leafraft::config::Config;
use leafraft::config::Settings;
use leafraft::node;
use leafraft::node::RunningNode;

#[derive(Debug, Clone)]
pub struct ClaimsOptions {
    pub nodes: usize,
    pub concurrency: Vec<usize>,
    pub duration: Duration,
    pub fsync: bool,
    pub step: u64,
    pub placement: Placement,
}

/// Which nodes the claimers run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Placement {
    Spread,
    Leader,
    Followers,
}

#[derive(Debug, Clone)]
pub struct ClaimsResult {
    pub concurrency: usize,
    pub claims: u64,
    pub errors: u64,
    pub claims_per_sec: f64,
    pub latency_us: Percentiles,
}

/// Starts `options.nodes` nodes in this process, runs each concurrency level for
/// `options.duration`, stops the nodes and removes their data.
pub async fn run(options: &ClaimsOptions) -> Result<Vec<ClaimsResult>, String> {
    let base = std::env::temp_dir().join(format!("leafraft-bench-claims-{}", std::process::id()));
    let res = run_in(&base, options).await;
    let _ = std::fs::remove_dir_all(&base);
    res
}

async fn run_in(base: &std::path::Path, options: &ClaimsOptions) -> Result<Vec<ClaimsResult>, String> {
    let nodes = start_cluster(base, options.nodes, options.fsync).await?;
    let leader = wait_for_leader(&nodes).await?;
    let tag = "bench-claims";
    let create = raft::Request::CreateTag {
        tag: tag.to_string(),
        max_id: 1,
        step: options.step,
        description: String::new(),
        now_ms: 0,
    };
    nodes[leader].cluster().write(create).await.map_err(|e| format!("cannot create the bench tag: {e}"))?;
    // Every node must have applied the tag before claimers start on it.
    let created_at = nodes[leader].cluster().metrics().last_applied.map(|id| id.index);
    for node in &nodes {
        node.cluster()
            .raft()
            .wait(Some(Duration::from_secs(10)))
            .applied_index_at_least(created_at, "bench tag applied")
            .await
            .map_err(|e| format!("the bench tag did not reach every node: {e}"))?;
    }

    let mut results = Vec::new();
    for &concurrency in &options.concurrency {
        results.push(run_level(&nodes, leader, tag, concurrency, options).await);
    }
    for node in nodes {
        node.stop().await.map_err(|e| e.to_string())?;
    }
    Ok(results)
}

async fn run_level(
    nodes: &[RunningNode],
    leader: usize,
    tag: &str,
    concurrency: usize,
    options: &ClaimsOptions,
) -> ClaimsResult {
    let hosts: Vec<usize> = match options.placement {
        Placement::Spread => (0..nodes.len()).collect(),
        Placement::Leader => vec![leader],
        Placement::Followers => (0..nodes.len()).filter(|i| *i != leader).collect(),
    };
    let deadline = Instant::now() + options.duration;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..concurrency {
        let cluster = Arc::clone(nodes[hosts[i % hosts.len()]].cluster());
        let tag = tag.to_string();
        let step = options.step;
        tasks.push(tokio::spawn(async move {
            let mut histogram = crate::report::new_histogram();
            let mut errors = 0u64;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                let res = cluster.write(raft::Request::ClaimSegment { tag: tag.clone(), step }).await;
                let micros = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
                match res {
                    Ok(raft::Response::Segment { .. }) => histogram.saturating_record(micros),
                    _ => errors += 1,
                }
            }
            (histogram, errors)
        }));
    }
    let mut histogram = crate::report::new_histogram();
    let mut errors = 0;
    for task in tasks {
        if let Ok((h, e)) = task.await {
            let _ = histogram.add(h);
            errors += e;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let claims = histogram.len();
    ClaimsResult {
        concurrency,
        claims,
        errors,
        claims_per_sec: claims as f64 / elapsed,
        latency_us: Percentiles::of(&histogram),
    }
}

async fn start_cluster(base: &std::path::Path, n: usize, fsync: bool) -> Result<Vec<RunningNode>, String> {
    let mut listeners = Vec::new();
    for _ in 0..n {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        listeners.push(listener);
    }
    let mut members = BTreeMap::new();
    for (i, listener) in listeners.iter().enumerate() {
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        members.insert(i as u64 + 1, addr.to_string());
    }
    let initial_cluster = members.iter().map(|(id, addr)| format!("{id}={addr}")).collect::<Vec<_>>().join(",");
    let mut nodes = Vec::new();
    for (i, listener) in listeners.into_iter().enumerate() {
        let node_id = i as u64 + 1;
        // Every other setting is the service's default, as `leafraft serve` would resolve it.
        let config = Config::resolve(Settings {
            node_id: Some(node_id),
            listen: Some(members[&node_id].clone()),
            data_dir: Some(PathBuf::from(base).join(format!("node-{node_id}"))),
            initial_cluster: Some(initial_cluster.clone()),
            fsync: Some(fsync),
            ..Settings::default()
        })?;
        nodes.push(node::start(config, listener).await.map_err(|e| e.to_string())?);
    }
    Ok(nodes)
}

async fn wait_for_leader(nodes: &[RunningNode]) -> Result<usize, String> {
    let mut rx = nodes[0].cluster().raft().metrics();
    let leader = tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|m| m.current_leader.is_some()))
        .await
        .map_err(|_| "no leader elected within 20 s".to_string())?
        .map_err(|_| "raft stopped".to_string())?
        .current_leader;
    nodes
        .iter()
        .position(|node| Some(node.cluster().node_id()) == leader)
        .ok_or_else(|| "leader is not a local node".to_string())
}
