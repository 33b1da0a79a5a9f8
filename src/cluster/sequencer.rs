//! The leader's sequencer for monotonic tags: IDs in real-time order across the whole cluster.
//!
//! Why it holds (the argument the tests check on recorded histories):
//! - Only the leader serves, from ranges it claimed with `ClaimMonotonic` entries of its own
//!   term. A later leader has every committed entry, so its claims start above every range an
//!   earlier leader served from; a range is dropped as soon as the term changes, so a node that
//!   leads again never serves from a range of an earlier term.
//! - A batch of takes is answered only after something confirmed, after every take in it had
//!   arrived, that no newer leader had been elected: this node's leader lease holding at that
//!   moment (`raft::lease`: a quorum acknowledged an append sent less than the lease ago, and
//!   none of them, this node included, grants a vote before the lease ends), a heartbeat round
//!   acknowledged by a quorum (`get_read_log_id`), or a claim proposed after the batch was
//!   formed and committed in the same term. Any newer leader needs a vote from a node of that
//!   quorum, cast after its acknowledgement (after the lease, for the lease), so it answers
//!   nobody before these takes arrived: whatever a client had received before sending one of
//!   these takes came from this leader (earlier in its cursor) or an older one (below its
//!   ranges).
//! - Within one leader, IDs come off one cursor, in the order takes are answered.
//!
//! Concurrent takes share one confirmation: the driver task takes everything queued, confirms
//! once, and answers all of it. While the lease holds, which heartbeats renew every
//! `heartbeat_interval`, a batch costs no message at all; without it, one heartbeat round.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::time::Duration;

use openraft::ServerState;
use raft::LeaderLease;
use raft::Raft;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::cluster::attempt::confirm_leadership;
use crate::cluster::attempt::from_write_error;
use crate::cluster::attempt::Attempt;
use crate::engine::step::Bounds;
use crate::engine::IdRange;
use crate::engine::StepPolicy;
use crate::error::Error;

/// The most takes one confirmation answers; more wait for the next round.
const MAX_BATCH: usize = 4096;
/// Bounds of the range a claim asks for: the tag's step at least, `MAX_STEP` at most.
const MAX_STEP: u64 = raft::tag::MAX_STEP;
/// Leaf's dynamic step on a shorter clock, within `[tag step, MAX_STEP]`: a range used up in less
/// than a second doubles the next claim, one that lasted longer than 30 s halves it (`halve_from`
/// is the first `Duration` past 30 s).
const STEP_POLICY: StepPolicy = StepPolicy {
    double_below: Duration::from_secs(1),
    halve_from: Duration::from_nanos(30_000_000_001),
    max_step: MAX_STEP,
    bounds: Bounds::Clamp,
};

/// Why a take was not answered with IDs.
#[derive(Debug, Clone)]
pub enum Refused {
    /// This node does not lead (or stopped leading before it could confirm): ask the leader.
    NotLeader,
    Failed(Error),
}

impl From<Attempt> for Refused {
    fn from(attempt: Attempt) -> Refused {
        match attempt {
            Attempt::NotLeader | Attempt::NotSent => Refused::NotLeader,
            Attempt::Failed(error) => Refused::Failed(error),
        }
    }
}

struct Take {
    tag: String,
    count: u64,
    reply: oneshot::Sender<Result<Vec<IdRange>, Refused>>,
}

/// The handle: takes go to one driver task, which owns every range.
pub struct Sequencer {
    takes: mpsc::UnboundedSender<Take>,
}

impl Sequencer {
    /// Starts the driver; it ends when the sequencer is dropped. `timeout` bounds each claim and
    /// confirmation.
    pub fn start(
        raft: Raft,
        store: storage::StateMachineStore,
        lease: std::sync::Arc<LeaderLease>,
        timeout: Duration,
    ) -> Sequencer {
        let (takes, rx) = mpsc::unbounded_channel();
        tokio::spawn(Driver { raft, store, lease, timeout, tags: HashMap::new() }.run(rx));
        Sequencer { takes }
    }

    /// `count` IDs of the monotonic `tag`, larger than every ID of it any client received
    /// before this call.
    pub async fn take(&self, tag: &str, count: u64) -> Result<Vec<IdRange>, Refused> {
        let (reply, answer) = oneshot::channel();
        let take = Take { tag: tag.to_string(), count, reply };
        if self.takes.send(take).is_err() {
            return Err(Refused::Failed(Error::no_leader("this node is shutting down")));
        }
        answer.await.unwrap_or_else(|_| Err(Refused::Failed(Error::no_leader("this node is shutting down"))))
    }
}

/// This leader's ranges of one tag, all claimed in `term`.
struct Lane {
    term: u64,
    ranges: VecDeque<IdRange>,
    /// What the next claim asks for.
    step: u64,
    claimed_at: Instant,
}

impl Lane {
    fn available(&self) -> u64 {
        self.ranges.iter().map(IdRange::len).sum()
    }

    /// Takes `count` IDs off the front; the caller made sure there are enough.
    fn cut(&mut self, mut count: u64) -> Vec<IdRange> {
        let mut out = Vec::new();
        while count > 0 {
            let Some(front) = self.ranges.front_mut() else { break };
            let n = count.min(front.len());
            out.push(IdRange { start: front.start, end: front.start + n });
            front.start += n;
            count -= n;
            if front.is_empty() {
                self.ranges.pop_front();
            }
        }
        out
    }
}

struct Driver {
    raft: Raft,
    store: storage::StateMachineStore,
    lease: std::sync::Arc<LeaderLease>,
    timeout: Duration,
    tags: HashMap<String, Lane>,
}

impl Driver {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Take>) {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(take) => batch.push(take),
                    Err(_) => break,
                }
            }
            self.serve(batch).await;
        }
    }

    /// Answers one batch: claims what is missing, confirms leadership unless a claim already did,
    /// then cuts IDs in arrival order.
    async fn serve(&mut self, batch: Vec<Take>) {
        let Some(term) = self.leading_term() else {
            self.tags.clear();
            return refuse_all(batch, || Refused::NotLeader);
        };
        self.tags.retain(|_, lane| lane.term == term);
        let deadline = Instant::now() + self.timeout;
        let mut needed: HashMap<&str, u64> = HashMap::new();
        for take in &batch {
            let total = needed.entry(take.tag.as_str()).or_default();
            *total = total.saturating_add(take.count);
        }
        let mut confirmed = false;
        let mut failed: HashMap<String, Error> = HashMap::new();
        let mut short: Vec<(String, u64)> = needed
            .into_iter()
            .filter(|(tag, n)| self.tags.get(*tag).map_or(0, Lane::available) < *n)
            .map(|(tag, n)| (tag.to_string(), n))
            .collect();
        short.sort();
        for (tag, n) in short {
            match self.claim(&tag, n, term, deadline).await {
                Ok(()) => confirmed = true,
                Err(Refused::NotLeader) => {
                    self.tags.clear();
                    return refuse_all(batch, || Refused::NotLeader);
                }
                Err(Refused::Failed(error)) => {
                    failed.insert(tag, error);
                }
            }
        }
        if !confirmed && !self.lease_holds(term) {
            if let Err(attempt) = confirm_leadership(&self.raft, deadline).await {
                self.tags.clear();
                let refused = Refused::from(attempt);
                return refuse_all(batch, || refused.clone());
            }
        }
        // The confirmation (or claim) holds for this term only.
        if self.leading_term() != Some(term) {
            self.tags.clear();
            return refuse_all(batch, || Refused::NotLeader);
        }
        for take in batch {
            let answer = match (failed.get(&take.tag), self.tags.get_mut(&take.tag)) {
                (Some(error), _) => Err(Refused::Failed(error.clone())),
                (None, Some(lane)) if lane.available() >= take.count => Ok(lane.cut(take.count)),
                // A claim shorter than asked (the tag's last IDs): what is left goes in order,
                // then the tag is exhausted.
                _ => Err(Refused::Failed(Error::new(
                    crate::error::ErrorCode::TagExhausted,
                    format!("tag '{}' has handed out its last ID", take.tag),
                ))),
            };
            let _ = take.reply.send(answer);
        }
    }

    /// Whether this node's lease as leader of `term` holds now (checked after every take of the
    /// batch arrived).
    fn lease_holds(&self, term: u64) -> bool {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let vote = metrics.vote;
        if !vote.is_committed() || vote.leader_id.term != term || vote.leader_id.node_id != metrics.id {
            return false;
        }
        let configs = metrics.membership_config.membership().get_joint_config();
        self.lease.holds(&vote, metrics.id, configs, raft::lease::now())
    }

    /// The term this node leads in, if it leads.
    fn leading_term(&self) -> Option<u64> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        (metrics.state == ServerState::Leader && metrics.current_leader == Some(metrics.id))
            .then_some(metrics.current_term)
    }

    /// Claims at least `needed` more IDs of `tag` in `term` (a claim committed in another term
    /// is not served from).
    async fn claim(&mut self, tag: &str, needed: u64, term: u64, deadline: Instant) -> Result<(), Refused> {
        let configured = self.store.read(|sm| sm.tags.get(tag).map(|record| record.step));
        let Some(configured) = configured else {
            return Err(Refused::Failed(Error::tag_not_found(tag)));
        };
        // Leaf's dynamic step, on a shorter clock: a leader claims on the write path of a
        // request, so a range should last about a second at the current rate.
        let (step, missing) = match self.tags.get_mut(tag) {
            None => (configured, needed),
            Some(lane) => {
                lane.step = STEP_POLICY.next_step(configured, Some((lane.step, lane.claimed_at.elapsed())));
                (lane.step, needed.saturating_sub(lane.available()))
            }
        };
        let step = step.max(missing).min(MAX_STEP);
        let request = raft::Request::ClaimMonotonic { tag: tag.to_string(), step };
        let remaining = deadline.saturating_duration_since(Instant::now());
        let written = tokio::time::timeout(remaining, self.raft.client_write(request))
            .await
            .map_err(|_| Refused::Failed(Error::no_leader("the claim timed out")))?
            .map_err(|e| Refused::from(from_write_error(e)))?;
        if written.log_id.leader_id.term != term {
            return Err(Refused::NotLeader);
        }
        match written.data {
            raft::Response::Segment { start, end } => {
                let lane = self.tags.entry(tag.to_string()).or_insert_with(|| Lane {
                    term,
                    ranges: VecDeque::new(),
                    step,
                    claimed_at: Instant::now(),
                });
                lane.ranges.push_back(IdRange { start, end });
                lane.claimed_at = Instant::now();
                Ok(())
            }
            raft::Response::Rejected(rejection) => Err(Refused::Failed(Error::from_rejection(tag, &rejection))),
            other => Err(Refused::Failed(Error::no_leader(format!("unexpected answer to a claim: {other:?}")))),
        }
    }
}

fn refuse_all(batch: Vec<Take>, refused: impl Fn() -> Refused) {
    for take in batch {
        let _ = take.reply.send(Err(refused()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(ranges: &[(u64, u64)]) -> Lane {
        Lane {
            term: 1,
            ranges: ranges.iter().map(|&(start, end)| IdRange { start, end }).collect(),
            step: 10,
            claimed_at: Instant::now(),
        }
    }

    #[test]
    fn a_lane_cuts_in_order_across_ranges() {
        let mut lane = lane(&[(10, 13), (20, 30)]);
        assert_eq!(lane.available(), 13);
        assert_eq!(lane.cut(2), vec![IdRange { start: 10, end: 12 }]);
        assert_eq!(lane.cut(3), vec![IdRange { start: 12, end: 13 }, IdRange { start: 20, end: 22 }]);
        assert_eq!(lane.cut(8), vec![IdRange { start: 22, end: 30 }]);
        assert_eq!(lane.available(), 0);
    }
}
