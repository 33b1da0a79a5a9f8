//! Members recorded with incarnation 0: added before they answered, or by a
//! command from before member identity. The identity check cannot judge them (0 is "unknown" and
//! accepted), so a wiped disk at such a member's address would be taken for the member.
//!
//! Every node of this version has its incarnation durably in its identity file before its store
//! opens (`storage::identity::open_member`), so what is missing is only the record. The leader
//! asks each such member who answers at its address (`hello`, which names the node ID it expects)
//! and, once that member replicates in sync with the leader's log (as a promotion requires),
//! records the incarnation through Raft (`ChangeMembers::SetNodes`), as `promote_as_leader` does
//! for a learner added before it answered. Until then the check accepts 0 as before.
//!
//! Why the leader and not the member itself: the leader alone changes the membership, and the
//! `hello` it already sends is the one way a member proves which disk answers at its address; no
//! new message between nodes is needed, so mixed versions during an upgrade change nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use leafraft_state::Node;
use leafraft_state::NodeId;
use openraft::ChangeMembers;
use openraft::ServerState;
use raft::network::identity::hex_id;
use tokio::time::Instant;

use super::attempt::Attempt;
use super::membership::replication_lag;
use super::Cluster;

/// How long one round may take (a `hello` per member, then one membership change).
const ROUND_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a leader with members still unrecorded tries again (and the fallback period of the
/// wait on Raft's metrics).
const RETRY_EVERY: Duration = Duration::from_secs(1);

impl Cluster {
    /// As leader: the members recorded with incarnation 0.
    fn unrecorded_members(&self) -> BTreeMap<NodeId, Node> {
        let metrics = self.metrics();
        if metrics.state != ServerState::Leader {
            return BTreeMap::new();
        }
        let nodes = metrics.membership_config.membership().nodes();
        nodes
            .filter(|(id, node)| node.incarnation == 0 && **id != self.node_id)
            .map(|(id, n)| (*id, n.clone()))
            .collect()
    }

    /// As leader: records the incarnation of every member recorded with 0 that answers at its
    /// address and replicates in sync. Answers how many are still unrecorded.
    async fn record_incarnations(&self) -> usize {
        let unrecorded = self.unrecorded_members();
        let deadline = Instant::now() + ROUND_TIMEOUT;
        let mut found = BTreeMap::new();
        for (&id, node) in &unrecorded {
            if replication_lag(&self.metrics(), id).is_err() {
                continue;
            }
            let timeout = deadline.saturating_duration_since(Instant::now());
            match self.hello(&node.addr, Some(id), timeout).await {
                Ok(hello) if hello.node_id == id && hello.incarnation != 0 => {
                    found.insert(id, Node::new(&node.addr, hello.incarnation));
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(node_id = id, error = ?e, "cannot learn the member's incarnation yet"),
            }
        }
        if found.is_empty() {
            return unrecorded.len();
        }
        let shown: Vec<String> = found.iter().map(|(id, node)| format!("{id}:{}", hex_id(node.incarnation))).collect();
        match self.change_membership(ChangeMembers::SetNodes(found.clone()), deadline).await {
            Ok(_) => tracing::info!(members = ?shown, "recorded the incarnations of members recorded without one"),
            Err(e) => {
                let reason = match e {
                    Attempt::Failed(error) => error.to_string(),
                    Attempt::NotLeader | Attempt::NotSent => "no longer the leader".to_string(),
                };
                tracing::warn!(members = ?shown, reason, "cannot record the members' incarnations yet");
            }
        }
        self.unrecorded_members().len()
    }
}

/// Keeps recording the incarnations of members recorded with 0 while this node leads.
pub async fn record_unknown_incarnations(cluster: Arc<Cluster>) {
    let mut rx = cluster.raft().metrics();
    loop {
        let pending = !cluster.unrecorded_members().is_empty() && cluster.record_incarnations().await > 0;
        // Metrics change with every apply; an unrecorded member is retried at most every second.
        let wait = if pending { RETRY_EVERY } else { RETRY_EVERY * 10 };
        match tokio::time::timeout(wait, rx.changed()).await {
            Ok(Err(_)) => return,
            Ok(Ok(())) if pending => tokio::time::sleep(RETRY_EVERY).await,
            Ok(Ok(())) | Err(_) => {}
        }
    }
}
