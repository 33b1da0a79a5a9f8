//! Snowflake IDs across real processes: every node issues from its own worker, IDs decode to the
//! issuing node in both the native and Leaf's shape, the CLI works, a node whose layout differs
//! from the cluster's is refused, and a graceful stop gives the worker back.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
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
use crate::snowflake_ids::leaf_error;
use crate::snowflake_ids::lease_of;
use crate::snowflake_ids::leases;
use crate::snowflake_ids::now_ms;
use crate::snowflake_ids::utc_text;
use crate::snowflake_ids::wait_lease;
use crate::snowflake_ids::wait_snowflake_ready;
use crate::snowflake_ids::wait_snowflake_refused;
use crate::snowflake_ids::workers;
use crate::snowflake_ids::Answer;
use crate::snowflake_ids::Endpoint;
use crate::snowflake_ids::Layout;
use crate::snowflake_ids::LEAF_EPOCH_MS;

const TIMEOUT: Duration = Duration::from_secs(20);
const CLI_TIMEOUT: Duration = Duration::from_secs(20);

/// Asserts the server's two decoders agree with the test's own reading of `id` (issued by
/// `worker` with `layout`): the native `{"id","timestamp_ms","time","worker_id","sequence"}` and
/// Leaf's `{"timestamp":"<ms>(<yyyy-MM-dd HH:mm:ss.SSS>)","workerId","sequenceId"}`.
async fn assert_decodes(cluster: &mut ProcessCluster, node: u64, layout: Layout, id: u64, worker: u64) {
    let parts = layout.parts(id);
    assert_eq!(parts.worker, worker, "ID {id} does not carry worker {worker}: {parts:?}");

    let (status, native) = cluster.request(node, Method::GET, &format!("/v1/snowflake/decode/{id}"), None, None).await;
    assert_eq!(status.as_u16(), 200, "decode {id} on node {node}: {native}");
    let rfc3339 = format!("{}Z", utc_text(parts.timestamp_ms).replacen(' ', "T", 1));
    let expected = serde_json::json!({
        "id": id.to_string(),
        "timestamp_ms": parts.timestamp_ms,
        "time": rfc3339,
        "worker_id": parts.worker,
        "sequence": parts.sequence,
    });
    assert_eq!(native, expected, "/v1/snowflake/decode/{id} on node {node}");

    let (status, leaf) =
        cluster.request(node, Method::GET, &format!("/decodeSnowflakeId?snowflakeId={id}"), None, None).await;
    assert_eq!(status.as_u16(), 200, "Leaf decode {id} on node {node}: {leaf}");
    let expected = serde_json::json!({
        "timestamp": format!("{}({})", parts.timestamp_ms, utc_text(parts.timestamp_ms)),
        "workerId": parts.worker.to_string(),
        "sequenceId": parts.sequence.to_string(),
    });
    assert_eq!(leaf, expected, "/decodeSnowflakeId?snowflakeId={id} on node {node}");
}

/// Three nodes each hold a distinct worker (as `/readyz` and `/v1/workers` agree); IDs fetched
/// from every node over both endpoints are unique, strictly increasing per node, carry the
/// node's worker and a timestamp within a second of the request; both decoders (native and
/// Leaf's shape, asked of a node other than the issuer too) answer the same parts; `count` out
/// of `1..=10000` is `INVALID_ARGUMENT`; and `leafraft id snowflake -n 5`, `leafraft decode` and
/// `leafraft worker list` work.
#[tokio::test]
async fn each_node_issues_unique_increasing_ids_from_its_own_worker_that_decode_to_it() {
    let mut cluster = ProcessCluster::start(3);
    cluster.wait_leader(TIMEOUT).await;
    let mut worker_of = BTreeMap::new();
    for node in 1..=3 {
        worker_of.insert(node, wait_snowflake_ready(&mut cluster, node, TIMEOUT).await);
    }
    let distinct: BTreeSet<u64> = worker_of.values().copied().collect();
    assert_eq!(distinct.len(), 3, "workers by node: {worker_of:?}");
    for node in 1..=3 {
        for (&holder, &worker) in &worker_of {
            wait_lease(&mut cluster, node, worker, &format!("held by {holder}"), |l| l.holder == Some(holder)).await;
        }
    }
    let (_, registry) = cluster.request(1, Method::GET, "/v1/workers", None, None).await;
    let layout = &registry["layout"];
    assert_eq!(
        (&layout["epoch_ms"], &layout["time_bits"], &layout["worker_bits"], &layout["sequence_bits"]),
        (&Value::from(LEAF_EPOCH_MS), &Value::from(41), &Value::from(10), &Value::from(12)),
        "the recorded layout is Leaf's: {registry}"
    );

    // IDs from every node, over both endpoints, one request after another per node.
    let http = http_client();
    let mut all = BTreeSet::new();
    let mut total = 0;
    for node in 1..=3 {
        let base = cluster.url(node);
        let mut last = 0;
        for round in 0..20 {
            let endpoint = if round % 2 == 0 { Endpoint::Native(1 + round * 50) } else { Endpoint::Leaf };
            let before = now_ms();
            let ids = fetch_ok(&http, &base, endpoint).await;
            let after = now_ms();
            assert!(ids[0] > last, "node {node}: {} after {last}", ids[0]);
            last = *ids.last().unwrap();
            for &id in &ids {
                let parts = Layout::LEAF.parts(id);
                assert_eq!(parts.worker, worker_of[&node], "node {node} issued {id}: {parts:?}");
                assert!(
                    parts.timestamp_ms + 1000 >= before && parts.timestamp_ms <= after + 1000,
                    "node {node} issued {id} with timestamp {} for a request in [{before}, {after}]",
                    parts.timestamp_ms
                );
                assert!(all.insert(id), "ID {id} issued twice");
                total += 1;
            }
        }
        // Decoded by the issuer and by another node (which uses the recorded layout too).
        let other = node % 3 + 1;
        assert_decodes(&mut cluster, node, Layout::LEAF, last, worker_of[&node]).await;
        assert_decodes(&mut cluster, other, Layout::LEAF, last, worker_of[&node]).await;
    }
    println!("{total} snowflake IDs from 3 nodes, all unique; workers {worker_of:?}");

    // Default count, the bounds of count, and bad counts.
    let base = cluster.url(2);
    assert_eq!(fetch_ok(&http, &base, Endpoint::Native(10_000)).await.len(), 10_000);
    let (status, body) = cluster.request(2, Method::GET, "/v1/snowflake", None, None).await;
    assert_eq!((status.as_u16(), body["ids"].as_array().map(Vec::len)), (200, Some(1)), "no count: {body}");
    for bad in ["0", "10001", "-1", "abc", "1.5"] {
        let answer = cluster.request(2, Method::GET, &format!("/v1/snowflake?count={bad}"), None, None).await;
        assert_error(&answer, 400, "INVALID_ARGUMENT", &format!("count={bad}"));
    }
    for bad in ["abc", "-5", "18446744073709551616"] {
        let answer = cluster.request(2, Method::GET, &format!("/v1/snowflake/decode/{bad}"), None, None).await;
        assert_error(&answer, 400, "INVALID_ARGUMENT", &format!("decode {bad}"));
    }

    // The CLI.
    let server = cluster.url(3);
    let out = run_binary(&["id", "snowflake", "-n", "5", "--server", &server], CLI_TIMEOUT).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "leafraft id snowflake: {out:?}");
    let ids: Vec<u64> = stdout.lines().map(|l| l.parse().unwrap_or_else(|_| panic!("not an ID: {l:?}"))).collect();
    assert_eq!(ids.len(), 5, "{stdout}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "not increasing: {ids:?}");
    for id in &ids {
        assert_eq!(Layout::LEAF.parts(*id).worker, worker_of[&3], "CLI ID {id}");
        assert!(all.insert(*id), "CLI ID {id} issued twice");
    }

    let out = run_binary(&["decode", &ids[4].to_string(), "--server", &server], CLI_TIMEOUT).await;
    assert!(out.status.success(), "leafraft decode: {out:?}");
    let decoded: Value = serde_json::from_slice(&out.stdout).expect("leafraft decode prints JSON");
    let parts = Layout::LEAF.parts(ids[4]);
    assert_eq!(decoded["worker_id"].as_u64(), Some(parts.worker), "{decoded}");
    assert_eq!(decoded["timestamp_ms"].as_u64(), Some(parts.timestamp_ms), "{decoded}");
    assert_eq!(decoded["sequence"].as_u64(), Some(parts.sequence), "{decoded}");

    let out = run_binary(&["worker", "list", "--server", &server], CLI_TIMEOUT).await;
    assert!(out.status.success(), "leafraft worker list: {out:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    let rows: BTreeSet<(String, String)> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            (cells.len() == 5).then(|| (cells[0].to_string(), cells[1].to_string()))
        })
        .collect();
    for (node, worker) in &worker_of {
        assert!(
            rows.contains(&(worker.to_string(), node.to_string())),
            "no row 'worker {worker} holder {node}':\n{table}"
        );
    }
    assert!(table.lines().next().is_some_and(|h| h.contains("WORKER") && h.contains("HOLDER")), "{table}");
}

/// A node started with a layout other than the one the cluster recorded (8 worker bits and 14
/// sequence bits against Leaf's 10 and 12) stays ready for everything else but refuses snowflake
/// with a reason that names the layout (`/readyz`, native 503 `WORKER_UNAVAILABLE`, Leaf −1),
/// acquires no worker and does not change the recorded layout; it decodes with the recorded
/// layout; the other nodes serve; restarted with the cluster's layout it serves too.
#[tokio::test]
async fn a_node_with_a_different_layout_is_refused_snowflake_and_the_others_serve() {
    let members = [1, 2, 3];
    let mut cluster = ProcessCluster::new();
    for id in members {
        cluster.reserve(id);
    }
    // Nodes 1 and 2 form the cluster and record the default layout before node 3 ever starts
    // (an initial member would wait for every other one), then node 3 joins.
    cluster.start_member(1, &[1, 2]);
    cluster.start_member(2, &[1, 2]);
    cluster.wait_leader(TIMEOUT).await;
    let w1 = wait_snowflake_ready(&mut cluster, 1, TIMEOUT).await;
    let w2 = wait_snowflake_ready(&mut cluster, 2, TIMEOUT).await;
    let seed = cluster.addr(1);
    let odd = ["--snowflake-worker-bits", "8", "--snowflake-sequence-bits", "14"];
    let mut args = vec!["--join", seed.as_str()];
    args.extend_from_slice(&odd);
    cluster.start_node(3, &args);
    cluster.wait_ready(3, TIMEOUT).await;

    let reason = wait_snowflake_refused(&mut cluster, 3, "layout", TIMEOUT).await;
    println!("node 3 refuses snowflake: {reason}");
    let answer = cluster.request(3, Method::GET, "/v1/snowflake?count=3", None, None).await;
    assert_error(&answer, 503, "WORKER_UNAVAILABLE", "snowflake on the node with another layout");
    let message = answer.1.pointer("/error/message").and_then(Value::as_str).unwrap_or_default();
    assert!(message.contains("layout"), "the error does not say why: {message}");
    assert_eq!(
        cluster.get_text(3, "/api/snowflake/get/k").await,
        (reqwest::StatusCode::INTERNAL_SERVER_ERROR, leaf_error(-1))
    );

    // Refused, it asks again every 2 s (a quarter window), not once per applied entry.
    let entries = entries_applied_during(&mut cluster, 3, Duration::from_secs(1)).await;
    println!("the Raft log grew by {entries} entries in 1 s while node 3 was refused");
    assert!(entries < 20, "node 3 proposes its layout in a loop: {entries} entries in 1 s");

    let (_, registry) = cluster.request(3, Method::GET, "/v1/workers", None, None).await;
    assert_eq!(registry["layout"]["worker_bits"], 10, "the recorded layout changed: {registry}");
    assert_eq!(registry["layout"]["sequence_bits"], 12, "the recorded layout changed: {registry}");
    let leases = workers(&mut cluster, 1).await;
    assert!(leases.iter().all(|l| l.holder != Some(3)), "node 3 holds a worker: {leases:?}");

    // The others serve, and node 3 decodes their IDs with the recorded layout.
    let http = http_client();
    for (node, worker) in [(1, w1), (2, w2)] {
        let ids = fetch_ok(&http, &cluster.url(node), Endpoint::Native(100)).await;
        assert!(ids.iter().all(|&id| Layout::LEAF.parts(id).worker == worker));
        assert_decodes(&mut cluster, 3, Layout::LEAF, ids[99], worker).await;
    }

    // With the cluster's layout, node 3 serves.
    cluster.kill(3);
    cluster.start_node(3, &["--join", &seed]);
    let w3 = wait_snowflake_ready(&mut cluster, 3, TIMEOUT).await;
    assert!(w3 != w1 && w3 != w2, "node 3 got worker {w3}, held by another");
    let ids = fetch_ok(&http, &cluster.url(3), Endpoint::Native(10)).await;
    assert!(ids.iter().all(|&id| Layout::LEAF.parts(id).worker == w3), "{ids:?}");
}

/// SIGTERM to a holder: it exits 0, and the registry (read on another node) shows its worker
/// with no holder, a new epoch and `window_end_ms` lowered from about 10 s ahead to exactly the
/// timestamp of the last ID it issued; restarted, it gets its own worker back and serves again
/// within 5 s, with IDs above every ID it issued before and stamped with the clock's time (not
/// the 10 s window it had committed).
#[tokio::test]
async fn a_gracefully_stopped_holder_releases_its_worker_down_to_its_last_timestamp() {
    let mut cluster = ProcessCluster::start(3);
    cluster.wait_leader(TIMEOUT).await;
    let node = 2;
    let worker = wait_snowflake_ready(&mut cluster, node, TIMEOUT).await;
    let http = http_client();
    let base = cluster.url(node);
    let mut old = Vec::new();
    for round in 0..10 {
        let endpoint = if round % 2 == 0 { Endpoint::Native(200) } else { Endpoint::Leaf };
        old.extend(fetch_ok(&http, &base, endpoint).await);
    }
    let last = *old.last().unwrap();
    let last_ts = Layout::LEAF.parts(last).timestamp_ms;
    let held = wait_lease(&mut cluster, node, worker, "held", |l| l.holder == Some(node)).await;
    assert!(held.window_end_ms > last_ts, "window {held:?} does not cover the last ID at {last_ts}");

    let took = cluster.terminate(node, Duration::from_secs(5)).await;
    println!(
        "node {node} (worker {worker}) stopped {took:?} after SIGTERM; window was {} ms past its last ID",
        held.window_end_ms - last_ts
    );
    let watcher = cluster.client(1);
    let released = wait_until(TIMEOUT, "node 1 to apply the release", || async {
        let view = watcher.workers().await.map_err(|e| e.to_string())?;
        let lease = lease_of(&leases(&view), worker);
        if lease.holder.is_none() {
            Ok(lease)
        } else {
            Err(format!("{lease:?}"))
        }
    })
    .await;
    assert_eq!(
        released.window_end_ms, last_ts,
        "the release must lower the window to the last ID's timestamp: {released:?}"
    );
    assert!(released.epoch > held.epoch, "a release bumps the epoch: {held:?} then {released:?}");
    assert!(cluster.log(node).contains("snowflake worker released"), "{}", cluster.log(node));

    let restarted = Instant::now();
    cluster.restart(node);
    let new = wait_until(TIMEOUT, "the restarted node to serve snowflake", || async {
        match fetch(&http, &base, Endpoint::Native(100)).await {
            Answer::Ids(ids) => Ok(ids),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let prompt = restarted.elapsed();
    let after = now_ms();
    let first = Layout::LEAF.parts(new[0]);
    println!(
        "restarted node {node} served again after {prompt:?}, from worker {} (held {worker} before), {} ms after \
         its last ID",
        first.worker,
        first.timestamp_ms - last_ts
    );
    assert!(prompt < Duration::from_secs(5), "serving again took {prompt:?}");
    assert_eq!(first.worker, worker, "the restarted node must get its own worker back (`docs/semantics.md`)");
    assert!(new[0] > last, "the first ID after the restart, {}, is not above the last before, {last}", new[0]);
    assert!(first.timestamp_ms > last_ts, "{first:?} is not after the last ID's {last_ts}");
    assert!(
        first.timestamp_ms <= after + 100,
        "the first ID after the restart is {} ms ahead of the clock: the window was not given back",
        first.timestamp_ms - after
    );
}

/// On a cluster of two nodes with one worker bit (two workers, both held), SIGTERM to the
/// follower: it stops within 5 s having released its worker (its peer, the leader, applies the
/// release: no holder, window lowered to the last ID's timestamp), although the release needs
/// the stopping node's own vote to commit. Restarted, it gets that worker back, and the new
/// holding starts right after the last timestamp it used, not after the 10 s window it had
/// committed: its first IDs carry the clock's time and are above every ID it issued before.
#[tokio::test]
async fn a_follower_of_two_releases_its_worker_on_sigterm_and_gets_it_back_right_after_its_last_id() {
    let layout = Layout { epoch_ms: LEAF_EPOCH_MS, worker_bits: 1, sequence_bits: 12 };
    let flags = ["--snowflake-worker-bits", "1", "--snowflake-time-bits", "50"];
    let mut cluster = ProcessCluster::new().start_members_with(&[1, 2], &flags);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let node = 3 - leader;
    let worker = wait_snowflake_ready(&mut cluster, node, TIMEOUT).await;
    wait_snowflake_ready(&mut cluster, leader, TIMEOUT).await;
    let http = http_client();
    let base = cluster.url(node);
    let old = fetch_ok(&http, &base, Endpoint::Native(1000)).await;
    let last = *old.last().unwrap();
    let last_ts = layout.parts(last).timestamp_ms;
    assert_eq!(layout.parts(last).worker, worker);
    let held = wait_lease(&mut cluster, node, worker, "held", |l| l.holder == Some(node)).await;

    let took = cluster.terminate(node, Duration::from_secs(5)).await;
    let released = wait_lease(&mut cluster, leader, worker, "released", |l| l.holder.is_none()).await;
    println!("follower {node} stopped {took:?} after SIGTERM; leader {leader} shows {released:?}");
    assert_eq!(released.window_end_ms, last_ts, "the release must lower the window to the last ID: {released:?}");

    cluster.restart(node);
    assert_eq!(wait_snowflake_ready(&mut cluster, node, TIMEOUT).await, worker, "node {node} must get its worker back");
    let new = fetch_ok(&http, &base, Endpoint::Native(1000)).await;
    let after = now_ms();
    let first = layout.parts(new[0]);
    let lease = wait_lease(&mut cluster, node, worker, "held again", |l| l.holder == Some(node)).await;
    println!(
        "window was {} ms past the last ID; new holding {lease:?} starts {} ms after it; first new ID {} ms before now",
        held.window_end_ms - last_ts,
        lease.floor_ms - last_ts,
        after as i64 - first.timestamp_ms as i64
    );
    assert_eq!(lease.floor_ms, last_ts + 1, "{lease:?}");
    assert!(new[0] > last && first.timestamp_ms > last_ts, "{first:?} is not after {last_ts}");
    assert!(
        first.timestamp_ms <= after + 100,
        "the first ID after the restart is {} ms ahead of the clock: the window was not given back",
        first.timestamp_ms - after
    );
}
