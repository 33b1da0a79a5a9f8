//! Member identity on the wire: every request between nodes and every answer carries the sender's
//! cluster ID, node ID and disk incarnation in headers, and both sides compare them with what they
//! know ([`IdentityCheck`]).
//!
//! What this guards against is an accident, not an attacker (the cluster secret is for those): a
//! member whose data directory was wiped or swapped comes back with another incarnation, and a
//! node of a second cluster may answer at an address this cluster knows. Raft assumes a voter
//! never forgets what it acknowledged; a refused peer's votes and acknowledgements are never
//! counted, so such a node cannot help elect a leader or commit an entry.
//!
//! Who judges a record: an answer is judged by the node that asked, by its own membership, because
//! that node counts the answer (a vote, an acknowledgement) in that membership's quorum. A request
//! is judged by the receiver only when the receiver's membership is at least as new as the
//! sender's ([`MembershipMark`]): a sender with a newer one may have been removed and re-added with
//! a new disk in entries the receiver has not received yet, and refusing it would keep the
//! receiver from ever receiving them. A request also names the node it means to reach and the
//! incarnation its sender records for it ([`Addressee`]); a node that is not that disk refuses it,
//! so a wiped member takes in nothing from a leader that records its old disk.
//!
//! A message without identity headers is not checked (every leafraft node sends them; the
//! receiving side is in the node's HTTP layer, the sending side in `client`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::PoisonError;
use std::sync::RwLock;

use axum::http::HeaderMap;
use axum::http::HeaderValue;

use leafraft_state::typ;
use leafraft_state::NodeId;

pub const CLUSTER_ID_HEADER: &str = "x-leafraft-cluster-id";
pub const NODE_ID_HEADER: &str = "x-leafraft-node-id";
pub const INCARNATION_HEADER: &str = "x-leafraft-incarnation";
pub const MEMBERSHIP_HEADER: &str = "x-leafraft-membership";
pub const TO_NODE_ID_HEADER: &str = "x-leafraft-to-node-id";
pub const TO_INCARNATION_HEADER: &str = "x-leafraft-to-incarnation";

// --- Amnesia detection (`crate::amnesia`), apart from the identity headers above.
/// On an append: the highest log index the leader saw the addressee match under its leadership.
pub const MATCHED_HEADER: &str = "x-leafraft-matched";
// --- end of amnesia detection.

/// How a cluster ID or an incarnation is shown: 16 hex digits, the form logs and errors use.
pub fn hex_id(id: u64) -> String {
    format!("{id:016x}")
}

/// Where a node's latest membership stands in the log: the term and index of its entry, compared
/// in that order (one leader per term, so this orders entries as the log does); zero when the node
/// has none. On the wire as `term.index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct MembershipMark {
    pub term: u64,
    pub index: u64,
}

impl MembershipMark {
    pub fn of(log_id: Option<&typ::LogId>) -> MembershipMark {
        log_id.map_or_else(MembershipMark::default, |id| MembershipMark { term: id.leader_id.term, index: id.index })
    }

    fn parse(text: &str) -> Option<MembershipMark> {
        let (term, index) = text.split_once('.')?;
        Some(MembershipMark { term: term.parse().ok()?, index: index.parse().ok()? })
    }
}

impl fmt::Display for MembershipMark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.term, self.index)
    }
}

/// Who sent a message, as its headers say. `cluster_id` 0: the sender knows no cluster yet.
/// `membership`: where the sender's latest membership stands (zero when it sends none, which
/// leaves the receiver to judge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerIdentity {
    pub cluster_id: u64,
    pub node_id: NodeId,
    pub incarnation: u64,
    pub membership: MembershipMark,
}

impl PeerIdentity {
    /// The identity in `headers`: `Ok(None)` when they carry none, an error when they carry a
    /// malformed one.
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<PeerIdentity>, String> {
        let field = |name: &str, hex: bool| -> Result<Option<u64>, String> {
            let Some(value) = headers.get(name) else { return Ok(None) };
            let text = value.to_str().map_err(|_| format!("header {name} is not ASCII"))?;
            let parsed = if hex { u64::from_str_radix(text, 16) } else { text.parse() };
            parsed.map(Some).map_err(|_| format!("header {name} is not a number: {text:?}"))
        };
        match (field(CLUSTER_ID_HEADER, true)?, field(NODE_ID_HEADER, false)?, field(INCARNATION_HEADER, true)?) {
            (None, None, None) => Ok(None),
            (Some(cluster_id), Some(node_id), Some(incarnation)) => {
                let membership = match headers.get(MEMBERSHIP_HEADER) {
                    None => MembershipMark::default(),
                    Some(value) => value
                        .to_str()
                        .ok()
                        .and_then(MembershipMark::parse)
                        .ok_or_else(|| format!("header {MEMBERSHIP_HEADER} is not `term.index`: {value:?}"))?,
                };
                Ok(Some(PeerIdentity { cluster_id, node_id, incarnation, membership }))
            }
            _ => {
                Err(format!("the identity needs all of {CLUSTER_ID_HEADER}, {NODE_ID_HEADER} and {INCARNATION_HEADER}"))
            }
        }
    }

    pub fn write_headers(&self, headers: &mut HeaderMap) {
        let value = |text: String| HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("0"));
        headers.insert(CLUSTER_ID_HEADER, value(hex_id(self.cluster_id)));
        headers.insert(NODE_ID_HEADER, value(self.node_id.to_string()));
        headers.insert(INCARNATION_HEADER, value(hex_id(self.incarnation)));
        headers.insert(MEMBERSHIP_HEADER, value(self.membership.to_string()));
        // Release versions: every message that carries an identity carries the release.
        super::versions::write_version(headers);
    }
}

/// The node a request means to reach and the incarnation its sender records for it (0: unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addressee {
    pub node_id: NodeId,
    pub incarnation: u64,
}

impl Addressee {
    /// The addressee in `headers`: `Ok(None)` when they name none.
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Addressee>, String> {
        let (Some(node), Some(incarnation)) = (headers.get(TO_NODE_ID_HEADER), headers.get(TO_INCARNATION_HEADER))
        else {
            return match headers.contains_key(TO_NODE_ID_HEADER) || headers.contains_key(TO_INCARNATION_HEADER) {
                true => Err(format!("the addressee needs both {TO_NODE_ID_HEADER} and {TO_INCARNATION_HEADER}")),
                false => Ok(None),
            };
        };
        let node_id = node.to_str().ok().and_then(|t| t.parse().ok());
        let incarnation = incarnation.to_str().ok().and_then(|t| u64::from_str_radix(t, 16).ok());
        match (node_id, incarnation) {
            (Some(node_id), Some(incarnation)) => Ok(Some(Addressee { node_id, incarnation })),
            _ => Err(format!("headers {TO_NODE_ID_HEADER} and {TO_INCARNATION_HEADER} are not numbers")),
        }
    }

    pub fn write_headers(&self, headers: &mut HeaderMap) {
        headers.insert(TO_NODE_ID_HEADER, HeaderValue::from(self.node_id));
        let incarnation = HeaderValue::from_str(&hex_id(self.incarnation)).unwrap_or(HeaderValue::from_static("0"));
        headers.insert(TO_INCARNATION_HEADER, incarnation);
    }
}

/// Why a peer was refused. `Display` is one line naming both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// The peer belongs to another cluster.
    Cluster { local: u64, peer: u64, peer_node: NodeId },
    /// The membership records `node_id` with another incarnation: its data directory was wiped
    /// or replaced since it was added.
    Incarnation { node_id: NodeId, recorded: u64, presented: u64 },
    /// Another node answers at the address of `expected`.
    NodeId { expected: NodeId, presented: NodeId },
}

impl Mismatch {
    /// The label of `leafraft_identity_refusals_total`.
    pub fn kind(&self) -> &'static str {
        match self {
            Mismatch::Cluster { .. } => "cluster_id",
            Mismatch::Incarnation { .. } => "incarnation",
            Mismatch::NodeId { .. } => "node_id",
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Cluster { local, peer, peer_node } => write!(
                f,
                "node {peer_node} belongs to cluster {}, this node to cluster {}",
                hex_id(*peer),
                hex_id(*local)
            ),
            Mismatch::Incarnation { node_id, recorded, presented } => write!(
                f,
                "node {node_id} is a member with data dir incarnation {}, but it presents incarnation {} (its data \
                 dir was wiped or replaced); remove it with `leafraft cluster remove --node-id {node_id}`, then start \
                 it with --join",
                hex_id(*recorded),
                hex_id(*presented)
            ),
            Mismatch::NodeId { expected, presented } => {
                write!(f, "node {presented} answers at the address of node {expected}")
            }
        }
    }
}

/// This node's identity and what it knows of the cluster: the cluster ID and the incarnation the
/// membership records for each member (0: unknown, not checked). Shared by the network client
/// and the node's HTTP layer; the node keeps it up to date with [`IdentityCheck::observe`].
#[derive(Debug)]
pub struct IdentityCheck {
    node_id: NodeId,
    incarnation: u64,
    cluster_id: AtomicU64,
    /// Where the membership stands, and the incarnation it records for each member.
    members: RwLock<(MembershipMark, BTreeMap<NodeId, u64>)>,
    refusals: [AtomicU64; KINDS.len()],
    /// With mutual TLS: whether a peer's certificate (DER) names a node, so that an answer comes
    /// from the member the request meant to reach (set once at start).
    certificate_names: std::sync::OnceLock<CertificateNames>,
    /// Members at whose address a node of another cluster answered, with that cluster's ID (the
    /// sending side of the check; cleared once the member answers as itself again).
    foreign: RwLock<BTreeMap<NodeId, u64>>,
    /// Release versions: what each member reported running.
    versions: super::versions::PeerVersions,
}

/// Whether a certificate (DER) names a node.
pub type CertificateNames = fn(&[u8], NodeId) -> bool;

const KINDS: [&str; 3] = ["cluster_id", "incarnation", "node_id"];

impl IdentityCheck {
    pub fn new(node_id: NodeId, incarnation: u64) -> IdentityCheck {
        IdentityCheck {
            node_id,
            incarnation,
            cluster_id: AtomicU64::new(0),
            members: RwLock::new((MembershipMark::default(), BTreeMap::new())),
            refusals: Default::default(),
            certificate_names: std::sync::OnceLock::new(),
            foreign: RwLock::new(BTreeMap::new()),
            versions: Default::default(),
        }
    }

    /// Release versions: what each member reported, and this node's stop on meeting
    /// a newer release's entries.
    pub fn versions(&self) -> &super::versions::PeerVersions {
        &self.versions
    }

    /// From now on, an answer over TLS to a request meant for a known node must come with a
    /// certificate that `names` says names that node (mutual TLS between members).
    pub fn require_certificate_names(&self, names: CertificateNames) {
        let _ = self.certificate_names.set(names);
    }

    /// The check [`require_certificate_names`](Self::require_certificate_names) set, if any.
    pub fn certificate_names(&self) -> Option<CertificateNames> {
        self.certificate_names.get().copied()
    }

    /// What this node sends in its headers.
    pub fn local(&self) -> PeerIdentity {
        PeerIdentity {
            cluster_id: self.cluster_id(),
            node_id: self.node_id,
            incarnation: self.incarnation,
            membership: self.membership_mark(),
        }
    }

    pub fn cluster_id(&self) -> u64 {
        self.cluster_id.load(Ordering::Relaxed)
    }

    /// Takes in the replicated cluster ID and the latest membership, which stands at `mark`.
    pub fn observe(&self, cluster_id: u64, mark: MembershipMark, membership: &typ::Membership) {
        self.cluster_id.store(cluster_id, Ordering::Relaxed);
        let members = membership.nodes().map(|(id, node)| (*id, node.incarnation)).collect();
        *self.members.write().unwrap_or_else(PoisonError::into_inner) = (mark, members);
    }

    fn membership_mark(&self) -> MembershipMark {
        self.members.read().unwrap_or_else(PoisonError::into_inner).0
    }

    /// The incarnation the membership records for `node_id` (0 when unknown or not a member).
    pub fn recorded_incarnation(&self, node_id: NodeId) -> u64 {
        self.members.read().unwrap_or_else(PoisonError::into_inner).1.get(&node_id).copied().unwrap_or(0)
    }

    /// Checks the sender of a request this node received. Its incarnation is judged only when
    /// this node's membership is at least as new as the sender's (see the module docs).
    pub fn check_sender(&self, peer: &PeerIdentity) -> Result<(), Mismatch> {
        self.check_cluster(peer)?;
        let (mark, recorded) = {
            let members = self.members.read().unwrap_or_else(PoisonError::into_inner);
            (members.0, members.1.get(&peer.node_id).copied().unwrap_or(0))
        };
        if peer.membership > mark {
            return Ok(());
        }
        check_incarnation(peer, recorded)
    }

    /// Checks that this node is the one a request means to reach: the node ID, and the disk its
    /// sender records (a sender that records another disk of this node ID is talking to the
    /// member this data dir replaced).
    pub fn check_addressee(&self, to: &Addressee) -> Result<(), Mismatch> {
        if to.node_id != self.node_id {
            return Err(Mismatch::NodeId { expected: to.node_id, presented: self.node_id });
        }
        if to.incarnation != 0 && to.incarnation != self.incarnation {
            return Err(Mismatch::Incarnation {
                node_id: self.node_id,
                recorded: to.incarnation,
                presented: self.incarnation,
            });
        }
        Ok(())
    }

    /// Checks the answer of a peer this node sent to: `expected` is the node it meant to reach
    /// and the incarnation its membership records (0: unknown), when it knows them.
    pub fn check_responder(&self, peer: &PeerIdentity, expected: Option<(NodeId, u64)>) -> Result<(), Mismatch> {
        let cluster = self.check_cluster(peer);
        if let Some((member, _)) = expected {
            let mut foreign = self.foreign.write().unwrap_or_else(PoisonError::into_inner);
            match &cluster {
                Err(Mismatch::Cluster { peer, .. }) => foreign.insert(member, *peer),
                _ => foreign.remove(&member),
            };
        }
        cluster?;
        let Some((expected, recorded)) = expected else { return Ok(()) };
        if peer.node_id != expected {
            return Err(Mismatch::NodeId { expected, presented: peer.node_id });
        }
        check_incarnation(peer, recorded)
    }

    fn check_cluster(&self, peer: &PeerIdentity) -> Result<(), Mismatch> {
        let local = self.cluster_id();
        if local != 0 && peer.cluster_id != 0 && peer.cluster_id != local {
            return Err(Mismatch::Cluster { local, peer: peer.cluster_id, peer_node: peer.node_id });
        }
        Ok(())
    }

    /// The members at whose address a node of another cluster answered, with its cluster ID.
    pub fn foreign_clusters(&self) -> BTreeMap<NodeId, u64> {
        self.foreign.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Counts a refusal and logs it once. `what` says which message was refused.
    pub fn refused(&self, what: &str, mismatch: &Mismatch) {
        if let Some(i) = KINDS.iter().position(|kind| *kind == mismatch.kind()) {
            self.refusals[i].fetch_add(1, Ordering::Relaxed);
        }
        tracing::warn!(kind = mismatch.kind(), "identity mismatch, {what} refused: {mismatch}");
    }

    /// Refusals so far, by kind (the label of `leafraft_identity_refusals_total`).
    pub fn refusals(&self) -> Vec<(&'static str, u64)> {
        KINDS.iter().zip(&self.refusals).map(|(kind, count)| (*kind, count.load(Ordering::Relaxed))).collect()
    }
}

fn check_incarnation(peer: &PeerIdentity, recorded: u64) -> Result<(), Mismatch> {
    if recorded != 0 && peer.incarnation != recorded {
        return Err(Mismatch::Incarnation { node_id: peer.node_id, recorded, presented: peer.incarnation });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
