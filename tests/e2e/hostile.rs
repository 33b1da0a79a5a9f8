//! Hostile bytes on the wire: bodies that claim more than they hold get 400 and the
//! node keeps serving.

use std::time::Duration;

use leafraft_state::typ;
use openraft::Vote;

use crate::harness::new_tag;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);

/// `POST path` with a raw `application/octet-stream` body; answers status and body text.
async fn post_raw(cluster: &mut ProcessCluster, path: &str, body: Vec<u8>) -> (u16, String) {
    let url = format!("{}{path}", cluster.url(1));
    let response = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/octet-stream")
        .body(body)
        .timeout(TIMEOUT)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {path}: no answer (did the node die?): {e}"));
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// A chunk from node 2 (a peer that does not exist) of a later term: openraft takes it into its
/// snapshot buffer (`done` stays false, so nothing is installed and no vote changes).
fn snapshot_chunk(term: u64, offset: u64, data: Vec<u8>) -> typ::InstallSnapshotRequest {
    typ::InstallSnapshotRequest {
        vote: Vote::new_committed(term + 1, 2),
        meta: typ::SnapshotMeta {
            last_log_id: None,
            last_membership: typ::StoredMembership::default(),
            snapshot_id: "hostile".into(),
        },
        offset,
        data,
        done: false,
    }
}

/// Found by review: `leafraft serve` as the README starts it (one node, no secret) and
/// 16 bytes to `/raft/forward` (two variant 0s, then a string claiming 2^50 bytes) made bincode
/// allocate the claim and the process abort without answering. The same for a snapshot chunk
/// claiming 2^60 bytes of data, and for one asking openraft to write at offset 2^60 of its
/// snapshot buffer. Each now gets 400, and the node goes on serving IDs.
#[tokio::test]
async fn regression_a_sixteen_byte_body_aborts_the_node() {
    let mut cluster = ProcessCluster::new();
    cluster.start_node(1, &[]);
    cluster.wait_ready(1, TIMEOUT).await;
    let client = cluster.client(1);
    client.create_tag(&new_tag("order", None, None, None)).await.expect("create a tag");
    let term = cluster.status(1).await.expect("status").term;

    let mut sixteen = vec![0u8; 8];
    sixteen.extend_from_slice(&(1u64 << 50).to_le_bytes());
    let (status, text) = post_raw(&mut cluster, "/raft/forward", sixteen).await;
    assert_eq!(status, 400, "/raft/forward: {text}");

    let mut claims_2_60 = leafraft_state::codec::encode(&snapshot_chunk(term, 0, vec![])).expect("encode");
    let data_len_at = claims_2_60.len() - 9;
    claims_2_60[data_len_at..data_len_at + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let (status, text) = post_raw(&mut cluster, "/raft/snapshot", claims_2_60).await;
    assert_eq!(status, 400, "a chunk claiming 2^60 bytes: {text}");

    let first = leafraft_state::codec::encode(&snapshot_chunk(term, 0, vec![1; 16])).expect("encode");
    let (status, text) = post_raw(&mut cluster, "/raft/snapshot", first).await;
    assert_eq!(status, 200, "a first chunk: {text}");
    let far = leafraft_state::codec::encode(&snapshot_chunk(term, 1 << 60, vec![1; 16])).expect("encode");
    let (status, text) = post_raw(&mut cluster, "/raft/snapshot", far).await;
    assert_eq!(status, 400, "a chunk at offset 2^60: {text}");

    assert!(cluster.is_running(1), "the node died");
    // The node's first claim of "order" and its worker come from background tasks: wait for them
    // (a slow machine may answer the documented 503 first), then ask.
    assert_eq!(crate::harness::segment_ids_within(&client, "order", 3, TIMEOUT).await.len(), 3);
    crate::snowflake_ids::wait_snowflake_ready(&mut cluster, 1, TIMEOUT).await;
    assert_eq!(client.snowflake_ids(3).await.expect("snowflake IDs after the hostile bodies").len(), 3);
}

/// Found by review: times were written with humantime, which panics for dates after
/// year 9999. A layout with 53 time bits reaches year 287,000: decoding the largest ID (native and
/// Leaf paths) killed the request's connection instead of answering, and so did the status page
/// with an epoch after 9999. They now answer 200 with the date written out.
#[tokio::test]
async fn regression_a_time_after_year_9999_panics() {
    let mut cluster = ProcessCluster::new();
    let year_12000_ms: u64 = 316_516_204_800_000;
    let epoch = year_12000_ms.to_string();
    let layout = ["--snowflake-time-bits", "53", "--snowflake-worker-bits", "5", "--snowflake-sequence-bits", "5"];
    cluster.start_node(1, &[&layout[..], &["--snowflake-epoch-ms", &epoch]].concat());
    cluster.wait_ready(1, TIMEOUT).await;

    let (status, body) = cluster.get_text(1, "/v1/snowflake/decode/9223372036854775807").await;
    assert_eq!(status.as_u16(), 200, "{body}");
    let (status, body) = cluster.get_text(1, "/v1/snowflake/decode/0").await;
    assert_eq!(status.as_u16(), 200, "{body}");
    assert!(body.contains("\"time\":\"+12000-01-01T00:00:00.000Z\""), "{body}");
    let (status, body) = cluster.get_text(1, "/decodeSnowflakeId?snowflakeId=9223372036854775807").await;
    assert_eq!(status.as_u16(), 200, "{body}");
    // The page shows the layout once the node has recorded it (in the background, once ready).
    let base = cluster.url(1);
    crate::harness::wait_until(TIMEOUT, "the snowflake layout to be recorded", || async {
        let workers: serde_json::Value = reqwest::get(format!("{base}/v1/workers"))
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        if workers["layout"].is_null() {
            Err("no layout yet".to_string())
        } else {
            Ok(())
        }
    })
    .await;
    let (status, body) = cluster.get_text(1, "/").await;
    assert_eq!(status.as_u16(), 200, "the status page: {body}");
    assert!(body.contains("+12000-01-01T00:00:00.000Z"), "the epoch on the status page: {body}");
}
