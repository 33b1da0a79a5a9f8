//! Snowflake under wrong clocks, with libfaketime preloaded into one node (only its wall clock
//! moves; its monotonic clock, and so its timers, run true): a node restarted 10 s behind after
//! a kill -9, and a node 1 h ahead of its peers. `docs/semantics.md`: uniqueness never depends on the
//! clock, and a node whose clock disagrees with its peers' is refused snowflake.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;
use std::time::Instant;

use reqwest::Method;
use reqwest::StatusCode;

use crate::harness::assert_error;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::snowflake_ids::assert_clock_offset;
use crate::snowflake_ids::clock_of;
use crate::snowflake_ids::fetch;
use crate::snowflake_ids::fetch_ok;
use crate::snowflake_ids::fixed_offset_env;
use crate::snowflake_ids::http_client;
use crate::snowflake_ids::leaf_error;
use crate::snowflake_ids::now_ms;
use crate::snowflake_ids::settled_lease;
use crate::snowflake_ids::start_three_with_fake_clock_on_node_3;
use crate::snowflake_ids::wait_lease;
use crate::snowflake_ids::wait_snowflake_ready;
use crate::snowflake_ids::wait_snowflake_refused;
use crate::snowflake_ids::workers;
use crate::snowflake_ids::Answer;
use crate::snowflake_ids::Endpoint;
use crate::snowflake_ids::Layout;

const TIMEOUT: Duration = Duration::from_secs(20);

/// IDs from `node`, over both endpoints, one request after another.
async fn some_ids(cluster: &mut ProcessCluster, node: u64, rounds: u64) -> Vec<u64> {
    let http = http_client();
    let base = cluster.url(node);
    let mut ids = Vec::new();
    for round in 0..rounds {
        let endpoint = if round % 3 == 2 { Endpoint::Leaf } else { Endpoint::Native(1 + round * 37 % 500) };
        let got = fetch_ok(&http, &base, endpoint).await;
        if let (Some(last), Some(first)) = (ids.last(), got.first()) {
            assert!(first > last, "node {node}: {first} after {last}");
        }
        ids.extend(got);
    }
    ids
}

/// Asserts that snowflake on `node` answers `CLOCK_BACKWARDS` (native 503) and Leaf's −3.
async fn assert_clock_refused(cluster: &mut ProcessCluster, node: u64) {
    let answer = cluster.request(node, Method::GET, "/v1/snowflake?count=5", None, None).await;
    assert_error(&answer, 503, "CLOCK_BACKWARDS", &format!("snowflake on node {node}"));
    let leaf = cluster.get_text(node, "/api/snowflake/get/order").await;
    assert_eq!(leaf, (StatusCode::INTERNAL_SERVER_ERROR, leaf_error(-3)), "Leaf snowflake on node {node}");
}

/// The node under test serves snowflake IDs, is killed with SIGKILL (its committed window still
/// reaches seconds ahead) and restarts on its data directory with its clock 10 s behind. With
/// the default `--max-clock-skew-ms` it is refused (`/readyz` names the clock, native
/// `CLOCK_BACKWARDS`, Leaf −3) and acquires nothing. Restarted again with the check loosened to
/// 60 s, it gets its own worker back under a new epoch whose floor is just above the old window,
/// and issues, from a clock still 10 s behind, IDs that are all above every ID it issued before
/// (same worker, later timestamps, ahead of its own clock), none repeated.
#[tokio::test]
async fn a_node_restarted_ten_seconds_behind_is_refused_then_issues_only_above_its_old_ids() {
    let mut cluster = ProcessCluster::start(3);
    cluster.wait_leader(TIMEOUT).await;
    let node = 3;
    let worker = wait_snowflake_ready(&mut cluster, node, TIMEOUT).await;
    let old = some_ids(&mut cluster, node, 30).await;
    let old_max = *old.last().unwrap();
    let old_max_ts = Layout::LEAF.parts(old_max).timestamp_ms;

    let epoch = wait_lease(&mut cluster, node, worker, "held", |l| l.holder == Some(node)).await.epoch;
    cluster.kill(node);
    let killed_at = now_ms();

    cluster.set_env(node, fixed_offset_env("-10s"));
    cluster.restart(node);
    cluster.wait_ready(node, TIMEOUT).await;
    let offset = assert_clock_offset(&mut cluster, node, -10_000).await;
    let reason = wait_snowflake_refused(&mut cluster, node, "max-clock-skew-ms", TIMEOUT).await;
    println!("node {node} restarted {offset} ms off: refused: {reason}");
    assert_clock_refused(&mut cluster, node).await;
    // Read once the cluster has settled (a new leader commits whatever the killed node proposed).
    let held = settled_lease(&mut cluster, &[1, 2, 3], worker).await;
    assert_eq!((held.holder, held.epoch), (Some(node), epoch), "a refused node must acquire nothing: {held:?}");
    assert!(held.window_end_ms > old_max_ts, "{held:?}");
    println!("node {node} was killed with its window reaching {} ms past the kill", held.window_end_ms - killed_at);

    // The same, with the skew check loosened: served, and only above the old IDs.
    cluster.kill(node);
    let mut args = cluster.args(node);
    args.extend(["--max-clock-skew-ms".to_string(), "60000".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cluster.start_node(node, &args);
    assert_eq!(wait_snowflake_ready(&mut cluster, node, TIMEOUT).await, worker, "node {node} must get its worker back");
    let lease = wait_lease(&mut cluster, 1, worker, "acquired again", |l| l.epoch > held.epoch).await;
    assert_eq!((lease.holder, lease.epoch), (Some(node), held.epoch + 1), "{lease:?}");
    assert_eq!(lease.floor_ms, held.window_end_ms + 1, "the new holding must start above the old window: {lease:?}");
    let new = some_ids(&mut cluster, node, 30).await;
    let (node_clock, _) = clock_of(&mut cluster, node).await;
    let first = Layout::LEAF.parts(new[0]);
    println!(
        "after the restart: first ID {} ms after the last old one, {} ms ahead of the node's clock",
        first.timestamp_ms - old_max_ts,
        first.timestamp_ms as i64 - node_clock as i64
    );
    assert!(first.timestamp_ms > node_clock, "the test means a clock behind the IDs; it is not: {first:?}");
    let mut seen: BTreeSet<u64> = old.iter().copied().collect();
    for &id in &new {
        let parts = Layout::LEAF.parts(id);
        assert!(id > old_max, "ID {id} after the restart is not above {old_max}, the largest before");
        assert_eq!(parts.worker, worker, "{id}: {parts:?}");
        assert!(parts.timestamp_ms > old_max_ts && parts.timestamp_ms >= lease.floor_ms, "{id}: {parts:?}");
        assert!(seen.insert(id), "ID {id} issued twice");
    }
}

/// A single-node cluster has no peer to compare clocks with: killed with SIGKILL and restarted
/// 10 s behind, it serves at once from its own worker, and every ID is above every ID it issued
/// before (Leaf's restart hole, closed by the committed window).
#[tokio::test]
async fn a_single_node_restarted_ten_seconds_behind_issues_only_above_its_old_ids() {
    let mut cluster = ProcessCluster::start(1);
    cluster.wait_leader(TIMEOUT).await;
    let worker = wait_snowflake_ready(&mut cluster, 1, TIMEOUT).await;
    let old = some_ids(&mut cluster, 1, 30).await;
    let old_max = *old.last().unwrap();
    cluster.kill(1);
    cluster.set_env(1, fixed_offset_env("-10s"));
    cluster.restart(1);
    assert_eq!(wait_snowflake_ready(&mut cluster, 1, TIMEOUT).await, worker);
    assert_clock_offset(&mut cluster, 1, -10_000).await;
    let new = some_ids(&mut cluster, 1, 30).await;
    assert!(new[0] > old_max, "first ID after the restart {} is not above {old_max}", new[0]);
    let old: BTreeSet<u64> = old.into_iter().collect();
    assert!(new.iter().all(|id| !old.contains(id)));
    assert!(new.iter().all(|&id| Layout::LEAF.parts(id).worker == worker));
}

/// A node whose clock runs 1 h ahead of its two peers' stays ready but is refused snowflake:
/// `/readyz` names the clock, native `CLOCK_BACKWARDS` 503, Leaf `Result{id=-3, ...}` 500, and it
/// holds no worker; segment IDs work on it (native and Leaf), and its peers serve snowflake with
/// timestamps of the true time. Once its clock is set right (without a restart) it serves
/// snowflake within 10 s, from a worker of its own.
#[tokio::test]
async fn a_node_an_hour_ahead_is_refused_snowflake_until_its_clock_is_right() {
    let (mut cluster, clock) = start_three_with_fake_clock_on_node_3("+1h", &[]);
    cluster.wait_leader(TIMEOUT).await;
    let w1 = wait_snowflake_ready(&mut cluster, 1, TIMEOUT).await;
    let w2 = wait_snowflake_ready(&mut cluster, 2, TIMEOUT).await;
    cluster.wait_ready(3, TIMEOUT).await;
    assert_clock_offset(&mut cluster, 3, 3_600_000).await;
    let reason = wait_snowflake_refused(&mut cluster, 3, "max-clock-skew-ms", TIMEOUT).await;
    println!("node 3, 1 h ahead, is refused: {reason}");
    assert_clock_refused(&mut cluster, 3).await;
    assert!(workers(&mut cluster, 1).await.iter().all(|l| l.holder != Some(3)), "node 3 holds a worker");

    // Segments do not care about the clock.
    let (status, body) =
        cluster.request(3, Method::POST, "/v1/tags", Some(r#"{"tag":"order","step":100}"#), None).await;
    assert_eq!(status.as_u16(), 201, "create a tag through node 3: {body}");
    // The first request of a tag waits 100 ms for its first claim (`SEGMENTS_NOT_READY` after
    // that, Leaf's −3): retried until a deadline.
    let (http, base) = (http_client(), cluster.url(3));
    for path in ["/v1/segment/order?count=5", "/api/segment/get/order"] {
        wait_until(TIMEOUT, &format!("GET {path} on node 3 to answer IDs"), || async {
            let response = http.get(format!("{base}{path}")).send().await.map_err(|e| e.to_string())?;
            let status = response.status();
            let text = response.text().await.map_err(|e| e.to_string())?;
            let ok = if path.starts_with("/api/") {
                text.parse::<u64>().is_ok()
            } else {
                serde_json::from_str::<serde_json::Value>(&text)
                    .is_ok_and(|json| json["ids"].as_array().map(Vec::len) == Some(5))
            };
            match status.as_u16() {
                200 if ok => Ok(()),
                200 => panic!("GET {path} on node 3: {text}"),
                _ => Err(format!("{status} {text}")),
            }
        })
        .await;
    }

    // The peers serve snowflake, stamped with the true time.
    let mut all = BTreeSet::new();
    for (node, worker) in [(1, w1), (2, w2)] {
        let before = now_ms();
        for id in some_ids(&mut cluster, node, 10).await {
            let parts = Layout::LEAF.parts(id);
            assert_eq!(parts.worker, worker);
            assert!(parts.timestamp_ms.abs_diff(before) < 5000, "node {node}: {parts:?} at {before}");
            assert!(all.insert(id), "{id} twice");
        }
    }

    // Set right, node 3 serves without a restart.
    clock.set("+0");
    let set_at = Instant::now();
    let w3 = wait_snowflake_ready(&mut cluster, 3, Duration::from_secs(10)).await;
    println!("node 3 serves snowflake {:?} after its clock was set right", set_at.elapsed());
    assert!(w3 != w1 && w3 != w2, "node 3 got worker {w3}, held by another");
    let before = now_ms();
    for id in some_ids(&mut cluster, 3, 10).await {
        let parts = Layout::LEAF.parts(id);
        assert_eq!(parts.worker, w3);
        assert!(parts.timestamp_ms.abs_diff(before) < 5000, "node 3: {parts:?} at {before}");
        assert!(all.insert(id), "{id} twice");
    }
}

/// A holder whose clock jumps 1 h ahead while it serves (2 s window), then back, without a
/// restart: while ahead it issues no ID past its committed window and extends nothing an hour
/// ahead (requests are refused: `WORKER_UNAVAILABLE` until its clock check runs, then
/// `CLOCK_BACKWARDS`); set right again, it serves within 10 s from the same worker, above every
/// ID it issued before (a refused reading an hour ahead is not remembered as the clock).
#[tokio::test]
async fn a_holder_whose_clock_jumps_an_hour_ahead_and_back_serves_again_without_a_restart() {
    let (mut cluster, clock) = start_three_with_fake_clock_on_node_3("+0", &["--snowflake-window-ms", "2000"]);
    cluster.wait_leader(TIMEOUT).await;
    let worker = wait_snowflake_ready(&mut cluster, 3, TIMEOUT).await;
    let old = some_ids(&mut cluster, 3, 10).await;
    let old_max = *old.last().unwrap();

    // Jump right after an extension, so the next one is a clock check away (the check and the
    // extension read the clock separately; a jump between them is not what this test is about).
    let seen = wait_lease(&mut cluster, 3, worker, "held", |l| l.holder == Some(3)).await.last_heartbeat_ms;
    wait_lease(&mut cluster, 3, worker, "extended", |l| l.last_heartbeat_ms > seen).await;
    clock.set("+1h");
    let http = http_client();
    let base = cluster.url(3);
    let mut refusals: BTreeMap<String, u64> = BTreeMap::new();
    let mut during = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match fetch(&http, &base, Endpoint::Native(10)).await {
            Answer::Ids(ids) => during.extend(ids),
            Answer::Error { status: 503, code } => *refusals.entry(code).or_default() += 1,
            other => panic!("snowflake on node 3 an hour ahead: {other:?}"),
        }
        if refusals.contains_key("CLOCK_BACKWARDS") {
            break;
        }
        assert!(Instant::now() < deadline, "node 3 an hour ahead is still not refused: {refusals:?}");
    }
    let lease = settled_lease(&mut cluster, &[1, 2, 3], worker).await;
    println!("an hour ahead, node 3 answered {refusals:?} and {} IDs; its lease: {lease:?}", during.len());
    assert!(lease.window_end_ms < now_ms() + 60_000, "the window was extended with the clock an hour ahead: {lease:?}");
    for &id in &during {
        assert!(Layout::LEAF.parts(id).timestamp_ms <= lease.window_end_ms, "{id} lies past the window {lease:?}");
    }

    // Set right: it serves again, without a restart.
    clock.set("+0");
    let set_at = Instant::now();
    let ids = wait_until(Duration::from_secs(10), "node 3 to serve snowflake again", || async {
        match fetch(&http, &base, Endpoint::Native(10)).await {
            Answer::Ids(ids) => Ok(ids),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    println!("node 3 serves again {:?} after its clock was set right", set_at.elapsed());
    assert!(ids.iter().all(|&id| id > old_max && Layout::LEAF.parts(id).worker == worker), "{ids:?} after {old_max}");
}
