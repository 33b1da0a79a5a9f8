//! Strictly increasing tags (`docs/semantics.md#strictly-increasing-tags`) against real processes: clients on every node while the
//! leader is killed with SIGKILL and restarted; every take sent after another was answered gets
//! larger IDs, and no ID comes twice. Plus the API's answers about modes.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use leafraft_history::duplicates;
use leafraft_history::real_time_order;
use leafraft_history::Span;
use reqwest::Method;

use crate::harness::assert_error;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(30);
const CLIENTS: usize = 6;

/// One answered take over HTTP.
#[derive(Debug, Clone)]
struct Op {
    node: usize,
    sent: Instant,
    answered: Instant,
    ids: Vec<u64>,
}

/// Takes sent after another take was answered must hold only larger IDs (real-time order:
/// `leafraft_history::real_time_order`, the sweep the chaos checker runs).
fn real_time_violations(history: &[Op]) -> Vec<String> {
    let mut spans: Vec<Span<Instant>> = history
        .iter()
        .enumerate()
        .filter_map(|(index, op)| Span::of_ids(index, op.sent, op.answered, &op.ids))
        .collect();
    let mut violations = Vec::new();
    real_time_order(&mut spans, |a, b| {
        let (earlier, op) = (&history[a.op], &history[b.op]);
        violations
            .push(format!("node {} answered {} after node {} had answered {}", op.node, b.min, earlier.node, a.max));
    });
    violations
}

/// IDs handed out twice, whatever node answered (`leafraft_history::duplicates`).
fn repeated_ids(history: &[Op]) -> Vec<String> {
    let mut ids: Vec<(u64, usize)> =
        history.iter().enumerate().flat_map(|(index, op)| op.ids.iter().map(move |&id| (id, index))).collect();
    let mut repeated = Vec::new();
    duplicates(&mut ids, |id, first, second| {
        repeated.push(format!("ID {id} by node {} and by node {}", history[first].node, history[second].node));
    });
    repeated
}

#[tokio::test]
async fn a_monotonic_tag_stays_in_real_time_order_across_a_leader_kill() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let body = r#"{"tag":"ticks","step":1000,"mode":"monotonic"}"#;
    let (status, created) = cluster.request(leader, Method::POST, "/v1/tags", Some(body), None).await;
    assert_eq!((status.as_u16(), created["mode"].as_str()), (201, Some("monotonic")), "{created}");

    // The API's answers about modes.
    let back = r#"{"mode":"segment"}"#;
    let answer = cluster.request(leader, Method::PATCH, "/v1/tags/ticks", Some(back), None).await;
    assert_error(&answer, 409, "MODE_MISMATCH", "a move back to segment");
    let bad = cluster.request(leader, Method::PATCH, "/v1/tags/ticks", Some(r#"{"mode":"fast"}"#), None).await;
    assert_error(&bad, 400, "INVALID_ARGUMENT", "an unknown mode");

    let takers = Takers::start(&mut cluster, "/v1/segment/ticks?count=4");
    takers.progress(200).await;
    cluster.kill(leader);
    let new = cluster.wait_leader(TIMEOUT).await;
    assert_ne!(new, leader);
    takers.progress(200).await;
    cluster.restart(leader);
    cluster.wait_ready(leader, TIMEOUT).await;
    takers.progress(200).await;
    let history = takers.stop_and_check().await;
    let served_by: HashSet<usize> = history.iter().map(|op| op.node).collect();
    assert_eq!(served_by.len(), 3, "every node answered takes (forwarding to the leader)");
}

/// A leader frozen (SIGSTOP stands in for a suspended VM or a long pause): the others elect a
/// leader that serves above it; when the old leader resumes, no quorum confirms its term any more
/// and it answers nothing from its old range.
#[tokio::test]
async fn a_frozen_leader_answers_nothing_old_when_it_resumes() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    // A large step: the frozen leader still holds IDs of its range when it resumes.
    let body = r#"{"tag":"ticks","step":100000,"mode":"monotonic"}"#;
    let (status, created) = cluster.request(leader, Method::POST, "/v1/tags", Some(body), None).await;
    assert_eq!(status.as_u16(), 201, "{created}");
    cluster.wait_tag_known(&[1, 2, 3], "ticks", TIMEOUT).await;
    let takers = Takers::start(&mut cluster, "/v1/segment/ticks?count=4");
    takers.progress(100).await;
    cluster.signal(leader, libc::SIGSTOP);
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let clients: Vec<_> = others.iter().map(|&id| cluster.client(id)).collect();
    wait_until(TIMEOUT, "the others to elect a new leader", || async {
        for client in &clients {
            let status = client.cluster_status().await.map_err(|e| e.to_string())?;
            if status.leader_id.is_none_or(|id| id == leader) {
                return Err(format!("leader {:?}", status.leader_id));
            }
        }
        Ok(())
    })
    .await;
    takers.progress(100).await;
    cluster.signal(leader, libc::SIGCONT);
    takers.progress(100).await;
    takers.stop_and_check().await;
}

/// `/ranges` of a monotonic tag (`docs/semantics.md#strictly-increasing-tags`): one range of exactly `count` consecutive IDs, above
/// everything answered before, whichever node is asked; concurrent takers of ranges and of lists
/// on every node keep real-time order. The small step makes ranges cross claims, so the rest of a
/// range too short for a request is skipped.
#[tokio::test]
async fn monotonic_ranges_are_contiguous_and_increase_across_leader_and_followers() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let body = r#"{"tag":"blocks","step":1000,"mode":"monotonic"}"#;
    let (status, created) = cluster.request(leader, Method::POST, "/v1/tags", Some(body), None).await;
    assert_eq!(status.as_u16(), 201, "{created}");
    cluster.wait_tag_known(&[1, 2, 3], "blocks", TIMEOUT).await;
    let clients: Vec<_> = (1..=3).map(|id| cluster.client(id)).collect();
    wait_until(TIMEOUT, "the cluster version to allow monotonic ranges", || async {
        for client in &clients {
            let status = client.cluster_status().await.map_err(|e| e.to_string())?;
            let version = status.extra.get("cluster_version").and_then(|v| v.as_str()).unwrap_or("").to_string();
            if version != "0.3.0" {
                return Err(format!("node {} at cluster version {version:?}", status.node_id));
            }
        }
        Ok(())
    })
    .await;

    let too_many = cluster.request(leader, Method::GET, "/v1/segment/blocks/ranges?count=10001", None, None).await;
    assert_error(&too_many, 400, "INVALID_ARGUMENT", "a count above 10,000");
    let mut above = 0;
    for (round, count) in [1u64, 300, 999, 1000, 10_000, 7, 600, 600, 600].into_iter().enumerate() {
        let node = 1 + round as u64 % 3;
        let path = format!("/v1/segment/blocks/ranges?count={count}");
        let (status, answer) = cluster.request(node, Method::GET, &path, None, None).await;
        assert_eq!(status.as_u16(), 200, "node {node}: {answer}");
        let ranges = answer["ranges"].as_array().expect("ranges");
        assert_eq!(ranges.len(), 1, "node {node}, count={count}: one contiguous range: {answer}");
        let bound = |name: &str| ranges[0][name].as_str().and_then(|v| v.parse::<u64>().ok()).expect("a bound");
        let (start, end) = (bound("start"), bound("end"));
        assert_eq!(end - start, count, "node {node}: {answer}");
        assert!(start >= above, "node {node} answered [{start}, {end}) after an answer ending at {above}");
        above = end;
    }
    // The client library's handle: one request per call, each range above the last.
    for client in &clients {
        let range = client.monotonic("blocks").next_range(50).await.expect("a range through the client library");
        assert!(range.len() == 50 && range.start >= above, "{range:?} after an answer ending at {above}");
        above = range.end;
    }

    let ranges = Takers::start(&mut cluster, "/v1/segment/blocks/ranges?count=10");
    let lists = Takers::start(&mut cluster, "/v1/segment/blocks?count=4");
    ranges.progress(200).await;
    lists.progress(200).await;
    let mut history = ranges.stop().await;
    history.extend(lists.stop().await);
    check(&history);
}

/// While the cluster version stays below 0.3.0 (`--hold-cluster-version`, as in a cluster not
/// fully upgraded), `/ranges` of a monotonic tag is refused unserved with 409
/// `FEATURE_NOT_ENABLED`, and takes through followers are still served in real-time order (each
/// forwarded on its own, the message a 0.1.0 leader decodes).
#[tokio::test]
async fn below_cluster_version_0_3_monotonic_ranges_are_refused_and_takes_still_served() {
    let mut cluster = ProcessCluster::new().start_members_with(&[1, 2, 3], &["--hold-cluster-version"]);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let body = r#"{"tag":"ticks","step":1000,"mode":"monotonic"}"#;
    let (status, created) = cluster.request(leader, Method::POST, "/v1/tags", Some(body), None).await;
    assert_eq!(status.as_u16(), 201, "{created}");
    cluster.wait_tag_known(&[1, 2, 3], "ticks", TIMEOUT).await;
    for node in 1..=3 {
        let answer = cluster.request(node, Method::GET, "/v1/segment/ticks/ranges?count=5", None, None).await;
        assert_error(&answer, 409, "FEATURE_NOT_ENABLED", "/ranges of a monotonic tag below 0.3.0");
        let message = answer.1["error"]["message"].as_str().unwrap_or_default().to_string();
        assert!(message.contains("needs cluster version 0.3.0, the cluster is at 0.1.0"), "{message}");
    }
    let takers = Takers::start(&mut cluster, "/v1/segment/ticks?count=4");
    takers.progress(300).await;
    let history = takers.stop_and_check().await;
    assert!(history.iter().any(|op| op.node != leader as usize), "followers answered takes");
    let status = cluster.client(leader).cluster_status().await.expect("the cluster status");
    assert_eq!(status.extra.get("cluster_version").and_then(|v| v.as_str()), Some("0.1.0"), "held: {status:?}");
}

/// Clients taking IDs of a monotonic tag with `path` (a list or `/ranges`) from every node in
/// turn, recording each answered take, until stopped.
struct Takers {
    history: Arc<Mutex<Vec<Op>>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Takers {
    fn start(cluster: &mut ProcessCluster, path: &'static str) -> Takers {
        let urls: Vec<String> = (1..=3).map(|id| cluster.url(id)).collect();
        let history = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..CLIENTS)
            .map(|client| {
                let (urls, history, stop) = (urls.clone(), Arc::clone(&history), Arc::clone(&stop));
                tokio::spawn(async move {
                    // Short: a take sent to a frozen node must not hold its client up for long.
                    let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).build().expect("HTTP client");
                    let mut round = client;
                    while !stop.load(SeqCst) {
                        let node = round % urls.len();
                        round += 1;
                        let sent = Instant::now();
                        let url = format!("{}{path}", urls[node]);
                        let Ok(response) = http.get(url).send().await else { continue };
                        let Ok(body) = response.json::<serde_json::Value>().await else { continue };
                        let Some(ids) = ids_of(&body) else { continue };
                        let op = Op { node: node + 1, sent, answered: Instant::now(), ids };
                        history.lock().expect("history").push(op);
                    }
                })
            })
            .collect();
        Takers { history, stop, tasks }
    }

    fn answered(&self) -> usize {
        self.history.lock().expect("history").len()
    }

    /// Waits until `more` takes beyond those answered now have been answered.
    async fn progress(&self, more: usize) {
        let target = self.answered() + more;
        wait_until(TIMEOUT, "more monotonic takes answered", || async {
            let n = self.answered();
            if n >= target {
                Ok(())
            } else {
                Err(format!("{n} answered"))
            }
        })
        .await
    }

    /// Stops the clients and answers their history.
    async fn stop(self) -> Vec<Op> {
        self.stop.store(true, SeqCst);
        for task in self.tasks {
            task.await.expect("client task");
        }
        self.history.lock().expect("history").clone()
    }

    /// Stops the clients and checks their history.
    async fn stop_and_check(self) -> Vec<Op> {
        let history = self.stop().await;
        check(&history);
        history
    }
}

/// The IDs of an answer: `"ids"`, or every ID of `"ranges"`.
fn ids_of(body: &serde_json::Value) -> Option<Vec<u64>> {
    let number = |value: &serde_json::Value| value.as_str()?.parse::<u64>().ok();
    if let Some(ids) = body["ids"].as_array() {
        return Some(ids.iter().filter_map(number).collect());
    }
    let ranges = body["ranges"].as_array()?;
    Some(ranges.iter().filter_map(|range| Some(number(&range["start"])?..number(&range["end"])?)).flatten().collect())
}

/// A history's checks: no ID twice, real-time order.
fn check(history: &[Op]) {
    let repeated = repeated_ids(history);
    assert!(repeated.is_empty(), "{} IDs handed out twice, first: {:?}", repeated.len(), repeated.first());
    let violations = real_time_violations(history);
    assert!(violations.is_empty(), "{} violations, first: {:?}", violations.len(), violations.first());
}

/// A cluster founded by one release runs at that release from the first moment a node reports
/// ready: `/readyz` holds back until the leader raised the cluster version, and a monotonic
/// `/ranges` (which needs 0.3.0) is answered on every node at once. Before, a new cluster ran at
/// 0.1.0 for one or two seconds after `/readyz` answered 200 and refused those ranges with
/// `FEATURE_NOT_ENABLED`.
#[tokio::test]
async fn a_new_cluster_runs_at_its_founders_release_when_it_reports_ready() {
    let mut cluster = ProcessCluster::start(3);
    let own = env!("CARGO_PKG_VERSION");
    let http = reqwest::Client::new();
    for node in 1..=3u64 {
        let readyz = format!("{}/readyz", cluster.url(node));
        wait_until(TIMEOUT, &format!("node {node} ready"), || {
            let ready = http.get(&readyz).send();
            async move {
                match ready.await {
                    Ok(answer) if answer.status().is_success() => Ok(()),
                    Ok(answer) => Err(answer.status().to_string()),
                    Err(e) => Err(e.to_string()),
                }
            }
        })
        .await;
        let (status, view) = cluster.request(node, Method::GET, "/v1/cluster", None, None).await;
        assert_eq!(status.as_u16(), 200, "{view}");
        assert_eq!(view["cluster_version"].as_str(), Some(own), "node {node} reported ready at {view}");
    }
    let body = r#"{"tag":"founded","step":1000,"mode":"monotonic"}"#;
    let (status, created) = cluster.request(1, Method::POST, "/v1/tags", Some(body), None).await;
    assert_eq!(status.as_u16(), 201, "{created}");
    cluster.wait_tag_known(&[1, 2, 3], "founded", TIMEOUT).await;
    for node in 1..=3 {
        let (status, answer) =
            cluster.request(node, Method::GET, "/v1/segment/founded/ranges?count=5", None, None).await;
        assert_eq!(status.as_u16(), 200, "node {node}: {answer}");
    }
}
