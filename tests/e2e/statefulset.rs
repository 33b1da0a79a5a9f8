//! Pods driven the way the StatefulSet controller and the kubelet drive them, from the manifest
//! (`deploy/kubernetes/base/statefulset.yaml`): every pod started with the `LEAFRAFT_*` values
//! the manifest sets, as it sets them, and only its name differing; no step flips a variable or
//! runs a membership command for the pods. The pods' DNS names are mapped to loopback ports by
//! `--statefulset-hosts`, which lists only the pods that exist (as Kubernetes's DNS has a record
//! only for those).
//!
//! First formation; an unchanged re-apply that restarts every pod in turn; a pod deleted (its
//! volume kept); a volume lost (the pod rejoins by itself as a new incarnation); scale 3 → 5 → 3
//! (the leader removes the scaled-down members by itself); scale to 0 and back; a scale-up onto a
//! removed member's kept volume; and a rolling update of the image from the 0.1.0 release to this
//! build (with `LEAFRAFT_BASELINE_BIN`, as `scripts/upgrade-test.sh` runs it), one pod at a time,
//! each caught up before the next goes. Every ID taken throughout is unique, and the cluster
//! serves at the end.
//!
//! One value differs from the manifest: `LEAFRAFT_STATEFULSET_SCALE_DOWN_AFTER_MS` is 2 s instead
//! of its 5-minute default, so that a scale-down completes within the test.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use crate::harness::new_tag;
use crate::harness::voters_are;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

pub const TIMEOUT: Duration = Duration::from_secs(60);
/// How long a scaled-down pod's name is absent before the leader removes its member, here.
const SCALE_DOWN_AFTER_MS: &str = "2000";
const NAMESPACE: &str = "ids";
const MANIFEST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kubernetes/base/statefulset.yaml");
/// What the manifest sets that a test on loopback replaces: the listener, the data directory,
/// TLS and the credential files (the harness gives a port, a directory and a shared secret), and
/// the log format (text is easier to read in a failing test).
const REPLACED: [&str; 10] = [
    "LEAFRAFT_LISTEN",
    "LEAFRAFT_PROBE_LISTEN",
    "LEAFRAFT_DATA_DIR",
    "LEAFRAFT_LOG_FORMAT",
    "LEAFRAFT_TLS_CERT",
    "LEAFRAFT_TLS_KEY",
    "LEAFRAFT_PEER_CA",
    "LEAFRAFT_PEER_SECRET_FILE",
    "LEAFRAFT_ADMIN_TOKEN_FILE",
    "LEAFRAFT_CLIENT_TOKEN_FILE",
];

/// The `LEAFRAFT_*` variables the manifest's container sets to a literal `value:` (not a
/// `valueFrom`, nor one that refers to another with `$(...)`).
fn manifest_variables() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(MANIFEST).expect("read the StatefulSet manifest");
    let mut vars = BTreeMap::new();
    let mut name: Option<String> = None;
    for line in text.lines().map(str::trim) {
        if let Some(n) = line.strip_prefix("- name: ") {
            name = Some(n.trim().to_string());
        } else if let Some(value) = line.strip_prefix("value: ") {
            if let Some(n) = name.take() {
                let value = value.trim().trim_matches('"').to_string();
                if n.starts_with("LEAFRAFT_") && !value.contains("$(") {
                    vars.insert(n, value);
                }
            }
        }
    }
    vars
}

/// Node IDs are ordinals + 1.
pub fn node_of(ordinal: u64) -> u64 {
    ordinal + 1
}

pub struct StatefulSet {
    pub cluster: ProcessCluster,
    hosts: PathBuf,
    service: String,
    /// The pods that exist (have a DNS record): started, and not deleted by a scale-down.
    exist: BTreeSet<u64>,
    env: Vec<(String, String)>,
    /// Every ID any client received in this test (segment and snowflake IDs are both 63-bit and
    /// kept apart).
    segment_ids: BTreeSet<u64>,
    snowflake_ids: BTreeSet<u64>,
}

impl StatefulSet {
    /// A StatefulSet whose pods run with the manifest's variables.
    pub fn from_manifest() -> StatefulSet {
        let vars = manifest_variables();
        let service =
            vars.get("LEAFRAFT_STATEFULSET_SERVICE").expect("the manifest names the headless Service").clone();
        let cluster = ProcessCluster::new();
        let hosts = cluster.temp_path("statefulset-hosts");
        let mut env: Vec<(String, String)> =
            vars.into_iter().filter(|(name, _)| !REPLACED.contains(&name.as_str())).collect();
        env.push(("LEAFRAFT_STATEFULSET_NAMESPACE".into(), NAMESPACE.into()));
        env.push(("LEAFRAFT_STATEFULSET_HOSTS".into(), hosts.display().to_string()));
        env.push(("LEAFRAFT_STATEFULSET_SCALE_DOWN_AFTER_MS".into(), SCALE_DOWN_AFTER_MS.into()));
        StatefulSet {
            cluster,
            hosts,
            service,
            exist: BTreeSet::new(),
            env,
            segment_ids: BTreeSet::new(),
            snowflake_ids: BTreeSet::new(),
        }
    }

    /// The manifest's variables as the pods get them.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Writes the hosts file: a line per pod that exists, by its DNS name.
    fn write_hosts(&mut self) {
        let mut hosts = String::from("# the pods that exist: DNS name, then HOST:PORT\n");
        for ordinal in self.exist.clone() {
            let addr = self.cluster.addr(node_of(ordinal));
            hosts.push_str(&format!("leafraft-{ordinal}.{}.{NAMESPACE}.svc.cluster.local {addr}\n", self.service));
        }
        // Whole or not at all: a pod starting now must not read a half-written file.
        let partial = self.hosts.with_extension("partial");
        std::fs::write(&partial, hosts).expect("write the hosts file");
        std::fs::rename(&partial, &self.hosts).expect("replace the hosts file");
    }

    /// The controller creates pod `ordinal` (or the kubelet restarts its container): the same
    /// command and variables for every pod, its name from the downward API.
    pub fn start_pod(&mut self, ordinal: u64) {
        let node = node_of(ordinal);
        self.cluster.reserve(node);
        if self.exist.insert(ordinal) {
            self.write_hosts();
        }
        let mut vars = self.env.clone();
        vars.push(("LEAFRAFT_STATEFULSET_POD".into(), format!("leafraft-{ordinal}")));
        self.cluster.set_env(node, vars);
        let service = self.service.clone();
        self.cluster.start_node(node, &["--statefulset-service", &service]);
    }

    /// The pod is deleted (SIGTERM, a graceful stop); with `gone`, by a scale-down, so its
    /// DNS record goes too. Its volume stays either way (retention policy Retain).
    pub async fn delete_pod(&mut self, ordinal: u64, gone: bool) {
        self.cluster.terminate(node_of(ordinal), TIMEOUT).await;
        if gone {
            self.exist.remove(&ordinal);
            self.write_hosts();
        }
    }

    /// Takes segment and snowflake IDs from `node` (retrying until it serves) and records them.
    pub async fn take(&mut self, node: u64) {
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

    pub async fn take_from_all(&mut self) {
        for ordinal in self.exist.clone() {
            self.take(node_of(ordinal)).await;
        }
    }

    pub fn taken(&self) -> (usize, usize) {
        (self.segment_ids.len(), self.snowflake_ids.len())
    }

    pub async fn wait_voters(&mut self, nodes: &[u64], expected: &'static [u64], what: &str) {
        for &node in nodes {
            self.cluster.wait_status(node, TIMEOUT, what, voters_are(expected)).await;
        }
    }

    /// The incarnation the membership, as `via` sees it, records for `node`.
    pub async fn incarnation(&mut self, node: u64, via: u64) -> String {
        let status = self.cluster.status(via).await.expect("status");
        status.incarnations.get(&node.to_string()).cloned().unwrap_or_default()
    }

    /// The first formation: pods 0..3 created together (`podManagementPolicy: Parallel`), a tag.
    pub async fn form(&mut self) {
        for ordinal in 0..3 {
            self.start_pod(ordinal);
        }
        self.wait_voters(&[1, 2, 3], &[1, 2, 3], "the three pods to form one cluster").await;
        let leader = self.cluster.wait_leader(TIMEOUT).await;
        self.cluster.client(leader).create_tag(&new_tag("orders", None, Some(10), None)).await.expect("create the tag");
        self.cluster.wait_tag_known(&[1, 2, 3], "orders", TIMEOUT).await;
    }

    /// Pods `ordinals` exist from now on (their DNS names resolve), started by another means.
    pub fn adopt(&mut self, ordinals: &[u64]) {
        self.exist.extend(ordinals);
        self.write_hosts();
    }

    /// What the StatefulSet controller waits for before it takes the next pod down: every pod
    /// that exists answers its readiness probe (`/readyz?mode=serving`) with 200 and has applied
    /// what the leader has committed (a restarted pod is not ready before it caught up).
    pub async fn wait_all_caught_up(&mut self, what: &str) {
        let leader = self.cluster.wait_leader(TIMEOUT).await;
        let committed = self.cluster.status(leader).await.expect("the leader's status").commit_index;
        for ordinal in self.exist.clone() {
            let node = node_of(ordinal);
            let url = format!("{}/readyz?mode=serving", self.cluster.url(node));
            wait_until(TIMEOUT, &format!("pod {ordinal} ready: {what}"), || {
                let url = url.clone();
                async move {
                    let code = reqwest::get(&url).await.map_err(|e| e.to_string())?.status().as_u16();
                    if code == 200 {
                        Ok(())
                    } else {
                        Err(format!("its readiness probe answers {code}"))
                    }
                }
            })
            .await;
            self.cluster
                .wait_status(node, TIMEOUT, &format!("pod {ordinal} caught up: {what}"), |status| {
                    if status.applied_index >= committed {
                        Ok(())
                    } else {
                        Err(format!("applied {:?} of {committed:?}", status.applied_index))
                    }
                })
                .await;
        }
    }
}

#[tokio::test]
async fn pods_from_one_manifest_form_restart_lose_a_volume_scale_and_come_back() {
    let mut set = StatefulSet::from_manifest();
    assert!(
        !set.env().iter().any(|(name, _)| name == "LEAFRAFT_INITIAL_CLUSTER_STATE"),
        "the manifest must not set a founding state: {:?}",
        set.env()
    );

    // First formation.
    set.form().await;
    set.take_from_all().await;

    // `kubectl apply` of the unchanged manifest, then a rolling restart with the same variables:
    // one pod at a time, each ready before the next.
    for ordinal in [2, 1, 0] {
        set.delete_pod(ordinal, false).await;
        set.start_pod(ordinal);
        set.cluster.wait_ready(node_of(ordinal), TIMEOUT).await;
        set.wait_voters(&[node_of(ordinal)], &[1, 2, 3], "the restarted pod to rejoin").await;
    }
    set.take_from_all().await;

    // A pod deleted: the StatefulSet makes it again on its kept volume.
    set.delete_pod(1, false).await;
    set.take(1).await;
    set.start_pod(1);
    set.cluster.wait_ready(2, TIMEOUT).await;
    set.take_from_all().await;

    // A lost volume: pod 2 crashes and comes back empty; it removes its old incarnation through
    // Raft and joins as a new one by itself.
    let old = set.incarnation(3, 1).await;
    set.cluster.kill(3);
    std::fs::remove_dir_all(set.cluster.data_dir(3)).expect("wipe pod 2's volume");
    set.start_pod(2);
    set.wait_voters(&[1, 2, 3], &[1, 2, 3], "pod 2 to rejoin as a voter with a new volume").await;
    set.cluster.wait_ready(3, TIMEOUT).await;
    let new = set.incarnation(3, 1).await;
    assert!(!new.is_empty() && new != old, "pod 2 rejoined as a new incarnation: {old} -> {new}");
    set.take_from_all().await;

    // Scale 3 -> 5: pods 3 and 4 join through the others and are promoted.
    set.start_pod(3);
    set.start_pod(4);
    set.wait_voters(&[1, 4, 5], &[1, 2, 3, 4, 5], "pods 3 and 4 to join as voters").await;
    set.cluster.wait_ready(4, TIMEOUT).await;
    set.cluster.wait_ready(5, TIMEOUT).await;
    set.take_from_all().await;

    // Scale 5 -> 3: the controller deletes pods 4 and 3 (their volumes stay) and nobody runs a
    // command; the leader removes their members once their names have been gone long enough.
    set.delete_pod(4, true).await;
    set.delete_pod(3, true).await;
    set.wait_voters(&[1, 2, 3], &[1, 2, 3], "the leader to remove the scaled-down members").await;
    let status = set.cluster.status(1).await.expect("status");
    assert!(status.learners.is_empty(), "no member of pods 3 and 4 is left: {status:?}");
    set.take_from_all().await;

    // Scale to 0 (every pod stopped at once) and back, on the kept volumes.
    set.cluster.signal(1, libc::SIGTERM);
    set.cluster.signal(2, libc::SIGTERM);
    set.cluster.signal(3, libc::SIGTERM);
    for node in [1, 2, 3] {
        let status = set.cluster.wait_exit(node, TIMEOUT).await;
        assert!(status.success(), "node {node} stopped with {status}");
    }
    for ordinal in 0..3 {
        set.start_pod(ordinal);
    }
    set.wait_voters(&[1, 2, 3], &[1, 2, 3], "the cluster to come back from zero").await;
    set.take_from_all().await;

    // Scale 3 -> 4 onto pod 3's kept volume, whose member was removed: it moves that data aside
    // and stops; its restart (the kubelet's) joins as a new member.
    set.start_pod(3);
    let status = set.cluster.wait_exit(4, TIMEOUT).await;
    let log = set.cluster.log(4);
    assert!(!status.success() && log.contains("data of a removed member"), "{status}: {log}");
    set.start_pod(3);
    set.wait_voters(&[1, 4], &[1, 2, 3, 4], "pod 3 to join again as a new member").await;
    set.cluster.wait_ready(4, TIMEOUT).await;

    // The cluster serves at the end, and nothing was handed out twice.
    set.take_from_all().await;
    let rounds = 3 + 3 + 1 + 3 + 3 + 5 + 3 + 3 + 4;
    assert_eq!(set.taken(), (rounds * 50, rounds * 20));
}

/// The probes at quorum loss: `/readyz` (strict) says not ready, `/readyz?mode=serving` (the
/// client Service's probe) keeps a pod that still serves from its buffers and window, and a pod
/// that restarts meanwhile is not ready in either mode until it has caught up.
#[tokio::test]
async fn at_quorum_loss_the_serving_probe_keeps_pods_that_serve_and_not_those_that_cannot() {
    let mut set = StatefulSet::from_manifest();
    set.form().await;
    let leader = set.cluster.wait_leader(TIMEOUT).await;
    set.cluster.client(leader).create_tag(&new_tag("buffered", None, Some(100_000), None)).await.expect("create");
    // The pod that stays is a follower: it loses its leader when the other two go.
    let keep = if leader == 1 { 2 } else { 1 };
    let others: Vec<u64> = [1, 2, 3].into_iter().filter(|&node| node != keep).collect();
    set.cluster.wait_tag_known(&[keep], "buffered", TIMEOUT).await;
    set.cluster.wait_ready(keep, TIMEOUT).await;
    let client = set.cluster.client(keep);
    let before = client.segment_ids("buffered", 10).await.expect("IDs before the quorum loss");
    let (code, body) = set.cluster.get_text(keep, "/readyz?mode=serving").await;
    assert_eq!(code.as_u16(), 200, "{body}");
    assert!(body.contains(r#""status":"ready""#), "{body}");

    // Killed, both: a graceful stop of the leader hands leadership over, possibly to the pod
    // kept, and a leader without a quorum still names itself.
    for &node in &others {
        set.cluster.kill(node);
    }
    let cluster = &mut set.cluster;
    let url = format!("{}/readyz", cluster.url(keep));
    wait_until(TIMEOUT, "the strict probe to fail without a quorum", || {
        let url = url.clone();
        async move {
            let code = reqwest::get(&url).await.map_err(|e| e.to_string())?.status().as_u16();
            if code == 503 {
                Ok(())
            } else {
                Err(format!("/readyz answers {code}"))
            }
        }
    })
    .await;
    let (code, body) = set.cluster.get_text(keep, "/readyz?mode=serving").await;
    assert_eq!(code.as_u16(), 200, "a pod serving from its buffers stays behind the Service: {body}");
    assert!(body.contains(r#""status":"degraded""#) && body.contains("no leader known"), "{body}");
    let during = client.segment_ids("buffered", 10).await.expect("IDs from the buffers without a quorum");
    assert!(during.iter().all(|id| !before.contains(id)), "{before:?} {during:?}");
    let (code, body) = set.cluster.get_text(keep, "/readyz?mode=bogus").await;
    assert_eq!(code.as_u16(), 400, "{body}");

    // A pod restarted without a quorum has not caught up: not ready in either mode.
    set.delete_pod(keep - 1, false).await;
    set.start_pod(keep - 1);
    let cluster = &mut set.cluster;
    let url = format!("{}/readyz?mode=serving", cluster.url(keep));
    let body = wait_until(TIMEOUT, "the restarted pod to answer its probe", || {
        let url = url.clone();
        async move {
            let answer = reqwest::get(&url).await.map_err(|e| e.to_string())?;
            let code = answer.status().as_u16();
            let body = answer.text().await.map_err(|e| e.to_string())?;
            if code == 503 {
                Ok(body)
            } else {
                Err(format!("{code}: {body}"))
            }
        }
    })
    .await;
    assert!(body.contains("NOT_READY"), "{body}");

    // The quorum back: every pod ready again in the strict sense.
    for &node in &others {
        set.start_pod(node - 1);
    }
    for node in [1, 2, 3] {
        set.cluster.wait_ready(node, TIMEOUT).await;
    }
}

/// A rolling update of the image from the 0.1.0 release to this build. That release has no
/// StatefulSet mode: its pods ran with explicit `--node-id`, `--advertise` (the pod's name) and
/// `--initial-cluster`. The controller replaces them highest ordinal first, each with this build
/// and the manifest's variables on the volume 0.1.0 wrote, and takes the next pod down only once
/// every pod is ready again and caught up; `kubectl apply` of the unchanged manifest in between
/// changes no pod. Every ID taken throughout is unique. Runs with `LEAFRAFT_BASELINE_BIN` (what
/// `scripts/upgrade-test.sh` builds and sets); without it, it says it is skipped.
#[tokio::test]
async fn a_rolling_upgrade_from_the_baseline_replaces_one_caught_up_pod_at_a_time() {
    let Some(baseline) = std::env::var_os("LEAFRAFT_BASELINE_BIN").map(PathBuf::from) else {
        eprintln!(
            "skipped: LEAFRAFT_BASELINE_BIN is not set (scripts/upgrade-test.sh builds the baseline and sets it)"
        );
        return;
    };
    assert!(baseline.is_file(), "LEAFRAFT_BASELINE_BIN={} is not a file", baseline.display());
    let mut set = StatefulSet::from_manifest();
    let applied = manifest_variables();
    for ordinal in 0..3 {
        set.cluster.set_binary(node_of(ordinal), Some(baseline.clone()));
    }
    // The 0.1.0 pods, at the addresses their names resolve to.
    let cluster = std::mem::take(&mut set.cluster);
    set.cluster = cluster.start_members(&[1, 2, 3]);
    set.adopt(&[0, 1, 2]);
    let leader = set.cluster.wait_leader(TIMEOUT).await;
    set.cluster.client(leader).create_tag(&new_tag("orders", None, Some(10), None)).await.expect("create the tag");
    set.cluster.wait_tag_known(&[1, 2, 3], "orders", TIMEOUT).await;
    set.take_from_all().await;

    for ordinal in [2, 1, 0] {
        set.wait_all_caught_up(&format!("before pod {ordinal} is replaced")).await;
        set.delete_pod(ordinal, false).await;
        set.cluster.set_binary(node_of(ordinal), None);
        set.start_pod(ordinal);
        set.wait_all_caught_up(&format!("pod {ordinal} runs this build")).await;
        set.take_from_all().await;

        // `kubectl apply` of the unchanged manifest: the pod template is what the pods run with,
        // so the controller restarts nothing.
        assert_eq!(manifest_variables(), applied, "the manifest changed under the test");
        set.take_from_all().await;
    }
    let status = set.cluster.status(1).await.expect("status");
    assert_eq!(status.voters, vec![1, 2, 3], "{status:?}");
    assert!(status.learners.is_empty(), "{status:?}");
    set.take_from_all().await;
    assert_eq!(set.taken(), (3 * (1 + 3 * 2 + 1) * 50, 3 * (1 + 3 * 2 + 1) * 20));
}
