//! Issue 37: a StatefulSet pod whose volume was lost came back under the same manifest and
//! refused to start (`CrashLoopBackOff`) until someone removed its old incarnation by hand and
//! flipped `LEAFRAFT_INITIAL_CLUSTER_STATE` to `existing`. Under the unchanged manifest it must
//! now rejoin by itself, as a new incarnation, with nothing handed out twice.

use crate::statefulset::node_of;
use crate::statefulset::StatefulSet;
use crate::statefulset::TIMEOUT;

#[tokio::test]
async fn regression_statefulset_pod_with_a_lost_volume_rejoins_by_itself() {
    let mut set = StatefulSet::from_manifest();
    set.form().await;
    set.take_from_all().await;
    let old = set.incarnation(2, 1).await;

    set.cluster.kill(node_of(1));
    std::fs::remove_dir_all(set.cluster.data_dir(node_of(1))).expect("wipe pod 1's volume");
    set.start_pod(1);
    set.wait_voters(&[1, 3, 2], &[1, 2, 3], "pod 1 to rejoin as a voter by itself").await;
    set.cluster.wait_ready(2, TIMEOUT).await;
    let new = set.incarnation(2, 3).await;
    assert!(!new.is_empty() && new != old, "a new incarnation: {old} -> {new}");
    set.take_from_all().await;
    assert_eq!(set.taken(), (6 * 50, 6 * 20));
}
