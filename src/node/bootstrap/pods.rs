//! StatefulSet pods (`--statefulset-service`): one command line for every pod and every
//! `kubectl apply`, so what a pod does on an empty volume is decided by asking the others, never
//! by a variable an operator flips (`config::statefulset` says what each case does and why).
//!
//! Which pods exist: the initial ordinals always (the cluster cannot have formed without them),
//! and the higher ordinals whose names resolve, asked in order until [`ABSENT_IN_A_ROW`] in a row
//! do not (a StatefulSet's pods are numbered from 0 up; Kubernetes's DNS has a record for each
//! pod that exists, ready or not, with `publishNotReadyAddresses`).

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use leafraft_state::Node;
use leafraft_state::NodeId;
use raft::network::identity::hex_id;

use super::incarnation;
use super::initialise;
use super::join;
use super::listed;
use super::seed_client;
use super::BootstrapRefusal;
use super::Listed;
use super::Rebuild;
use super::HELLO_TIMEOUT;
use super::MAX_BACKOFF;
use crate::cluster::Cluster;
use crate::cluster::HelloError;
use crate::config::statefulset::Pods;
use crate::config::Config;

/// Higher ordinals are asked about until this many in a row have no name: a pod being replaced
/// has none for a moment, and must not hide the ones above it.
const ABSENT_IN_A_ROW: u32 = 2;
/// How long one name may take to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a pod that started with data looks whether it was removed.
const REMOVED_POLL: Duration = Duration::from_millis(500);
/// How often the leader looks for members whose pods a scale-down deleted.
const SCALE_DOWN_POLL: Duration = Duration::from_secs(1);

/// What one round of asking the other pods found.
#[derive(Debug, Default)]
struct Survey {
    /// The initial pods that answered without a cluster, with their disks' incarnations.
    empty_initial: BTreeMap<NodeId, Node>,
    /// Pods that exist (initial, or with a name) and did not answer.
    silent: BTreeSet<NodeId>,
    /// Pods that hold a cluster, or refused this one (a member that records it with another disk).
    running: Vec<String>,
    /// Whether a pod that holds a cluster lists this node with its own disk.
    listed_as_itself: bool,
}

/// Whether `addr`'s host has an address now: in Kubernetes, whether the pod exists.
async fn resolves(addr: &str) -> bool {
    let lookup = tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host(addr.to_string())).await;
    match lookup {
        Ok(Ok(mut addrs)) => addrs.next().is_some(),
        _ => false,
    }
}

async fn survey(cluster: &Cluster, pods: &Pods) -> Survey {
    let me = pods.node_id();
    let mine = incarnation(cluster);
    let mut survey = Survey::default();
    let mut absent_in_a_row = 0;
    for ordinal in 0..=pods.last_ordinal() {
        let initial = ordinal < pods.set.initial;
        if !initial && absent_in_a_row >= ABSENT_IN_A_ROW {
            break;
        }
        let (id, addr) = pods.pod(ordinal);
        if id == me {
            absent_in_a_row = 0;
            continue;
        }
        if !initial && !resolves(&addr).await {
            absent_in_a_row += 1;
            continue;
        }
        absent_in_a_row = 0;
        match cluster.hello(&addr, Some(id), HELLO_TIMEOUT).await {
            Ok(hello) if hello.initialized => {
                survey.listed_as_itself |= listed(&hello, me, mine) == Listed::AsItself;
                survey.running.push(addr);
            }
            Ok(hello) => {
                if initial {
                    survey.empty_initial.insert(id, Node::new(&addr, hello.incarnation));
                }
            }
            Err(HelloError::Refused(reason)) => {
                tracing::debug!(node_id = id, addr = %addr, reason, "a pod refused this one's hello");
                survey.running.push(addr);
            }
            Err(HelloError::Unanswered(_)) => {
                survey.silent.insert(id);
            }
        }
    }
    survey
}

/// A pod on an empty volume: found with the other initial pods when every pod that exists
/// answers without a cluster (initial pods only), join the cluster a pod holds (replacing this
/// node's old incarnation first), or wait, saying for whom.
pub(super) async fn form_or_join(cluster: &Cluster, config: &Config, pods: &Pods) -> Result<(), BootstrapRefusal> {
    let me = config.node_id;
    let mut backoff = Duration::from_millis(100);
    let mut last_waiting = None;
    loop {
        // Another initial pod may have founded with this one and replicated the membership here.
        if pods.founds() && !cluster.members().is_empty() {
            return Ok(());
        }
        let survey = survey(cluster, pods).await;
        if !survey.running.is_empty() {
            if survey.listed_as_itself && pods.founds() {
                tracing::info!("a running pod lists this node; waiting to be replicated to");
                return Ok(());
            }
            tracing::info!(seeds = ?survey.running, "a pod holds a cluster: joining it");
            return join(cluster, config, &survey.running, Rebuild::Replace).await;
        }
        if pods.founds() && survey.silent.is_empty() {
            let mut nodes = survey.empty_initial;
            nodes.insert(me, Node::new(&config.advertise, incarnation(cluster)));
            if nodes.len() == pods.initial().len() {
                initialise(cluster, nodes).await;
                return Ok(());
            }
        }
        let waiting = survey.silent;
        if last_waiting.as_ref() != Some(&waiting) {
            if pods.founds() {
                tracing::info!(
                    waiting_for = ?waiting,
                    "forming the cluster once every pod answers, and only if none holds a cluster"
                );
            } else {
                tracing::info!(waiting_for = ?waiting, "no pod holds a cluster yet: waiting for the initial pods to form it");
            }
            last_waiting = Some(waiting);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// `seed` refused this pod or lists its node ID with another disk (`why`): this pod's volume was
/// lost. Reads the membership from `seed` and, if it records this node ID with another non-zero
/// incarnation, asks for that incarnation to be removed (a Raft membership change: it needs a
/// leader and a quorum). Every outcome is logged; the caller asks again after a pause.
pub(super) async fn replace_old_incarnation(cluster: &Cluster, config: &Config, seed: &str, why: &str) {
    let me = config.node_id;
    let mine = hex_id(incarnation(cluster));
    let client = match seed_client(seed, config) {
        Ok(client) => client,
        Err(e) => {
            tracing::warn!(seed = %seed, error = %e, "waiting: cannot ask the pod to remove this node's old incarnation");
            return;
        }
    };
    let status = match client.cluster_status().await {
        Ok(status) => status,
        Err(e) => {
            tracing::warn!(seed = %seed, error = %e, "waiting: cannot read the cluster's membership");
            return;
        }
    };
    let recorded = status.incarnations.get(&me.to_string()).cloned().unwrap_or_default();
    if recorded.is_empty() || recorded == mine || recorded.bytes().all(|b| b == b'0') {
        tracing::warn!(seed = %seed, reason = why, recorded = %recorded, "waiting: the pod refused this one, but does not record node {me} with another disk");
        return;
    }
    tracing::info!(
        node_id = me,
        old_incarnation = %recorded,
        new_incarnation = %mine,
        seed = %seed,
        "this pod's volume was lost: removing its old incarnation through Raft before joining as a new one"
    );
    match client.remove_member(me).await {
        Ok(_) => tracing::info!(node_id = me, old_incarnation = %recorded, "old incarnation removed"),
        Err(e) if e.code() == Some(leafraft_client::ErrorCode::NodeNotFound) => {
            tracing::info!(node_id = me, "old incarnation already removed")
        }
        Err(e) => tracing::warn!(
            node_id = me,
            error = %e,
            "waiting: cannot remove the old incarnation yet (a membership change needs a leader and a quorum)"
        ),
    }
}

/// A pod that started with data: if the cluster removed this member (a volume kept after a
/// scale-down, back with a scale-up) before it was ever ready since start, moves the data
/// directory aside and stops, so that its restart joins as a new member. A member removed while
/// it ran (an operator's `cluster remove` before scaling down) has been ready, and stays removed.
pub(super) async fn set_aside_if_removed(cluster: &Cluster, config: &Config) -> Result<(), BootstrapRefusal> {
    loop {
        if cluster.readiness().is_ok() {
            return Ok(());
        }
        if let Some(reason) = cluster.removed() {
            let aside = aside_path(config, incarnation(cluster))?;
            std::fs::rename(&config.data_dir, &aside).map_err(|e| {
                BootstrapRefusal(format!(
                    "node {} holds the data of a removed member ({reason}) and cannot move {} aside to {}: {e}; \
                     move or delete it, then start the pod again",
                    config.node_id,
                    config.data_dir.display(),
                    aside.display()
                ))
            })?;
            let line = format!(
                "node {} started with the data of a removed member ({reason}); moved it to {}: the pod's restart \
                 joins the cluster as a new member",
                config.node_id,
                aside.display()
            );
            // Logged here too: stopping cannot flush a store whose directory moved, and the
            // process then exits with that error instead of this line.
            tracing::error!("{line}");
            return Err(BootstrapRefusal(line));
        }
        tokio::time::sleep(REMOVED_POLL).await;
    }
}

/// `DIR.removed-INCARNATION` next to the data directory.
fn aside_path(config: &Config, incarnation: u64) -> Result<PathBuf, BootstrapRefusal> {
    let dir = &config.data_dir;
    let name = dir.file_name().ok_or_else(|| {
        BootstrapRefusal(format!(
            "node {} holds the data of a removed member in {}; move it aside",
            config.node_id,
            dir.display()
        ))
    })?;
    let mut aside = name.to_os_string();
    aside.push(format!(".removed-{}", hex_id(incarnation)));
    Ok(dir.with_file_name(aside))
}

/// The leader's side of a scale-down, on every pod (only the leader acts): the member with the
/// highest ordinal, if that ordinal is at or above the formation size and its pod's name has not
/// resolved for `scale_down_after`, is removed through Raft; then the next one. The StatefulSet
/// controller deletes pods from the highest ordinal down, and a pod that no longer exists has no
/// DNS record, so this is a scale-down with nobody running `cluster remove`.
///
/// Why this and not a preStop hook: a pod being stopped cannot tell a scale-down from a restart,
/// a drain or a rolling update (Kubernetes gives it the same SIGTERM), and removing itself on a
/// restart would cost a full rejoin each time. Absence of the name over minutes tells them apart;
/// the initial ordinals are never removed (the cluster never shrinks below its formation size),
/// and a round in which this pod's own name does not resolve is skipped (DNS is failing, which
/// says nothing about the other pods).
///
/// Nothing here can hand out an ID twice: removing a member changes who votes, not what was
/// claimed. Its claimed ranges stay claimed in the replicated state whether it gave back their
/// unused tails on SIGTERM or not, and its snowflake worker stays leased until the lease and
/// window have run out. A member removed while its pod was only away for longer (Pending) comes
/// back on the removed member's data, moves it aside and rejoins as a new incarnation
/// ([`set_aside_if_removed`]).
pub async fn remove_scaled_down(cluster: Arc<Cluster>, pods: Pods) {
    let me = pods.node_id();
    let initial = NodeId::from(pods.set.initial);
    let after = pods.set.scale_down_after;
    let mut absent_since: BTreeMap<NodeId, Instant> = BTreeMap::new();
    loop {
        tokio::time::sleep(SCALE_DOWN_POLL).await;
        let status = cluster.status();
        if status.leader_id != Some(me) {
            absent_since.clear();
            continue;
        }
        let Some(top) = cluster.members().keys().copied().filter(|&id| id > initial && id != me).max() else {
            absent_since.clear();
            continue;
        };
        let set = current_hosts(&pods);
        let address = |id: NodeId| set.address(u32::try_from(id - 1).unwrap_or(u32::MAX), pods.port);
        if !resolves(&address(me)).await {
            continue;
        }
        absent_since.retain(|&id, _| id == top);
        if resolves(&address(top)).await {
            absent_since.clear();
            continue;
        }
        let since = *absent_since.entry(top).or_insert_with(Instant::now);
        if since.elapsed() < after {
            continue;
        }
        tracing::info!(
            node_id = top,
            absent_for_s = since.elapsed().as_secs(),
            "the pod of the highest member is gone (scaled down): removing the member through Raft"
        );
        match cluster.remove_member(top).await {
            Ok(()) => {
                tracing::info!(node_id = top, "scaled-down member removed");
                absent_since.clear();
            }
            Err(e) => {
                tracing::warn!(node_id = top, error = %e, "cannot remove the scaled-down member yet; trying again")
            }
        }
    }
}

/// The StatefulSet's names with `--statefulset-hosts` read again (a test deletes pods by
/// rewriting it); the names read at start when it cannot be read.
fn current_hosts(pods: &Pods) -> crate::config::statefulset::StatefulSet {
    let mut set = pods.set.clone();
    if let Some(path) = &set.hosts_file {
        match crate::config::statefulset::read_hosts(path) {
            Ok(hosts) => set.hosts = hosts,
            Err(error) => tracing::debug!(%error, "keeping the hosts read before"),
        }
    }
    set
}
