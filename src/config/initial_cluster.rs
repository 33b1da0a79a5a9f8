//! How a node becomes a member: `--initial-cluster` (the members a cluster is formed with, as
//! `ID=HOST:PORT` pairs), `--join`, `--initial-cluster-state`, or the names of a StatefulSet.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use leafraft_state::NodeId;

use super::founding;
use super::statefulset::StatefulSet;
use super::Bootstrap;
use super::Settings;

/// This node's ID, the address it advertises and how it joins the world.
pub(super) fn resolve_membership(layers: &Settings, listen: SocketAddr) -> Result<(NodeId, String, Bootstrap), String> {
    let parse_state = || layers.initial_cluster_state.as_deref().map(founding::ClusterState::parse).transpose();
    // Kubernetes sets $HOSTNAME to the pod's name.
    if let Some(set) = StatefulSet::of(layers, std::env::var("HOSTNAME").ok())? {
        let derived = set.derive(listen.port(), parse_state()?);
        return Ok((derived.node_id, derived.advertise, derived.bootstrap));
    }
    let node_id = layers.node_id.unwrap_or(1);
    let bootstrap = resolve_bootstrap(node_id, layers.initial_cluster.clone(), layers.join.clone())?;
    let advertise = resolve_advertise(node_id, listen, layers.advertise.clone(), &bootstrap)?;
    let bootstrap = founding::decide(bootstrap, parse_state()?, &advertise)?;
    Ok((node_id, advertise, bootstrap))
}

/// Parses `1=host:port,2=host:port`.
pub fn parse_initial_cluster(text: &str) -> Result<BTreeMap<NodeId, String>, String> {
    let mut members = BTreeMap::new();
    for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (id, addr) =
            part.split_once('=').ok_or_else(|| format!("'{part}' in --initial-cluster is not ID=HOST:PORT"))?;
        let id: NodeId = id.trim().parse().map_err(|_| format!("'{id}' in --initial-cluster is not a node ID"))?;
        let addr = addr.trim();
        if !addr.contains(':') {
            return Err(format!("'{addr}' in --initial-cluster is not HOST:PORT"));
        }
        if members.insert(id, addr.to_string()).is_some() {
            return Err(format!("node {id} appears twice in --initial-cluster"));
        }
    }
    if members.is_empty() {
        return Err("--initial-cluster lists no members".into());
    }
    Ok(members)
}

fn resolve_bootstrap(
    node_id: NodeId,
    initial_cluster: Option<String>,
    join: Option<String>,
) -> Result<Bootstrap, String> {
    match (initial_cluster, join) {
        (Some(_), Some(_)) => Err("--initial-cluster and --join exclude each other".into()),
        (Some(text), None) => {
            let members = parse_initial_cluster(&text)?;
            if !members.contains_key(&node_id) {
                return Err(format!("--initial-cluster does not list this node (--node-id {node_id})"));
            }
            Ok(Bootstrap::InitialCluster(members))
        }
        (None, Some(text)) => {
            let addrs: Vec<String> =
                text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
            if addrs.is_empty() {
                return Err("--join needs at least one HOST:PORT".into());
            }
            Ok(Bootstrap::Join(addrs))
        }
        (None, None) => Ok(Bootstrap::Single),
    }
}

/// The address peers reach this node at: given, else the one `--initial-cluster` lists for it,
/// else the listen address (unless that is a wildcard).
fn resolve_advertise(
    node_id: NodeId,
    listen: SocketAddr,
    advertise: Option<String>,
    bootstrap: &Bootstrap,
) -> Result<String, String> {
    let advertise = match (advertise, bootstrap) {
        (Some(advertise), _) => advertise,
        (None, Bootstrap::InitialCluster(members)) => members[&node_id].clone(),
        (None, _) if listen.ip().is_unspecified() => {
            return Err(format!("--listen {listen} is a wildcard address: give --advertise HOST:PORT"));
        }
        (None, _) => listen.to_string(),
    };
    if let Bootstrap::InitialCluster(members) = bootstrap {
        if members[&node_id] != advertise {
            return Err(format!(
                "--initial-cluster lists node {node_id} at {}, but it advertises {advertise}",
                members[&node_id]
            ));
        }
    }
    Ok(advertise)
}
