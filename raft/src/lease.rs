//! The leader's lease: for how long this leader may be sure, without asking anyone, that no newer
//! leader has been elected. The monotonic sequencer answers from it instead of one heartbeat
//! round per batch.
//!
//! Why it holds. openraft 0.9 keeps a follower from granting a vote for `election_timeout_max`
//! after it accepted an append from the leader it follows (its "leader lease", restarted from
//! the moment it starts up again after a crash), and from electing itself for longer still. So
//! when a quorum of every configuration of the membership accepted appends this leader sent at
//! or after `t`, no other node can gather a quorum of votes before `t + election_timeout_max`,
//! measured on those followers' clocks, which start no earlier than `t`. The lease here ends
//! sooner, at `t + duration` on this node's monotonic clock, with `duration` a fraction of that
//! (margin for clock rates that differ).
//!
//! The leader itself is the one vote openraft does not hold back: a leader grants a vote once
//! its own election is `election_timeout_max` old. So this node refuses every vote request while
//! its lease may be in force ([`LeaderLease::admit_vote`]), and a vote it lets through ends the
//! lease for good: acknowledgements of appends sent before the vote was answered no longer count.
//!
//! Appends are recorded by the network ([`LeaderLease::acknowledged`]), under the vote they were
//! sent with; nothing here reads the state machine.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use openraft::Vote;

use crate::NodeId;

/// One node's lease, shared by its network (which records acknowledgements), its `/raft/vote`
/// handler (which refuses votes while the lease may hold) and its sequencer (which asks whether
/// it holds).
#[derive(Debug)]
pub struct LeaderLease {
    duration: Duration,
    state: Mutex<LeaseState>,
}

#[derive(Debug, Default)]
struct LeaseState {
    /// The vote the recorded acknowledgements were sent under.
    vote: Option<Vote<NodeId>>,
    /// Per follower, when the latest acknowledged append under `vote` was sent.
    acked: BTreeMap<NodeId, Instant>,
    /// Appends sent before this do not count: a vote request was let through after it.
    floor: Option<Instant>,
}

impl LeaderLease {
    /// A lease of `duration` after the send time a quorum acknowledged; a zero duration never
    /// holds (and never holds votes back).
    pub fn new(duration: Duration) -> LeaderLease {
        LeaderLease { duration, state: Mutex::new(LeaseState::default()) }
    }

    /// The lease for a Raft configuration: three quarters of the time openraft's followers hold
    /// their votes back (`election_timeout_max`).
    pub fn for_config(config: &openraft::Config) -> LeaderLease {
        LeaderLease::new(Duration::from_millis(config.election_timeout_max) * 3 / 4)
    }

    /// `target` accepted an append this node sent at `sent_at` under `vote` (any answer but
    /// `HigherVote`: the follower took `vote` as its own, which restarts its lease).
    pub fn acknowledged(&self, target: NodeId, vote: &Vote<NodeId>, sent_at: Instant) {
        let mut state = self.lock();
        if state.floor.is_some_and(|floor| sent_at < floor) {
            return;
        }
        if state.vote.as_ref() != Some(vote) {
            state.vote = Some(*vote);
            state.acked.clear();
        }
        let latest = state.acked.entry(target).or_insert(sent_at);
        *latest = (*latest).max(sent_at);
    }

    /// Until when no leader newer than `vote` (this node's, as leader `own`) can exist: the send
    /// time that a quorum of each of `configs` acknowledged, plus the lease. This node counts as
    /// acknowledging at once, since it refuses votes while the lease may hold.
    pub fn expiry(&self, vote: &Vote<NodeId>, own: NodeId, configs: &[BTreeSet<NodeId>]) -> Option<Instant> {
        if self.duration.is_zero() || configs.is_empty() {
            return None;
        }
        let state = self.lock();
        if state.vote.as_ref() != Some(vote) {
            return None;
        }
        let mut start: Option<Instant> = None;
        for voters in configs {
            let mut sent: Vec<Option<Instant>> = voters
                .iter()
                .map(|id| if *id == own { Some(far_future()) } else { state.acked.get(id).copied() })
                .collect();
            // Newest first; `None` (never acknowledged) sorts last.
            sent.sort_unstable_by(|a, b| b.cmp(a));
            let quorum = voters.len() / 2 + 1;
            let quorum_sent = sent.get(quorum - 1).copied().flatten()?;
            start = Some(start.map_or(quorum_sent, |s| s.min(quorum_sent)));
        }
        start.map(|start| start + self.duration)
    }

    /// Whether the lease holds at `now` for `vote` (see [`LeaderLease::expiry`]).
    pub fn holds(&self, vote: &Vote<NodeId>, own: NodeId, configs: &[BTreeSet<NodeId>], now: Instant) -> bool {
        self.expiry(vote, own, configs).is_some_and(|expiry| now < expiry)
    }

    /// Whether this node may answer a vote request now. While any follower's acknowledgement is
    /// recent enough that a lease may hold, no (the candidate asks again later); otherwise yes,
    /// and nothing sent before now counts towards a lease any more.
    pub fn admit_vote(&self, now: Instant) -> bool {
        let mut state = self.lock();
        if !self.duration.is_zero() && state.acked.values().any(|sent| now < *sent + self.duration) {
            return false;
        }
        state.floor = Some(state.floor.map_or(now, |floor| floor.max(now)));
        state.acked.clear();
        true
    }

    /// A vote request let through has been answered at `now`: appends sent until then, which
    /// may have been acknowledged while the vote was being decided, do not count either.
    pub fn vote_answered(&self, now: Instant) {
        let mut state = self.lock();
        state.floor = Some(state.floor.map_or(now, |floor| floor.max(now)));
        state.acked.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LeaseState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A time later than any send: what the leader's own acknowledgement counts as.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(term: u64, leader: NodeId) -> Vote<NodeId> {
        Vote::new_committed(term, leader)
    }

    fn voters(ids: &[NodeId]) -> Vec<BTreeSet<NodeId>> {
        vec![ids.iter().copied().collect()]
    }

    const D: Duration = Duration::from_millis(450);

    #[test]
    fn a_lease_needs_a_quorum_and_runs_from_the_send_time() {
        let lease = LeaderLease::new(D);
        let t0 = Instant::now();
        let v = vote(3, 1);
        assert!(!lease.holds(&v, 1, &voters(&[1, 2, 3]), t0), "nothing acknowledged yet");
        lease.acknowledged(2, &v, t0);
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), Some(t0 + D), "leader and node 2 are a quorum of 3");
        assert!(lease.holds(&v, 1, &voters(&[1, 2, 3]), t0 + D - Duration::from_millis(1)));
        assert!(!lease.holds(&v, 1, &voters(&[1, 2, 3]), t0 + D));
        // Five voters: the leader and one follower are not a quorum; a second follower's older
        // acknowledgement is what the lease runs from.
        let five = voters(&[1, 2, 3, 4, 5]);
        assert_eq!(lease.expiry(&v, 1, &five), None);
        lease.acknowledged(3, &v, t0 - Duration::from_millis(100));
        assert_eq!(lease.expiry(&v, 1, &five), Some(t0 - Duration::from_millis(100) + D));
    }

    #[test]
    fn a_joint_membership_needs_a_quorum_of_each_configuration() {
        let lease = LeaderLease::new(D);
        let t0 = Instant::now();
        let v = vote(3, 1);
        lease.acknowledged(2, &v, t0);
        let joint = vec![BTreeSet::from([1, 2, 3]), BTreeSet::from([4, 5, 6])];
        assert_eq!(lease.expiry(&v, 1, &joint), None, "no quorum of the new configuration");
        lease.acknowledged(4, &v, t0);
        lease.acknowledged(5, &v, t0 + Duration::from_millis(5));
        assert_eq!(lease.expiry(&v, 1, &joint), Some(t0 + D));
    }

    #[test]
    fn acknowledgements_under_another_vote_do_not_count() {
        let lease = LeaderLease::new(D);
        let t0 = Instant::now();
        lease.acknowledged(2, &vote(3, 1), t0);
        assert_eq!(lease.expiry(&vote(4, 1), 1, &voters(&[1, 2, 3])), None);
        lease.acknowledged(3, &vote(4, 1), t0);
        assert_eq!(lease.expiry(&vote(3, 1), 1, &voters(&[1, 2, 3])), None, "the term-3 acknowledgements are gone");
        assert_eq!(lease.expiry(&vote(4, 1), 1, &voters(&[1, 2, 3])), Some(t0 + D));
    }

    #[test]
    fn votes_wait_while_a_lease_may_hold_and_a_vote_let_through_ends_it() {
        let lease = LeaderLease::new(D);
        let t0 = Instant::now();
        let v = vote(3, 1);
        lease.acknowledged(2, &v, t0);
        assert!(!lease.admit_vote(t0 + D / 2), "refused while node 2's acknowledgement is recent");
        assert!(lease.holds(&v, 1, &voters(&[1, 2, 3]), t0 + D / 2), "a refused vote changes nothing");
        assert!(lease.admit_vote(t0 + D));
        // An append sent before the vote was answered, acknowledged late, does not revive it.
        lease.acknowledged(2, &v, t0 + D + Duration::from_millis(1));
        lease.vote_answered(t0 + D + Duration::from_millis(2));
        lease.acknowledged(3, &v, t0 + D + Duration::from_millis(1));
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), None);
        // Appends sent after it count again (the node may lead again in a later term).
        let later = vote(5, 1);
        lease.acknowledged(3, &later, t0 + D + Duration::from_millis(3));
        assert_eq!(lease.expiry(&later, 1, &voters(&[1, 2, 3])), Some(t0 + D + Duration::from_millis(3) + D));
    }

    #[test]
    fn a_zero_lease_never_holds_and_never_holds_votes_back() {
        let lease = LeaderLease::new(Duration::ZERO);
        let t0 = Instant::now();
        let v = vote(3, 1);
        lease.acknowledged(2, &v, t0);
        lease.acknowledged(3, &v, t0);
        assert!(!lease.holds(&v, 1, &voters(&[1, 2, 3]), t0));
        assert!(lease.admit_vote(t0));
    }
}
