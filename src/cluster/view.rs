//! The `/v1/cluster` view of this node's Raft group: members, roles, leader, term, indexes and,
//! on the leader, each follower's replication.

use std::collections::BTreeMap;

use leafraft_state::NodeId;
use openraft::ServerState;
use raft::network::identity::hex_id;
use serde::Deserialize;
use serde::Serialize;

use crate::cluster::Cluster;

/// The `/v1/cluster` answer.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClusterStatus {
    #[schema(value_type = u64)]
    pub node_id: NodeId,
    pub role: String,
    #[schema(value_type = Option<u64>)]
    pub leader_id: Option<NodeId>,
    pub term: u64,
    #[schema(value_type = Vec<u64>)]
    pub voters: Vec<NodeId>,
    #[schema(value_type = Vec<u64>)]
    pub learners: Vec<NodeId>,
    /// Member addresses by node ID (JSON object keys are strings: `{"1": "host:port"}`).
    #[schema(value_type = BTreeMap<String, String>)]
    pub nodes: BTreeMap<NodeId, String>,
    /// The ID of the cluster (16 hex digits) once it is committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Each member's data dir incarnation (16 hex digits), as the membership records it.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, String>)]
    pub incarnations: BTreeMap<NodeId, String>,
    /// Members at whose address a node of another cluster answered this node, with that
    /// cluster's ID (a wiped member that founded a new cluster, say); absent when none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub foreign_clusters: BTreeMap<NodeId, String>,
    pub commit_index: Option<u64>,
    pub applied_index: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, ReplicationStatus>>)]
    pub replication: Option<BTreeMap<NodeId, ReplicationStatus>>,
    // Rolling upgrades.
    /// The release this node runs.
    #[serde(default)]
    pub version: String,
    /// The release every member runs at least, agreed through Raft: what commands may be proposed.
    #[serde(default)]
    pub cluster_version: String,
    /// Each member's release as this node last heard it (`unknown`: not heard since it started;
    /// a follower knows the others' through the leader).
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, String>)]
    pub versions: BTreeMap<NodeId, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReplicationStatus {
    pub matched_index: Option<u64>,
    pub lag: u64,
}

impl Cluster {
    pub fn status(&self) -> ClusterStatus {
        let metrics = self.metrics();
        let membership = metrics.membership_config.membership();
        let voters: Vec<NodeId> = membership.voter_ids().collect();
        let learners: Vec<NodeId> = membership.learner_ids().collect();
        let nodes = membership.nodes().map(|(id, node)| (*id, node.addr.clone())).collect();
        let incarnations = membership.nodes().map(|(id, node)| (*id, hex_id(node.incarnation))).collect();
        let cluster_id = Some(self.read(|state| state.cluster_id)).filter(|id| *id != 0).map(hex_id);
        let role = match metrics.state {
            ServerState::Leader => "leader",
            ServerState::Candidate => "candidate",
            ServerState::Follower if voters.contains(&self.node_id) => "follower",
            ServerState::Follower | ServerState::Learner => "learner",
            ServerState::Shutdown => "shutdown",
        };
        let last_log_index = metrics.last_log_index.unwrap_or(0);
        let replication = metrics.replication.as_ref().map(|replication| {
            replication
                .iter()
                .filter(|(id, _)| **id != self.node_id)
                .map(|(id, matched)| {
                    let matched_index = matched.map(|log_id| log_id.index);
                    let lag = last_log_index.saturating_sub(matched_index.unwrap_or(0));
                    (*id, ReplicationStatus { matched_index, lag })
                })
                .collect()
        });
        ClusterStatus {
            node_id: self.node_id,
            role: role.to_string(),
            leader_id: metrics.current_leader,
            term: metrics.current_term,
            voters,
            learners,
            nodes,
            cluster_id,
            incarnations,
            foreign_clusters: self.identity.foreign_clusters().into_iter().map(|(id, c)| (id, hex_id(c))).collect(),
            commit_index: self.store.log.committed_index().max(metrics.last_applied.map(|id| id.index)),
            applied_index: metrics.last_applied.map(|id| id.index),
            replication,
            version: leafraft_state::Version::OWN.to_string(),
            cluster_version: self.cluster_version().to_string(),
            versions: self
                .member_versions()
                .into_iter()
                .map(|(id, version)| (id, version.map_or_else(|| "unknown".to_string(), |v| v.to_string())))
                .collect(),
        }
    }
}
