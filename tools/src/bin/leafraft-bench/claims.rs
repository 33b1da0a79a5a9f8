//! Claims per second and commit latency of `ClaimSegment` on a local cluster: every claim is a
//! Raft entry replicated over loopback HTTP and fsynced by a majority before it answers.
//!
//! By default claimers are spread over all nodes, so most claims are forwarded to the leader, as
//! in a real deployment where every node refills its own buffers; `--claimers-on leader` and
//! `followers` separate the forward hop from the rest of a claim's cost.
//!
//! With `followers_in_processes`, node 1 runs in this process and carries every claimer, and the
//! other nodes are `leafraft serve` children, as in a deployment with one node per machine: the
//! nodes then share no sled (whose concurrency lock is process-wide) and no runtime.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use tokio::net::TcpListener;

use crate::report::Percentiles;
use leafraft::config::Config;
use leafraft::config::Settings;
use leafraft::node::run::RunningNode;

#[derive(Debug, Clone)]
pub struct ClaimsOptions {
    pub nodes: usize,
    pub concurrency: Vec<usize>,
    pub duration: Duration,
    pub fsync: bool,
    pub step: u64,
    pub placement: Placement,
    /// Run the followers as `leafraft serve` processes that join node 1, which leads; the
    /// claimers then run on node 1.
    pub followers_in_processes: bool,
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
    let (nodes, children) = if options.followers_in_processes {
        let (node, children) = start_with_child_followers(base, options.nodes, options.fsync).await?;
        (vec![node], children)
    } else {
        (start_cluster(base, options.nodes, options.fsync).await?, Vec::new())
    };
    let res = measure(&nodes, options).await;
    for node in nodes {
        node.stop().await.map_err(|e| e.to_string())?;
    }
    // Dropping the follower processes kills and reaps them.
    drop(children);
    res
}

async fn measure(nodes: &[RunningNode], options: &ClaimsOptions) -> Result<Vec<ClaimsResult>, String> {
    let leader = wait_for_leader(nodes).await?;
    let tag = "bench-claims";
    let create = leafraft_state::Request::CreateTag {
        tag: tag.to_string(),
        max_id: 1,
        step: options.step,
        description: String::new(),
        now_ms: 0,
    };
    nodes[leader].cluster().write(create).await.map_err(|e| format!("cannot create the bench tag: {e}"))?;
    // Every node must have applied the tag before claimers start on it.
    let created_at = nodes[leader].cluster().metrics().last_applied.map(|id| id.index);
    for node in nodes {
        node.cluster()
            .raft()
            .wait(Some(Duration::from_secs(10)))
            .applied_index_at_least(created_at, "bench tag applied")
            .await
            .map_err(|e| format!("the bench tag did not reach every node: {e}"))?;
    }

    let mut results = Vec::new();
    for &concurrency in &options.concurrency {
        results.push(run_level(nodes, leader, tag, concurrency, options).await);
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
                let res = cluster.write(leafraft_state::Request::ClaimSegment { tag: tag.clone(), step }).await;
                let micros = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
                match res {
                    Ok(leafraft_state::Response::Segment { .. }) => histogram.saturating_record(micros),
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
    let (listeners, initial_cluster) = bind_members(n).await?;
    let mut nodes = Vec::new();
    for (i, listener) in listeners.into_iter().enumerate() {
        nodes.push(start_node(base, i as u64 + 1, listener, Some(&initial_cluster), fsync).await?);
    }
    Ok(nodes)
}

/// Node 1 in this process, started alone (so it leads from the start, with no election to lose),
/// then nodes 2..=n as `leafraft serve` children (the binary next to this one) that join it as
/// voters; answers once node 1's configuration has every voter.
async fn start_with_child_followers(
    base: &std::path::Path,
    n: usize,
    fsync: bool,
) -> Result<(RunningNode, Vec<leafraft_harness::ServeProcess>), String> {
    let binary = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("leafraft");
    if !binary.is_file() {
        return Err(format!("{} not found: build it with `cargo build --release -p leafraft`", binary.display()));
    }
    let (mut listeners, _) = bind_members(n).await?;
    let first = listeners.remove(0);
    let seed = first.local_addr().map_err(|e| e.to_string())?.to_string();
    let node = start_node(base, 1, first, None, fsync).await?;
    let mut children = Vec::new();
    // Each child binds its own port: free this process's listener for it first.
    for (i, listener) in listeners.into_iter().enumerate() {
        let node_id = i as u64 + 2;
        let addr = listener.local_addr().map_err(|e| e.to_string())?.to_string();
        drop(listener);
        let dir = base.join(format!("node-{node_id}"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut command = leafraft_harness::Serve::new(&binary);
        command.log_to(&base.join(format!("node-{node_id}.log"))).map_err(|e| e.to_string())?;
        command
            .args(["--node-id", &node_id.to_string(), "--listen", &addr, "--join", &seed])
            .args(["--fsync", &fsync.to_string()])
            .arg("--data-dir")
            .arg(&dir);
        children.push(command.spawn().map_err(|e| format!("cannot start {}: {e}", binary.display()))?);
    }
    let mut metrics = node.cluster().raft().metrics();
    let joined = {
        let all_voters = metrics.wait_for(|m| m.membership_config.membership().voter_ids().count() == n);
        matches!(tokio::time::timeout(Duration::from_secs(60), all_voters).await, Ok(Ok(_)))
    };
    if !joined {
        return Err(format!("the follower processes did not join as voters within 60 s (logs in {})", base.display()));
    }
    Ok((node, children))
}

/// One loopback listener per member and the `--initial-cluster` value naming them.
async fn bind_members(n: usize) -> Result<(Vec<TcpListener>, String), String> {
    let mut listeners = Vec::new();
    let mut members = BTreeMap::new();
    for i in 0..n {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        members.insert(i as u64 + 1, listener.local_addr().map_err(|e| e.to_string())?.to_string());
        listeners.push(listener);
    }
    let initial_cluster = members.iter().map(|(id, addr)| format!("{id}={addr}")).collect::<Vec<_>>().join(",");
    Ok((listeners, initial_cluster))
}

async fn start_node(
    base: &std::path::Path,
    node_id: u64,
    listener: TcpListener,
    initial_cluster: Option<&str>,
    fsync: bool,
) -> Result<RunningNode, String> {
    // Every other setting is the service's default, as `leafraft serve` would resolve it.
    let config = Config::resolve(Settings {
        node_id: Some(node_id),
        listen: Some(listener.local_addr().map_err(|e| e.to_string())?.to_string()),
        data_dir: Some(PathBuf::from(base).join(format!("node-{node_id}"))),
        initial_cluster: initial_cluster.map(str::to_string),
        fsync: Some(fsync),
        ..Settings::default()
    })?;
    leafraft::node::run::start(config, listener).await.map_err(|e| e.to_string())
}

async fn wait_for_leader(nodes: &[RunningNode]) -> Result<usize, String> {
    let mut rx = nodes[0].cluster().raft().metrics();
    let leader = tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|m| m.current_leader.is_some()))
        .await
        .map_err(|_| "no leader elected within 20 s".to_string())?
        .map_err(|_| "raft stopped".to_string())?
        .current_leader;
    nodes.iter().position(|node| Some(node.cluster().node_id()) == leader).ok_or_else(|| {
        format!("the leader ({leader:?}) is not a node of this process: a follower process won the election; run again")
    })
}
