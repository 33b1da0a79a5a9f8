//! The peer clock check: before it takes a worker, and while it holds one, a node compares its
//! wall clock with its peers' (`Peers::clock`, RTT-compensated) and serves snowflake only while a
//! majority of the members agree with its clock. Uniqueness never rests on this (the committed
//! windows give it); it keeps a wrong clock from burning time bits or from issuing inside its
//! window after the others, by their clocks, could take its worker over.

use std::time::Duration;

use raft::Node;
use raft::NodeId;

use crate::clock::millis;
use crate::clock::now_ms;
use crate::cluster::Peers;
use crate::error::Error;
use crate::error::ErrorCode;
use crate::snowflakes::Snowflakes;

/// The outcome of one peer clock check.
#[derive(Debug)]
pub(super) enum ClockVerdict {
    Serve,
    Refuse(Error),
    /// Too few peers answered to decide either way: keep whatever was decided before.
    Keep,
}

/// Judges this node's clock from the offsets (peer minus local, ms) of the peers that answered, out
/// of `members` nodes in the membership, this one included.
///
/// Serve only when this node and the peers agreeing with it (within `max_skew_ms`) are a majority of
/// the members: then a wrong clock among them is outvoted. Refuse when any answering peer disagrees
/// and there is no such majority: with half or fewer answering, nobody can tell which side is wrong,
/// and serving with a wrong clock lets other nodes take this node's worker over by their clocks while
/// it still issues inside its window. Keep the last verdict when nobody disagrees but too few answered
/// (a node cut off from its peers neither starts nor stops serving because of it).
pub(super) fn clock_verdict(offsets: &[i64], members: usize, max_skew_ms: i64) -> ClockVerdict {
    let disagreeing = offsets.iter().filter(|offset| offset.abs() > max_skew_ms).count();
    let agreeing = 1 + offsets.len() - disagreeing;
    if 2 * agreeing > members {
        return ClockVerdict::Serve;
    }
    if disagreeing == 0 {
        return ClockVerdict::Keep;
    }
    let median = offsets.get(offsets.len().saturating_sub(1) / 2).copied().unwrap_or(0);
    ClockVerdict::Refuse(Error::new(
        ErrorCode::ClockBackwards,
        format!(
            "this node's clock is further than --max-clock-skew-ms {max_skew_ms} from {disagreeing} of the {} peers \
             that answered (median offset {median} ms), and fewer than a majority of the {members} members agree \
             with it; snowflake is refused until a majority does",
            offsets.len()
        ),
    ))
}

impl Snowflakes {
    /// Reads every other member's clock (`Peers::clock`, RTT-compensated), records the median
    /// offset for the status views, and answers [`clock_verdict`] of what it measured: `Serve`
    /// when this node and the peers agreeing with it are a majority of the members, `Refuse` when
    /// a peer disagrees without such a majority, `Keep` when nobody disagrees but too few answered.
    pub(super) async fn check_clock(&self) -> ClockVerdict {
        let peers = self.cluster.other_members();
        let mut offsets = Vec::new();
        for (id, node) in &peers {
            if let Some(offset) = peer_clock_offset(self.cluster.peers(), *id, node).await {
                offsets.push(offset);
            }
        }
        offsets.sort_unstable();
        {
            let mut state = self.lock();
            state.clock_offset_ms = (!offsets.is_empty()).then(|| offsets[(offsets.len() - 1) / 2]);
            state.peers_checked = offsets.len();
        }
        let max_skew = i64::try_from(millis(self.config.max_skew)).unwrap_or(i64::MAX);
        clock_verdict(&offsets, peers.len() + 1, max_skew)
    }
}

/// The offset of a peer's wall clock from this node's (peer minus local), compensated for half
/// the round trip; `None` when the peer does not answer within a second.
async fn peer_clock_offset(peers: &dyn Peers, id: NodeId, node: &Node) -> Option<i64> {
    let sent = now_ms();
    let peer_now_ms = peers.clock(id, node, Duration::from_secs(1)).await?;
    let received = now_ms();
    let local_mid = i128::from(sent) + (i128::from(received) - i128::from(sent)) / 2;
    i64::try_from(i128::from(peer_now_ms) - local_mid).ok()
}
