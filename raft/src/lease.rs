//! The leader's lease: for how long this leader may be sure, without asking anyone, that no newer
//! leader has been elected. The monotonic sequencer answers from it instead of one heartbeat
//! round per batch.
//!
//! Why it holds. openraft 0.9 keeps a follower from granting a vote for its own
//! `election_timeout_max` after it accepted an append from the leader it follows (its "leader
//! lease", restarted from the moment it starts up again after a crash), and from electing itself
//! for longer still. So when a quorum of every configuration of the membership accepted appends
//! this leader sent at or after `t_f`, no other node can gather a quorum of votes before the
//! earliest `t_f + hold_f` of that quorum, measured on those followers' clocks, which start no
//! earlier than `t_f`. Each follower reports its own `hold_f` with its answer (voters may run
//! different `--election-timeout-ms` during a rolling change; an answer without it does not
//! count). The lease here ends sooner, at `t_f + 3/4 hold_f` on this node's clock (margin for
//! clock rates that differ by up to a third).
//!
//! What voids it:
//! - The leader itself is the one vote openraft does not hold back: a leader grants a vote once
//!   its own election is `election_timeout_max` old. So this node refuses every vote request
//!   while its lease may be in force ([`LeaderLease::admit_vote`]); a vote it lets through ends
//!   the lease for good: acknowledgements of appends sent before the vote was answered no longer
//!   count, nor do acknowledgements under any vote not above the candidate's (a replication task
//!   of the old term may still send after the answer).
//! - A new membership: openraft lets a lone voter elect itself at its next tick, without any
//!   election timeout, and a new configuration takes effect on a follower as soon as it is in its
//!   log. So the lease ends when this node sends a configuration it has not sent before, counts
//!   again only on appends sent from then on, and never holds while the newest configuration it
//!   sent, or the caller's, has a single voter other than this node.
//!
//! Time is read from `CLOCK_BOOTTIME` ([`now`]), which keeps running while the machine is
//! suspended: `CLOCK_MONOTONIC` (std's `Instant`) stops, and a leader resumed after a suspend
//! would trust a lease its followers stopped honouring long ago. Followers measure their hold on
//! their own monotonic clock; one that is suspended holds its vote back longer, which is safe.
//!
//! Appends are recorded by the network ([`LeaderLease::sending_append`] before, and
//! [`LeaderLease::append_answered`] after), under the vote they were sent with; nothing here
//! reads the state machine.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use openraft::EntryPayload;
use openraft::LogId;
use openraft::Vote;
use rustix::time::ClockId;

use crate::typ;
use crate::NodeId;

/// The name of the response header in which a node answering `/raft/append` says how long it
/// holds its vote back after accepting an append (its `election_timeout_max`, in milliseconds).
pub const VOTE_HOLD_HEADER: &str = "x-leafraft-vote-hold-ms";

/// A point in time on `CLOCK_BOOTTIME`: time since boot, suspended time included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Moment(Duration);

impl Moment {
    /// The moment `since_boot` after boot (for tests).
    pub fn from_since_boot(since_boot: Duration) -> Moment {
        Moment(since_boot)
    }

    /// `self + by`, saturating.
    pub fn plus(self, by: Duration) -> Moment {
        Moment(self.0.saturating_add(by))
    }

    /// `self - by`, saturating at boot.
    pub fn minus(self, by: Duration) -> Moment {
        Moment(self.0.saturating_sub(by))
    }
}

/// Now, on `CLOCK_BOOTTIME`.
pub fn now() -> Moment {
    let time = rustix::time::clock_gettime(ClockId::Boottime);
    // The kernel never answers a negative time since boot; clamp rather than trust that.
    let secs = u64::try_from(time.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(time.tv_nsec).unwrap_or(0).min(999_999_999);
    Moment(Duration::new(secs, nanos))
}

/// One node's lease, shared by its network (which records acknowledgements), its `/raft/vote`
/// handler (which refuses votes while the lease may hold) and its sequencer (which asks whether
/// it holds).
#[derive(Debug)]
pub struct LeaderLease {
    /// Whether this node ever holds a lease as leader (a node built without one never does).
    enabled: bool,
    /// How long this node, as a follower, holds its vote back after an append: what it reports
    /// to leaders ([`VOTE_HOLD_HEADER`]).
    own_hold: Duration,
    state: Mutex<LeaseState>,
}

#[derive(Debug, Default)]
struct LeaseState {
    /// The vote the recorded acknowledgements were sent under.
    vote: Option<Vote<NodeId>>,
    /// Per follower, its latest acknowledgement under `vote`: the send time, and until when it
    /// keeps a lease (the send time plus 3/4 of the hold it reported with it; a follower that
    /// restarted with a shorter hold reports the shorter one, so the latest answer decides).
    acked: BTreeMap<NodeId, (Moment, Moment)>,
    /// After a restart with a shorter hold than the previous process promised: no vote before
    /// this (see [`LeaderLease::restarted`]).
    restart_hold_until: Option<Moment>,
    /// Appends sent before this do not count: a vote request was let through, or a new
    /// configuration was sent, after it.
    floor: Option<Moment>,
    /// The highest vote of a candidate this node let a vote request through for: acknowledgements
    /// under votes not above it never count again.
    voted_for: Option<Vote<NodeId>>,
    /// The newest configuration this node sent: its log ID and its voters.
    config: Option<(LogId<NodeId>, Vec<BTreeSet<NodeId>>)>,
    /// The hold each follower last reported, to say once when it differs from this node's own.
    reported: BTreeMap<NodeId, Duration>,
}

impl LeaderLease {
    /// A lease that this node may hold as leader; `own_hold` is how long it holds its vote back
    /// as a follower (openraft's `election_timeout_max`).
    pub fn new(own_hold: Duration) -> LeaderLease {
        LeaderLease { enabled: !own_hold.is_zero(), own_hold, state: Mutex::new(LeaseState::default()) }
    }

    /// A node that never holds a lease and never holds votes back.
    pub fn disabled() -> LeaderLease {
        LeaderLease::new(Duration::ZERO)
    }

    /// The lease of a node running `config`.
    pub fn for_config(config: &openraft::Config) -> LeaderLease {
        LeaderLease::new(Duration::from_millis(config.election_timeout_max))
    }

    /// What this node reports to leaders as its hold, if it keeps one.
    pub fn own_hold(&self) -> Option<Duration> {
        self.enabled.then_some(self.own_hold)
    }

    /// This node is about to send `rpc`: returns the send time to record its answer under, after
    /// ending the lease if `rpc` carries a configuration this node has not sent before.
    pub fn sending_append(&self, rpc: &typ::AppendEntriesRequest) -> Moment {
        let sent_at = now();
        let newest = rpc.entries.iter().rev().find_map(|entry| match &entry.payload {
            EntryPayload::Membership(membership) => Some((entry.log_id, membership.get_joint_config().clone())),
            _ => None,
        });
        if let Some((log_id, configs)) = newest {
            self.config_sent(log_id, configs, sent_at);
        }
        sent_at
    }

    /// This node is about to send a snapshot chunk of `meta`: the snapshot's configuration counts
    /// as sent (a follower installs it as its own).
    pub fn sending_snapshot(&self, meta: &typ::SnapshotMeta) {
        if let Some(log_id) = meta.last_membership.log_id() {
            self.config_sent(*log_id, meta.last_membership.membership().get_joint_config().clone(), now());
        }
    }

    fn config_sent(&self, log_id: LogId<NodeId>, configs: Vec<BTreeSet<NodeId>>, at: Moment) {
        let mut state = self.lock();
        if state.config.as_ref().is_some_and(|(sent, _)| *sent >= log_id) {
            return;
        }
        state.config = Some((log_id, configs));
        state.floor = Some(state.floor.map_or(at, |floor| floor.max(at)));
        state.acked.clear();
    }

    /// `target` answered an append this node sent at `sent_at` under `vote`, reporting `hold`
    /// (`None`: a node that reports none, whose answer never counts). Any answer but
    /// `HigherVote` means the follower took `vote` as its own, which restarts its hold.
    pub fn append_answered(
        &self,
        target: NodeId,
        vote: &Vote<NodeId>,
        sent_at: Moment,
        answer: &typ::AppendEntriesResponse,
        hold: Option<Duration>,
    ) {
        if matches!(answer, openraft::raft::AppendEntriesResponse::HigherVote(_)) {
            return;
        }
        let Some(hold) = hold else { return };
        self.acknowledged(target, vote, sent_at, hold);
    }

    /// `target` accepted an append this node sent at `sent_at` under `vote`, and holds its vote
    /// back for `hold` after accepting one.
    pub fn acknowledged(&self, target: NodeId, vote: &Vote<NodeId>, sent_at: Moment, hold: Duration) {
        let mut state = self.lock();
        if state.reported.insert(target, hold) != Some(hold) && hold != self.own_hold {
            tracing::warn!(
                follower = target,
                follower_hold_ms = hold.as_millis() as u64,
                own_hold_ms = self.own_hold.as_millis() as u64,
                "a follower runs another election timeout than this node: the lease counts each \
                 follower's own"
            );
        }
        if state.floor.is_some_and(|floor| sent_at < floor) {
            return;
        }
        if state.voted_for.is_some_and(|voted| !matches!(vote.partial_cmp(&voted), Some(std::cmp::Ordering::Greater))) {
            return;
        }
        if state.vote.as_ref() != Some(vote) {
            state.vote = Some(*vote);
            state.acked.clear();
        }
        let until = sent_at.plus(hold * 3 / 4);
        let latest = state.acked.entry(target).or_insert((sent_at, until));
        if sent_at >= latest.0 {
            *latest = (sent_at, until);
        }
    }

    /// This node just started, and its previous process promised to hold its vote back for
    /// `previous` after each append (`storage::vote_hold`). If that is longer than what this
    /// process runs with, the promise is kept: no vote is let through, and no election should be
    /// started ([`LeaderLease::restart_hold_until`]), until `previous` after now.
    pub fn restarted(&self, previous: Option<Duration>) {
        let Some(previous) = previous.filter(|previous| *previous > self.own_hold) else { return };
        tracing::warn!(
            previous_ms = previous.as_millis() as u64,
            now_ms = self.own_hold.as_millis() as u64,
            "the election timeout was lowered: this node keeps its previous vote hold for that long after \
             starting, as its previous process promised its leader"
        );
        self.lock().restart_hold_until = Some(now().plus(previous));
    }

    /// Until when this node keeps the longer hold of its previous process, if it does.
    pub fn restart_hold_until(&self) -> Option<Moment> {
        self.lock().restart_hold_until
    }

    /// Until when no leader newer than `vote` (this node's, as leader `own`) can exist: the time
    /// until which a quorum of each of `configs`, and of the newest configuration this node sent,
    /// holds its votes back. This node counts as holding its vote back for ever, since it refuses
    /// votes while the lease may hold.
    pub fn expiry(&self, vote: &Vote<NodeId>, own: NodeId, configs: &[BTreeSet<NodeId>]) -> Option<Moment> {
        if !self.enabled || configs.is_empty() {
            return None;
        }
        let state = self.lock();
        if state.vote.as_ref() != Some(vote) {
            return None;
        }
        let sent = state.config.iter().flat_map(|(_, sent)| sent.iter());
        let mut end: Option<Moment> = None;
        for voters in configs.iter().chain(sent) {
            if voters.len() == 1 && !voters.contains(&own) {
                // A lone voter elects itself at its next tick: nothing holds it back.
                return None;
            }
            let mut until: Vec<Option<Moment>> = voters
                .iter()
                .map(|id| {
                    if *id == own {
                        Some(Moment(Duration::MAX))
                    } else {
                        state.acked.get(id).map(|(_, until)| *until)
                    }
                })
                .collect();
            // Latest first; `None` (never acknowledged) sorts last.
            until.sort_unstable_by(|a, b| b.cmp(a));
            let quorum = voters.len() / 2 + 1;
            let quorum_until = until.get(quorum - 1).copied().flatten()?;
            end = Some(end.map_or(quorum_until, |e| e.min(quorum_until)));
        }
        end
    }

    /// Whether the lease holds at `now` for `vote` (see [`LeaderLease::expiry`]).
    pub fn holds(&self, vote: &Vote<NodeId>, own: NodeId, configs: &[BTreeSet<NodeId>], now: Moment) -> bool {
        self.expiry(vote, own, configs).is_some_and(|expiry| now < expiry)
    }

    /// Whether this node may answer a vote request of `candidate` now. While any follower's
    /// acknowledgement is recent enough that a lease may hold, no (the candidate asks again
    /// later); otherwise yes, and nothing sent before now, nor under a vote not above the
    /// candidate's, counts towards a lease any more.
    pub fn admit_vote(&self, candidate: &Vote<NodeId>, now: Moment) -> bool {
        let mut state = self.lock();
        if self.enabled && state.acked.values().any(|(_, until)| now < *until) {
            return false;
        }
        if state.restart_hold_until.is_some_and(|until| now < until) {
            return false;
        }
        state.floor = Some(state.floor.map_or(now, |floor| floor.max(now)));
        state.acked.clear();
        let higher =
            state.voted_for.is_none_or(|voted| candidate.partial_cmp(&voted) == Some(std::cmp::Ordering::Greater));
        if higher {
            state.voted_for = Some(*candidate);
        }
        true
    }

    /// A vote request let through has been answered at `now`: appends sent until then, which
    /// may have been acknowledged while the vote was being decided, do not count either.
    pub fn vote_answered(&self, now: Moment) {
        let mut state = self.lock();
        state.floor = Some(state.floor.map_or(now, |floor| floor.max(now)));
        state.acked.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LeaseState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Keeps the promise of a previous process that held its vote back longer
/// ([`LeaderLease::restarted`]): `raft` starts no election until then. Votes for others wait at
/// `/raft/vote` ([`LeaderLease::admit_vote`]); this covers the node's vote for itself.
pub fn keep_restart_hold(raft: &crate::Raft, lease: &LeaderLease) {
    let Some(until) = lease.restart_hold_until() else { return };
    let wait = until.0.saturating_sub(now().0);
    raft.runtime_config().elect(false);
    let raft = raft.clone();
    tokio::spawn(async move {
        // A timer, not a synchronisation: elections are allowed again once the promise ran out.
        tokio::time::sleep(wait).await;
        raft.runtime_config().elect(true);
    });
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Every node's hold in most tests, and the lease it gives: 3/4 of it.
    const HOLD: Duration = Duration::from_millis(600);
    const D: Duration = Duration::from_millis(450);

    fn t0() -> Moment {
        Moment::from_since_boot(Duration::from_secs(100))
    }

    #[test]
    fn a_lease_needs_a_quorum_and_runs_from_the_send_time() {
        let lease = LeaderLease::new(HOLD);
        let t0 = t0();
        let v = vote(3, 1);
        assert!(!lease.holds(&v, 1, &voters(&[1, 2, 3]), t0), "nothing acknowledged yet");
        lease.acknowledged(2, &v, t0, HOLD);
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), Some(t0.plus(D)), "leader and node 2 are a quorum of 3");
        assert!(lease.holds(&v, 1, &voters(&[1, 2, 3]), t0.plus(D).minus(ms(1))));
        assert!(!lease.holds(&v, 1, &voters(&[1, 2, 3]), t0.plus(D)));
        // Five voters: the leader and one follower are not a quorum; a second follower's older
        // acknowledgement is what the lease runs from.
        let five = voters(&[1, 2, 3, 4, 5]);
        assert_eq!(lease.expiry(&v, 1, &five), None);
        lease.acknowledged(3, &v, t0.minus(ms(100)), HOLD);
        assert_eq!(lease.expiry(&v, 1, &five), Some(t0.minus(ms(100)).plus(D)));
    }

    #[test]
    fn a_joint_membership_needs_a_quorum_of_each_configuration() {
        let lease = LeaderLease::new(HOLD);
        let t0 = t0();
        let v = vote(3, 1);
        lease.acknowledged(2, &v, t0, HOLD);
        let joint = vec![BTreeSet::from([1, 2, 3]), BTreeSet::from([4, 5, 6])];
        assert_eq!(lease.expiry(&v, 1, &joint), None, "no quorum of the new configuration");
        lease.acknowledged(4, &v, t0, HOLD);
        lease.acknowledged(5, &v, t0.plus(ms(5)), HOLD);
        assert_eq!(lease.expiry(&v, 1, &joint), Some(t0.plus(D)));
    }

    #[test]
    fn acknowledgements_under_another_vote_do_not_count() {
        let lease = LeaderLease::new(HOLD);
        let t0 = t0();
        lease.acknowledged(2, &vote(3, 1), t0, HOLD);
        assert_eq!(lease.expiry(&vote(4, 1), 1, &voters(&[1, 2, 3])), None);
        lease.acknowledged(3, &vote(4, 1), t0, HOLD);
        assert_eq!(lease.expiry(&vote(3, 1), 1, &voters(&[1, 2, 3])), None, "the term-3 acknowledgements are gone");
        assert_eq!(lease.expiry(&vote(4, 1), 1, &voters(&[1, 2, 3])), Some(t0.plus(D)));
    }

    /// Each follower holds its vote back for its own election timeout: the lease rests on what
    /// each reported, whatever this node's own setting.
    #[test]
    fn each_follower_counts_with_the_hold_it_reported() {
        let lease = LeaderLease::new(ms(2_000));
        let t0 = t0();
        let v = vote(3, 1);
        lease.acknowledged(2, &v, t0, HOLD);
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), Some(t0.plus(D)), "node 2's hold, not the leader's");
        lease.acknowledged(3, &v, t0, ms(1_000));
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), Some(t0.plus(ms(750))), "node 3 holds longer");
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3, 4, 5])), Some(t0.plus(D)), "five voters need both");
        assert_eq!(lease.own_hold(), Some(ms(2_000)), "what this node reports as a follower");
    }

    #[test]
    fn an_answer_without_a_hold_or_with_a_higher_vote_does_not_count() {
        let lease = LeaderLease::new(HOLD);
        let t0 = t0();
        let v = vote(3, 1);
        let success = openraft::raft::AppendEntriesResponse::Success;
        lease.append_answered(2, &v, t0, &success, None);
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), None, "a node that reports no hold");
        let higher = openraft::raft::AppendEntriesResponse::HigherVote(vote(4, 2));
        lease.append_answered(2, &v, t0, &higher, Some(HOLD));
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), None, "a follower that follows a newer leader");
        lease.append_answered(2, &v, t0, &success, Some(HOLD));
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), Some(t0.plus(D)));
    }

    #[test]
    fn votes_wait_while_a_lease_may_hold_and_a_vote_let_through_ends_it() {
        let lease = LeaderLease::new(HOLD);
        let t0 = t0();
        let v = vote(3, 1);
        let candidate = Vote::new(4, 2);
        lease.acknowledged(2, &v, t0, HOLD);
        assert!(!lease.admit_vote(&candidate, t0.plus(D / 2)), "refused while node 2's acknowledgement is recent");
        assert!(lease.holds(&v, 1, &voters(&[1, 2, 3]), t0.plus(D / 2)), "a refused vote changes nothing");
        assert!(lease.admit_vote(&candidate, t0.plus(D)));
        // An append sent before the vote was answered, acknowledged late, does not revive it.
        lease.acknowledged(2, &v, t0.plus(D).plus(ms(1)), HOLD);
        lease.vote_answered(t0.plus(D).plus(ms(2)));
        lease.acknowledged(3, &v, t0.plus(D).plus(ms(1)), HOLD);
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), None);
        // Appends sent after it under a newer vote count again (the node may lead again later).
        let later = vote(5, 1);
        lease.acknowledged(3, &later, t0.plus(D).plus(ms(3)), HOLD);
        assert_eq!(lease.expiry(&later, 1, &voters(&[1, 2, 3])), Some(t0.plus(D).plus(ms(3)).plus(D)));
    }

    /// A vote let through voids, for good, every acknowledgement under the vote this node led
    /// with: a replication task of the old term may still send an append after the vote was
    /// answered, and its acknowledgement must not make a lease of the old term hold again.
    #[test]
    fn regression_an_append_sent_after_a_granted_vote_does_not_count() {
        let lease = LeaderLease::new(HOLD);
        let t0 = t0();
        let v = vote(3, 1);
        assert!(lease.admit_vote(&Vote::new(4, 2), t0), "no acknowledgement yet: the vote goes through");
        lease.vote_answered(t0.plus(ms(1)));
        lease.acknowledged(2, &v, t0.plus(ms(2)), HOLD);
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), None, "an append of term 3 sent after the vote");
        // Not even a vote of the candidate's own term led by this node counts (it cannot be
        // compared with the candidate's).
        lease.acknowledged(2, &vote(4, 1), t0.plus(ms(3)), HOLD);
        assert_eq!(lease.expiry(&vote(4, 1), 1, &voters(&[1, 2, 3])), None);
    }

    fn membership_entry(index: u64, voters: &[NodeId]) -> typ::Entry {
        let ids: BTreeSet<NodeId> = voters.iter().copied().collect();
        let nodes: BTreeMap<NodeId, crate::Node> = ids.iter().map(|id| (*id, crate::Node::new("n", 1))).collect();
        let membership = openraft::Membership::new(vec![ids], nodes);
        typ::Entry {
            log_id: LogId::new(openraft::CommittedLeaderId::new(3, 1), index),
            payload: EntryPayload::Membership(membership),
        }
    }

    fn append(entries: Vec<typ::Entry>) -> typ::AppendEntriesRequest {
        openraft::raft::AppendEntriesRequest { vote: vote(3, 1), prev_log_id: None, entries, leader_commit: None }
    }

    /// Sending a new configuration ends the lease; it counts again on appends sent from then on,
    /// and never while the newest configuration's one voter is another node.
    #[test]
    fn regression_a_new_configuration_ends_the_lease() {
        let lease = LeaderLease::new(HOLD);
        let v = vote(3, 1);
        let before = now();
        lease.acknowledged(2, &v, before, HOLD);
        lease.acknowledged(3, &v, before, HOLD);
        assert!(lease.expiry(&v, 1, &voters(&[1, 2, 3])).is_some());
        let sent = lease.sending_append(&append(vec![membership_entry(7, &[1, 2])]));
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), None, "acknowledgements before the new configuration");
        lease.acknowledged(2, &v, sent, HOLD);
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), Some(sent.plus(D)), "{{1, 2}} and {{1, 2, 3}} both agree");
        // The same configuration sent again (to a follower behind) changes nothing.
        lease.sending_append(&append(vec![membership_entry(7, &[1, 2])]));
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), Some(sent.plus(D)));
        // A configuration whose lone voter is node 2: node 2 elects itself at its next tick.
        let sent = lease.sending_append(&append(vec![membership_entry(9, &[2])]));
        lease.acknowledged(2, &v, sent, HOLD);
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2])), None, "the newest configuration sent has one other voter");
        assert_eq!(lease.expiry(&v, 1, &voters(&[2])), None, "the caller's has one other voter");
    }

    /// The latest answer of a follower decides its hold, even when it is shorter: the follower
    /// restarted with a shorter election timeout and holds back only that long now.
    #[test]
    fn regression_a_follower_restarted_with_a_shorter_hold_counts_with_the_shorter_one() {
        let lease = LeaderLease::new(ms(2_000));
        let t0 = t0();
        let v = vote(3, 1);
        lease.acknowledged(2, &v, t0, ms(2_000));
        lease.acknowledged(2, &v, t0.plus(ms(100)), HOLD);
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), Some(t0.plus(ms(100)).plus(D)));
        // An older answer arriving late changes nothing.
        lease.acknowledged(2, &v, t0.plus(ms(50)), ms(2_000));
        assert_eq!(lease.expiry(&v, 1, &voters(&[1, 2, 3])), Some(t0.plus(ms(100)).plus(D)));
    }

    /// A node started with a shorter hold than its previous process promised keeps the longer
    /// one for that long: no vote goes through before.
    #[test]
    fn a_restart_with_a_shorter_hold_keeps_the_promised_one() {
        let lease = LeaderLease::new(HOLD);
        lease.restarted(Some(ms(600)));
        assert_eq!(lease.restart_hold_until(), None, "the same hold: nothing to keep");
        lease.restarted(Some(ms(60_000)));
        let until = lease.restart_hold_until().expect("held");
        assert!(!lease.admit_vote(&Vote::new(4, 2), now()), "the previous hold is still running");
        assert!(lease.admit_vote(&Vote::new(4, 2), until));
    }

    #[test]
    fn a_disabled_lease_never_holds_and_never_holds_votes_back() {
        let lease = LeaderLease::disabled();
        let t0 = t0();
        let v = vote(3, 1);
        lease.acknowledged(2, &v, t0, HOLD);
        lease.acknowledged(3, &v, t0, HOLD);
        assert!(!lease.holds(&v, 1, &voters(&[1, 2, 3]), t0));
        assert!(lease.admit_vote(&Vote::new(4, 2), t0));
        assert_eq!(lease.own_hold(), None, "and reports no hold as a follower");
    }

    /// `CLOCK_BOOTTIME` is `CLOCK_MONOTONIC` plus the time spent suspended: never behind it.
    #[test]
    fn the_lease_clock_is_never_behind_the_monotonic_clock() {
        let monotonic = rustix::time::clock_gettime(ClockId::Monotonic);
        let boot = now();
        let monotonic = Duration::new(monotonic.tv_sec as u64, monotonic.tv_nsec as u32);
        assert!(boot >= Moment::from_since_boot(monotonic), "{boot:?} is behind {monotonic:?}");
        assert!(now() >= boot);
    }
}
