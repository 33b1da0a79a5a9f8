//! Shared window claims across real processes: the namespace's home renews every member's window
//! with one claim, each member serves its own block from its own apply, and a member that lost
//! its disk and rejoined (applying the whole log again) serves none of them again.

use std::collections::BTreeSet;
use std::time::Duration;
use std::time::Instant;

use reqwest::Method;
use reqwest::StatusCode;

use crate::harness::run_binary;
use crate::harness::ProcessCluster;
use crate::snowflake_ids::now_ms;
use crate::timeseq::timeseq_events;
use leafraft::services::timeseq::home_member;
use leafraft::services::timeseq::window_phase;
use leafraft_client::ClusterStatus;

const TIMEOUT: Duration = Duration::from_secs(20);

/// A namespace whose windows start 20 to 29 s from now: its first windows end then, and the
/// home's shared claim renews them a few seconds before.
pub(crate) fn namespace_renewed_soon() -> (String, u64) {
    let now_s = now_ms() / 1000;
    (0..)
        .map(|i| format!("shared-{i}"))
        .find_map(|name| {
            let until_s = (window_phase(&name) + 60 - now_s % 60) % 60;
            (20..30).contains(&until_s).then_some((name, now_s + until_s))
        })
        .expect("one name in sixty fits")
}

/// Asks every node for a few IDs of `name`, each ID seen only once.
async fn take_from_all(cluster: &mut ProcessCluster, name: &str, seen: &mut BTreeSet<u64>, round: u64) {
    for node in [1, 2, 3] {
        let path = format!("/v1/timeseq/{name}?shard={}&count=3", round % 4);
        let (status, body) = cluster.request(node, Method::GET, &path, None, None).await;
        if status == StatusCode::NOT_FOUND && body["error"]["code"] == "NAMESPACE_NOT_FOUND" {
            // This node has not applied the namespace's creation yet.
            continue;
        }
        assert_eq!(status, StatusCode::OK, "node {node}: {body}");
        for id in body["ids"].as_array().expect("ids") {
            let id: u64 = id.as_str().and_then(|id| id.parse().ok()).expect("a decimal ID");
            assert!(seen.insert(id), "node {node} served {id} twice");
        }
    }
}

/// Takes IDs of `name` from every node until each installed a block of a shared window and the
/// window renewed at `renewed_at_s` began, each ID seen only once.
pub(crate) async fn serve_until_every_member_installed_a_shared_block(
    cluster: &mut ProcessCluster,
    name: &str,
    renewed_at_s: u64,
    seen: &mut BTreeSet<u64>,
) {
    let home = home_member(name, &[1, 2, 3]).expect("a home");
    let deadline = Instant::now() + Duration::from_secs(renewed_at_s.saturating_sub(now_ms() / 1000)) + TIMEOUT;
    let mut round = 0;
    loop {
        take_from_all(cluster, name, seen, round).await;
        round += 1;
        let mut installed = Vec::new();
        for node in [1, 2, 3] {
            installed.push(timeseq_events(cluster, node, "shared_blocks_installed").await);
        }
        let renewed = now_ms() / 1000 >= renewed_at_s + 2;
        if renewed && installed.iter().all(|&n| n >= 1) {
            return;
        }
        assert!(Instant::now() < deadline, "blocks installed per node {installed:?}, the home is node {home}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_home_renews_every_members_window_and_a_rejoined_member_serves_no_block_again() {
    let mut cluster = ProcessCluster::start(3);
    cluster.wait_leader(TIMEOUT).await;
    let (name, renewed_at_s) = namespace_renewed_soon();
    let home = home_member(&name, &[1, 2, 3]).expect("a home");
    let others: Vec<u64> = [1, 2, 3].into_iter().filter(|&node| node != home).collect();
    let body = format!(r#"{{"namespace":"{name}"}}"#);
    let (status, created) = cluster.request(1, Method::POST, "/v1/timeseq", Some(&body), None).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");

    // Every node serves the namespace from its first window, then from the blocks of the
    // window the home renewed for all three.
    let mut seen = BTreeSet::new();
    serve_until_every_member_installed_a_shared_block(&mut cluster, &name, renewed_at_s, &mut seen).await;
    assert!(timeseq_events(&mut cluster, home, "shared_window_claims").await >= 1, "the home claimed for all");
    for &node in &others {
        assert_eq!(timeseq_events(&mut cluster, node, "shared_window_claims").await, 0, "node {node} is not the home");
    }

    // A member that lost its disk comes back (the documented way: removed, then started empty
    // with `--join`) and applies the whole log again, the shared claim's entry too: it serves
    // none of its blocks, and every ID stays unique.
    let wiped = others[0];
    let server = cluster.url(home);
    let id = wiped.to_string();
    let output = run_binary(&["cluster", "remove", "--node-id", &id, "--server", &server], TIMEOUT).await;
    assert!(output.status.success(), "cluster remove: {output:?}");
    cluster.kill(wiped);
    let dir = cluster.data_dir(wiped);
    std::fs::remove_dir_all(&dir).expect("wipe the data directory");
    let seed = cluster.addr(home);
    cluster.start_node(wiped, &["--join", &seed]);
    let back = |s: &ClusterStatus| match s.voters == [1, 2, 3] {
        true => Ok(()),
        false => Err("not a voter again yet".into()),
    };
    cluster.wait_status(wiped, TIMEOUT, "the wiped member to be a voter again", back).await;
    cluster.wait_ready(wiped, TIMEOUT).await;
    let deadline = Instant::now() + TIMEOUT;
    while timeseq_events(&mut cluster, wiped, "shared_blocks_fenced").await == 0 {
        assert!(Instant::now() < deadline, "the rejoined member never applied the shared claim's entry again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        timeseq_events(&mut cluster, wiped, "shared_blocks_installed").await,
        0,
        "a member installs no block of an entry committed before its process began"
    );
    let deadline = Instant::now() + TIMEOUT;
    let mut round = 0;
    loop {
        let path = format!("/v1/timeseq/{name}?shard=1&count=3");
        let (status, body) = cluster.request(wiped, Method::GET, &path, None, None).await;
        if status == StatusCode::OK {
            for id in body["ids"].as_array().expect("ids") {
                let id: u64 = id.as_str().and_then(|id| id.parse().ok()).expect("a decimal ID");
                assert!(seen.insert(id), "the rejoined node {wiped} served {id} twice");
            }
            round += 1;
            if round == 3 {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the rejoined node serves nothing: {status} {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for round in 0..40 {
        take_from_all(&mut cluster, &name, &mut seen, round).await;
    }
}
