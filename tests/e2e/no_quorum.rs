//! A node that loses quorum keeps serving from its buffers, fails fast and clearly once they are
//! used up, and serves again without a restart when quorum returns (`docs/bars.md`, safety bars).

use std::cell::Cell;
use std::time::Duration;
use std::time::Instant;

use serde_json::Value;

use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::ids::fetch;
use crate::ids::fetch_ok;
use crate::ids::is_segments_not_ready;
use crate::ids::leaf_error;
use crate::ids::range_of;
use crate::ids::Answer;
use crate::ids::Endpoint;
use crate::ids::IdSet;

const TIMEOUT: Duration = Duration::from_secs(20);
const TAG: &str = "nq";

/// Node 3 warms up tag `nq` (step 100; `--segment-duration-ms` of an hour, so each claim doubles
/// the step) until its buffers hold a current and a next segment, and reads what they hold. Node
/// 1 is killed and node 2 paused: node 3 alone hands out exactly the IDs it held, one per request
/// on alternating paths, then answers 503 `SEGMENTS_NOT_READY` on `/v1/segment` and its
/// `/ranges`, and HTTP 500 `Result{id=-3, status=EXCEPTION}` on Leaf's path, each within the
/// bounded wait (well under 1 s). Node 1 restarted on its data gives a quorum again: node 3
/// serves again, without a restart, within 15 s, and its new IDs lie above all it served before.
/// Every ID of the whole test is unique.
#[tokio::test]
async fn a_node_without_quorum_serves_its_buffers_then_fails_fast_and_recovers() {
    let mut cluster = ProcessCluster::new().start_members_with(&[1, 2, 3], &["--segment-duration-ms", "3600000"]);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("HTTP client");
    let url = cluster.url(3);
    cluster.client(1).create_tag(&new_tag(TAG, None, Some(100), None)).await.expect("create");
    let (status, body) = cluster.request(3, reqwest::Method::GET, "/v1/tags/nq?consistent=true", None, None).await;
    assert_eq!(status.as_u16(), 200, "{body}");

    // Warm up: 20 IDs cross the 10 % mark of the first segment, so the next one is claimed.
    let mut all = IdSet::default();
    all.add(&fetch_ok(&http, &url, TAG, Endpoint::Ids(20)).await);
    let tag_url = format!("{url}/v1/tags/{TAG}");
    let held: Vec<(u64, u64)> = wait_until(TIMEOUT, "node 3 to hold two segments", || async {
        let body: Value =
            http.get(&tag_url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
        let buffers = &body["buffers"];
        let cursor: Option<u64> = buffers["cursor"].as_str().and_then(|c| c.parse().ok());
        match (range_of(&buffers["current"]), cursor, range_of(&buffers["next"])) {
            (Some((_, end)), Some(cursor), Some(next)) if buffers["loading"] == false => Ok(vec![(cursor, end), next]),
            _ => Err(format!("buffers {buffers}")),
        }
    })
    .await;
    let held_count: u64 = held.iter().map(|(start, end)| end - start).sum();
    println!("leader {leader}; node 3 holds {held:?} ({held_count} IDs) before losing quorum");

    cluster.kill(1);
    cluster.signal(2, libc::SIGSTOP);
    let lost_at = Instant::now();

    // Alone, node 3 serves what it holds: one ID per request, so none is lost on the way.
    let endpoints = [Endpoint::Leaf, Endpoint::Ids(1), Endpoint::Ranges(1)];
    let mut alone = IdSet::default();
    let mut requests = 0;
    let (endpoint, answer, took) = loop {
        let endpoint = endpoints[requests % endpoints.len()];
        requests += 1;
        assert!(requests <= held_count as usize + 10, "node 3 served {} IDs without quorum", alone.len());
        let sent = Instant::now();
        match fetch(&http, &url, TAG, endpoint).await {
            Answer::Ids(ranges) => alone.add(&ranges),
            answer => break (endpoint, answer, sent.elapsed()),
        }
    };
    println!(
        "without quorum node 3 served {} IDs in {:?}, then {endpoint:?} answered {answer:?} in {took:?}",
        alone.len(),
        lost_at.elapsed()
    );
    assert!(is_segments_not_ready(endpoint, &answer), "the first failure must be 'not ready': {answer:?}");
    assert!(took < Duration::from_secs(1), "the bounded wait took {took:?}");
    assert!(!alone.is_empty(), "node 3 served nothing from its buffers");
    assert!(alone.within(&held), "node 3 served IDs it did not hold: {:?} (held {held:?})", alone.ids());
    let expected: Vec<u64> = held.iter().flat_map(|&(start, end)| start..end).collect();
    assert_eq!(alone.ids(), expected, "node 3 serves exactly what its buffers held");
    all.add(&alone.ids().iter().map(|&id| (id, id + 1)).collect::<Vec<_>>());

    // Used up: every path fails clearly and fast, repeatedly.
    let expected_failures = [
        (Endpoint::Ids(1), Answer::Error { status: 503, code: "SEGMENTS_NOT_READY".into() }),
        (Endpoint::Ids(50), Answer::Error { status: 503, code: "SEGMENTS_NOT_READY".into() }),
        (Endpoint::Ranges(7), Answer::Error { status: 503, code: "SEGMENTS_NOT_READY".into() }),
        (Endpoint::Leaf, Answer::Error { status: 500, code: leaf_error(-3) }),
    ];
    for _ in 0..2 {
        for (endpoint, expected) in &expected_failures {
            let sent = Instant::now();
            let answer = fetch(&http, &url, TAG, *endpoint).await;
            let took = sent.elapsed();
            assert_eq!(&answer, expected, "{endpoint:?} without quorum and with empty buffers");
            assert!(took < Duration::from_secs(1), "{endpoint:?} took {took:?} to fail");
        }
    }

    // One node back: a quorum again. Node 3 serves again, same process.
    let back_at = Instant::now();
    cluster.restart(1);
    let failures = Cell::new(0);
    let recovered = wait_until(Duration::from_secs(15), "node 3 to serve again after quorum returned", || async {
        match fetch(&http, &url, TAG, Endpoint::Ids(1)).await {
            Answer::Ids(ranges) => Ok(ranges),
            answer if is_segments_not_ready(Endpoint::Ids(1), &answer) => {
                failures.set(failures.get() + 1);
                Err(format!("{answer:?}"))
            }
            answer => panic!("node 3 while quorum returns: {answer:?}"),
        }
    })
    .await;
    let recovery = back_at.elapsed();
    println!(
        "node 3 served again {recovery:?} after node 1 was restarted ({} 'not ready' answers meanwhile)",
        failures.get()
    );
    let before = all.max().expect("IDs");
    assert!(recovered[0].0 > before, "after recovery node 3 served {recovered:?}, not above {before}");
    all.add(&recovered);
    for endpoint in [Endpoint::Leaf, Endpoint::Ids(30), Endpoint::Ranges(300)] {
        all.add(&fetch_ok(&http, &url, TAG, endpoint).await);
    }
    cluster.wait_ready(1, TIMEOUT).await;
    let url_1 = cluster.url(1);
    all.add(&fetch_ok(&http, &url_1, TAG, Endpoint::Ids(10)).await);
    assert_eq!(all.duplicates(), vec![], "duplicate IDs");
    assert_eq!(cluster.live(), vec![1, 2, 3], "every process still runs (node 2 paused)");
    println!("{} unique IDs in all", all.len());
}
