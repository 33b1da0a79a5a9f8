//! Logs for collectors: with `--log-format json` every line is one JSON object, and every durable
//! decision (leader change, membership change, tag created/updated, claim committed, worker
//! acquired) is one INFO line with its fields.

use std::time::Duration;

use serde_json::Value;

use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);

/// The INFO lines of `log` whose message is `message`; panics on a line that is not a JSON object.
fn info_lines(log: &str, message: &str) -> Vec<Value> {
    log.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            assert!(value.is_object() && value["timestamp"].is_string(), "not a log object: {line}");
            value
        })
        .filter(|v| v["level"] == "INFO" && v["fields"]["message"] == message)
        .collect()
}

/// On a single node started with `--log-format json`: after a create, an update, segment IDs and
/// snowflake IDs, every log line parses as a JSON object, and "leader changed", "membership
/// changed", "tag created", "tag updated", "segment claim committed" (once per claim the node
/// counts) and "snowflake worker acquired" are INFO lines carrying their fields.
#[tokio::test]
async fn json_logs_are_one_object_per_line_with_an_info_line_per_durable_decision() {
    let mut cluster = ProcessCluster::new().start_members_with(&[1], &["--log-format", "json"]);
    cluster.wait_leader(TIMEOUT).await;
    let client = cluster.client(1);
    client.create_tag(&new_tag("order", None, Some(10), None)).await.expect("create");
    let update = leafraft_client::TagUpdate { step: Some(20), ..Default::default() };
    client.update_tag("order", &update).await.expect("update");
    crate::harness::segment_ids_within(&client, "order", 15, TIMEOUT).await;
    wait_until(TIMEOUT, "snowflake IDs", || async { client.snowflake_ids(2).await.map_err(|e| e.to_string()) }).await;

    let log = wait_until(TIMEOUT, "one claim line per claim and every decision logged", || async {
        let log = cluster.log(1);
        let tag = client.get_tag("order").await.map_err(|e| e.to_string())?;
        let claims = tag.buffers.map_or(0, |b| b.claims);
        let lines = info_lines(&log, "segment claim committed").len() as u64;
        let missing: Vec<&str> = ["leader changed", "membership changed", "tag created", "tag updated"]
            .into_iter()
            .chain(["snowflake worker acquired"])
            .filter(|m| info_lines(&log, m).is_empty())
            .collect();
        if claims >= 2 && lines == claims && missing.is_empty() {
            Ok(log)
        } else {
            Err(format!("{claims} claims, {lines} claim lines, missing {missing:?}"))
        }
    })
    .await;

    let has = |message: &str, fields: &[&str]| {
        let lines = info_lines(&log, message);
        for line in &lines {
            for field in fields {
                assert!(!line["fields"][field].is_null(), "'{message}' without {field}: {line}");
            }
        }
        lines
    };
    let leader = has("leader changed", &["leader", "term"]);
    assert!(leader.iter().any(|l| l["fields"]["leader"] == "Some(1)"), "{leader:?}");
    has("membership changed", &["voters", "learners", "log_index"]);
    let created = has("tag created", &["tag", "max_id", "step"]);
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(
        (&created[0]["fields"]["tag"], &created[0]["fields"]["step"]),
        (&Value::from("order"), &Value::from(10))
    );
    has("tag updated", &["tag", "max_id", "step"]);
    let claims = has("segment claim committed", &["tag", "start", "step", "new_max_id"]);
    assert_eq!(claims[0]["fields"]["start"], 1, "{claims:?}");
    assert_eq!(has("snowflake worker acquired", &["worker", "epoch", "floor_ms", "window_end_ms"]).len(), 1);
}
