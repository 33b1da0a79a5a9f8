//! Nodes started the way `deploy/kubernetes/` starts them: every pod with the same flags
//! (`--statefulset-service`, `--statefulset-initial 3`) and only its name differing, the pods'
//! DNS names mapped to loopback ports by `--statefulset-hosts` (a hosts file cannot give ports).
//!
//! Three pods form one cluster and serve; a fourth (ordinal 3) joins and becomes a voter; scaling
//! back removes it first, then stops it; a pod whose volume is lost refuses to start until the
//! documented rebuild (remove it, then start it with `--initial-cluster-state existing`) brings
//! it back. No ID is handed out twice across the run.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use crate::harness::new_tag;
use crate::harness::run_binary;
use crate::harness::voters_are;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "ids";
const SERVICE: &str = "leafraft-peers";

/// The DNS name of pod `ordinal`, as the derivation builds it.
fn dns_name(ordinal: u64) -> String {
    format!("leafraft-{ordinal}.{SERVICE}.{NAMESPACE}.svc.cluster.local")
}

/// Node IDs are ordinals + 1.
fn node_of(ordinal: u64) -> u64 {
    ordinal + 1
}

struct StatefulSet {
    cluster: ProcessCluster,
    hosts: PathBuf,
    /// Every ID any client received in this test (segment and snowflake IDs are both 63-bit and
    /// kept apart).
    segment_ids: BTreeSet<u64>,
    snowflake_ids: BTreeSet<u64>,
}

impl StatefulSet {
    /// Reserves a port for each of `pods` pods and writes the hosts file that maps their DNS
    /// names (ordinal 2 by its pod name, as the file allows) to them.
    fn new(pods: u64) -> StatefulSet {
        let mut cluster = ProcessCluster::new();
        let mut hosts = String::from("# pod name or DNS name, then HOST:PORT\n");
        for ordinal in 0..pods {
            let name = if ordinal == 2 { format!("leafraft-{ordinal}") } else { dns_name(ordinal) };
            hosts.push_str(&format!("{name} {}\n", cluster.addr(node_of(ordinal))));
        }
        let path = cluster.temp_path("statefulset-hosts");
        std::fs::write(&path, hosts).expect("write the hosts file");
        StatefulSet { cluster, hosts: path, segment_ids: BTreeSet::new(), snowflake_ids: BTreeSet::new() }
    }

    /// Starts pod `ordinal` with the StatefulSet's flags only; ordinal 0 takes its name from
    /// `$HOSTNAME`, as in Kubernetes, the others from `--statefulset-pod`.
    fn start_pod(&mut self, ordinal: u64, env: &[(&str, &str)]) {
        let node = node_of(ordinal);
        let pod = format!("leafraft-{ordinal}");
        let hosts = self.hosts.display().to_string();
        let mut args = vec![
            "--statefulset-service",
            SERVICE,
            "--statefulset-namespace",
            NAMESPACE,
            "--statefulset-initial",
            "3",
            "--statefulset-hosts",
            &hosts,
        ];
        let mut vars: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        if ordinal == 0 {
            vars.push(("HOSTNAME".into(), pod.clone()));
        } else {
            args.extend(["--statefulset-pod", &pod]);
        }
        self.cluster.set_env(node, vars);
        self.cluster.start_node(node, &args);
    }

    /// Takes segment and snowflake IDs from `node` (retrying until it serves) and records them.
    async fn take(&mut self, node: u64) {
        let client = self.cluster.client(node);
        let segments = wait_until(TIMEOUT, &format!("segment IDs from node {node}"), || async {
            client.segment_ids("orders", 50).await.map_err(|e| e.to_string())
        })
        .await;
        let stamps = wait_until(TIMEOUT, &format!("snowflake IDs from node {node}"), || async {
            client.snowflake_ids(20).await.map_err(|e| e.to_string())
        })
        .await;
        assert_eq!((segments.len(), stamps.len()), (50, 20));
        for id in segments {
            assert!(self.segment_ids.insert(id), "segment ID {id} handed out twice (again by node {node})");
        }
        for id in stamps {
            assert!(self.snowflake_ids.insert(id), "snowflake ID {id} handed out twice (again by node {node})");
        }
    }

    async fn wait_voters(&mut self, nodes: &[u64], expected: &'static [u64], what: &str) {
        for &node in nodes {
            self.cluster.wait_status(node, TIMEOUT, what, voters_are(expected)).await;
        }
    }

    /// `leafraft cluster remove --node-id NODE` through `via`.
    async fn remove(&mut self, node: u64, via: u64) {
        let server = self.cluster.url(via);
        let id = node.to_string();
        let output = run_binary(&["cluster", "remove", "--node-id", &id, "--server", &server], TIMEOUT).await;
        assert_success(&output, "cluster remove");
    }
}

#[track_caller]
fn assert_success(output: &Output, what: &str) {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    assert!(output.status.success(), "{what}: {}\n{}{}", output.status, text(&output.stdout), text(&output.stderr));
}

#[tokio::test]
async fn pods_form_scale_to_four_and_back_and_a_lost_volume_needs_the_rebuild() {
    let mut set = StatefulSet::new(4);
    for ordinal in 0..3 {
        set.start_pod(ordinal, &[]);
    }
    set.wait_voters(&[1, 2, 3], &[1, 2, 3], "the three pods to form one cluster").await;
    let status = set.cluster.status(1).await.expect("status");
    assert_eq!(status.nodes.get("3"), Some(&set.cluster.addr(3)), "the hosts file names pod 2: {status:?}");
    let leader = set.cluster.wait_leader(TIMEOUT).await;
    set.cluster.client(leader).create_tag(&new_tag("orders", None, Some(10), None)).await.expect("create the tag");
    set.cluster.wait_tag_known(&[1, 2, 3], "orders", TIMEOUT).await;
    for node in [1, 2, 3] {
        set.take(node).await;
    }

    // Scale up: ordinal 3 is beyond the formation size, so it joins through the initial pods.
    set.start_pod(3, &[]);
    set.wait_voters(&[1, 4], &[1, 2, 3, 4], "pod 3 to join and become a voter").await;
    set.cluster.wait_ready(4, TIMEOUT).await;
    for node in [4, 1, 2, 3] {
        set.take(node).await;
    }

    // Scale down: remove the member first, then stop its pod.
    set.remove(4, 1).await;
    set.wait_voters(&[1, 2, 3], &[1, 2, 3], "pod 3 to be removed").await;
    set.cluster.terminate(4, TIMEOUT).await;
    for node in [1, 2, 3] {
        set.take(node).await;
    }

    // A lost volume: pod 1 restarts with the same flags on an empty data dir and must refuse.
    set.cluster.terminate(2, TIMEOUT).await;
    std::fs::remove_dir_all(set.cluster.data_dir(2)).expect("wipe pod 1's volume");
    set.start_pod(1, &[]);
    let status = set.cluster.wait_exit(2, TIMEOUT).await;
    let log = set.cluster.log(2);
    assert!(!status.success(), "a pod with a lost volume must not start: {log}");
    assert!(log.contains("cluster remove --node-id 2"), "the refusal names the rebuild: {log}");
    set.wait_voters(&[1, 3], &[1, 2, 3], "the refused pod to change nothing").await;

    // The rebuild: remove it, then it joins with `existing` as a new disk under its old ID.
    set.remove(2, 1).await;
    set.wait_voters(&[1, 3], &[1, 3], "pod 1 to be removed").await;
    set.start_pod(1, &[("LEAFRAFT_INITIAL_CLUSTER_STATE", "existing")]);
    set.wait_voters(&[1, 2, 3], &[1, 2, 3], "the rebuilt pod 1 to be a voter again").await;
    set.cluster.wait_ready(2, TIMEOUT).await;
    for node in [2, 1, 3] {
        set.take(node).await;
    }
    assert_eq!(set.segment_ids.len(), 13 * 50);
    assert_eq!(set.snowflake_ids.len(), 13 * 20);
}
