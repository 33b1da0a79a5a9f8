//! `--initial-cluster`: the members a cluster is formed with, as `ID=HOST:PORT` pairs.

use std::collections::BTreeMap;

use raft::NodeId;

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
