//! What a new user reads: the listing commands print aligned tables by default and
//! JSON with `--json`, with words instead of `null`; a follower's `cluster status` says only the
//! leader knows MATCHED/LAG; with no node running the CLI prints one line that says what to do;
//! malformed numbers in requests say what is allowed; the status page says how a monotonic tag is
//! served instead of "no buffers".

use std::process::Output;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::harness::assert_error;
use crate::harness::free_port;
use crate::harness::new_tag;
use crate::harness::run_cli;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);

#[track_caller]
fn stdout_of(out: &Output, what: &str) -> String {
    assert!(out.status.success(), "{what}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn listings_are_tables_by_default_json_on_request_and_never_print_null() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let follower = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    let (leader_url, follower_url) = (cluster.url(leader), cluster.url(follower));
    let client = cluster.client(follower);
    client.create_tag(&new_tag("invoice", None, Some(1000), Some("bills".into()))).await.expect("create invoice");
    let mut ticket = new_tag("ticket", None, None, None);
    ticket.mode = Some("monotonic".into());
    client.create_tag(&ticket).await.expect("create ticket");
    wait_until(TIMEOUT, "the follower to serve both tags", || async {
        client.segment_ids("invoice", 3).await.map_err(|e| e.to_string())?;
        client.segment_ids("ticket", 2).await.map_err(|e| e.to_string())
    })
    .await;

    let table = stdout_of(&run_cli(&follower_url, &["tag", "list"]).await, "tag list");
    let header = table.lines().next().unwrap_or_default();
    assert!(header.starts_with("TAG") && header.contains("MAX_ID") && header.contains("THIS NODE"), "{table}");
    let invoice = table.lines().find(|l| l.starts_with("invoice ")).unwrap_or_else(|| panic!("no invoice:\n{table}"));
    assert!(invoice.contains("segment") && invoice.contains("[1, 1001) at 4") && invoice.ends_with("bills"), "{table}");
    let ticket = table.lines().find(|l| l.starts_with("ticket ")).unwrap_or_else(|| panic!("no ticket:\n{table}"));
    assert!(ticket.contains("monotonic") && ticket.contains("served by the leader's sequencer"), "{table}");
    let json: Value =
        serde_json::from_str(&stdout_of(&run_cli(&follower_url, &["tag", "list", "--json"]).await, "--json"))
            .expect("tag list --json prints JSON");
    assert_eq!(json["tags"].as_array().map(Vec::len), Some(2), "{json}");

    // The node's own snowflake state is said in words, never `null`.
    let workers = stdout_of(&run_cli(&follower_url, &["worker", "list"]).await, "worker list");
    assert!(!workers.contains("null"), "{workers}");
    assert!(workers.lines().last().is_some_and(|l| l.starts_with("this node: worker ")), "{workers}");
    let json = stdout_of(&run_cli(&follower_url, &["worker", "list", "--json"]).await, "worker list --json");
    assert!(serde_json::from_str::<Value>(&json).is_ok_and(|v| v["workers"].is_array()), "{json}");

    let status = stdout_of(&run_cli(&follower_url, &["cluster", "status"]).await, "status on a follower");
    let ask =
        format!("only the leader knows them; ask it: leafraft cluster status --server http://{}", cluster.addr(leader));
    assert!(status.contains(&ask) && !status.contains("MATCHED"), "{status}");
    let status = stdout_of(&run_cli(&leader_url, &["cluster", "status"]).await, "status on the leader");
    assert!(status.contains("MATCHED") && !status.contains("only the leader"), "{status}");

    // The status page of either node: the monotonic tag is the leader's, not "no buffers".
    for url in [&follower_url, &leader_url] {
        let html = reqwest::get(format!("{url}/")).await.expect("GET /").text().await.expect("the page");
        let start = html.find("<tr data-tag=\"ticket\"").unwrap_or_else(|| panic!("no ticket row: {html}"));
        let row = &html[start..start + html[start..].find("</tr>").unwrap_or(0)];
        assert!(row.contains("served by the leader's sequencer") && !row.contains("no buffers"), "{row}");
        assert!(row.contains("every ID served so far is below max_id"), "{row}");
    }
}

#[tokio::test]
async fn with_no_node_running_the_cli_prints_one_line_that_says_what_to_do() {
    let server = format!("http://127.0.0.1:{}", free_port());
    for args in [&["tag", "list"][..], &["cluster", "status"], &["id", "snowflake"]] {
        let out = run_cli(&server, args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert_eq!(
            stderr,
            format!(
                "error: no leafraft node at {server} (connection refused); start one with `leafraft serve` or pass \
                 --server\n"
            ),
            "{args:?}"
        );
    }
}

#[tokio::test]
async fn malformed_numbers_say_what_is_allowed() {
    let mut cluster = ProcessCluster::start(1);
    cluster.wait_leader(TIMEOUT).await;
    let answer = cluster.request(1, Method::POST, "/v1/tags", Some(r#"{"tag":"t","step":-5}"#), None).await;
    assert_error(&answer, 400, "INVALID_ARGUMENT", "a negative step");
    let message = answer.1["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("step must be an integer from 1 to 10000000, got -5"), "{message}");
    let answer = cluster.request(1, Method::GET, "/v1/tags/t", None, None).await;
    assert_error(&answer, 404, "TAG_NOT_FOUND", "the refused create changed nothing");

    cluster.request(1, Method::POST, "/v1/tags", Some(r#"{"tag":"t"}"#), None).await;
    let answer = cluster.request(1, Method::PATCH, "/v1/tags/t", Some(r#"{"step":"lots"}"#), None).await;
    assert_error(&answer, 400, "INVALID_ARGUMENT", "a step that is not a number");
    for (path, needle) in [
        ("/v1/segment/t?count=-1", r#"count must be an integer from 1 to 10000, got "-1""#),
        ("/v1/segment/t/ranges?count=x", r#"count must be an integer from 1 to 10000, got "x""#),
        ("/v1/snowflake?count=-3", r#"count must be an integer from 1 to 10000, got "-3""#),
        ("/v1/segment/t?count=0", "count must be between 1 and 10000, got 0"),
    ] {
        let answer = cluster.request(1, Method::GET, path, None, None).await;
        assert_error(&answer, 400, "INVALID_ARGUMENT", path);
        let message = answer.1["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle) && !message.contains("invalid digit"), "{path}: {message}");
    }
    let answer = cluster.request(1, Method::POST, "/v1/timeseq", Some(r#"{"namespace":"n"}"#), None).await;
    assert_eq!(answer.0.as_u16(), 201, "{answer:?}");
    let answer = cluster.request(1, Method::GET, "/v1/timeseq/n?shard=-7", None, None).await;
    assert_error(&answer, 400, "INVALID_ARGUMENT", "a negative shard");
    let message = answer.1["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(r#"shard must be an integer from 0 to 2^shard_bits - 1"#), "{message}");
}
