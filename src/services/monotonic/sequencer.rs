//! The leader's sequencer for monotonic tags: IDs in real-time order across the whole cluster.
//!
//! Why it holds (the argument the tests check on recorded histories). It rests on Raft's quorum
//! intersection alone: no clock, no timeout and no persisted timing value is part of it.
//! - Only the leader serves, from ranges it claimed with `ClaimMonotonic` entries of its own
//!   term. A later leader has every committed entry, so its claims start above every range an
//!   earlier leader served from; a range is dropped as soon as the term changes, so a node that
//!   leads again never serves from a range of an earlier term.
//! - A batch of takes is answered only after a quorum acknowledged this leader's term once every
//!   take in the batch had arrived: a quorum of voters, each read after those takes arrived,
//!   answered that the vote they have saved is this leader's (`confirm`: asked after the batch
//!   formed, or a forwarding follower's vouch read after its batch formed; it falls back to openraft's heartbeat
//!   round, `get_read_log_id`, which counts only acknowledgements of appends it sends after it was
//!   called, each by a voter whose vote is this leader's), or a claim proposed after the batch was
//!   formed and committed in the same term (committed means a quorum appended it under this
//!   leader's vote). A newer leader needs the
//!   votes of a quorum, which shares a voter with that one; that voter granted its vote after it
//!   acknowledged (a voter that has granted a newer vote refuses this leader's appends), so the
//!   newer leader was elected, and answered anything, only after these takes arrived. Whatever a
//!   client had received before sending one of these takes therefore came from this leader
//!   (earlier on its cursor) or an older one (below its ranges).
//! - Within one leader, IDs come off one cursor, in the order takes are answered.
//!
//! Concurrent takes share one confirmation: the driver task takes everything queued, confirms
//! once, and answers all of it; the next batch forms while a confirmation is in flight. A
//! follower's forwarded batch (`Forwarded::TakeMonotonicBatch`) is one unit of the queue: its
//! takes share the confirmation and are cut in the order the follower sent them.
//!
//! Each take is judged on its own: a tag that does not exist (or whose claim failed) fails its
//! takes only. Only losing the leadership refuses a whole batch.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::time::Duration;

use openraft::ServerState;
use raft::Raft;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::cluster::attempt::from_write_error;
use crate::cluster::attempt::Attempt;
use crate::cluster::forward::MonotonicTake;
use crate::cluster::forward::Vouch;
use crate::error::Error;
use crate::error::ErrorCode;
use crate::services::monotonic::confirm::Confirmer;
use crate::services::monotonic::lane::shortfall;
use crate::services::monotonic::lane::Lane;
use leafraft_ids::step::Bounds;
use leafraft_ids::IdRange;
use leafraft_ids::StepPolicy;

/// The most takes one confirmation answers; more wait for the next round (a forwarded batch is
/// never split, so one round may exceed it by one batch).
const MAX_BATCH: usize = 4096;
/// The most IDs one take may ask for: what one claim holds, so a contiguous take fits one range
/// (the API allows 10,000; a forwarded take above this is refused).
const MAX_TAKE: u64 = MAX_STEP;
/// The most claims one tag makes for one round: the takes the API allows (at most 10,000 IDs
/// each) need at most `MAX_BATCH` × 10,000 IDs, which `MAX_STEP`-sized claims cover in five.
const MAX_CLAIMS_PER_ROUND: usize = 8;
/// Bounds of the range a claim asks for: the tag's step at least, `MAX_STEP` at most.
const MAX_STEP: u64 = leafraft_state::tag::MAX_STEP;
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

/// Each take's IDs (or why it got none), in the order of the takes.
pub type Answers = Vec<Result<Vec<IdRange>, Error>>;

/// Takes answered together: one caller's take, or a follower's whole forwarded batch.
struct Unit {
    takes: Vec<MonotonicTake>,
    /// The forwarding follower's saved vote, read after these takes reached it.
    vouch: Option<Vouch>,
    reply: oneshot::Sender<Result<Answers, Refused>>,
}

/// The handle: takes go to one driver task, which owns every range.
pub struct Sequencer {
    units: mpsc::UnboundedSender<Unit>,
}

impl Sequencer {
    /// Starts the driver; it ends when the sequencer is dropped. `timeout` bounds each claim and
    /// confirmation.
    pub fn start(raft: Raft, store: storage::StateMachineStore, confirmer: Confirmer, timeout: Duration) -> Sequencer {
        let (units, rx) = mpsc::unbounded_channel();
        tokio::spawn(Driver { raft, store, confirmer, timeout, tags: HashMap::new() }.run(rx));
        Sequencer { units }
    }

    /// `count` IDs of the monotonic `tag`, larger than every ID of it any client received
    /// before this call.
    pub async fn take(&self, tag: &str, count: u64) -> Result<Vec<IdRange>, Refused> {
        let take = MonotonicTake { tag: tag.to_string(), count, contiguous: false };
        let mut answers = self.take_batch(vec![take], None).await?;
        match answers.pop() {
            Some(answer) => answer.map_err(Refused::Failed),
            None => Err(Refused::Failed(Error::no_leader("the sequencer answered no take"))),
        }
    }

    /// Every take of `takes`, as one unit: one confirmation, cut in this order, each answered
    /// on its own (`Refused` only when the whole unit is: this node does not lead). `vouch`: the
    /// forwarding follower's saved vote, read after every one of `takes` reached it.
    pub async fn take_batch(&self, takes: Vec<MonotonicTake>, vouch: Option<Vouch>) -> Result<Answers, Refused> {
        let (reply, answer) = oneshot::channel();
        if self.units.send(Unit { takes, vouch, reply }).is_err() {
            return Err(Refused::Failed(Error::no_leader("this node is shutting down")));
        }
        answer.await.unwrap_or_else(|_| Err(Refused::Failed(Error::no_leader("this node is shutting down"))))
    }
}

struct Driver {
    raft: Raft,
    store: storage::StateMachineStore,
    confirmer: Confirmer,
    timeout: Duration,
    tags: HashMap<String, Lane>,
}

impl Driver {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Unit>) {
        while let Some(first) = rx.recv().await {
            let mut takes = first.takes.len();
            let mut batch = vec![first];
            while takes < MAX_BATCH {
                match rx.try_recv() {
                    Ok(unit) => {
                        takes += unit.takes.len();
                        batch.push(unit);
                    }
                    Err(_) => break,
                }
            }
            self.serve(batch).await;
        }
    }

    /// Answers one batch: claims what is missing, confirms leadership unless a claim already did,
    /// then cuts IDs in arrival order.
    async fn serve(&mut self, batch: Vec<Unit>) {
        let Some(term) = self.leading_term() else {
            self.tags.clear();
            return refuse_all(batch, || Refused::NotLeader);
        };
        self.tags.retain(|_, lane| lane.term == term);
        let deadline = Instant::now() + self.timeout;
        let (confirmed, failed) = match self.claim_what_is_short(&batch, term, deadline).await {
            Ok(claimed) => claimed,
            Err(refused) => {
                self.tags.clear();
                return refuse_all(batch, || refused.clone());
            }
        };
        // A committed claim of this batch confirmed the term already; otherwise one round of
        // asking the voters (`confirm`), counting a vouch every unit of the batch carries.
        if !confirmed {
            if let Err(attempt) = self.confirmer.confirm(term, common_vouch(&batch), deadline).await {
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
        for unit in batch {
            let answers = unit.takes.iter().map(|take| self.cut(take, &failed)).collect();
            let _ = unit.reply.send(Ok(answers));
        }
    }

    /// One take's IDs off its tag's lane, in the order takes are cut.
    fn cut(&mut self, take: &MonotonicTake, failed: &HashMap<String, Error>) -> Result<Vec<IdRange>, Error> {
        if let Some(invalid) = invalid(take) {
            return Err(invalid);
        }
        if let Some(error) = failed.get(&take.tag) {
            return Err(error.clone());
        }
        let lane = self.tags.get_mut(&take.tag);
        match lane.and_then(|lane| lane.cut(take.count, take.contiguous)) {
            Some(ranges) => Ok(ranges),
            // A claim shorter than asked (the tag's last IDs): what is left goes in order,
            // then the tag is exhausted.
            None => Err(Error::new(ErrorCode::TagExhausted, format!("tag '{}' has handed out its last ID", take.tag))),
        }
    }

    /// Claims, per tag, what its lane lacks to cut every take of `batch` in order. Answers
    /// whether a claim committed (which confirms the leadership for the batch) and the tags whose
    /// claim failed; `Refused` when this node stopped leading.
    async fn claim_what_is_short(
        &mut self,
        batch: &[Unit],
        term: u64,
        deadline: Instant,
    ) -> Result<(bool, HashMap<String, Error>), Refused> {
        let mut by_tag: HashMap<&str, Vec<(u64, bool)>> = HashMap::new();
        for take in batch.iter().flat_map(|unit| &unit.takes).filter(|take| invalid(take).is_none()) {
            by_tag.entry(take.tag.as_str()).or_default().push((take.count, take.contiguous));
        }
        let mut tags: Vec<(&str, Vec<(u64, bool)>)> = by_tag.into_iter().collect();
        tags.sort_by_key(|(tag, _)| *tag);
        let (mut confirmed, mut failed) = (false, HashMap::new());
        let none = VecDeque::new();
        for (tag, takes) in tags {
            for _ in 0..MAX_CLAIMS_PER_ROUND {
                let missing = shortfall(self.tags.get(tag).map_or(&none, |lane| &lane.ranges), &takes);
                if missing == 0 {
                    break;
                }
                match self.claim(tag, missing, term, deadline).await {
                    Ok(full) => {
                        confirmed = true;
                        if !full {
                            break;
                        }
                    }
                    Err(Refused::NotLeader) => return Err(Refused::NotLeader),
                    Err(Refused::Failed(error)) => {
                        failed.insert(tag.to_string(), error);
                        break;
                    }
                }
            }
        }
        Ok((confirmed, failed))
    }

    /// The term this node leads in, if it leads.
    fn leading_term(&self) -> Option<u64> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        (metrics.state == ServerState::Leader && metrics.current_leader == Some(metrics.id))
            .then_some(metrics.current_term)
    }

    /// Claims one range of `tag` in `term` holding at least `missing` IDs (at most `MAX_STEP`;
    /// a claim committed in another term is not served from). Answers whether the range is as
    /// long as asked: a shorter one holds the tag's last IDs.
    async fn claim(&mut self, tag: &str, missing: u64, term: u64, deadline: Instant) -> Result<bool, Refused> {
        let configured = self.store.read(|sm| sm.tags.get(tag).map(|record| record.step));
        let Some(configured) = configured else {
            return Err(Refused::Failed(Error::tag_not_found(tag)));
        };
        // Leaf's dynamic step, on a shorter clock: a leader claims on the write path of a
        // request, so a range should last about a second at the current rate.
        let step = match self.tags.get_mut(tag) {
            None => configured,
            Some(lane) => {
                lane.step = STEP_POLICY.next_step(configured, Some((lane.step, lane.claimed_at.elapsed())));
                lane.step
            }
        };
        let asked = step.max(missing).min(MAX_STEP);
        let request = leafraft_state::Request::ClaimMonotonic { tag: tag.to_string(), step: asked };
        let remaining = deadline.saturating_duration_since(Instant::now());
        let written = tokio::time::timeout(remaining, self.raft.client_write(request))
            .await
            .map_err(|_| Refused::Failed(Error::no_leader("the claim timed out")))?
            .map_err(|e| Refused::from(from_write_error(e)))?;
        if written.log_id.leader_id.term != term {
            return Err(Refused::NotLeader);
        }
        match written.data {
            leafraft_state::Response::Segment { start, end } => {
                let lane = self.tags.entry(tag.to_string()).or_insert_with(|| Lane::new(term, step));
                lane.ranges.push_back(IdRange { start, end });
                lane.claimed_at = Instant::now();
                Ok(end.saturating_sub(start) >= asked)
            }
            leafraft_state::Response::Rejected(rejection) => {
                Err(Refused::Failed(Error::from_rejection(tag, &rejection)))
            }
            other => Err(Refused::Failed(Error::no_leader(format!("unexpected answer to a claim: {other:?}")))),
        }
    }
}

/// Why a take cannot be served whatever the lanes hold (a forwarded take is checked here too).
fn invalid(take: &MonotonicTake) -> Option<Error> {
    (take.count == 0 || take.count > MAX_TAKE)
        .then(|| Error::invalid(format!("count must be between 1 and {MAX_TAKE}, got {}", take.count)))
}

/// The vouch every unit of `batch` carries, if they all carry the same one: a voter's read counts
/// for a take only if it came after that take arrived, so a vouch counts for the whole batch
/// only when it was given for each of its units.
fn common_vouch(batch: &[Unit]) -> Option<&Vouch> {
    let first = batch.first()?.vouch.as_ref()?;
    batch.iter().all(|unit| unit.vouch.as_ref() == Some(first)).then_some(first)
}

fn refuse_all(batch: Vec<Unit>, refused: impl Fn() -> Refused) {
    for unit in batch {
        let _ = unit.reply.send(Err(refused()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leafraft_state::typ;

    fn unit(vouch: Option<Vouch>) -> Unit {
        Unit { takes: Vec::new(), vouch, reply: oneshot::channel().0 }
    }

    #[test]
    fn a_vouch_counts_for_a_batch_only_when_every_unit_carries_it() {
        let vouch = |voter| Some(Vouch { voter, saved: Some(typ::Vote::new_committed(3, 1)) });
        assert_eq!(common_vouch(&[unit(vouch(2)), unit(vouch(2))]), vouch(2).as_ref());
        // A caller's own take, or another follower's batch, was not vouched for by this voter.
        assert_eq!(common_vouch(&[unit(vouch(2)), unit(None)]), None);
        assert_eq!(common_vouch(&[unit(None), unit(vouch(2))]), None);
        assert_eq!(common_vouch(&[unit(vouch(2)), unit(vouch(3))]), None);
        assert_eq!(common_vouch(&[]), None);
    }
}
