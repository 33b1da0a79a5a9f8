//! Regression, found by review: a follower killed within sled's flush window loses the
//! last applies from its state machine (they were in sled's buffer), although the log entries
//! they came from are on disk. Restarted, it knew a leader at once (from its persisted committed
//! vote), had applied everything it found applied at open, and so reported ready, answering
//! `GET /v1/tags/T` with 404 for a tag it had served before the crash: a read going back in time
//! (`docs/semantics.md`). A node now does one linearizable read through the leader before it first reports
//! ready.

use std::path::Path;
use std::time::Duration;

use leafraft_state::typ;
use reqwest::Method;

use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::harness::Timing;
use crate::snowflake_ids::wait_snowflake_ready;

const TIMEOUT: Duration = Duration::from_secs(20);

/// Stands in for the lost flush on a stopped node: the state machine forgets the create of `tag`
/// and every apply after it (`last_applied` and the committed hint go back to the entry before),
/// while the log keeps every entry. Knows the store's layout (`storage::keys`): a test-only view.
fn forget_applies_since_create(data_dir: &Path, tag: &str) {
    let db = sled::open(data_dir).expect("open the stopped node's sled database");
    let log = db.open_tree("log").expect("log tree");
    let decode = |bytes: &[u8]| -> typ::Entry {
        assert_eq!(bytes[0], storage::FORMAT_VERSION);
        leafraft_state::codec::decode(&bytes[1..]).expect("a log entry")
    };
    let entries: Vec<typ::Entry> = log.iter().map(|kv| decode(&kv.expect("read the log").1)).collect();
    let create_at = entries
        .iter()
        .position(|e| matches!(&e.payload, openraft::EntryPayload::Normal(leafraft_state::Request::CreateTag { tag: t, .. }) if t == tag))
        .expect("the create is in the follower's log");
    let later: Vec<_> =
        entries[create_at + 1..].iter().filter(|e| !matches!(e.payload, openraft::EntryPayload::Blank)).collect();
    assert!(later.is_empty(), "entries after the create would be applied twice: {later:?}");
    let before = entries[create_at - 1].log_id;
    let versioned = |value: &typ::LogId| {
        [vec![storage::FORMAT_VERSION], leafraft_state::codec::encode(value).expect("encode")].concat()
    };
    let state_machine = db.open_tree("state_machine").expect("state machine tree");
    state_machine.remove(format!("tag/{tag}")).expect("forget the tag");
    state_machine.insert("last_applied", versioned(&before)).expect("rewind last_applied");
    db.open_tree("meta").expect("meta tree").insert("committed", versioned(&before)).expect("rewind committed");
    db.flush().expect("flush");
}

#[tokio::test]
async fn regression_a_restarted_follower_is_ready_before_reapplying() {
    // A window of 10 minutes: no snowflake extension lands in the log during the test.
    let flags = ["--snowflake-window-ms", "600000", "--worker-lease-ms", "1200000"];
    let mut cluster = ProcessCluster::new().with_timing(Timing::Default).start_members_with(&[1, 2, 3], &flags);
    let leader = cluster.wait_leader(TIMEOUT).await;
    for id in [1, 2, 3] {
        wait_snowflake_ready(&mut cluster, id, TIMEOUT).await;
    }
    let follower = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    let other = [1, 2, 3].into_iter().find(|&id| id != leader && id != follower).expect("another follower");
    cluster.client(leader).create_tag(&new_tag("order", None, None, None)).await.expect("create a tag");
    let client = cluster.client(follower);
    wait_until(TIMEOUT, "the follower to serve the new tag", || async {
        client.get_tag("order").await.map(|_| ()).map_err(|e| e.to_string())
    })
    .await;

    cluster.kill(follower);
    forget_applies_since_create(&cluster.data_dir(follower), "order");
    cluster.signal(leader, libc::SIGSTOP);
    cluster.signal(other, libc::SIGSTOP);
    // A long election timeout: the follower keeps believing in its (paused) leader instead of
    // campaigning, as a follower restarted in a healthy cluster does until it hears from it.
    let mut args = cluster.args(follower);
    args.extend(["--election-timeout-ms".to_string(), "60000".to_string()]);
    cluster.start_node(follower, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let base = cluster.url(follower);
    let http = reqwest::Client::new();
    let readyz = wait_until(TIMEOUT, "the restarted follower to answer /readyz", || async {
        let response = http.get(format!("{base}/readyz")).send().await.map_err(|e| e.to_string())?;
        let (status, text) = (response.status().as_u16(), response.text().await.unwrap_or_default());
        match status {
            200 => Ok((status, text)),
            _ if text.contains("catching up") => Ok((status, text)),
            _ => Err(format!("{status} {text}")),
        }
    })
    .await;
    let answer = cluster.request(follower, Method::GET, "/v1/tags/order", None, None).await;
    cluster.signal(leader, libc::SIGCONT);
    cluster.signal(other, libc::SIGCONT);
    assert_ne!(answer.0.as_u16(), 404, "a tag it had served went missing: {}", answer.1);
    assert_eq!(readyz.0, 503, "ready before catching up: {}", readyz.1);
    crate::harness::assert_error(&answer, 503, "NOT_READY", "a tag read while catching up");

    cluster.wait_ready(follower, TIMEOUT).await;
    let tag = cluster.client(follower).get_tag("order").await.expect("the tag after catching up");
    assert_eq!(tag.tag, "order");
}
