//! A node that is no longer a member: it serves nothing, refuses takes at once, and stops
//! campaigning.
//!
//! openraft 0.9 stops replicating to a removed member once the configuration without it is
//! committed, so the member often never applies that configuration: it still lists itself, hears
//! no leader, and campaigns with a higher term every election timeout (members refuse the vote
//! requests of nodes outside their membership, `raft::network::vote_from_member`, so this changes
//! nothing for the cluster, but it is noise and its clients would wait for their timeouts). So a
//! node decides it was removed either from its own membership (it applied a configuration without
//! itself) or, when it hears no leader, from the members it knows: when a majority of the voters of
//! its configuration answer, and none of the answers lists it, it was removed. Then it stops
//! campaigning (`runtime_config().elect(false)`) and every ID request answers 503 `NOT_READY` at
//! once. Neither affects what it holds or what any other node serves: being wrong costs this node
//! its availability, never an ID. A configuration that lists it again (it was added back) undoes it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use leafraft_state::NodeId;

use crate::cluster::Cluster;
use crate::error::Error;

/// How often the watch looks; also how long it waits for each member's answer.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);
/// How long without a known leader before the members are asked.
const LEADERLESS_BEFORE_ASKING: Duration = Duration::from_secs(2);

impl Cluster {
    /// Whether this node knows it is no longer a member, with the reason.
    pub fn removed(&self) -> Option<String> {
        self.removal.reason()
    }

    /// 503 `NOT_READY` at once when this node is no longer a member (one atomic load otherwise):
    /// the first thing every ID request asks.
    pub fn refuse_if_removed(&self) -> Result<(), Error> {
        if !self.removal.removed.load(Ordering::Relaxed) {
            return Ok(());
        }
        Err(Error::not_ready(self.removed().unwrap_or_else(|| "this node is no longer a member".into())))
    }

    /// The verdict from this node's own membership: `Some(true)` when it lists this node,
    /// `Some(false)` when a membership exists without it, `None` before the node has one.
    fn listed_in_own_membership(&self) -> Option<bool> {
        let metrics = self.metrics();
        let membership = metrics.membership_config.membership();
        // No membership yet (a new node waiting to be added): no verdict.
        membership.nodes().next()?;
        Some(membership.get_node(&self.node_id).is_some())
    }

    /// Asks the other voters of this node's configuration for the members they know: `true`
    /// when a majority of the voters answered and none of them lists this node.
    async fn majority_says_removed(&self) -> bool {
        let metrics = self.metrics();
        let membership = metrics.membership_config.membership().clone();
        let voters: Vec<NodeId> = membership.voter_ids().collect();
        let asked: Vec<(NodeId, leafraft_state::Node)> = voters
            .iter()
            .filter(|id| **id != self.node_id)
            .filter_map(|id| membership.get_node(id).map(|node| (*id, node.clone())))
            .collect();
        let mut answers = tokio::task::JoinSet::new();
        for (id, node) in asked {
            let peers = Arc::clone(&self.peers);
            answers.spawn(async move { peers.hello(&node.addr, Some((id, node.incarnation)), WATCH_INTERVAL).await });
        }
        let mut answered = 0;
        while let Some(answer) = answers.join_next().await {
            let Ok(Ok(hello)) = answer else { continue };
            if !hello.initialized || hello.members.contains_key(&self.node_id) {
                return false;
            }
            answered += 1;
        }
        answered > voters.len() / 2
    }
}

/// Every node, for as long as it runs: keeps [`Cluster::removed`] and openraft's elections in
/// line with whether this node is still a member.
pub async fn watch_membership(cluster: Arc<Cluster>) {
    let mut leaderless_since: Option<tokio::time::Instant> = None;
    let mut ticks = tokio::time::interval(WATCH_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let verdict = match cluster.listed_in_own_membership() {
            None => continue,
            Some(false) => Some(format!(
                "node {} is no longer a member: the membership it applied does not list it",
                cluster.node_id
            )),
            // A leader that replicates to this node: it is a member.
            Some(true) if cluster.metrics().current_leader.is_some() => {
                leaderless_since = None;
                None
            }
            Some(true) => {
                let since = *leaderless_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= LEADERLESS_BEFORE_ASKING && cluster.majority_says_removed().await {
                    Some(format!(
                        "node {} is no longer a member: a majority of the voters it knows list it no more (to \
                         add it back, stop it, empty its data directory and start it with --join)",
                        cluster.node_id
                    ))
                } else {
                    // Leaderless, not shown removed (yet): keep whatever was decided (a removed node
                    // whose peers stopped answering stays removed).
                    cluster.removed()
                }
            }
        };
        let removed = verdict.is_some();
        if cluster.removal.set(verdict.clone()) {
            cluster.raft.runtime_config().elect(!removed);
            match verdict {
                Some(reason) => tracing::warn!("{reason}; it serves nothing and stops campaigning"),
                None => tracing::info!("this node is a member again; it campaigns and serves"),
            }
        }
    }
}
