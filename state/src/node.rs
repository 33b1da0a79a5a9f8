//! `Node`: what the Raft membership records about each member.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::Hasher;

use serde::Deserialize;
use serde::Serialize;

use crate::NodeId;

/// A member as the membership records it: where to reach it and which disk it is.
///
/// `incarnation` is the random, nonzero ID a node creates with its data directory (see
/// `storage::identity`). A member whose disk was wiped comes back with another incarnation, so
/// its peers can tell it from the member the membership remembers and refuse it: a Raft voter
/// must never forget what it acknowledged. `0` means unknown (a member added by an older
/// command); such a member is not checked.
///
/// Persisted inside every membership (log entries, the state machine, snapshot metadata):
/// bincode is positional, so fields are only ever appended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub addr: String,
    pub incarnation: u64,
}

impl Node {
    pub fn new(addr: impl ToString, incarnation: u64) -> Node {
        Node { addr: addr.to_string(), incarnation }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.addr)
    }
}

/// The cluster ID every initial member derives from the initial membership: a hash (FNV-1a, the
/// same on every build and platform) of the members sorted by ID, with their addresses and
/// incarnations, never 0. The incarnations are random, so two clusters formed with the same IDs
/// and addresses still get different IDs.
pub fn derive_cluster_id(members: &BTreeMap<NodeId, Node>) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    for (id, node) in members {
        hasher.write(&id.to_le_bytes());
        hasher.write(&(node.addr.len() as u64).to_le_bytes());
        hasher.write(node.addr.as_bytes());
        hasher.write(&node.incarnation.to_le_bytes());
    }
    hasher.finish().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(incarnation_of_2: u64) -> BTreeMap<NodeId, Node> {
        [(1, Node::new("10.0.0.1:8080", 7)), (2, Node::new("10.0.0.2:8080", incarnation_of_2))].into()
    }

    /// Golden (checked against an independent FNV-1a): every member of every build must derive the
    /// same ID from the same membership.
    #[test]
    fn the_derived_cluster_id_is_stable_and_depends_on_every_field() {
        assert_eq!(derive_cluster_id(&members(8)), 0x1590_d7f9_30da_3a6e);
        assert_ne!(derive_cluster_id(&members(9)), derive_cluster_id(&members(8)));
        let mut moved = members(8);
        moved.insert(2, Node::new("10.0.0.3:8080", 8));
        assert_ne!(derive_cluster_id(&moved), derive_cluster_id(&members(8)));
        assert_ne!(derive_cluster_id(&BTreeMap::new()), 0);
    }

    #[test]
    fn display_is_the_address() {
        assert_eq!(Node::new("h:1", 5).to_string(), "h:1");
    }
}
