//! One place that assembles a node from its configuration, its store and a transport between
//! nodes: its leader lease (keeping the longer vote hold a previous process promised,
//! `storage::vote_hold`), its amnesia guard, openraft's network (`raft::DurableCommitNetwork`
//! over `raft::GuardedNetwork` over the transport), its Raft, its `Cluster` and its ID services.
//!
//! `node::start` (`leafraft serve`, over HTTP) and the in-process suite
//! (`tests/cluster/fixtures/cluster.rs`, over the test router; the claims bench runs on it) call
//! [`assemble`]; `recover::form`, a lone member that sends no RPC, calls its raft core
//! [`start_raft`] with a disabled lease and no guard. `Raft::new` is called nowhere else.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use raft::guarded::Transport;
use raft::network::IdentityCheck;
use raft::AmnesiaGuard;
use raft::LeaderLease;
use raft::NodeId;
use raft::Raft;

use crate::cluster::Cluster;
use crate::cluster::Peers;
use crate::cluster::Timeouts;
use crate::metrics::Metrics;
use crate::segments::SegmentConfig;
use crate::services::IdServices;
use crate::snowflakes::SnowflakeConfig;

/// What a node is assembled from.
pub struct Parts<T> {
    pub node_id: NodeId,
    pub raft_config: Arc<openraft::Config>,
    /// The node's opened store (`storage::identity::open_member`, or `storage::open` in tests).
    pub store: storage::Store,
    /// The data directory, where the vote hold this process promises is recorded.
    pub data_dir: PathBuf,
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
    pub lease: Arc<LeaderLease>,
    pub amnesia: Arc<AmnesiaGuard>,
    pub cluster: Arc<Cluster>,
    pub services: IdServices,
}

/// Assembles the node of `parts`; an error says in one line what could not be done.
pub async fn assemble<T: Transport>(parts: Parts<T>) -> Result<Assembled, String> {
    let Parts {
        node_id,
        raft_config,
        store,
        data_dir,
        transport,
        peers,
        timeouts,
        identity,
        segments,
        snowflake,
        metrics,
    } = parts;
    let lease = Arc::new(LeaderLease::for_config(&raft_config));
    let hold = Duration::from_millis(raft_config.election_timeout_max);
    let previous = storage::vote_hold::record_vote_hold(&data_dir, hold)
        .map_err(|e| format!("cannot record the vote hold in {}: {e}", data_dir.display()))?;
    lease.restarted(previous);
    let amnesia = Arc::new(AmnesiaGuard::new(store.log.durability()));
    let raft = start_raft(node_id, raft_config, &store, transport, &lease, Some(Arc::clone(&amnesia))).await?;
    let cluster = Cluster::new(node_id, raft.clone(), store, peers, timeouts, identity);
    let cluster = Arc::new(cluster.with_lease(Arc::clone(&lease)));
    let services = IdServices::new(&cluster, segments, snowflake, metrics);
    Ok(Assembled { raft, lease, amnesia, cluster, services })
}

/// The raft core of a node: its Raft on `store`, whose network holds back commits beyond the
/// local disk and keeps `lease` and `amnesia` over `transport`; no election before the vote hold
/// of a previous process ran out (`raft::lease::keep_restart_hold`).
pub async fn start_raft<T: Transport>(
    node_id: NodeId,
    raft_config: Arc<openraft::Config>,
    store: &storage::Store,
    transport: T,
    lease: &Arc<LeaderLease>,
    amnesia: Option<Arc<AmnesiaGuard>>,
) -> Result<Raft, String> {
    let network = raft::GuardedNetwork::new(transport, Arc::clone(lease), amnesia);
    let network = raft::DurableCommitNetwork::new(network, store.log.durability());
    let raft = Raft::new(node_id, raft_config, network, store.log.clone(), store.state_machine.clone())
        .await
        .map_err(|e| format!("cannot start raft: {e}"))?;
    raft::lease::keep_restart_hold(&raft, lease);
    Ok(raft)
}
