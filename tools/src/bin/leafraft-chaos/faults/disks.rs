//! Disk faults: a member whose data directory is wiped, and a majority lost for good.
//!
//! - `wipe-member`: kill -9 a node, delete its data directory and start it again with its original
//!   flags. It must refuse to start (exit non-zero): its peers' membership remembers another disk
//!   under its node ID. The runner then repairs it the documented way (docs/operations.md):
//!   `cluster remove`, wipe again, start it with `--join`.
//! - `lose-majority`: kill -9 every node, delete every data directory but one survivor's, run
//!   `leafraft recover` from the survivor into a new directory, start it there, and start every
//!   other node empty with `--join` the survivor.
//!
//! Both leave the checks to the clients' records: no ID may be handed out twice across either.

use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use anyhow::bail;
use anyhow::Context;

use crate::faults::Plan;
use crate::faults::Record;
use crate::nodes::Nodes;

/// How long a node restarted on a wiped directory gets to refuse.
const REFUSAL_DEADLINE: Duration = Duration::from_secs(20);

/// How long the repair and the rejoining nodes get to become voters (the run goes on regardless;
/// the final recovery check judges the end state).
const REJOIN_DEADLINE: Duration = Duration::from_secs(30);

/// The lease the nodes run with (`--worker-lease-ms` in `main.rs`), for the recovery margin.
const WORKER_LEASE_MS: &str = "4000";

/// Kills `victim`, wipes it, restarts it with its flags (it must refuse), then rebuilds it.
pub async fn wipe_member(nodes: &Arc<Nodes>, record: &Arc<Record>, victim: u64) {
    let ev = |text: String| record.event(nodes, text);
    ev(format!("kill -9 node {victim}, wipe its data directory, start it again with its original flags"));
    nodes.resume(victim);
    nodes.kill(victim);
    if let Err(e) = nodes.wipe(victim).and_then(|()| nodes.start(victim)) {
        return ev(format!("wipe of node {victim} failed: {e:#}"));
    }
    let verdict = match nodes.wait_exit(victim, REFUSAL_DEADLINE).await {
        Some((status, line)) if !status.success() => {
            ev(format!("node {victim} refused to start ({status}): {line}"));
            None
        }
        Some((status, line)) => Some(format!("node {victim} on a wiped directory exited with {status}: {line}")),
        None => {
            nodes.kill(victim);
            Some(format!("node {victim} on a wiped directory still ran {REFUSAL_DEADLINE:?} after its restart"))
        }
    };
    if let Some(failure) = &verdict {
        ev(format!("WIPED MEMBER NOT REFUSED: {failure}"));
    }
    record.wipes.lock().unwrap_or_else(|e| e.into_inner()).push(verdict);
    if let Err(e) = rebuild(nodes, victim).await {
        ev(format!("rebuilding node {victim} failed: {e:#}"));
    } else {
        ev(format!("node {victim} removed, wiped and started with --join"));
        await_voters(nodes, record, &[victim]).await;
    }
}

/// The documented rebuild: `cluster remove` (retried while no leader answers), wipe, `--join`.
async fn rebuild(nodes: &Nodes, victim: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + REJOIN_DEADLINE;
    loop {
        match nodes.admin(reqwest::Method::DELETE, &format!("/v1/cluster/members/{victim}"), None).await {
            Ok(()) => break,
            // Not a member (any more): nothing to remove.
            Err(e) if e.to_string().contains("NODE_NOT_FOUND") => break,
            Err(e) if Instant::now() >= deadline => return Err(e.context("cluster remove")),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    // Each member applies the removal a moment after the leader commits it. A joiner that asks
    // one that has not yet is told it is still a member with its old disk, and refuses to run:
    // wait until no running member lists it (as an operator reads `cluster status`).
    let settled = Instant::now() + Duration::from_secs(10);
    loop {
        let views = nodes.views().await;
        let listed =
            views.iter().any(|v| v.node != victim && (v.voters.contains(&victim) || v.learners.contains(&victim)));
        if !listed || Instant::now() >= settled {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    nodes.wipe(victim)?;
    let seeds: Vec<String> = nodes.running().into_iter().filter_map(|id| nodes.addr(id)).collect();
    nodes.set_args(victim, vec!["--join".into(), seeds.join(",")]);
    nodes.start(victim)
}

/// Kills every node, keeps only `survivor`'s directory, recovers from it, and rebuilds the rest;
/// answers false when there was no node to lose.
pub async fn lose_majority(nodes: &Arc<Nodes>, record: &Arc<Record>, plan: Plan) -> bool {
    let ev = |text: String| record.event(nodes, text);
    let all = nodes.ids();
    let Some(&survivor) = all.get((plan.pick % all.len().max(1) as u64) as usize) else { return false };
    ev(format!("lose a majority for good: kill -9 every node, wipe all but node {survivor}, recover from it"));
    for &id in &all {
        nodes.resume(id);
        nodes.kill(id);
    }
    let outcome = recover(nodes, survivor, &all).await;
    match &outcome {
        Ok(report) => ev(format!("recovered from node {survivor}: {}", report.lines().next().unwrap_or(""))),
        Err(e) => ev(format!("RECOVERY FAILED: {e:#}")),
    }
    let failure = outcome.err().map(|e| format!("recovery from node {survivor}: {e:#}"));
    record.recoveries_from_survivors.lock().unwrap_or_else(|e| e.into_inner()).push(failure);
    let others: Vec<u64> = all.into_iter().filter(|id| *id != survivor).collect();
    await_voters(nodes, record, &others).await;
    true
}

/// Wipes every node of `all` but `survivor`, recovers into a new directory for it, starts it there
/// and the others empty with `--join`; answers `leafraft recover`'s report.
async fn recover(nodes: &Nodes, survivor: u64, all: &[u64]) -> anyhow::Result<String> {
    for &id in all.iter().filter(|id| **id != survivor) {
        nodes.wipe(id)?;
    }
    let old = nodes.data_dir(survivor).context("the survivor's directory")?;
    let addr = nodes.addr(survivor).context("the survivor's address")?;
    let round = (1..).find(|n| !nodes.recovery_dir(survivor, *n).exists()).unwrap_or(0);
    let new = nodes.recovery_dir(survivor, round);
    let output = tokio::process::Command::new(nodes.binary())
        .arg("recover")
        .arg("--data-dir")
        .arg(&new)
        .arg("--from-data-dir")
        .arg(&old)
        .args(["--node-id", &survivor.to_string(), "--advertise", &addr, "--worker-lease-ms", WORKER_LEASE_MS])
        .kill_on_drop(true)
        .output()
        .await
        .context("run leafraft recover")?;
    let log = nodes.run_dir().join(format!("recover-node{survivor}.{round}.log"));
    std::fs::write(log, [&output.stdout[..], &output.stderr[..]].concat())?;
    if !output.status.success() {
        bail!("leafraft recover exited with {}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim());
    }
    nodes.set_data_dir(survivor, new);
    nodes.start(survivor)?;
    for &id in all.iter().filter(|id| **id != survivor) {
        nodes.set_args(id, vec!["--join".into(), addr.clone()]);
        nodes.start(id)?;
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Waits (bounded) until every node of `ids` is a voter, and says how it went.
async fn await_voters(nodes: &Nodes, record: &Record, ids: &[u64]) {
    let deadline = Instant::now() + REJOIN_DEADLINE;
    let started = Instant::now();
    loop {
        if let Some((voters, _)) = nodes.membership().await {
            if ids.iter().all(|id| voters.contains(id)) {
                let took = started.elapsed().as_secs_f64();
                return record.event(nodes, format!("  nodes {ids:?} are voters after {took:.3}s"));
            }
        }
        if Instant::now() >= deadline {
            return record.event(nodes, format!("  nodes {ids:?} are not all voters after {REJOIN_DEADLINE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
