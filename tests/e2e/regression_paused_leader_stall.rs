//! Regression: a paused leader stalled the claims of followers that already knew the new leader
//! for the whole write timeout (found by the segment chaos test; fixed in `Cluster::submit`).

use std::time::Duration;
use std::time::Instant;

use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::ids::fetch;
use crate::ids::fetch_ok;
use crate::ids::Answer;
use crate::ids::Endpoint;
use crate::ids::IdSet;

/// The leader is SIGSTOPped while a follower serves: once the other two have elected a new
/// leader, the follower's next claim goes there, so it serves again within 1 s of knowing the new
/// leader (not after `--write-timeout-ms`, 5 s, spent waiting for the paused node).
#[tokio::test]
async fn a_follower_claims_from_the_new_leader_while_the_old_one_is_paused() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(Duration::from_secs(20)).await;
    cluster.client(leader).create_tag(&new_tag("p", None, Some(100), None)).await.expect("create");
    let follower = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    let url = cluster.url(follower);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(3)).build().expect("HTTP client");
    let follower_client = cluster.client(follower);
    wait_until(Duration::from_secs(10), "the follower to apply the tag", || async {
        follower_client.get_tag("p").await.map(|_| ()).map_err(|e| e.to_string())
    })
    .await;
    let mut served = IdSet::default();
    served.add(&fetch_ok(&http, &url, "p", Endpoint::Ids(1)).await);
    cluster.signal(leader, libc::SIGSTOP);
    // Use the buffers up, so the follower needs a claim while the leader sleeps. Two segments of
    // 100 hold 200 IDs; a follower that kept serving far past them would be claiming without the
    // leader, which the deadline turns into a failure instead of a hang.
    let drain_deadline = Instant::now() + Duration::from_secs(10);
    while let Answer::Ids(ranges) = fetch(&http, &url, "p", Endpoint::Ids(50)).await {
        served.add(&ranges);
        assert!(Instant::now() < drain_deadline, "the follower still serves 10 s after the leader paused");
    }
    let client = cluster.client(follower);
    wait_until(Duration::from_secs(10), "the follower to know a new leader", || async {
        match client.cluster_status().await.map_err(|e| e.to_string())?.leader_id {
            Some(new) if new != leader => Ok(()),
            other => Err(format!("leader {other:?}")),
        }
    })
    .await;
    let known = Instant::now();
    let after =
        wait_until(Duration::from_secs(1), "the follower to serve again from a claim at the new leader", || async {
            match fetch(&http, &url, "p", Endpoint::Ids(1)).await {
                Answer::Ids(ranges) => Ok(ranges),
                other => Err(format!("{other:?} {:?} after the new leader was known", known.elapsed())),
            }
        })
        .await;
    served.add(&after);
    assert_eq!(served.duplicates(), Vec::new(), "an ID was served twice");
}
