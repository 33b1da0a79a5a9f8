//! Changing the membership of a running cluster: a node that joins by itself with `--join`, an
//! operator adding and removing a node with `leafraft cluster add|remove|status`, and a learner
//! that never catches up.

use std::process::Output;
use std::time::Duration;

use leafraft_client::ClusterStatus;
use reqwest::Method;

use crate::harness::assert_error;
use crate::harness::free_port;
use crate::harness::new_tag;
use crate::harness::run_binary;
use crate::harness::voters_are;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(30);
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn assert_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} exited with {}\nstdout: {}\nstderr: {}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
}

/// A fourth node started empty with `--join <member>` is added as a learner, promoted to voter
/// by itself, and then serves reads: local ones of what was written before and after it joined,
/// and `?consistent=true` ones.
#[tokio::test]
async fn a_node_started_with_join_becomes_a_voter_and_serves_reads() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    cluster
        .client(leader)
        .create_tag(&new_tag("before-join", Some(777), None, None))
        .await
        .expect("create before join");

    let seed = cluster.addr(2);
    cluster.start_node(4, &["--join", &seed]);
    for id in [leader, 4] {
        cluster.wait_status(id, TIMEOUT, "node 4 to be a voter", voters_are(&[1, 2, 3, 4])).await;
    }
    cluster.wait_ready(4, TIMEOUT).await;
    let status = cluster.status(4).await.unwrap();
    assert_eq!(status.role, "follower", "{status:?}");
    assert_eq!(status.nodes.get("4"), Some(&cluster.addr(4)), "{status:?}");

    let joined = cluster.client(4);
    assert_eq!(joined.get_tag("before-join").await.expect("read on the new node").max_id, 777);
    cluster.client(1).create_tag(&new_tag("after-join", None, Some(10), None)).await.expect("create after join");
    let (status, body) = cluster.request(4, Method::GET, "/v1/tags/after-join?consistent=true", None, None).await;
    assert_eq!(status.as_u16(), 200, "{body}");
    assert_eq!(body["step"], 10);
    // A write through the new node is forwarded to the leader.
    joined.create_tag(&new_tag("via-node-4", None, None, None)).await.expect("write through the new node");
    let leader = cluster.wait_leader(TIMEOUT).await;
    let leader_client = cluster.client(leader);
    wait_until(TIMEOUT, "the leader to list the tag written through node 4", || async {
        let tags = leader_client.list_tags().await.map_err(|e| e.to_string())?;
        tags.iter().any(|t| t.tag == "via-node-4").then_some(()).ok_or_else(|| format!("{} tags", tags.len()))
    })
    .await;
}

/// The operator CLI: `cluster add` makes a waiting node (started with `--join` at a seed that
/// does not answer, so it cannot add itself) a voter; `cluster remove` takes it out again;
/// `cluster status` prints a table and `--json` parses; a failing command exits 1 with one line.
#[tokio::test]
async fn the_cli_adds_removes_and_shows_members() {
    let mut cluster = ProcessCluster::start(3);
    cluster.wait_leader(TIMEOUT).await;
    let server = cluster.url(1);

    let nobody = format!("127.0.0.1:{}", free_port());
    cluster.start_node(5, &["--join", &nobody]);
    let addr5 = cluster.addr(5);
    let client5 = cluster.client(5);
    wait_until(TIMEOUT, "node 5 to answer /healthz", || async {
        let response = reqwest::get(format!("{}/healthz", client5.base())).await.map_err(|e| e.to_string())?;
        response.status().is_success().then_some(()).ok_or_else(|| format!("HTTP {}", response.status()))
    })
    .await;
    let (status, body) = cluster.request(5, Method::GET, "/readyz", None, None).await;
    assert_eq!(status.as_u16(), 503, "a node waiting to be added is not ready: {body}");
    let before = cluster.status(1).await.unwrap();
    assert_eq!(before.voters, [1, 2, 3], "node 5 must not be a member before `cluster add`: {before:?}");

    let output =
        run_binary(&["cluster", "add", "--node-id", "5", "--addr", &addr5, "--server", &server], CLI_TIMEOUT).await;
    assert_success(&output, "cluster add");
    for id in [1, 2, 3, 5] {
        cluster.wait_status(id, TIMEOUT, "node 5 to be a voter everywhere", voters_are(&[1, 2, 3, 5])).await;
    }
    cluster.wait_ready(5, TIMEOUT).await;

    let output = run_binary(&["cluster", "status", "--server", &server], CLI_TIMEOUT).await;
    assert_success(&output, "cluster status");
    let table = text(&output.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines.len() >= 6, "a summary line, a header and four members:\n{table}");
    assert!(lines[0].starts_with("node 1 is ") && lines[0].contains("; leader "), "{table}");
    assert!(["NODE", "ADDRESS", "ROLE"].iter().all(|h| lines[1].contains(h)), "{table}");
    // Only the leader tracks replication; another node says so instead of printing dashes.
    let leads = lines[0].starts_with("node 1 is leader");
    assert_eq!(["MATCHED", "LAG"].iter().all(|h| lines[1].contains(h)), leads, "{table}");
    assert_eq!(table.contains("only the leader knows them"), !leads, "{table}");
    for id in [1, 2, 3, 5] {
        let addr = cluster.addr(id);
        let row = lines.iter().find(|l| l.split_whitespace().next() == Some(&id.to_string()));
        assert!(row.is_some_and(|r| r.contains(&addr)), "no row for node {id} at {addr}:\n{table}");
    }
    assert_eq!(lines.iter().filter(|l| l.split_whitespace().nth(2) == Some("leader")).count(), 1, "{table}");

    let output = run_binary(&["cluster", "remove", "--node-id", "5", "--server", &server], CLI_TIMEOUT).await;
    assert_success(&output, "cluster remove");
    for id in [1, 2, 3] {
        let status = cluster.wait_status(id, TIMEOUT, "node 5 to be removed", voters_are(&[1, 2, 3])).await;
        assert!(!status.nodes.contains_key("5"), "node {id}: {status:?}");
    }
    // As the operations guide says: stop the removed process.
    cluster.kill(5);

    let output = run_binary(&["cluster", "status", "--json", "--server", &server], CLI_TIMEOUT).await;
    assert_success(&output, "cluster status --json");
    let status: ClusterStatus = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("`cluster status --json` is not a status ({e}): {}", text(&output.stdout)));
    assert_eq!((status.node_id, status.voters.as_slice()), (1, &[1, 2, 3][..]), "{status:?}");
    assert!(status.leader_id.is_some(), "{status:?}");

    let output = run_binary(&["cluster", "remove", "--node-id", "42", "--server", &server], CLI_TIMEOUT).await;
    assert_eq!(output.status.code(), Some(1), "removing an unknown node must fail: {output:?}");
    let stderr = text(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line on stderr: {stderr}");
    assert!(stderr.contains("NODE_NOT_FOUND"), "{stderr}");
}

/// `docs/api.md`: adding a learner where nothing runs answers 503 `NO_LEADER` once the learner timeout
/// has passed and leaves the voters unchanged (the node stays a learner); promoting it answers 409
/// `LEARNER_NOT_CAUGHT_UP` and changes nothing. When a node then starts there with `--join`, it
/// catches up, is promoted, and the membership records its own disk's incarnation.
#[tokio::test]
async fn a_learner_where_nothing_runs_is_not_promoted() {
    let mut cluster = ProcessCluster::new().start_members_with(&[1, 2, 3], &["--learner-timeout-ms", "2000"]);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let addr = cluster.addr(9);
    let bad = format!(r#"{{"node_id":9,"addr":"{addr}","incarnation":"not hex"}}"#);
    let answer = cluster.request(1, Method::POST, "/v1/cluster/learners", Some(&bad), None).await;
    assert_error(&answer, 400, "INVALID_ARGUMENT", "an incarnation that is not hex");
    let body = format!(r#"{{"node_id":9,"addr":"{addr}"}}"#);
    let started = std::time::Instant::now();
    let answer = cluster.request(1, Method::POST, "/v1/cluster/learners", Some(&body), None).await;
    let took = started.elapsed();
    assert_error(&answer, 503, "NO_LEADER", "adding a learner where nothing runs");
    assert!(answer.1.to_string().contains("voters are unchanged"), "{}", answer.1);
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(15), "answered after {took:?}");
    let learner_only = |s: &ClusterStatus| match (s.voters.as_slice(), s.learners.as_slice()) {
        ([1, 2, 3], [9]) => Ok(()),
        _ => Err(format!("voters {:?}, learners {:?}", s.voters, s.learners)),
    };
    cluster.wait_status(leader, TIMEOUT, "node 9 to be a learner only", learner_only).await;

    let answer = cluster.request(2, Method::POST, "/v1/cluster/voters", Some(r#"{"node_id":9}"#), None).await;
    assert_error(&answer, 409, "LEARNER_NOT_CAUGHT_UP", "promoting a learner that replicated nothing");
    let status = cluster.status(leader).await.unwrap();
    assert_eq!((status.voters.as_slice(), status.learners.as_slice()), (&[1, 2, 3][..], &[9][..]), "{status:?}");

    let seed = cluster.addr(leader);
    cluster.start_node(9, &["--join", &seed]);
    let all = cluster.wait_status(leader, TIMEOUT, "node 9 to be a voter", voters_are(&[1, 2, 3, 9])).await;
    let recorded = format!("incarnation=\"{}\"", all.incarnations["9"]);
    assert!(cluster.log(9).contains(&recorded), "the membership records node 9's own disk: {all:?}");
}

/// A voter removed while it runs: it refuses ID requests at once (503 `NOT_READY` naming the
/// removal) instead of answering from its buffers or hanging until the client's timeout, it stops
/// campaigning, and the members' term does not move on its account (members refuse the vote
/// requests of a node outside their membership: openraft 0.9 has no PreVote). Seen before: a
/// removed node started an election every ~1.7 s (term 2 -> 7) and its takes hung for 3 s.
#[tokio::test]
async fn a_removed_node_refuses_takes_at_once_and_disturbs_no_term() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let removed = (1..=3).find(|id| *id != leader).expect("a follower");
    let body = r#"{"tag":"kept","step":1000}"#;
    let (status, created) = cluster.request(leader, Method::POST, "/v1/tags", Some(body), None).await;
    assert_eq!(status.as_u16(), 201, "{created}");
    cluster.wait_tag_known(&[1, 2, 3], "kept", TIMEOUT).await;
    let (status, ids) = cluster.request(removed, Method::GET, "/v1/segment/kept?count=3", None, None).await;
    assert_eq!(status.as_u16(), 200, "the member serves before its removal: {ids}");

    let path = format!("/v1/cluster/members/{removed}");
    let (status, answer) = cluster.request(leader, Method::DELETE, &path, None, None).await;
    assert!(status.is_success(), "removal: {status} {answer}");
    let rest: Vec<u64> = (1..=3).filter(|id| *id != removed).collect();
    for &id in &rest {
        cluster
            .wait_status(
                id,
                TIMEOUT,
                "the removal everywhere",
                voters_are(if removed == 1 {
                    &[2, 3]
                } else if removed == 2 {
                    &[1, 3]
                } else {
                    &[1, 2]
                }),
            )
            .await;
    }
    // The removed node finds out by itself, then answers every take at once.
    let url = format!("{}/v1/segment/kept?count=1", cluster.url(removed));
    let http = reqwest::Client::new();
    wait_until(TIMEOUT, "the removed node to refuse takes", || {
        let take = http.get(&url).timeout(Duration::from_secs(5)).send();
        async move {
            let answer = take.await.map_err(|e| e.to_string())?;
            let status = answer.status();
            let body: serde_json::Value = answer.json().await.map_err(|e| e.to_string())?;
            match (status.as_u16(), body["error"]["code"].as_str()) {
                (503, Some("NOT_READY")) if body["error"]["message"].as_str().is_some_and(|m| m.contains("member")) => {
                    Ok(())
                }
                _ => Err(format!("{status} {body}")),
            }
        }
    })
    .await;
    let started = std::time::Instant::now();
    let (status, answer) = cluster.request(removed, Method::GET, "/v1/segment/kept?count=1", None, None).await;
    assert_eq!(status.as_u16(), 503, "{answer}");
    assert!(started.elapsed() < Duration::from_millis(500), "refused at once, not after {:?}", started.elapsed());

    // Over several election timeouts of the removed node, neither its term nor the members' moves.
    let term_of = |status: &ClusterStatus| status.term;
    let members_before = term_of(&cluster.status(rest[0]).await.expect("status"));
    let removed_before = term_of(&cluster.status(removed).await.expect("status of the removed node"));
    let wait = std::time::Instant::now() + Duration::from_secs(4);
    while std::time::Instant::now() < wait {
        let members_now = term_of(&cluster.status(rest[0]).await.expect("status"));
        assert_eq!(members_now, members_before, "the members' term moved after the removal");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let removed_after = term_of(&cluster.status(removed).await.expect("status of the removed node"));
    assert_eq!(removed_after, removed_before, "the removed node kept campaigning");
}
