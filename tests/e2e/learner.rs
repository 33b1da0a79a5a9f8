//! A learner is a serving replica: it serves every ID kind like a voter (claims and
//! monotonic takes forwarded to the leader) and keeps serving through a leader kill, without
//! being part of the quorum.

use std::collections::HashSet;
use std::time::Duration;

use leafraft_client::ClusterStatus;
use reqwest::Method;
use serde_json::Value;

use crate::harness::new_tag;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(30);

/// IDs of every kind one node handed out, each kind checked for duplicates as it grows.
#[derive(Default)]
struct Taken {
    segment: HashSet<u64>,
    snowflake: HashSet<u64>,
    timeseq: HashSet<u64>,
    monotonic: Vec<u64>,
}

fn insert_unique(set: &mut HashSet<u64>, ids: &[u64], kind: &str) {
    for id in ids {
        assert!(set.insert(*id), "{kind} ID {id} handed out twice");
    }
}

fn ids_of(body: &Value) -> Vec<u64> {
    body["ids"].as_array().map_or_else(Vec::new, |ids| {
        ids.iter().map(|id| id.as_str().and_then(|s| s.parse().ok()).expect("a decimal string")).collect()
    })
}

/// One round of every kind from `node`; `Err` names the first kind that failed.
async fn take_round(cluster: &mut ProcessCluster, node: u64, taken: &mut Taken) -> Result<(), String> {
    let client = cluster.client(node);
    let segment = client.segment_ids("seg", 20).await.map_err(|e| format!("segment: {e}"))?;
    insert_unique(&mut taken.segment, &segment, "segment");
    let snowflake = client.snowflake_ids(5).await.map_err(|e| format!("snowflake: {e}"))?;
    insert_unique(&mut taken.snowflake, &snowflake, "snowflake");
    let (status, body) = cluster.request(node, Method::GET, "/v1/timeseq/ns?shard=7&count=5", None, None).await;
    if status != 200 {
        return Err(format!("timeseq: {status} {body}"));
    }
    insert_unique(&mut taken.timeseq, &ids_of(&body), "timeseq");
    let (status, body) = cluster.request(node, Method::GET, "/v1/segment/mono?count=3", None, None).await;
    if status != 200 {
        return Err(format!("monotonic: {status} {body}"));
    }
    let mono = ids_of(&body);
    // One client, one request after the other: real-time order says each answer is larger.
    if let (Some(last), Some(first)) = (taken.monotonic.last(), mono.first()) {
        assert!(first > last, "monotonic {first} after {last}");
    }
    taken.monotonic.extend(mono);
    Ok(())
}

/// Polls [`take_round`] until a whole round succeeds (what a partial one took is kept and
/// checked too), waiting on the condition with a deadline.
async fn round_within(cluster: &mut ProcessCluster, node: u64, taken: &mut Taken, what: &str) {
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        match take_round(cluster, node, taken).await {
            Ok(()) => return,
            Err(why) => {
                assert!(std::time::Instant::now() < deadline, "{what}: still {why} after {TIMEOUT:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[tokio::test]
async fn a_learner_serves_every_kind_and_keeps_serving_through_a_leader_kill() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let seed = cluster.addr(1);
    cluster.start_node(4, &["--join", &seed, "--learner"]);
    let is_learner = |s: &ClusterStatus| match (s.voters.as_slice(), s.learners.as_slice()) {
        ([1, 2, 3], [4]) => Ok(()),
        _ => Err(format!("voters {:?}, learners {:?}", s.voters, s.learners)),
    };
    cluster.wait_status(leader, TIMEOUT, "node 4 to be a learner", is_learner).await;
    cluster.wait_ready(4, TIMEOUT).await;

    let admin = cluster.client(leader);
    admin.create_tag(&new_tag("seg", None, Some(1000), None)).await.expect("create seg");
    let mut mono = new_tag("mono", None, Some(100), None);
    mono.mode = Some("monotonic".into());
    admin.create_tag(&mono).await.expect("create mono");
    let (status, body) =
        cluster.request(leader, Method::POST, "/v1/timeseq", Some(r#"{"namespace":"ns"}"#), None).await;
    assert_eq!(status, 201, "{body}");

    // The learner serves like a voter, and what a voter serves never overlaps it.
    let mut learner = Taken::default();
    let mut voter = Taken::default();
    for _ in 0..5 {
        round_within(&mut cluster, 4, &mut learner, "a round of every kind on the learner").await;
    }
    let other = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    round_within(&mut cluster, other, &mut voter, "a round on a voter").await;

    cluster.kill(leader);
    // Every kind comes back on the learner (segment and snowflake from what it holds, the others
    // once a new leader answers its forwards); it never stopped being a learner.
    for _ in 0..5 {
        round_within(&mut cluster, 4, &mut learner, "a round of every kind on the learner after the leader kill").await;
    }
    let new_leader = cluster.wait_leader(TIMEOUT).await;
    assert_ne!(new_leader, 4, "a learner never leads");
    let status = cluster.status(4).await.expect("status of the learner");
    assert_eq!(status.learners, vec![4], "{status:?}");

    for (kind, a, b) in [
        ("segment", &learner.segment, &voter.segment),
        ("snowflake", &learner.snowflake, &voter.snowflake),
        ("timeseq", &learner.timeseq, &voter.timeseq),
    ] {
        assert!(a.is_disjoint(b), "a {kind} ID served by both the learner and a voter");
        assert!(!a.is_empty(), "the learner served no {kind} ID");
    }
    let all_mono: HashSet<u64> = learner.monotonic.iter().chain(&voter.monotonic).copied().collect();
    assert_eq!(all_mono.len(), learner.monotonic.len() + voter.monotonic.len(), "a monotonic ID twice");
}
