//! One place that assembles a node from its configuration, its store and a transport between
//! nodes: its amnesia guard, openraft's network (`raft::DurableCommitNetwork` over
//! `raft::GuardedNetwork` over the transport), its Raft, its `Cluster` and its ID services.
//!
//! `node::run::start` (`leafraft serve`, over HTTP) and the in-process suite
//! (`tests/cluster/fixtures/cluster.rs`, over the test router; the claims bench runs on it) call
//! [`assemble`]; `offline::recover::form`, a lone member that sends no RPC, calls its raft core
//! [`start_raft`] with no guard. `Raft::new` is called nowhere else.

use std::sync::Arc;

use leafraft_state::NodeId;
use raft::guarded::Transport;
use raft::network::IdentityCheck;
use raft::AmnesiaGuard;
use raft::Raft;

use crate::cluster::Cluster;
use crate::cluster::Peers;
use crate::cluster::Timeouts;
use crate::metrics::Metrics;
use crate::services::monotonic::LeaderTakes;
use crate::services::segments::SegmentConfig;
use crate::services::snowflakes::SnowflakeConfig;
use crate::services::IdServices;

/// What a node is assembled from.
pub struct Parts<T> {
    pub node_id: NodeId,
    pub raft_config: Arc<openraft::Config>,
    /// The node's opened store (`storage::identity::open_member`, or `storage::open` in tests).
    pub store: storage::Store,
    /// Carries the Raft RPCs to the peers (HTTP, or the test router).
    pub transport: T,
    /// Carries forwards, hellos and clock reads to the peers.
    pub peers: Arc<dyn Peers>,
    pub timeouts: Timeouts,
    pub identity: Arc<IdentityCheck>,
    pub segments: SegmentConfig,
    pub snowflake: SnowflakeConfig,
    pub metrics: Arc<Metrics>,
}

/// An assembled node: its Raft runs (reachable once its transport's server side serves it), its
/// services are built and not yet maintained (`IdServices::maintain`).
pub struct Assembled {
    pub raft: Raft,
    pub amnesia: Arc<AmnesiaGuard>,
    pub cluster: Arc<Cluster>,
    pub services: IdServices,
}

/// Assembles the node of `parts`; an error says in one line what could not be done.
pub async fn assemble<T: Transport>(parts: Parts<T>) -> Result<Assembled, String> {
    let Parts { node_id, raft_config, store, transport, peers, timeouts, identity, segments, snowflake, metrics } =
        parts;
    let amnesia = Arc::new(AmnesiaGuard::new(store.log.durability()));
    let raft = start_raft(node_id, raft_config, &store, transport, Some(Arc::clone(&amnesia))).await?;
    // The monotonic service's leader side, to which the cluster hands the takes it serves as leader.
    let takes = Arc::new(LeaderTakes::new(
        node_id,
        raft.clone(),
        store.state_machine.clone(),
        Arc::clone(&peers),
        timeouts.write,
    ));
    let cluster = Arc::new(Cluster::new(node_id, raft.clone(), store, peers, timeouts, identity, takes));
    let services = IdServices::new(&cluster, segments, snowflake, metrics);
    Ok(Assembled { raft, amnesia, cluster, services })
}

/// The raft core of a node: its Raft on `store`, whose network holds back commits beyond the
/// local disk and keeps `amnesia` over `transport`.
pub async fn start_raft<T: Transport>(
    node_id: NodeId,
    raft_config: Arc<openraft::Config>,
    store: &storage::Store,
    transport: T,
    amnesia: Option<Arc<AmnesiaGuard>>,
) -> Result<Raft, String> {
    let network = raft::GuardedNetwork::new(transport, amnesia);
    let network = raft::DurableCommitNetwork::new(network, store.log.durability());
    Raft::new(node_id, raft_config, network, store.log.clone(), store.state_machine.clone())
        .await
        .map_err(|e| format!("cannot start raft: {e}"))
}
