//! Sharded time-sequence IDs across real processes, with libfaketime shifting single nodes'
//! wall clocks (their monotonic clocks, and so their timers, run true). `docs/semantics.md#time-sequence-ids`: unique per
//! namespace across nodes whatever their clocks; a node whose clock is far off is refused.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;

use reqwest::Method;
use reqwest::StatusCode;
use serde_json::Value;

use crate::harness::assert_error;
use crate::harness::ProcessCluster;
use crate::snowflake_ids::assert_clock_offset;
use crate::snowflake_ids::fixed_offset_env;
use crate::snowflake_ids::now_ms;

const TIMEOUT: Duration = Duration::from_secs(20);
const SEQ_BITS: u64 = 19;
const SHARD_BITS: u64 = 12;
const EPOCH_S: u64 = 1_577_836_800;

/// Three members, node 2's clock `offset_2` and node 3's `offset_3` (libfaketime specs), each
/// started with `flags`.
fn start_with_clocks(offset_2: &str, offset_3: &str, flags: &[&str]) -> ProcessCluster {
    let mut cluster = ProcessCluster::new();
    cluster.set_env(2, fixed_offset_env(offset_2));
    cluster.set_env(3, fixed_offset_env(offset_3));
    cluster.start_members_with(&[1, 2, 3], flags)
}

async fn create_namespace(cluster: &mut ProcessCluster, node: u64, body: &str) -> (StatusCode, Value) {
    cluster.request(node, Method::POST, "/v1/timeseq", Some(body), None).await
}

/// The IDs of one answer, or its status and body.
async fn ids(cluster: &mut ProcessCluster, node: u64, query: &str) -> Result<Vec<String>, (StatusCode, Value)> {
    let answer = cluster.request(node, Method::GET, &format!("/v1/timeseq/orders?{query}"), None, None).await;
    if answer.0 != StatusCode::OK {
        return Err(answer);
    }
    Ok(answer.1["ids"].as_array().expect("ids").iter().map(|id| id.as_str().expect("a string").to_string()).collect())
}

type Answer = Result<Vec<String>, (StatusCode, Value)>;

/// Polls `node` with `query` until `done` holds for its answer (waiting on a condition with a
/// deadline, as `wait_until` does).
async fn answer_within(cluster: &mut ProcessCluster, node: u64, query: &str, done: impl Fn(&Answer) -> bool) -> Answer {
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let answer = ids(cluster, node, query).await;
        if done(&answer) {
            return answer;
        }
        assert!(std::time::Instant::now() < deadline, "node {node}: still {answer:?} after {TIMEOUT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn second_of(id: u64) -> u64 {
    EPOCH_S + (id >> (SEQ_BITS + SHARD_BITS))
}

/// Nodes 3 s behind and 2 s ahead serve with the others (allowed skew 6 s): every ID is unique,
/// carries its shard, its second is within the answering node's clock error of the answer time,
/// and per node a later second's IDs are larger. The string form decodes to the same parts.
#[tokio::test]
async fn three_nodes_with_shifted_clocks_serve_unique_ids() {
    let mut cluster = start_with_clocks("-3s", "+2s", &["--max-clock-skew-ms", "6000"]);
    cluster.wait_leader(TIMEOUT).await;
    assert_clock_offset(&mut cluster, 2, -3_000).await;
    assert_clock_offset(&mut cluster, 3, 2_000).await;
    let created = create_namespace(&mut cluster, 2, r#"{"namespace":"orders","time_zone":"+08:00"}"#).await;
    assert_eq!(created.0, StatusCode::CREATED, "{created:?}");
    assert_eq!(created.1["time_bits"], 32);
    let again = create_namespace(&mut cluster, 1, r#"{"namespace":"orders"}"#).await;
    assert_error(&again, 409, "NAMESPACE_EXISTS", "a second create");
    let bad = create_namespace(&mut cluster, 1, r#"{"namespace":"x","shard_bits":30}"#).await;
    assert_error(&bad, 400, "INVALID_ARGUMENT", "too many shard bits");
    let missing = cluster.request(1, Method::GET, "/v1/timeseq/nope?shard=1", None, None).await;
    assert_error(&missing, 404, "NAMESPACE_NOT_FOUND", "an unknown namespace");
    for node in [1, 2, 3] {
        answer_within(&mut cluster, node, "shard=1", |answer| answer.is_ok()).await.expect("serving");
    }
    let offsets = BTreeMap::from([(1u64, 0i64), (2, -3_000), (3, 2_000)]);
    let mut seen = BTreeSet::new();
    let mut last_second = BTreeMap::new();
    for round in 0..60u64 {
        let node = 1 + round % 3;
        let shard = round * 61 % 4096;
        let asked_ms = now_ms();
        let got = ids(&mut cluster, node, &format!("shard={shard}&count=1000")).await.expect("IDs");
        let answered_ms = now_ms();
        assert_eq!(got.len(), 1000);
        for id in got {
            let id: u64 = id.parse().expect("a decimal ID");
            assert!(seen.insert(id), "{id} handed out twice");
            assert_eq!((id >> SEQ_BITS) & 4095, shard);
            let second_ms = i64::try_from(second_of(id) * 1000).unwrap();
            let (from, to) = (asked_ms as i64 + offsets[&node] - 1_000, answered_ms as i64 + offsets[&node] + 1_000);
            assert!((from..=to).contains(&second_ms), "node {node}: second {second_ms} outside {from}..{to}");
            let last = last_second.entry(node).or_insert(0);
            assert!(second_of(id) >= *last, "node {node} went back a second");
            *last = second_of(id);
        }
    }
    let strings = ids(&mut cluster, 3, "shard=7&count=5&format=string&prefix=ORD").await.expect("string IDs");
    for id in &strings {
        assert_eq!(id.len(), 3 + 14 + 6 + 4, "{id}");
        let decoded = cluster.request(1, Method::GET, &format!("/v1/timeseq/orders/decode/{id}"), None, None).await;
        assert_eq!(decoded.0, StatusCode::OK, "{decoded:?}");
        assert_eq!(decoded.1["shard"], 7);
    }
    let text = cluster.get_text(2, "/api/timeseq/get/orders?shard=3").await;
    assert_eq!(text.0, StatusCode::OK);
    assert!(seen.insert(text.1.parse().expect("a decimal ID")), "Leaf path handed out a seen ID");
    let unknown = cluster.get_text(2, "/api/timeseq/get/nope?shard=3").await;
    assert_eq!(unknown, (StatusCode::INTERNAL_SERVER_ERROR, "Result{id=-2, status=EXCEPTION}".to_string()));
    let metrics = cluster.get_text(1, "/metrics").await.1;
    let claims = metrics.lines().find(|line| line.starts_with("leafraft_timeseq_events_total{kind=\"claims\"}"));
    let claims: u64 = claims.and_then(|line| line.rsplit(' ').next()?.parse().ok()).expect("the claims counter");
    assert!(claims >= 1, "node 1 served from {claims} claims");
}

/// A node 20 minutes behind its peers is refused, and the others serve.
#[tokio::test]
async fn a_node_20_minutes_behind_is_refused() {
    let mut cluster = start_with_clocks("+0", "-1200s", &[]);
    cluster.wait_leader(TIMEOUT).await;
    assert_clock_offset(&mut cluster, 3, -1_200_000).await;
    let created = create_namespace(&mut cluster, 1, r#"{"namespace":"orders"}"#).await;
    assert_eq!(created.0, StatusCode::CREATED, "{created:?}");
    answer_within(&mut cluster, 1, "shard=1", |answer| answer.is_ok()).await.expect("serving");
    // Node 3 never serves: before its first clock check and after it, it is refused.
    let refused = answer_within(&mut cluster, 3, "shard=1", |answer| match answer {
        Err((_, body)) => body["error"]["code"] == "CLOCK_BACKWARDS",
        Ok(got) => panic!("node 3, 20 minutes behind, served {got:?}"),
    })
    .await;
    assert_error(&refused.expect_err("refused"), 503, "CLOCK_BACKWARDS", "node 3");
    let leaf = cluster.get_text(3, "/api/timeseq/get/orders?shard=1").await;
    assert_eq!(leaf, (StatusCode::INTERNAL_SERVER_ERROR, "Result{id=-4, status=EXCEPTION}".to_string()));
}

/// A node that has just become ready has not compared its clock with its peers' yet: a
/// time-sequence request in that moment waits for the first check (bounded, as one waits for a
/// range) instead of answering 503 `CLOCK_BACKWARDS`, and `/readyz` says kind by kind what the
/// node serves.
#[tokio::test]
async fn regression_a_time_sequence_request_right_after_ready_is_served() {
    let mut cluster = ProcessCluster::start(3);
    cluster.wait_leader(TIMEOUT).await;
    let (status, body) = create_namespace(&mut cluster, 1, r#"{"namespace":"orders"}"#).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    cluster.wait_ready(2, TIMEOUT).await;
    // Node 2 serves the namespace once it has applied its creation.
    let _served = answer_within(&mut cluster, 2, "shard=1", Result::is_ok).await;
    cluster.kill(2);
    cluster.restart(2);
    // The first moment node 2 answers ready: polled without a pause, so the request below comes
    // as early as a load balancer's would.
    let (url, http) = (cluster.url(2), reqwest::Client::new());
    let deadline = std::time::Instant::now() + TIMEOUT;
    let ready = loop {
        if let Ok(response) = http.get(format!("{url}/readyz")).send().await {
            if response.status() == StatusCode::OK {
                break response.json::<Value>().await.expect("a /readyz body");
            }
        }
        assert!(std::time::Instant::now() < deadline, "node 2 not ready after {TIMEOUT:?}");
        // The poll's own pace (a millisecond), not a synchronisation: the condition is the answer.
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let answer = ids(&mut cluster, 2, "shard=1").await;
    assert!(answer.is_ok(), "right after /readyz answered {ready}: {answer:?}");
    for kind in ["segment", "snowflake", "timeseq", "monotonic"] {
        assert!(ready[kind]["ready"].is_boolean(), "/readyz reports no {kind}: {ready}");
    }
    assert_eq!(ready["segment"]["ready"], true, "{ready}");
}

/// A node's counter of `leafraft_timeseq_events_total` of `kind`.
pub(crate) async fn timeseq_events(cluster: &mut ProcessCluster, node: u64, kind: &str) -> u64 {
    let metrics = cluster.get_text(node, "/metrics").await.1;
    let prefix = format!("leafraft_timeseq_events_total{{kind=\"{kind}\"}}");
    let line = metrics.lines().find(|line| line.starts_with(&prefix));
    line.and_then(|line| line.rsplit(' ').next()?.parse().ok()).unwrap_or(0)
}

/// Three nodes serve a namespace in use from window claims (a block in every second of a
/// window), and no ID is served twice across a node's restart: the restarted node's first
/// request waits for a claim, then it claims a window again.
#[tokio::test]
async fn three_nodes_serve_from_window_claims_and_a_restart_serves_no_id_twice() {
    let mut cluster = ProcessCluster::start(3);
    cluster.wait_leader(TIMEOUT).await;
    let (status, body) = create_namespace(&mut cluster, 1, r#"{"namespace":"orders"}"#).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let mut seen = BTreeSet::new();
    let take = |got: Vec<String>, node: u64, seen: &mut BTreeSet<u64>| {
        for id in got {
            let id: u64 = id.parse().expect("a decimal ID");
            assert!(seen.insert(id), "node {node} served {id} twice");
        }
    };
    for node in [1, 2, 3] {
        let got = answer_within(&mut cluster, node, "shard=1&count=3", Result::is_ok).await.expect("serving");
        take(got, node, &mut seen);
    }
    // Every node in use claims a window: wait for it, asking all the while.
    let deadline = std::time::Instant::now() + TIMEOUT;
    for node in [1, 2, 3] {
        while timeseq_events(&mut cluster, node, "window_claims").await == 0 {
            assert!(std::time::Instant::now() < deadline, "node {node} claimed no window");
            let got = ids(&mut cluster, node, "shard=2&count=2").await.expect("IDs");
            take(got, node, &mut seen);
        }
    }
    for round in 0..150u64 {
        let node = 1 + round % 3;
        let got = ids(&mut cluster, node, &format!("shard={}&count=3", round % 4)).await.expect("IDs");
        take(got, node, &mut seen);
    }
    cluster.kill(2);
    cluster.restart(2);
    cluster.wait_ready(2, TIMEOUT).await;
    let got =
        answer_within(&mut cluster, 2, "shard=1&count=3", Result::is_ok).await.expect("serving after the restart");
    take(got, 2, &mut seen);
    let deadline = std::time::Instant::now() + TIMEOUT;
    while timeseq_events(&mut cluster, 2, "window_claims").await == 0 {
        assert!(std::time::Instant::now() < deadline, "the restarted node claimed no window");
        for node in [1, 2, 3] {
            let got = ids(&mut cluster, node, "shard=1&count=3").await.expect("IDs");
            take(got, node, &mut seen);
        }
    }
    for round in 0..150u64 {
        let node = 1 + round % 3;
        let got = ids(&mut cluster, node, &format!("shard={}&count=3", round % 4)).await.expect("IDs");
        take(got, node, &mut seen);
    }
}
