//! Regression: a store that went back in time kept its identity. The identity
//! file was accepted as it was, and the store did not record which incarnation it belonged to:
//! deleting the store but keeping `leafraft-identity` brought a member back as itself with an empty
//! log, accepted by its peers, able to vote for a stale leader.
//!
//! The store now records its incarnation; a store created next to an existing identity file takes
//! a new incarnation, so the node is what it is, a wiped member: refused at start with the line
//! naming the fix, while the cluster still records (and serves with) the old disk.

use std::time::Duration;

use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn regression_a_store_deleted_next_to_its_identity_is_refused_as_a_wiped_member() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let victim = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    cluster.client(leader).create_tag(&new_tag("t", None, Some(10), None)).await.expect("create tag t");
    let client = cluster.client(victim);
    wait_until(TIMEOUT, "the victim to serve", || async {
        client.segment_ids("t", 3).await.map_err(|e| e.to_string())
    })
    .await;
    let recorded = cluster.status(leader).await.expect("status").incarnations[&victim.to_string()].clone();

    cluster.kill(victim);
    let dir = cluster.data_dir(victim);
    for entry in std::fs::read_dir(&dir).expect("read the data dir") {
        let path = entry.expect("entry").path();
        if path.file_name().is_some_and(|name| name == "leafraft-identity") {
            continue;
        }
        if path.is_dir() {
            std::fs::remove_dir_all(&path).expect("delete the store");
        } else {
            std::fs::remove_file(&path).expect("delete the store");
        }
    }
    cluster.restart(victim);
    let exit = cluster.wait_exit(victim, TIMEOUT).await;
    let log = cluster.log(victim);
    assert!(!exit.success(), "node {victim} must not come back as itself with an empty log: {exit}\n{log}");
    let error = log.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("no error line:\n{log}"));
    assert!(error.contains(&format!("cluster remove --node-id {victim}")), "{error}");
    assert!(log.contains("new incarnation"), "the log says why the incarnation changed:\n{log}");
    let status = cluster.status(leader).await.expect("status");
    assert_eq!(status.incarnations[&victim.to_string()], recorded, "the cluster still records the old disk");
}
