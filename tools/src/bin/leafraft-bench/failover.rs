//! `leafraft-bench failover`: how long a monotonic tag goes without service when its leader is
//! killed. Starts three `leafraft serve` processes, keeps callers taking single IDs of a
//! monotonic tag from every node (followers forward to the leader), kills the leader with SIGKILL
//! `kills` times (restarting it on its disk each time) and reports, per kill, the time from the
//! kill to the first answer to a request sent after the kill (answers already on their way when
//! the leader died do not count as service).
//!
//! Every ID is checked: unique across the run, and increasing per caller (each caller sends its
//! next request after it received the previous answer, so real-time order says so).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use leafraft_harness::Serve;
use leafraft_harness::ServeProcess;
use serde::Serialize;

pub struct FailoverOptions {
    /// The `leafraft` binary.
    pub bin: PathBuf,
    pub kills: usize,
    pub callers: usize,
    /// Extra `serve` flags (e.g. `--election-timeout-ms 150`).
    pub serve_flags: Vec<String>,
    /// Steady service between two kills.
    pub settle: Duration,
}

#[derive(Debug, Serialize)]
pub struct FailoverReport {
    /// Milliseconds from each kill to the first answer to a request sent after it, in kill order.
    pub downtime_ms: Vec<f64>,
    pub ids: usize,
    pub duplicates: usize,
    /// Answers smaller than the same caller's previous one.
    pub order_violations: usize,
    pub errors: u64,
}

/// One answered take: when its request was sent, when the answer came, the ID.
struct Taken {
    sent: Instant,
    received: Instant,
    id: u64,
}

struct Node {
    id: u64,
    addr: String,
    dir: PathBuf,
    child: Option<ServeProcess>,
}

pub async fn run(options: &FailoverOptions) -> Result<FailoverReport, String> {
    let work = tempfile_dir()?;
    let mut nodes: Vec<Node> = Vec::new();
    for id in 1..=3 {
        let addr = free_addr()?;
        nodes.push(Node { id, addr, dir: work.join(format!("node-{id}")), child: None });
    }
    let members = nodes.iter().map(|n| format!("{}={}", n.id, n.addr)).collect::<Vec<_>>().join(",");
    for node in &mut nodes {
        start(options, node, &members, &work)?;
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr.clone()).collect();
    for addr in &addrs {
        wait_ready(&http, addr).await?;
    }
    create_tag(&http, &addrs).await?;

    let stop = Arc::new(AtomicBool::new(false));
    let taken: Arc<Mutex<Vec<Taken>>> = Arc::default();
    let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut callers = Vec::new();
    for caller in 0..options.callers {
        let (http, addrs, stop, taken, errors) =
            (http.clone(), addrs.clone(), stop.clone(), taken.clone(), errors.clone());
        callers.push(tokio::spawn(async move { take_loop(caller, http, addrs, stop, taken, errors).await }));
    }

    let mut kills = Vec::new();
    let result = async {
        for round in 0..options.kills {
            tokio::time::sleep(options.settle).await;
            let leader = leader_of(&http, &addrs).await?;
            let node = nodes.iter_mut().find(|n| n.id == leader).ok_or(format!("no node {leader}"))?;
            let killed_at = Instant::now();
            if let Some(mut child) = node.child.take() {
                child.kill().map_err(|e| format!("kill node {leader}: {e}"))?;
            }
            kills.push(killed_at);
            wait_for_service_after(&taken, killed_at).await?;
            eprintln!("kill {}: node {leader}", round + 1);
            start(options, node, &members, &work)?;
            wait_ready(&http, &node.addr).await?;
        }
        tokio::time::sleep(options.settle).await;
        Ok::<(), String>(())
    }
    .await;
    stop.store(true, Ordering::Relaxed);
    let mut per_caller = Vec::new();
    for caller in callers {
        per_caller.push(caller.await.map_err(|e| format!("a caller panicked: {e}"))?);
    }
    for node in &mut nodes {
        // Dropping a process kills and reaps it.
        node.child = None;
    }
    let _ = std::fs::remove_dir_all(&work);
    result?;

    let taken = std::mem::take(&mut *taken.lock().map_err(|_| "poisoned")?);
    let downtime_ms = kills
        .iter()
        .map(|killed| {
            taken
                .iter()
                .filter(|t| t.sent > *killed)
                .map(|t| t.received - *killed)
                .min()
                .map_or(f64::INFINITY, |d| d.as_secs_f64() * 1000.0)
        })
        .collect();
    let mut seen = HashSet::new();
    let duplicates = taken.iter().filter(|t| !seen.insert(t.id)).count();
    let order_violations = per_caller.iter().sum();
    Ok(FailoverReport {
        downtime_ms,
        ids: taken.len(),
        duplicates,
        order_violations,
        errors: errors.load(Ordering::Relaxed),
    })
}

/// One caller: single IDs, round robin over the nodes, the next request after the answer.
/// Answers the number of IDs smaller than its previous one.
async fn take_loop(
    caller: usize,
    http: reqwest::Client,
    addrs: Vec<String>,
    stop: Arc<AtomicBool>,
    taken: Arc<Mutex<Vec<Taken>>>,
    errors: Arc<std::sync::atomic::AtomicU64>,
) -> usize {
    let mut previous = 0u64;
    let mut violations = 0;
    let mut next = caller;
    while !stop.load(Ordering::Relaxed) {
        let addr = &addrs[next % addrs.len()];
        next += 1;
        let sent = Instant::now();
        let answer = http.get(format!("http://{addr}/api/segment/get/mono")).send().await;
        let id = match answer {
            Ok(resp) if resp.status().is_success() => resp.text().await.ok().and_then(|t| t.trim().parse::<u64>().ok()),
            _ => None,
        };
        match id {
            Some(id) => {
                let received = Instant::now();
                if id <= previous {
                    violations += 1;
                }
                previous = id;
                if let Ok(mut taken) = taken.lock() {
                    taken.push(Taken { sent, received, id });
                }
            }
            None => {
                errors.fetch_add(1, Ordering::Relaxed);
                // A dead node refuses at once: do not spin on it.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }
    violations
}

fn start(options: &FailoverOptions, node: &mut Node, members: &str, work: &std::path::Path) -> Result<(), String> {
    let mut command = Serve::new(&options.bin);
    command.log_to(&work.join(format!("node-{}.log", node.id))).map_err(|e| format!("log file: {e}"))?;
    let child = command
        .args(["--node-id", &node.id.to_string(), "--listen", &node.addr])
        .arg("--data-dir")
        .arg(&node.dir)
        .args(["--initial-cluster", members])
        .args(&options.serve_flags)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", options.bin.display()))?;
    node.child = Some(child);
    Ok(())
}

async fn wait_ready(http: &reqwest::Client, addr: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(resp) = http.get(format!("http://{addr}/readyz")).send().await {
            if resp.status().is_success() {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("{addr} not ready within 30 s"))
}

async fn create_tag(http: &reqwest::Client, addrs: &[String]) -> Result<(), String> {
    let body = serde_json::json!({"tag": "mono", "step": 1000, "mode": "monotonic"});
    let resp = http
        .post(format!("http://{}/v1/tags", addrs[0]))
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("create the tag: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("create the tag: {}", resp.status()));
    }
    Ok(())
}

async fn leader_of(http: &reqwest::Client, addrs: &[String]) -> Result<u64, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        for addr in addrs {
            let Ok(resp) = http.get(format!("http://{addr}/v1/cluster")).send().await else { continue };
            let Ok(status) = resp.json::<serde_json::Value>().await else { continue };
            if let Some(leader) = status["leader_id"].as_u64() {
                return Ok(leader);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err("no leader within 30 s".into())
}

async fn wait_for_service_after(taken: &Mutex<Vec<Taken>>, killed_at: Instant) -> Result<(), String> {
    let deadline = killed_at + Duration::from_secs(30);
    while Instant::now() < deadline {
        let served = taken.lock().map_err(|_| "poisoned")?.iter().rev().take(64).any(|t| t.sent > killed_at);
        if served {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Err("no ID served within 30 s of a kill".into())
}

fn free_addr() -> Result<String, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| format!("bind: {e}"))?;
    Ok(addr.to_string())
}

fn tempfile_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("leafraft-failover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The value at quantile `q` (0..=1) of sorted `values`.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
