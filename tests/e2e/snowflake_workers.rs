//! Worker takeover across processes, with two workers for three nodes (`--snowflake-worker-bits
//! 1`): a dead holder's worker goes to the waiting node once its lease expires, or at once when
//! an operator releases it with `leafraft worker release`; either way the new holder's
//! timestamps start above the old holder's window, so no ID repeats (`docs/semantics.md`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;
use std::time::Instant;

use reqwest::Method;
use serde_json::Value;

use crate::harness::assert_error;
use crate::harness::run_binary;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::snowflake_ids::entries_applied_during;
use crate::snowflake_ids::fetch;
use crate::snowflake_ids::fetch_ok;
use crate::snowflake_ids::http_client;
use crate::snowflake_ids::is_worker_unavailable;
use crate::snowflake_ids::leaf_error;
use crate::snowflake_ids::lease_of;
use crate::snowflake_ids::leases;
use crate::snowflake_ids::readiness;
use crate::snowflake_ids::wait_lease;
use crate::snowflake_ids::wait_snowflake_ready;
use crate::snowflake_ids::Answer;
use crate::snowflake_ids::Endpoint;
use crate::snowflake_ids::Layout;
use crate::snowflake_ids::Lease;
use crate::snowflake_ids::LEAF_EPOCH_MS;

const TIMEOUT: Duration = Duration::from_secs(20);

/// Two workers, a 1 s window (extended every ~0.5 s) and a 3 s lease.
const FLAGS: [&str; 8] = [
    "--snowflake-worker-bits",
    "1",
    "--snowflake-time-bits",
    "50",
    "--snowflake-window-ms",
    "1000",
    "--worker-lease-ms",
    "3000",
];
const LEASE_MS: u64 = 3000;
const LAYOUT: Layout = Layout { epoch_ms: LEAF_EPOCH_MS, worker_bits: 1, sequence_bits: 12 };

/// Fetches IDs from `base` one request after another until the node stops answering (it is
/// killed meanwhile); answers every ID it got. `got` counts them as they come.
async fn fetch_until_dead(base: String, got: Rc<RefCell<usize>>) -> Vec<u64> {
    let http = http_client();
    let mut ids: Vec<u64> = Vec::new();
    for round in 0u64.. {
        let endpoint = if round % 2 == 0 { Endpoint::Native(1 + round % 200) } else { Endpoint::Leaf };
        match fetch(&http, &base, endpoint).await {
            Answer::Ids(more) => {
                assert!(ids.last().is_none_or(|last| more[0] > *last), "{} after {:?}", more[0], ids.last());
                ids.extend(more);
                *got.borrow_mut() = ids.len();
            }
            Answer::Transport(_) => break,
            answer if is_worker_unavailable(&answer) => {}
            other => panic!("GET {base}{}: {other:?}", endpoint.path()),
        }
    }
    ids
}

/// Loads `base` until it is killed: spawns [`fetch_until_dead`], waits until it has `n` IDs,
/// SIGKILLs `node`, and answers the IDs it got before the kill.
async fn ids_until_killed(cluster: &mut ProcessCluster, node: u64, n: usize) -> Vec<u64> {
    let got = Rc::new(RefCell::new(0));
    let task = tokio::task::spawn_local(fetch_until_dead(cluster.url(node), got.clone()));
    wait_until(TIMEOUT, &format!("{n} IDs from node {node}"), || async {
        let count = *got.borrow();
        if count >= n {
            Ok(())
        } else {
            Err(format!("{count} IDs"))
        }
    })
    .await;
    cluster.kill(node);
    task.await.expect("the loading task")
}

/// The holder of each worker, once two nodes serve snowflake (workers 0 and 1) and the third
/// waits; answers `(holders by worker, the waiting node)`.
async fn wait_two_holders(cluster: &mut ProcessCluster, nodes: &[u64]) -> (BTreeMap<u64, u64>, u64) {
    let http = http_client();
    let bases: Vec<(u64, String)> = nodes.iter().map(|&id| (id, cluster.url(id))).collect();
    wait_until(TIMEOUT, "two nodes to hold the two workers", || async {
        let mut holders = BTreeMap::new();
        let mut waiting = Vec::new();
        for (id, base) in &bases {
            let answer = readiness(&http, base).await?;
            match answer.worker {
                Some(worker) if answer.ready => {
                    holders.insert(worker, *id);
                }
                _ => waiting.push((*id, answer.reason)),
            }
        }
        match waiting.as_slice() {
            [(id, reason)] if holders.len() == 2 && reason.contains("no worker") => Ok((holders, *id)),
            _ => Err(format!("holders {holders:?}, waiting {waiting:?}")),
        }
    })
    .await
}

/// Waits until `observer` has applied a new holding of `worker` (epoch above `old`'s), and
/// answers the last lease it saw under `old`'s epoch (the final one) and the new one.
async fn wait_taken_over(cluster: &mut ProcessCluster, observer: u64, worker: u64, old: Lease) -> (Lease, Lease) {
    let client = cluster.client(observer);
    let last_old = RefCell::new(old);
    let new = wait_until(TIMEOUT, &format!("worker {worker} to change hands"), || async {
        let view = client.workers().await.map_err(|e| e.to_string())?;
        let lease = lease_of(&leases(&view), worker);
        if lease.epoch == old.epoch {
            *last_old.borrow_mut() = lease;
        }
        if lease.epoch > old.epoch && lease.holder.is_some() {
            Ok(lease)
        } else {
            Err(format!("{lease:?}"))
        }
    })
    .await;
    (last_old.into_inner(), new)
}

/// Asserts that `new` IDs of `worker` all lie above `old` ones in time (and so in value), and
/// that no ID is in both or twice in either.
fn assert_no_overlap(worker: u64, old: &[u64], new: &[u64]) {
    let old_ts: Vec<u64> = old.iter().map(|&id| LAYOUT.parts(id).timestamp_ms).collect();
    let new_ts: Vec<u64> = new.iter().map(|&id| LAYOUT.parts(id).timestamp_ms).collect();
    assert!(old.iter().chain(new).all(|&id| LAYOUT.parts(id).worker == worker), "IDs of another worker");
    let (old_max, new_min) = (old_ts.iter().max().unwrap(), new_ts.iter().min().unwrap());
    assert!(new_min > old_max, "worker {worker}: new timestamps from {new_min}, old ones up to {old_max}");
    assert!(new.iter().min().unwrap() > old.iter().max().unwrap());
    let unique: BTreeSet<u64> = old.iter().chain(new).copied().collect();
    assert_eq!(unique.len(), old.len() + new.len(), "an ID repeats");
    println!(
        "worker {worker}: {} old IDs up to {old_max}, {} new from {new_min} ({} ms later)",
        old.len(),
        new.len(),
        new_min - old_max
    );
}

/// Three nodes, two workers: two nodes hold them and the third answers `WORKER_UNAVAILABLE`
/// (Leaf −1). The holder of one worker is SIGKILLed under load; no one takes its worker before
/// its lease (3 s) has run out since its last extension, then the waiting node takes it (new
/// epoch, floor just above the old window) and serves: every new ID of that worker is later
/// than every old one, none repeats. Then the operator path: the restarted node (whose own
/// lease setting is 60 s) waits; the holder of the other worker is SIGKILLed and
/// `leafraft worker release` frees that worker, which the waiting node takes at once, again
/// strictly after the old holder's IDs.
#[tokio::test]
async fn a_dead_holders_worker_is_taken_over_after_its_lease_or_an_operator_release_without_overlap() {
    tokio::task::LocalSet::new().run_until(takeover()).await;
}

async fn takeover() {
    let mut cluster = ProcessCluster::new().start_members_with(&[1, 2, 3], &FLAGS);
    cluster.wait_leader(TIMEOUT).await;
    let (holders, waiting) = wait_two_holders(&mut cluster, &[1, 2, 3]).await;
    println!("holders by worker {holders:?}; node {waiting} waits");
    let answer = cluster.request(waiting, Method::GET, "/v1/snowflake", None, None).await;
    assert_error(&answer, 503, "WORKER_UNAVAILABLE", "snowflake on the node without a worker");
    let leaf = cluster.get_text(waiting, "/api/snowflake/get/k").await;
    assert_eq!(leaf, (reqwest::StatusCode::INTERNAL_SERVER_ERROR, leaf_error(-1)));
    // Waiting costs little: two holders extend every ~0.5 s and the waiting node asks every
    // 0.25 s (a quarter window), some 8 entries a second; not a proposal per applied entry.
    let entries = entries_applied_during(&mut cluster, waiting, Duration::from_secs(1)).await;
    println!("the Raft log grew by {entries} entries in 1 s while node {waiting} waited for a worker");
    assert!(entries < 40, "node {waiting} proposes in a loop while it waits: {entries} entries in 1 s");

    // Expiry: kill the holder of worker 0 under load.
    let (x, victim) = (0, holders[&0]);
    let (y, other) = (1, holders[&1]);
    let before = wait_lease(&mut cluster, waiting, x, "held", |l| l.holder == Some(victim)).await;
    let old_x = ids_until_killed(&mut cluster, victim, 2000).await;
    let killed = Instant::now();
    let (final_old, taken) = wait_taken_over(&mut cluster, waiting, x, before).await;
    let after = killed.elapsed();
    println!(
        "worker {x}: holder {victim} killed; node {} took it over {after:?} later: {final_old:?} -> {taken:?}",
        taken.holder.unwrap()
    );
    assert_eq!(taken.holder, Some(waiting), "{taken:?}");
    assert_eq!(taken.epoch, final_old.epoch + 1, "{taken:?}");
    assert_eq!(taken.floor_ms, final_old.window_end_ms + 1, "the new holding must start above the old window");
    assert!(
        taken.last_heartbeat_ms - final_old.last_heartbeat_ms >= LEASE_MS,
        "taken over {} ms after the last extension, before the {LEASE_MS} ms lease ran out",
        taken.last_heartbeat_ms - final_old.last_heartbeat_ms
    );
    assert_eq!(wait_snowflake_ready(&mut cluster, waiting, TIMEOUT).await, x);
    let http = http_client();
    let mut new_x = Vec::new();
    for round in 0..20 {
        let endpoint = if round % 2 == 0 { Endpoint::Native(100) } else { Endpoint::Leaf };
        new_x.extend(fetch_ok(&http, &cluster.url(waiting), endpoint).await);
    }
    assert_no_overlap(x, &old_x, &new_x);

    // Operator release: the restarted victim, with a 60 s lease of its own, can only get a
    // worker by a release.
    let mut args: Vec<String> = cluster.args(victim);
    let lease_at = args.iter().position(|a| a == "--worker-lease-ms").expect("lease flag") + 1;
    args[lease_at] = "60000".to_string();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cluster.start_node(victim, &args);
    cluster.wait_ready(victim, TIMEOUT).await;
    let answer = cluster.request(victim, Method::GET, "/v1/snowflake", None, None).await;
    assert_error(&answer, 503, "WORKER_UNAVAILABLE", "the restarted node, both workers held");

    let before = wait_lease(&mut cluster, waiting, y, "held", |l| l.holder == Some(other)).await;
    let old_y = ids_until_killed(&mut cluster, other, 2000).await;
    let killed = Instant::now();
    cluster.wait_leader(TIMEOUT).await;
    let server = cluster.url(waiting);
    let out = run_binary(&["worker", "release", &y.to_string(), "--server", &server], TIMEOUT).await;
    assert!(out.status.success(), "leafraft worker release {y}: {out:?}");
    let view: Value = serde_json::from_slice(&out.stdout).expect("worker release prints the registry as JSON");
    assert!(view["workers"].is_array(), "{view}");
    let client = cluster.client(waiting);
    let taken = wait_until(TIMEOUT, &format!("node {victim} to take worker {y}"), || async {
        let view = client.workers().await.map_err(|e| e.to_string())?;
        let lease = lease_of(&leases(&view), y);
        if lease.holder == Some(victim) {
            Ok(lease)
        } else {
            Err(format!("{lease:?}"))
        }
    })
    .await;
    let after = killed.elapsed();
    println!(
        "worker {y}: holder {other} killed, released by the operator; node {victim} took it {after:?} after the kill"
    );
    assert_eq!(taken.epoch, before.epoch + 2, "one release and one acquire: {before:?} -> {taken:?}");
    assert!(taken.floor_ms > before.window_end_ms, "{before:?} -> {taken:?}");
    assert!(after < Duration::from_secs(10), "the release should free the worker at once, not after a lease");
    assert_eq!(wait_snowflake_ready(&mut cluster, victim, TIMEOUT).await, y);
    let mut new_y = Vec::new();
    for round in 0..20 {
        let endpoint = if round % 2 == 0 { Endpoint::Native(100) } else { Endpoint::Leaf };
        new_y.extend(fetch_ok(&http, &cluster.url(victim), endpoint).await);
    }
    assert_no_overlap(y, &old_y, &new_y);
    let everything: BTreeSet<u64> = old_x.iter().chain(&new_x).chain(&old_y).chain(&new_y).copied().collect();
    assert_eq!(everything.len(), old_x.len() + new_x.len() + old_y.len() + new_y.len(), "an ID repeats");
}
