//! Snowflake under load while the leader is killed with SIGKILL and restarted: `docs/semantics.md#the-one-rule` (no
//! ID twice) and §5 (per node, IDs strictly increase) checked over every answer of a run.

use std::collections::BTreeMap;
use std::time::Duration;
use std::time::Instant;

use crate::harness::ProcessCluster;
use crate::snowflake_ids::fetch;
use crate::snowflake_ids::leaf_error;
use crate::snowflake_ids::wait_snowflake_ready;
use crate::snowflake_ids::Answer;
use crate::snowflake_ids::Endpoint;
use crate::snowflake_ids::Layout;

const TIMEOUT: Duration = Duration::from_secs(20);
const CLIENTS: u64 = 8;
const RUN: Duration = Duration::from_secs(14);
/// When the leader is killed, counted from the start of the load.
const KILL_AFTER: Duration = Duration::from_secs(4);
/// How long the killed leader stays down (at least until a new leader is elected).
const DOWN_FOR: Duration = Duration::from_secs(2);

/// One answered request.
struct Request {
    node: u64,
    endpoint: Endpoint,
    sent: Instant,
    received: Instant,
    answer: Answer,
}

/// A request that got IDs: when it was sent and answered, its smallest and largest ID.
#[derive(Debug, Clone, Copy)]
struct Answered {
    sent: Instant,
    received: Instant,
    min: u64,
    max: u64,
}

/// One client: requests go round the nodes, alternating Leaf's path and `count` 1 to 64.
async fn client(index: u64, nodes: Vec<(u64, String)>, until: Instant) -> Vec<Request> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("HTTP client");
    let mut requests = Vec::new();
    for k in 0u64.. {
        let sent = Instant::now();
        if sent >= until {
            break;
        }
        let (node, base) = &nodes[usize::try_from((index + k) % nodes.len() as u64).unwrap()];
        let endpoint = if k % 3 == 0 { Endpoint::Leaf } else { Endpoint::Native(1 + (k * 7 + index) % 64) };
        let answer = fetch(&http, base, endpoint).await;
        requests.push(Request { node: *node, endpoint, sent, received: Instant::now(), answer });
    }
    requests
}

/// Whether an error answer is one the spec allows while a node restarts or the cluster elects:
/// native 503 `WORKER_UNAVAILABLE`, `NOT_READY` or `CLOCK_BACKWARDS`; Leaf's −1 or −3.
fn allowed_error(endpoint: Endpoint, status: u16, code: &str) -> bool {
    match endpoint {
        Endpoint::Native(_) => status == 503 && ["WORKER_UNAVAILABLE", "NOT_READY", "CLOCK_BACKWARDS"].contains(&code),
        Endpoint::Leaf => status == 500 && (code == leaf_error(-1) || code == leaf_error(-3)),
    }
}

/// Eight clients spread over three nodes ask `/v1/snowflake?count=1..64` and Leaf's
/// `/api/snowflake/get/x` for 14 s (window 2 s, so extensions run all along); 4 s in, the leader
/// is SIGKILLed, and restarted 2 s later. Over every answer: no ID twice; every ID carries the
/// worker of the node (and incarnation) that issued it, and the restarted node has its own
/// worker back; per node incarnation, a request sent after another was answered gets only
/// larger IDs; the restarted node's IDs are above its IDs before the kill; errors are only the
/// documented ones (counted and printed), and connection failures only hit the killed node.
#[tokio::test]
async fn no_snowflake_id_repeats_under_load_while_the_leader_is_killed_and_restarted() {
    let mut cluster = ProcessCluster::new().start_members_with(&[1, 2, 3], &["--snowflake-window-ms", "2000"]);
    let leader = cluster.wait_leader(TIMEOUT).await;
    // Worker by (node, incarnation): incarnation 1 is the killed leader after its restart.
    let mut worker_of = BTreeMap::new();
    for node in 1..=3 {
        worker_of.insert((node, 0), wait_snowflake_ready(&mut cluster, node, TIMEOUT).await);
    }
    let nodes: Vec<(u64, String)> = (1..=3).map(|id| (id, cluster.url(id))).collect();

    let start = Instant::now();
    let until = start + RUN;
    let clients: Vec<_> = (0..CLIENTS).map(|i| tokio::spawn(client(i, nodes.clone(), until))).collect();

    tokio::time::sleep_until((start + KILL_AFTER).into()).await;
    let killed_at = Instant::now();
    cluster.kill(leader);
    let next = cluster.wait_leader(TIMEOUT).await;
    let failover = killed_at.elapsed();
    tokio::time::sleep_until((killed_at + DOWN_FOR).into()).await;
    let restarted_at = Instant::now();
    cluster.restart(leader);
    worker_of.insert((leader, 1), wait_snowflake_ready(&mut cluster, leader, TIMEOUT).await);
    let back = restarted_at.elapsed();
    println!("leader {leader} killed; node {next} leads after {failover:?}; restarted, it serves after {back:?}");
    assert_eq!(worker_of[&(leader, 1)], worker_of[&(leader, 0)], "the restarted node must get its own worker back");

    let mut requests = Vec::new();
    for task in clients {
        requests.extend(task.await.expect("a client task"));
    }

    // Judge every answer.
    let mut violations = Vec::new();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut ok_by_node: BTreeMap<u64, u64> = BTreeMap::new();
    let mut all = Vec::new();
    // The requests that got IDs, per (node, incarnation).
    let mut answered: BTreeMap<(u64, u64), Vec<Answered>> = BTreeMap::new();
    for r in &requests {
        let incarnation = u64::from(r.node == leader && r.sent >= killed_at);
        let kind = if matches!(r.endpoint, Endpoint::Leaf) { "leaf" } else { "native" };
        match &r.answer {
            Answer::Ids(ids) => {
                *ok_by_node.entry(r.node).or_default() += 1;
                let worker = worker_of[&(r.node, incarnation)];
                if let Some(id) = ids.iter().find(|&&id| Layout::LEAF.parts(id).worker != worker) {
                    violations
                        .push(format!("node {} (incarnation {incarnation}, worker {worker}) issued {id}", r.node));
                }
                answered.entry((r.node, incarnation)).or_default().push(Answered {
                    sent: r.sent,
                    received: r.received,
                    min: ids[0],
                    max: ids[ids.len() - 1],
                });
                all.extend_from_slice(ids);
            }
            Answer::Error { status, code } => {
                *errors.entry(format!("node {} {kind} {status} {code}", r.node)).or_default() += 1;
                if !allowed_error(r.endpoint, *status, code) {
                    violations.push(format!("node {} {kind}: {status} {code}", r.node));
                }
            }
            Answer::Transport(e) => {
                *errors.entry(format!("node {} {kind} connection failure", r.node)).or_default() += 1;
                if r.node != leader {
                    violations.push(format!("node {} (not killed) {kind}: {e}", r.node));
                }
            }
            Answer::Malformed(why) => violations.push(format!("node {} {kind}: {why}", r.node)),
        }
    }

    // Per node incarnation, in real time: whatever was answered before a request was sent holds
    // only smaller IDs than that request's.
    for (group, list) in &mut answered {
        let mut by_received = list.clone();
        by_received.sort_unstable_by_key(|a| a.received);
        list.sort_unstable_by_key(|a| a.sent);
        let (mut at, mut highest) = (0, 0);
        for a in list.iter() {
            while at < by_received.len() && by_received[at].received < a.sent {
                highest = highest.max(by_received[at].max);
                at += 1;
            }
            if a.min <= highest {
                violations.push(format!("{group:?}: a request answered {} after {highest} had been answered", a.min));
            }
        }
    }
    let old_max = answered.get(&(leader, 0)).and_then(|l| l.iter().map(|a| a.max).max()).unwrap_or(0);
    let new_min = answered.get(&(leader, 1)).and_then(|l| l.iter().map(|a| a.min).min());
    match new_min {
        Some(min) if min > old_max => {}
        Some(min) => violations.push(format!("restarted node {leader} issued {min}, not above {old_max}")),
        None => violations.push(format!("the restarted node {leader} served nothing")),
    }

    let total = all.len();
    all.sort_unstable();
    let duplicates: Vec<u64> = all.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
    println!(
        "{} requests in {RUN:?}: {total} IDs, {} duplicates; answered by node {ok_by_node:?}; errors {errors:#?}",
        requests.len(),
        duplicates.len()
    );
    assert!(
        duplicates.is_empty(),
        "{} IDs issued twice, e.g. {:?}",
        duplicates.len(),
        &duplicates[..duplicates.len().min(10)]
    );
    assert!(
        violations.is_empty(),
        "{} violations, e.g. {:#?}",
        violations.len(),
        &violations[..violations.len().min(20)]
    );
    for node in 1..=3 {
        assert!(ok_by_node.get(&node).copied().unwrap_or(0) > 100, "node {node} answered too little: {ok_by_node:?}");
    }
}
