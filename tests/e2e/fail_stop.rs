//! Fail-stop (`docs/semantics.md#failure-behaviour`): a node whose storage fails logs why and exits non-zero, quickly, so its
//! supervisor can restart or replace it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;
use std::time::Instant;

use leafraft::cluster::Forwarded;
use leafraft_state::typ;

use crate::harness::new_tag;
use crate::harness::ProcessCluster;
use crate::stand_in::with_stand_in_leader;

const TIMEOUT: Duration = Duration::from_secs(20);

/// What `docs/semantics.md#failure-behaviour` allows between the failure and the exit.
const EXIT_LIMIT: Duration = Duration::from_secs(2);

/// A single node, ready, with a tag; data dirs under the cluster's temporary directory.
async fn one_node(cluster: &mut ProcessCluster) {
    cluster.start_node(1, &[]);
    cluster.wait_ready(1, TIMEOUT).await;
    cluster.client(1).create_tag(&new_tag("order", None, None, None)).await.expect("create a tag");
}

/// Waits for the exit and checks it is a failure with the fail-stop line in the log, naming one
/// of `reasons` (a node writing at that moment may see Raft's write fail before its probe does).
async fn assert_fail_stop(cluster: &mut ProcessCluster, broken: Instant, reasons: &[&str]) -> ExitStatus {
    let status = cluster.wait_exit(1, EXIT_LIMIT * 2).await;
    let took = broken.elapsed();
    let log = cluster.log(1);
    println!("node 1 exited with {status} {took:?} after its storage failed");
    assert!(!status.success(), "exit status {status}:\n{log}");
    assert!(took < EXIT_LIMIT, "took {took:?} to exit:\n{log}");
    let line = log.lines().find(|line| line.contains("storage failed")).unwrap_or_else(|| panic!("no line:\n{log}"));
    assert!(reasons.iter().any(|reason| line.contains(reason)), "{line}");
    assert!(!log.contains("panicked"), "{log}");
    status
}

#[tokio::test]
async fn a_node_whose_data_dir_disappears_exits_non_zero() {
    let mut cluster = ProcessCluster::new();
    one_node(&mut cluster).await;
    std::fs::remove_dir_all(cluster.data_dir(1)).expect("remove the data directory");
    assert_fail_stop(&mut cluster, Instant::now(), &["is gone", "raft stopped"]).await;
}

/// As root, permissions do not apply: the node then runs as `nobody`.
#[tokio::test]
async fn a_node_whose_data_dir_turns_read_only_exits_non_zero() {
    let mut cluster = ProcessCluster::new();
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        cluster.run_as(1, 65534);
    }
    one_node(&mut cluster).await;
    let dir = cluster.data_dir(1);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).expect("make read-only");
    let broken = Instant::now();
    assert_fail_stop(&mut cluster, broken, &["cannot be written", "raft stopped"]).await;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("restore for cleanup");
}

/// Flipped bits on disk: an applied log entry (never read again at start) claims a tag name of
/// 2^50 bytes. When a learner joins, the leader reads it to replicate it; the decode fails
/// (instead of aborting on the allocation), Raft stops on the storage error and the node exits.
#[tokio::test]
async fn a_node_whose_raft_stops_on_a_storage_error_exits_non_zero() {
    let mut cluster = ProcessCluster::new();
    one_node(&mut cluster).await;
    for tag in ["invoice", "after"] {
        cluster.client(1).create_tag(&new_tag(tag, None, None, None)).await.expect("create another tag");
    }
    // A graceful stop flushes the state machine: the entry stays applied.
    cluster.terminate(1, TIMEOUT).await;
    corrupt_an_applied_entry(&cluster.data_dir(1), "invoice");
    cluster.restart(1);
    cluster.wait_ready(1, TIMEOUT).await;
    let seed = cluster.addr(1);
    let joined = Instant::now();
    cluster.start_node(2, &["--join", &seed]);
    assert_fail_stop(&mut cluster, joined, &["raft stopped"]).await;
}

/// Replaces the tag name's length in the entry that created `tag` with 2^50. Knows the store's
/// layout (`storage::keys`): the log tree holds `[version] ++ bincode(Entry)` under big-endian
/// indexes.
fn corrupt_an_applied_entry(data_dir: &Path, tag: &str) {
    let db = sled::open(data_dir).expect("open the stopped node's sled database");
    let log = db.open_tree("log").expect("log tree");
    let decode = |bytes: &[u8]| -> typ::Entry { leafraft_state::codec::decode(&bytes[1..]).expect("a log entry") };
    let (key, value) = log
        .iter()
        .map(|kv| kv.expect("read the log"))
        .find(|(_, value)| {
            matches!(&decode(value).payload, openraft::EntryPayload::Normal(leafraft_state::Request::CreateTag { tag: t, .. }) if t == tag)
        })
        .expect("the create is in the log");
    // Version byte, log id (24 bytes), payload and request variants (4 + 4): then the tag's length.
    let mut hostile = value.to_vec();
    hostile[33..41].copy_from_slice(&(1u64 << 50).to_le_bytes());
    log.insert(key, hostile).expect("corrupt the entry");
    db.flush().expect("flush");
}

/// Requests in flight when the storage fails are answered with an error, not a closed connection:
/// here a tag create that node 1 forwarded to a leader that never answers (a stand-in, see
/// `stand_in.rs`) when node 1's data directory is removed.
#[tokio::test]
async fn requests_in_flight_at_a_storage_failure_are_answered_with_an_error() {
    let (arrived, mut forwarded) = tokio::sync::mpsc::channel::<()>(1);
    let mut cluster = with_stand_in_leader(move |op| {
        let arrived = arrived.clone();
        async move {
            if matches!(op, Forwarded::Write(leafraft_state::Request::CreateTag { .. })) {
                let _ = arrived.send(()).await;
            }
            std::future::pending().await
        }
    })
    .await;
    let client = cluster.client(1);
    let create = tokio::spawn(async move { client.create_tag(&new_tag("in-flight", None, None, None)).await });
    forwarded.recv().await.expect("the create reached the stand-in leader");
    std::fs::remove_dir_all(cluster.data_dir(1)).expect("remove the data directory");
    let broken = Instant::now();
    let answer = create.await.expect("the request task").expect_err("the create cannot succeed");
    assert_eq!(answer.code(), Some(leafraft_client::ErrorCode::NoLeader), "{answer}");
    assert_fail_stop(&mut cluster, broken, &["is gone", "raft stopped"]).await;
}
