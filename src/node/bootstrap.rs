//! How a node with an empty data directory becomes a member, and refuses to when that would make
//! it an amnesiac: a member the cluster remembers, back without what it acknowledged.
//!
//! - The embedded default (no `--initial-cluster`, no `--join`) initialises alone at once when it
//!   advertises a loopback address or `--initial-cluster-state new` says so; elsewhere it refuses
//!   (`config::founding`), and `--initial-cluster-state existing` waits to be added.
//! - `--initial-cluster` initialises only once every initial member has answered `hello` without a
//!   Raft state (Consul's `bootstrap_expect`): then all of them compute the same membership with
//!   every member's disk incarnation, as openraft requires of members that initialise, and every
//!   member is bound to its disk from the first entry. If a member already runs a cluster that
//!   lists this node with its own incarnation, the node waits to be replicated to; with another
//!   incarnation, or not at all, it refuses to start.
//! - `--join` refuses alike when a seed lists this node with another incarnation, and otherwise
//!   asks to be added as a learner (sending its incarnation), then to be promoted once caught up.
//! - A StatefulSet pod (`--statefulset-service`, [`pods`]) founds like `--initial-cluster` but
//!   asks every pod that exists first, and where the others would refuse it replaces its own old
//!   incarnation through Raft and joins: there the operator's intent is clear (the pod's name is
//!   the member), so a lost volume needs no hand.
//!
//! A refusal ends the process with one line naming the fix (see [`BootstrapRefusal`]).

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use leafraft_state::Node;
use leafraft_state::NodeId;
use openraft::ServerState;
use raft::network::identity::hex_id;
use raft::network::identity::MembershipMark;

use crate::cluster::Cluster;
use crate::cluster::Hello;
use crate::cluster::HelloError;
use crate::config::founding;
use crate::config::Bootstrap;
use crate::config::Config;
use leafraft_client::Client;

/// How long one round of `hello`s waits for each member.
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Why this node must not start: one line that names the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapRefusal(pub String);

/// Makes a node whose data directory was empty at start (`was_empty`, judged before Raft could
/// receive anything) part of a cluster. A node with data does nothing: its membership is in its
/// log. What peers replicate here meanwhile does not make the directory "not empty": a learner
/// added before it started still asks to be promoted.
pub async fn bootstrap(cluster: Arc<Cluster>, config: Config, was_empty: bool) -> Result<(), BootstrapRefusal> {
    if !was_empty {
        tracing::info!("data directory holds a Raft state; rejoining with it");
        if let Bootstrap::StatefulSet(_) = &config.bootstrap {
            return pods::set_aside_if_removed(&cluster, &config).await;
        }
        return Ok(());
    }
    match &config.bootstrap {
        Bootstrap::Single => {
            let me = BTreeMap::from([(config.node_id, Node::new(&config.advertise, incarnation(&cluster)))]);
            initialise(&cluster, me).await;
            Ok(())
        }
        Bootstrap::Undecided => Err(BootstrapRefusal(founding::undecided_refusal(config.node_id, &config.advertise))),
        Bootstrap::Existing => {
            tracing::info!("empty data directory, --initial-cluster-state existing: waiting to be added");
            Ok(())
        }
        Bootstrap::InitialCluster(members) => form(&cluster, &config, members).await,
        Bootstrap::Join(seeds) => join(&cluster, &config, seeds, Rebuild::Refuse).await,
        Bootstrap::StatefulSet(set) => pods::form_or_join(&cluster, &config, set).await,
    }
}

mod pods;

pub use pods::remove_scaled_down;

fn incarnation(cluster: &Cluster) -> u64 {
    cluster.identity().local().incarnation
}

async fn initialise(cluster: &Cluster, nodes: BTreeMap<NodeId, Node>) {
    let shown: Vec<String> = nodes.iter().map(|(id, node)| format!("{id}:{}", hex_id(node.incarnation))).collect();
    match cluster.raft().initialize(nodes).await {
        Ok(()) => tracing::info!(members = ?shown, "cluster initialised"),
        Err(openraft::error::RaftError::APIError(openraft::error::InitializeError::NotAllowed(_))) => {
            tracing::info!("cluster already initialised")
        }
        Err(e) => tracing::error!(error = %e, "cannot initialise the cluster"),
    }
}

/// What a member that already runs a cluster says about this node.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Listed {
    /// With this node's own incarnation: it is a member already.
    AsItself,
    /// With another disk's incarnation.
    Otherwise(Node),
    Absent,
}

fn listed(hello: &Hello, node_id: NodeId, incarnation: u64) -> Listed {
    match hello.members.get(&node_id) {
        Some(node) if node.incarnation == incarnation || node.incarnation == 0 => Listed::AsItself,
        Some(node) => Listed::Otherwise(node.clone()),
        None => Listed::Absent,
    }
}

/// The refusal for a node that a running cluster lists with another disk (`recorded`), or not.
fn refusal(node_id: NodeId, addr: &str, hello: &Hello, recorded: Option<&Node>) -> BootstrapRefusal {
    let cluster = hex_id(hello.cluster_id);
    let runs = format!("node {} at {addr} runs cluster {cluster}", hello.node_id);
    BootstrapRefusal(match recorded {
        Some(node) => format!(
            "refusing to start node {node_id} on an empty data dir: {runs}, which lists node {node_id} with another \
             data dir (incarnation {}); a wiped member must not rejoin as itself: run `leafraft cluster remove \
             --node-id {node_id}`, then start it with --join",
            hex_id(node.incarnation)
        ),
        None => format!(
            "refusing to initialise node {node_id} with --initial-cluster: {runs}, which does not list node \
             {node_id}; start it with --join"
        ),
    })
}

fn refused_by(node_id: NodeId, addr: &str, reason: &str) -> BootstrapRefusal {
    BootstrapRefusal(format!(
        "refusing to start node {node_id} on an empty data dir: the member at {addr} refused it: {reason}"
    ))
}

/// `--initial-cluster` on an empty data directory.
async fn form(cluster: &Cluster, config: &Config, members: &BTreeMap<NodeId, String>) -> Result<(), BootstrapRefusal> {
    let me = config.node_id;
    let mut backoff = Duration::from_millis(100);
    let mut last_waiting = None;
    loop {
        // Another member may have initialised first and replicated its membership here already.
        if !cluster.members().is_empty() {
            return Ok(());
        }
        let mut nodes = BTreeMap::from([(me, Node::new(&config.advertise, incarnation(cluster)))]);
        let mut waiting = BTreeSet::new();
        for (&id, addr) in members.iter().filter(|(id, _)| **id != me) {
            match cluster.hello(addr, Some(id), HELLO_TIMEOUT).await {
                Ok(hello) if hello.initialized => {
                    return match listed(&hello, me, incarnation(cluster)) {
                        Listed::AsItself => {
                            tracing::info!(
                                member = id,
                                "a running member lists this node; waiting to be replicated to"
                            );
                            Ok(())
                        }
                        Listed::Otherwise(node) => Err(refusal(me, addr, &hello, Some(&node))),
                        Listed::Absent => Err(refusal(me, addr, &hello, None)),
                    };
                }
                Ok(hello) => {
                    nodes.insert(id, Node::new(addr, hello.incarnation));
                }
                Err(HelloError::Refused(reason)) => return Err(refused_by(me, addr, &reason)),
                Err(HelloError::Unanswered(_)) => {
                    waiting.insert(id);
                }
            }
        }
        if waiting.is_empty() {
            initialise(cluster, nodes).await;
            return Ok(());
        }
        if last_waiting.as_ref() != Some(&waiting) {
            tracing::info!(waiting_for = ?waiting, "forming the cluster once every initial member answers");
            last_waiting = Some(waiting);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// What to do when a seed's cluster lists this node ID with another disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rebuild {
    /// Refuse to start, naming the fix (`--join`: the operator removes the old incarnation).
    Refuse,
    /// Have the old incarnation removed through Raft, then join (StatefulSet pods).
    Replace,
}

/// Refuses to join when a seed's cluster lists this node ID with another disk, or (with
/// [`Rebuild::Replace`]) answers the seed that does and what it said.
async fn check_seeds(
    cluster: &Cluster,
    config: &Config,
    seeds: &[String],
    rebuild: Rebuild,
) -> Result<Option<(String, String)>, BootstrapRefusal> {
    for seed in seeds {
        match cluster.hello(seed, None, HELLO_TIMEOUT).await {
            Ok(hello) if hello.initialized => {
                if let Listed::Otherwise(node) = listed(&hello, config.node_id, incarnation(cluster)) {
                    if rebuild == Rebuild::Replace {
                        let lists =
                            format!("it lists node {} with incarnation {}", config.node_id, hex_id(node.incarnation));
                        return Ok(Some((seed.clone(), lists)));
                    }
                    return Err(refusal(config.node_id, seed, &hello, Some(&node)));
                }
            }
            Ok(_) | Err(HelloError::Unanswered(_)) => {}
            Err(HelloError::Refused(reason)) if rebuild == Rebuild::Replace => return Ok(Some((seed.clone(), reason))),
            Err(HelloError::Refused(reason)) => return Err(refused_by(config.node_id, seed, &reason)),
        }
    }
    Ok(None)
}

/// `--join`: asks the members in `seeds` to add this node as a learner (which answers once it has
/// caught up), then to promote it, retrying until the cluster answers.
/// A client of exactly one seed, sending each write once: a join goes through the seeds in turn
/// itself, and adding a learner waits for it to catch up (up to the seed's learner timeout).
fn seed_client(seed: &str, config: &Config) -> Result<Client, leafraft_client::ClientError> {
    let admin = config.credentials.admin.as_ref().map(|token| token.expose().to_string());
    let mut builder = Client::builder().nodes([seed]).token_opt(admin);
    if let Some(tls) = &config.tls {
        if let Some(ca) = tls.ca.as_ref().or(tls.peer_ca.as_ref()) {
            builder = builder.ca_file(ca);
        }
    }
    builder
        .discover(false)
        .retry_until_timeout(false)
        .timeout(Duration::from_secs(90))
        .attempt_timeout(Duration::from_secs(90))
        .build()
}

async fn join(cluster: &Cluster, config: &Config, seeds: &[String], rebuild: Rebuild) -> Result<(), BootstrapRefusal> {
    let mut backoff = Duration::from_millis(200);
    let mut added = false;
    let incarnation = hex_id(incarnation(cluster));
    loop {
        // An operator may have added (or promoted) this node meanwhile with `cluster add`.
        let status = cluster.status();
        if status.voters.contains(&config.node_id) || (config.learner && status.learners.contains(&config.node_id)) {
            tracing::info!("join: already a member");
            return Ok(());
        }
        added |= status.learners.contains(&config.node_id);
        if !added {
            if let Some((seed, why)) = check_seeds(cluster, config, seeds, rebuild).await? {
                pods::replace_old_incarnation(cluster, config, &seed, &why).await;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        }
        for seed in seeds {
            let client = match seed_client(seed, config) {
                Ok(client) => client,
                Err(e) => return Err(BootstrapRefusal(format!("cannot ask {seed} to be added: {e}"))),
            };
            if !added {
                tracing::info!(seed = %seed, "join: asking to be added as a learner; waits until caught up");
                match client.add_learner_as(config.node_id, &config.advertise, Some(&incarnation)).await {
                    Ok(_) => {
                        tracing::info!(seed = %seed, "joined the cluster as a learner");
                        added = true;
                    }
                    Err(e) if e.code() == Some(leafraft_client::ErrorCode::ClusterMismatch) => {
                        return Err(BootstrapRefusal(format!("refusing to join as node {}: {e}", config.node_id)));
                    }
                    Err(e) => {
                        tracing::warn!(seed = %seed, error = %e, "join: cannot be added yet");
                        continue;
                    }
                }
            }
            if config.learner {
                return Ok(());
            }
            match client.promote_voter(config.node_id).await {
                Ok(_) => {
                    tracing::info!("join: promoted to voter");
                    return Ok(());
                }
                Err(e)
                    if e.code() == Some(leafraft_client::ErrorCode::NotALearner)
                        && cluster.status().voters.contains(&config.node_id) =>
                {
                    return Ok(());
                }
                Err(e) if e.code() == Some(leafraft_client::ErrorCode::ClusterMismatch) => {
                    return Err(BootstrapRefusal(format!("refusing to join as node {}: {e}", config.node_id)));
                }
                Err(e) => tracing::warn!(seed = %seed, error = %e, "join: cannot be promoted yet"),
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Keeps the identity check's view (cluster ID, members' incarnations and where that membership
/// stands) equal to the replicated state and the latest membership.
///
/// It never stops the node: a membership that records this node ID with another disk may be
/// history being replayed (a member rebuilt by remove, wipe and `--join` receives the entries that
/// added its previous disk before the ones that added this one). A data dir that really replaced a
/// member is refused at start ([`bootstrap`] asks the members) and its peers refuse its messages.
pub async fn keep_identity_current(cluster: Arc<Cluster>) {
    let mut rx = cluster.raft().metrics();
    let mut seen = None;
    loop {
        // Metrics change with every apply; the view only when the membership or the ID does.
        let (membership, log_id) = {
            let metrics = rx.borrow_and_update();
            (metrics.membership_config.membership().clone(), *metrics.membership_config.log_id())
        };
        let now = (log_id, cluster.read(|state| state.cluster_id));
        if seen != Some(now) {
            cluster.identity().observe(now.1, MembershipMark::of(log_id.as_ref()), &membership);
            seen = Some(now);
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// The first leader of a new cluster commits the cluster ID every initial member derives from
/// the initial membership ([`leafraft_state::node::derive_cluster_id`]); a later leader finishes the job
/// if the first one lost leadership before it committed.
pub async fn commit_cluster_id(cluster: Arc<Cluster>) {
    let mut rx = cluster.raft().metrics();
    loop {
        let recorded = cluster.read(|state| state.cluster_id);
        if recorded != 0 {
            tracing::info!(cluster_id = %hex_id(recorded), "cluster ID");
            return;
        }
        let (leads, members) = {
            let metrics = rx.borrow_and_update();
            let nodes = metrics.membership_config.membership().nodes().map(|(id, node)| (*id, node.clone()));
            (metrics.state == ServerState::Leader, nodes.collect::<BTreeMap<_, _>>())
        };
        if leads && !members.is_empty() {
            let cluster_id = leafraft_state::node::derive_cluster_id(&members);
            match cluster.raft().client_write(leafraft_state::Request::SetClusterId { cluster_id }).await {
                Ok(_) => continue,
                Err(e) => tracing::debug!(error = %e, "cannot commit the cluster ID yet"),
            }
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(members: &[(NodeId, u64)]) -> Hello {
        Hello {
            node_id: 1,
            incarnation: 0x11,
            cluster_id: 0xc1,
            initialized: true,
            members: members.iter().map(|&(id, inc)| (id, Node::new(format!("h:{id}"), inc))).collect(),
        }
    }

    #[test]
    fn a_running_cluster_lists_a_node_as_itself_otherwise_or_not() {
        let running = hello(&[(1, 0x11), (2, 0x22), (3, 0)]);
        assert_eq!(listed(&running, 2, 0x22), Listed::AsItself);
        assert_eq!(listed(&running, 2, 0x99), Listed::Otherwise(Node::new("h:2", 0x22)));
        // Added before it answered: its incarnation is recorded at promotion.
        assert_eq!(listed(&running, 3, 0x33), Listed::AsItself);
        assert_eq!(listed(&running, 4, 0x44), Listed::Absent);
    }

    #[test]
    fn refusals_are_one_line_naming_the_fix() {
        let running = hello(&[(1, 0x11), (2, 0x22)]);
        let BootstrapRefusal(wiped) = refusal(2, "h:1", &running, Some(&Node::new("h:2", 0x22)));
        assert!(wiped.contains("runs cluster 00000000000000c1"), "{wiped}");
        assert!(wiped.contains("`leafraft cluster remove --node-id 2`, then start it with --join"), "{wiped}");
        let BootstrapRefusal(absent) = refusal(4, "h:1", &running, None);
        assert!(absent.contains("does not list node 4; start it with --join"), "{absent}");
        assert!(!wiped.contains('\n') && !absent.contains('\n'));
    }
}
