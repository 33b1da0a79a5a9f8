//! Regression, found by the chaos suite (`leafraft-chaos --seed 202 --nodes 5`, soak): a node whose
//! clock had been stepped 6 s back heard from one peer only (the others were still reconnecting
//! after a partition), and one disagreeing peer against its own clock was a tie, judged "serve".
//! It acquired a worker with its wrong clock; a node on true time then saw that lease as 6 s stale,
//! took the worker over, and both issued from it at once (unique IDs, but a worker's IDs going
//! back in time). A node now serves snowflake only when a majority of the members agrees with its
//! clock; one disagreeing peer without such a majority refuses it.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::harness::assert_error;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::snowflake_ids::start_three_with_fake_clock_on_node_3;
use crate::snowflake_ids::wait_snowflake_refused;

const TIMEOUT: Duration = Duration::from_secs(30);

/// `this_node` of node `id`'s `/v1/workers`: its own snowflake state.
async fn this_node(cluster: &mut ProcessCluster, id: u64) -> Value {
    let (status, body) = cluster.request(id, Method::GET, "/v1/workers", None, None).await;
    assert!(status.is_success(), "GET /v1/workers on node {id}: {status} {body}");
    body["this_node"].clone()
}

#[tokio::test]
async fn regression_a_wrong_clock_hearing_one_disagreeing_peer_stays_refused() {
    let (mut cluster, _clock) = start_three_with_fake_clock_on_node_3("-6s", &[]);
    cluster.wait_leader(TIMEOUT).await;
    cluster.wait_ready(3, TIMEOUT).await;
    // Both peers answer and both disagree: refused, as before the fix.
    wait_snowflake_refused(&mut cluster, 3, "max-clock-skew-ms", TIMEOUT).await;

    // Node 2 stops answering: node 3 hears node 1 only, one disagreeing peer against itself.
    cluster.signal(2, libc::SIGSTOP);
    let before = this_node(&mut cluster, 3).await["clock_checks"].as_u64().expect("clock_checks");
    let (http, base) = (reqwest::Client::new(), cluster.url(3));
    let status = wait_until(TIMEOUT, "a whole clock check of node 3 that heard one peer", || {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let body: Value = http
                .get(format!("{base}/v1/workers"))
                .send()
                .await
                .map_err(|e| e.to_string())?
                .json()
                .await
                .map_err(|e| e.to_string())?;
            let node = body["this_node"].clone();
            // The check in flight at the pause may have heard both peers; the second one after
            // `before` started after it.
            let checks = node["clock_checks"].as_u64().unwrap_or(0);
            if checks >= before + 2 && node["peers_checked"] == 1 {
                Ok(node)
            } else {
                Err(format!("{node}"))
            }
        }
    })
    .await;
    assert!(status["refused"].is_string(), "one peer against a wrong clock must refuse, not serve: {status}");
    assert!(status["worker_id"].is_null(), "node 3 acquired a worker with a clock 6 s off: {status}");
    let answer = cluster.request(3, Method::GET, "/v1/snowflake", None, None).await;
    assert_error(&answer, 503, "CLOCK_BACKWARDS", "snowflake on node 3 while it hears one disagreeing peer");
    cluster.signal(2, libc::SIGCONT);
}
