//! The clock verdict, a small service of its own: whether this node's wall clock agrees with its
//! peers'. Snowflakes and time sequences both read it; one peer clock check per node.
//!
//! Before it takes a worker, and while it holds one, a node compares its wall clock with its
//! peers' (`Peers::clock`, RTT-compensated) and serves snowflake and time-sequence IDs only while
//! a majority of the members agree with its clock. Uniqueness never rests on this (committed
//! windows and claims give it); it keeps a wrong clock from burning time bits, from issuing inside
//! a snowflake window after the others, by their clocks, could take its worker over, and from
//! claiming time-sequence seconds it should not.
//!
//! The check runs in the snowflake upkeep's tick ([`ClockCheck::check`]; `snowflakes::lease`),
//! once the layout is agreed and while the node is ready, as it always has: that is when a node
//! first knows its members.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::time::Duration;

use leafraft_state::Node;
use leafraft_state::NodeId;

use crate::clock::millis;
use crate::clock::now_ms;
use crate::cluster::Cluster;
use crate::cluster::Peers;
use crate::error::Error;
use crate::error::ErrorCode;

/// The outcome of one peer clock check.
#[derive(Debug)]
pub enum ClockVerdict {
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
pub fn clock_verdict(offsets: &[i64], members: usize, max_skew_ms: i64) -> ClockVerdict {
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

/// What the checks so far found, for the verdict and the status views.
#[derive(Debug, Default)]
struct Checked {
    /// The refusal of the last `Refuse` verdict, until a `Serve` clears it (`Keep` keeps it).
    refused: Option<Error>,
    /// The (lower) median offset of the peers' clocks from this node's, at the last check.
    offset_ms: Option<i64>,
    peers_checked: usize,
    /// Checks completed since start (each one's verdict recorded).
    checks: u64,
}

/// This node's clock verdict: the peer clock check and what it last decided.
pub struct ClockCheck {
    cluster: Arc<Cluster>,
    max_skew: Duration,
    checked: Mutex<Checked>,
    /// Turns true once the first check has given its verdict (time sequences wait for it rather
    /// than refusing in a node's first moments).
    first: tokio::sync::watch::Sender<bool>,
}

/// What the status views show of the checks.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClockStatus {
    pub offset_ms: Option<i64>,
    pub peers_checked: usize,
    pub checks: u64,
}

impl ClockCheck {
    /// `max_skew`: how far a peer's clock may be from this node's and still agree with it.
    pub fn new(cluster: Arc<Cluster>, max_skew: Duration) -> ClockCheck {
        ClockCheck {
            cluster,
            max_skew,
            checked: Mutex::new(Checked::default()),
            first: tokio::sync::watch::Sender::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Checked> {
        // Every update of `Checked` is a plain field store, so a poisoned lock is still consistent.
        self.checked.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reads every other member's clock (`Peers::clock`, RTT-compensated), records the median
    /// offset and the verdict, and answers [`clock_verdict`] of what it measured: `Serve` when
    /// this node and the peers agreeing with it are a majority of the members, `Refuse` when a
    /// peer disagrees without such a majority, `Keep` when nobody disagrees but too few answered.
    pub async fn check(&self) -> ClockVerdict {
        let peers = self.cluster.other_members();
        let mut offsets = Vec::new();
        for (id, node) in &peers {
            if let Some(offset) = peer_clock_offset(self.cluster.peers(), *id, node).await {
                offsets.push(offset);
            }
        }
        offsets.sort_unstable();
        let max_skew = i64::try_from(millis(self.max_skew)).unwrap_or(i64::MAX);
        let verdict = clock_verdict(&offsets, peers.len() + 1, max_skew);
        {
            let mut checked = self.lock();
            checked.offset_ms = (!offsets.is_empty()).then(|| offsets[(offsets.len() - 1) / 2]);
            checked.peers_checked = offsets.len();
            match &verdict {
                ClockVerdict::Serve => checked.refused = None,
                ClockVerdict::Refuse(error) => checked.refused = Some(error.clone()),
                ClockVerdict::Keep => {}
            }
            checked.checks += 1;
        }
        self.first.send_replace(true);
        verdict
    }

    /// The verdict: `None` while this node's clock is confirmed by a majority of the members (or
    /// no check has refused it since one did), `CLOCK_UNCHECKED` before the first check.
    pub fn refusal(&self) -> Option<Error> {
        let checked = self.lock();
        if checked.checks == 0 {
            return Some(Error::new(
                ErrorCode::ClockUnchecked,
                "this node's clock has not been compared with its peers' yet; retry shortly",
            ));
        }
        checked.refused.clone()
    }

    /// Waits until the first check has given its verdict ([`ClockCheck::refusal`] then answers
    /// it).
    pub async fn first_checked(&self) {
        let mut first = self.first.subscribe();
        let _ = first.wait_for(|first| *first).await;
    }

    pub fn status(&self) -> ClockStatus {
        let checked = self.lock();
        ClockStatus { offset_ms: checked.offset_ms, peers_checked: checked.peers_checked, checks: checked.checks }
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

#[cfg(test)]
mod tests {
    use super::*;

    const SKEW: i64 = 1000;

    fn verdict(offsets: &[i64], members: usize) -> &'static str {
        match clock_verdict(offsets, members, SKEW) {
            ClockVerdict::Serve => "serve",
            ClockVerdict::Refuse(_) => "refuse",
            ClockVerdict::Keep => "keep",
        }
    }

    /// Found by the chaos suite (seed 202, 5 nodes): a node whose clock had been stepped 6.2 s back
    /// came out of a partition, heard from one peer (which disagreed) and, one against one, was
    /// judged fine. It acquired a worker with its wrong clock; a node on true time then saw that
    /// lease as 6 s stale, took the worker over, and both issued from it at once: unique IDs, but a
    /// worker's IDs going back in time (`snowflake-order`).
    #[test]
    fn regression_a_tied_clock_check_refuses_instead_of_serving() {
        assert_eq!(verdict(&[6182], 5), "refuse");
        assert_eq!(verdict(&[-6182], 2), "refuse");
        assert_eq!(verdict(&[6182, 12], 4), "refuse");
    }

    #[test]
    fn a_majority_agreeing_serves_even_with_a_wrong_peer() {
        assert_eq!(verdict(&[3_600_000, 5], 3), "serve");
        assert_eq!(verdict(&[3_600_000, 5, -20], 5), "serve");
        assert_eq!(verdict(&[0, 0, 0, 0], 5), "serve");
    }

    #[test]
    fn a_majority_disagreeing_refuses() {
        assert_eq!(verdict(&[-3_600_000, -3_600_010], 3), "refuse");
        assert_eq!(verdict(&[6000, 6000, 6000, 10], 5), "refuse");
    }

    #[test]
    fn too_few_answers_without_disagreement_keep_the_last_verdict() {
        assert_eq!(verdict(&[], 3), "keep");
        assert_eq!(verdict(&[10], 5), "keep");
        assert_eq!(verdict(&[10], 4), "keep");
    }

    #[test]
    fn a_single_node_serves() {
        assert_eq!(verdict(&[], 1), "serve");
    }
}
