//! Property tests of `IdStateMachine`: a model of several nodes that create tags, claim segments,
//! serve IDs from them and give back never-served tails (delivered late, out of order or never),
//! checked against the one rule (no ID handed out twice) and against determinism of `apply`.
//!
//! The deterministic tests at the end pin down the interleavings the safety argument of
//! `ReleaseSegment` depends on.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashSet;

use openraft::testing::log_id;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use proptest::test_runner::TestCaseError;

use super::*;
use crate::codec;
use crate::ImportRow;
use crate::Node;

const NODES: usize = 3;
/// Three valid names and one that is invalid (so never created): requests naming it exercise the
/// validation and not-found paths.
const TAGS: [&str; 4] = ["order", "coupon", "msg.v2:a-b", "not a tag"];
const LIMIT: u64 = tag::MAX_ID_LIMIT;

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

/// How an update moves `max_id`, resolved against the current value when the op runs so that
/// "lower by one" and "keep" actually happen (absolute random values would almost never).
#[derive(Debug, Clone)]
enum MaxIdChange {
    Lower(u64),
    Keep,
    Raise(u64),
    To(u64),
}

impl MaxIdChange {
    fn resolve(&self, current: u64) -> u64 {
        match self {
            MaxIdChange::Lower(by) => current.saturating_sub(*by),
            MaxIdChange::Keep => current,
            MaxIdChange::Raise(by) => current.saturating_add(*by),
            MaxIdChange::To(to) => *to,
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        tag: usize,
        max_id: u64,
        step: u64,
        description: usize,
        now_ms: u64,
    },
    /// A forwarded create retried verbatim (same `now_ms`), as after a timeout.
    RetryLastCreate,
    Claim {
        node: usize,
        tag: usize,
        step: u64,
    },
    /// Serve up to `count` IDs from one of the node's open buffers of the tag.
    Serve {
        node: usize,
        tag: usize,
        pick: usize,
        count: u64,
    },
    /// Close one of the node's open buffers at its cursor and queue the release of its tail.
    Release {
        node: usize,
        tag: usize,
        pick: usize,
    },
    /// Commit one queued release (any of them: deliveries are late and out of order).
    Deliver {
        pick: usize,
    },
    Update {
        tag: usize,
        step: Option<u64>,
        description: Option<usize>,
        max_id: Option<MaxIdChange>,
        now_ms: u64,
    },
    /// `leafraft tag import`: several tags created or raised in one entry (all or none).
    Import {
        rows: Vec<(usize, MaxIdChange, u64, Option<usize>)>,
        now_ms: u64,
    },
    /// Replace the state by its snapshot (encode, decode), as a follower installing it would.
    Snapshot,
    /// A new leader: a blank entry in a higher term.
    NewTerm,
}

fn step() -> impl Strategy<Value = u64> {
    prop_oneof![
        1 => Just(0),
        6 => 1..=20u64,
        6 => 1..=3000u64,
        1 => Just(tag::MAX_STEP),
        1 => Just(tag::MAX_STEP + 1),
        1 => Just(u64::MAX),
    ]
}

fn initial_max_id() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(1),
        2 => 1..10_000u64,
        3 => (LIMIT - 5000)..=LIMIT,
        1 => Just(0),
        1 => Just(LIMIT + 1),
        1 => any::<u64>(),
    ]
}

/// A description length; the largest is one byte over the limit.
fn description() -> impl Strategy<Value = usize> {
    prop_oneof![8 => 0..4usize, 1 => Just(tag::MAX_DESCRIPTION_LEN), 1 => Just(tag::MAX_DESCRIPTION_LEN + 1)]
}

fn max_id_change() -> impl Strategy<Value = MaxIdChange> {
    prop_oneof![
        (1..100u64).prop_map(MaxIdChange::Lower),
        Just(MaxIdChange::Keep),
        (1..5000u64).prop_map(MaxIdChange::Raise),
        initial_max_id().prop_map(MaxIdChange::To),
    ]
}

/// Mostly the valid tags: requests naming the invalid one only need to show up now and then.
fn tag() -> impl Strategy<Value = usize> + Clone {
    prop_oneof![9 => 0..TAGS.len() - 1, 1 => Just(TAGS.len() - 1)]
}

fn op() -> impl Strategy<Value = Op> {
    let node = 0..NODES;
    let tag = tag();
    prop_oneof![
        3 => (tag.clone(), initial_max_id(), step(), description(), 0..3u64)
            .prop_map(|(tag, max_id, step, description, now_ms)| Op::Create { tag, max_id, step, description, now_ms }),
        1 => Just(Op::RetryLastCreate),
        8 => (node.clone(), tag.clone(), step()).prop_map(|(node, tag, step)| Op::Claim { node, tag, step }),
        8 => (node.clone(), tag.clone(), any::<usize>(), 0..40u64)
            .prop_map(|(node, tag, pick, count)| Op::Serve { node, tag, pick, count }),
        4 => (node, tag.clone(), any::<usize>()).prop_map(|(node, tag, pick)| Op::Release { node, tag, pick }),
        4 => any::<usize>().prop_map(|pick| Op::Deliver { pick }),
        2 => (
            tag.clone(),
            proptest::option::of(step()),
            proptest::option::of(description()),
            proptest::option::of(max_id_change()),
            0..1000u64
        )
            .prop_map(|(tag, step, description, max_id, now_ms)| Op::Update { tag, step, description, max_id, now_ms }),
        1 => (proptest::collection::vec((tag.clone(), max_id_change(), step(), proptest::option::of(description())), 0..4), 0..1000u64)
            .prop_map(|(rows, now_ms)| Op::Import { rows, now_ms }),
        1 => Just(Op::Snapshot),
        1 => Just(Op::NewTerm),
    ]
}

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

/// One successful claim as its node sees it.
#[derive(Debug)]
struct Claim {
    node: usize,
    tag: usize,
    start: u64,
    end: u64,
    /// The next ID this node would serve from the claim.
    cursor: u64,
    /// The release of this claim's tail has been proposed: the buffer is closed for good.
    closed: bool,
    /// The end of the handed-out part: `end`, or `from` once this claim's release applied
    /// ("a released tail counts as never handed out").
    handed_out_end: u64,
}

/// A proposed release that is not committed yet.
#[derive(Debug)]
struct Pending {
    claim: usize,
    request: Request,
}

struct Model {
    sm: IdStateMachine,
    /// Every entry applied to `sm`, in order, with the answer it gave: the Raft log.
    log: Vec<(typ::Entry, Response)>,
    term: u64,
    claims: Vec<Claim>,
    pending: Vec<Pending>,
    served: HashSet<(usize, u64)>,
    /// Per tag: a claim was answered TAG_EXHAUSTED and no release has applied since.
    exhausted: [bool; TAGS.len()],
    last_create: Option<Request>,
}

impl Model {
    fn new() -> Self {
        let mut model = Model {
            sm: IdStateMachine::default(),
            log: Vec::new(),
            term: 1,
            claims: Vec::new(),
            pending: Vec::new(),
            served: HashSet::new(),
            exhausted: [false; TAGS.len()],
            last_create: None,
        };
        // A real log starts with the initial membership.
        let nodes: BTreeMap<u64, Node> =
            (1..=NODES as u64).map(|id| (id, Node::new(format!("10.0.0.{id}:8080"), id))).collect();
        let voters: BTreeSet<u64> = nodes.keys().copied().collect();
        let membership = typ::Membership::new(vec![voters], nodes);
        model.append(EntryPayload::Membership(membership));
        model
    }

    fn append(&mut self, payload: EntryPayload<crate::TypeConfig>) -> Response {
        let index = self.log.len() as u64 + 1;
        let leader = self.term % NODES as u64 + 1;
        let entry = typ::Entry { log_id: log_id(self.term, leader, index), payload };
        let response = self.sm.apply(&entry);
        self.log.push((entry, response.clone()));
        response
    }

    /// Applies one request as a committed log entry and checks the rules every request obeys.
    fn propose(&mut self, request: Request) -> Result<Response, TestCaseError> {
        let before = self.sm.clone();
        let response = self.append(EntryPayload::Normal(request.clone()));
        let log_id = self.sm.last_applied;
        check_request(&before, log_id, &request, &response, &self.sm)?;
        Ok(response)
    }

    fn run(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Create { tag, max_id, step, description, now_ms } => {
                let request = Request::CreateTag {
                    tag: TAGS[*tag].to_string(),
                    max_id: *max_id,
                    step: *step,
                    description: "d".repeat(*description),
                    now_ms: *now_ms,
                };
                self.last_create = Some(request.clone());
                self.propose(request)?;
            }
            Op::RetryLastCreate => {
                if let Some(request) = self.last_create.clone() {
                    self.propose(request)?;
                }
            }
            Op::Claim { node, tag, step } => self.claim(*node, *tag, *step)?,
            Op::Serve { node, tag, pick, count } => self.serve(*node, *tag, *pick, *count)?,
            Op::Release { node, tag, pick } => {
                let open = self.open_claims(*node, *tag);
                if !open.is_empty() {
                    let index = open[pick % open.len()];
                    let claim = &mut self.claims[index];
                    claim.closed = true;
                    let request = Request::ReleaseSegment {
                        tag: TAGS[claim.tag].to_string(),
                        from: claim.cursor,
                        expected_max_id: claim.end,
                    };
                    self.pending.push(Pending { claim: index, request });
                }
            }
            Op::Deliver { pick } => {
                if !self.pending.is_empty() {
                    // Removed from the queue: each claim's release is proposed at most once.
                    let Pending { claim, request } = self.pending.swap_remove(pick % self.pending.len());
                    self.deliver(claim, request)?;
                }
            }
            Op::Update { tag, step, description, max_id, now_ms } => {
                let current = self.sm.tags.get(TAGS[*tag]).map_or(1, |r| r.max_id);
                let max_id = max_id.as_ref().map(|change| change.resolve(current));
                let request = Request::UpdateTag {
                    tag: TAGS[*tag].to_string(),
                    step: *step,
                    description: description.map(|n| "u".repeat(n)),
                    max_id,
                    now_ms: *now_ms,
                };
                self.propose(request)?;
            }
            Op::Import { rows, now_ms } => {
                let rows = rows
                    .iter()
                    .map(|(tag, change, step, description)| {
                        let current = self.sm.tags.get(TAGS[*tag]).map_or(1, |r| r.max_id);
                        ImportRow {
                            tag: TAGS[*tag].to_string(),
                            max_id: change.resolve(current),
                            step: *step,
                            description: description.map(|n| "i".repeat(n)),
                        }
                    })
                    .collect();
                self.propose(Request::ImportTags { rows, now_ms: *now_ms })?;
            }
            Op::Snapshot => {
                let bytes = codec::encode(&self.sm).map_err(fail)?;
                let restored: IdStateMachine = codec::decode(&bytes).map_err(fail)?;
                prop_assert_eq!(&restored, &self.sm);
                self.sm = restored;
            }
            Op::NewTerm => {
                self.term += 1;
                self.append(EntryPayload::Blank);
            }
        }
        Ok(())
    }

    fn claim(&mut self, node: usize, tag: usize, step: u64) -> Result<(), TestCaseError> {
        let response = self.propose(Request::ClaimSegment { tag: TAGS[tag].to_string(), step })?;
        match response {
            Response::Segment { start, end } => {
                prop_assert!(!self.exhausted[tag], "claim {start}..{end} succeeded after TAG_EXHAUSTED");
                // The one rule, on ranges: the new range overlaps no handed-out part of any
                // earlier claim of the tag, whoever made it and whether or not it was served.
                for other in self.claims.iter().filter(|c| c.tag == tag) {
                    prop_assert!(
                        !overlap((start, end), (other.start, other.handed_out_end)),
                        "claim {start}..{end} overlaps the handed-out part {}..{} of node {}'s claim {}..{}",
                        other.start,
                        other.handed_out_end,
                        other.node,
                        other.start,
                        other.end
                    );
                }
                self.claims.push(Claim { node, tag, start, end, cursor: start, closed: false, handed_out_end: end });
            }
            Response::Rejected(Rejection::TagExhausted) => self.exhausted[tag] = true,
            _ => {}
        }
        Ok(())
    }

    fn serve(&mut self, node: usize, tag: usize, pick: usize, count: u64) -> Result<(), TestCaseError> {
        let open = self.open_claims(node, tag);
        if open.is_empty() {
            return Ok(());
        }
        let claim = &mut self.claims[open[pick % open.len()]];
        let until = claim.end.min(claim.cursor.saturating_add(count));
        for id in claim.cursor..until {
            prop_assert!((1..LIMIT).contains(&id), "served ID {id} out of range");
            prop_assert!(self.served.insert((tag, id)), "ID {id} of tag {} served twice", TAGS[tag]);
        }
        claim.cursor = until;
        Ok(())
    }

    fn deliver(&mut self, claim: usize, request: Request) -> Result<(), TestCaseError> {
        let response = self.propose(request.clone())?;
        if response == (Response::Released { applied: true }) {
            let Request::ReleaseSegment { from, expected_max_id, .. } = request else {
                return Err(fail("a queued request that is not a release"));
            };
            let claim = &mut self.claims[claim];
            prop_assert_eq!(expected_max_id, claim.end);
            prop_assert!(claim.start <= from && from < claim.end && from == claim.cursor);
            claim.handed_out_end = from;
            // The tail went back: the tag may hand it out again even if it was exhausted.
            self.exhausted[claim.tag] = false;
        }
        Ok(())
    }

    /// Indices of the node's claims of the tag it may still serve from or release.
    fn open_claims(&self, node: usize, tag: usize) -> Vec<usize> {
        let open = |c: &&Claim| c.node == node && c.tag == tag && !c.closed;
        self.claims.iter().enumerate().filter(|(_, c)| open(c)).map(|(i, _)| i).collect()
    }

    /// Across the whole run: no two claims' handed-out parts overlap, and every served ID lies in
    /// the handed-out part of a claim (so "served IDs are unique" follows from the first).
    fn check_end(&self) -> Result<(), TestCaseError> {
        for (i, a) in self.claims.iter().enumerate() {
            prop_assert!(a.start <= a.cursor && a.cursor <= a.handed_out_end && a.handed_out_end <= a.end, "{a:?}");
            for b in self.claims.iter().skip(i + 1).filter(|b| b.tag == a.tag) {
                prop_assert!(
                    !overlap((a.start, a.handed_out_end), (b.start, b.handed_out_end)),
                    "handed-out parts overlap: {a:?} {b:?}"
                );
            }
        }
        let served_from_claims: u64 = self.claims.iter().map(|c| c.cursor - c.start).sum();
        prop_assert_eq!(served_from_claims, self.served.len() as u64);
        Ok(())
    }
}

/// Whether two half-open ranges share an ID; an empty range (a claim whose whole range was
/// given back) shares none.
fn overlap(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1
}

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

/// The rules one applied request obeys, from the states before and after it.
fn check_request(
    before: &IdStateMachine,
    log_id: Option<typ::LogId>,
    request: &Request,
    response: &Response,
    after: &IdStateMachine,
) -> Result<(), TestCaseError> {
    let changed = matches!(
        response,
        Response::Tag { .. }
            | Response::Segment { .. }
            | Response::Released { applied: true }
            | Response::Imported { .. }
    );
    if !changed {
        // A rejected request changes nothing but the applied log id, which every entry advances.
        let mut expected = before.clone();
        expected.last_applied = log_id;
        prop_assert_eq!(codec::encode(&expected).map_err(fail)?, codec::encode(after).map_err(fail)?);
    }

    // Only the named tag may change, and `max_id` goes down only through a release that found
    // `max_id == expected_max_id`, and then to exactly `from`.
    let names: BTreeSet<&String> = before.tags.keys().chain(after.tags.keys()).collect();
    for name in names {
        let (old, new) = (before.tags.get(name), after.tags.get(name));
        let imported = matches!(request, Request::ImportTags { rows, .. } if rows.iter().any(|row| &row.tag == name));
        if Some(name.as_str()) != request.tag() && !imported {
            prop_assert_eq!(old, new, "tag {} changed by {:?}", name, request);
            continue;
        }
        prop_assert!(old.is_none() || new.is_some(), "tag {name} disappeared");
        if let (Some(old), Some(new)) = (old, new) {
            if new.max_id < old.max_id {
                let is_release = matches!(request,
                    Request::ReleaseSegment { from, expected_max_id, .. }
                        if *expected_max_id == old.max_id && new.max_id == *from);
                prop_assert!(is_release, "max_id {} -> {} by {:?}", old.max_id, new.max_id, request);
            }
        }
    }
    for record in after.tags.values() {
        prop_assert!((1..=LIMIT).contains(&record.max_id), "{record:?}");
    }

    let old_max = request.tag().and_then(|t| before.tags.get(t)).map(|r| r.max_id);
    let new_max = request.tag().and_then(|t| after.tags.get(t)).map(|r| r.max_id);
    match (request, response) {
        (Request::ClaimSegment { step, .. }, Response::Segment { start, end }) => {
            // A claim answers `[max_id, max_id + step)`, cut at the limit, never empty.
            prop_assert_eq!(Some(*start), old_max);
            prop_assert_eq!(*end, start.saturating_add(*step).min(LIMIT));
            prop_assert!(1 <= *start && start < end && *end <= LIMIT, "{start}..{end}");
            prop_assert_eq!(new_max, Some(*end));
        }
        (Request::ClaimSegment { step, .. }, Response::Rejected(rejection)) => {
            // Checked in this order: the step, then the tag, then room left below the limit.
            let as_expected = if tag::validate_step(*step).is_err() {
                matches!(rejection, Rejection::InvalidArgument(_))
            } else if old_max.is_none() {
                *rejection == Rejection::TagNotFound
            } else {
                *rejection == Rejection::TagExhausted && old_max == Some(LIMIT)
            };
            prop_assert!(as_expected, "{rejection:?} for {request:?} with max_id {old_max:?}");
        }
        (Request::ReleaseSegment { from, expected_max_id, .. }, Response::Released { applied }) => {
            let applies = old_max == Some(*expected_max_id) && 1 <= *from && from < expected_max_id;
            prop_assert_eq!(*applied, applies);
            prop_assert_eq!(new_max, if applies { Some(*from) } else { old_max });
        }
        (Request::ReleaseSegment { .. }, Response::Rejected(rejection)) => {
            prop_assert_eq!(rejection, &Rejection::TagNotFound);
            prop_assert!(old_max.is_none());
        }
        (Request::UpdateTag { max_id: Some(wanted), now_ms, .. }, Response::Tag { record, .. }) => {
            if Some(*wanted) >= old_max {
                prop_assert_eq!(record.max_id, *wanted);
            } else {
                // A copy of the tag's last update, committed again after claims: answered with
                // the tag as it is, nothing changed.
                prop_assert_eq!(record.updated_at_ms, *now_ms);
                prop_assert_eq!(request.tag().and_then(|t| before.tags.get(t)), Some(record));
                prop_assert_eq!(request.tag().and_then(|t| after.tags.get(t)), Some(record));
            }
        }
        (Request::UpdateTag { max_id: Some(wanted), .. }, Response::Rejected(Rejection::MaxIdDecrease { current })) => {
            prop_assert_eq!(Some(*current), old_max);
            prop_assert!(wanted < current);
        }
        (Request::CreateTag { max_id, step, now_ms, .. }, Response::Tag { record, .. }) => {
            prop_assert_eq!((record.step, record.created_at_ms), (*step, *now_ms));
            prop_assert!(record.max_id >= *max_id, "{record:?} for {request:?}");
            prop_assert_eq!(request.tag().and_then(|t| after.tags.get(t)), Some(record));
            if let Some(existing) = request.tag().and_then(|t| before.tags.get(t)) {
                prop_assert_eq!(existing, record, "a repeated create changed the tag");
            } else {
                prop_assert_eq!(record.max_id, *max_id);
            }
        }
        (Request::ImportTags { rows, .. }, Response::Imported { created, updated }) => {
            prop_assert!(*created + *updated <= rows.len() as u64);
            for row in rows {
                let record = after.tags.get(&row.tag);
                prop_assert!(record.is_some(), "import of {} left no tag", row.tag);
                let record = record.map_or(0, |r| r.max_id);
                prop_assert!(record >= row.max_id, "import of {} left max_id {record} below {}", row.tag, row.max_id);
            }
        }
        (Request::ImportTags { .. }, Response::Rejected(Rejection::InvalidArgument(_))) => {
            prop_assert_eq!(&before.tags, &after.tags, "a refused import changed tags");
        }
        (Request::ImportTags { .. }, other) => {
            prop_assert!(false, "unexpected answer {other:?} to {request:?}");
        }
        (Request::ClaimSegment { .. }, other) | (Request::ReleaseSegment { .. }, other) => {
            prop_assert!(false, "unexpected answer {other:?} to {request:?}");
        }
        _ => {}
    }
    Ok(())
}

/// Replays the model's log into fresh state machines: `apply` must give the same answers and
/// byte-identical states, the same as the model's, whether the log is applied in one go or
/// across a snapshot taken halfway.
fn check_determinism(model: &Model) -> Result<(), TestCaseError> {
    let replay = |snapshot_at: Option<usize>| -> Result<IdStateMachine, TestCaseError> {
        let mut sm = IdStateMachine::default();
        for (i, (entry, response)) in model.log.iter().enumerate() {
            if snapshot_at == Some(i) {
                sm = codec::decode(&codec::encode(&sm).map_err(fail)?).map_err(fail)?;
            }
            prop_assert_eq!(&sm.apply(entry), response, "entry {}", i);
        }
        Ok(sm)
    };
    let first = codec::encode(&replay(None)?).map_err(fail)?;
    let second = codec::encode(&replay(None)?).map_err(fail)?;
    let across_snapshot = codec::encode(&replay(Some(model.log.len() / 2))?).map_err(fail)?;
    prop_assert_eq!(&first, &second);
    prop_assert_eq!(&first, &across_snapshot);
    prop_assert_eq!(&first, &codec::encode(&model.sm).map_err(fail)?);
    let decoded: IdStateMachine = codec::decode(&first).map_err(fail)?;
    prop_assert_eq!(codec::encode(&decoded).map_err(fail)?, first);
    prop_assert_eq!(decoded, model.sm.clone());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1024,
        // A failing case is saved under raft/proptest-regressions/ and replayed first next time.
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_id_is_handed_out_twice_and_apply_is_deterministic(ops in proptest::collection::vec(op(), 1..250)) {
        let mut model = Model::new();
        for op in &ops {
            model.run(op)?;
        }
        model.check_end()?;
        check_determinism(&model)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Deterministic interleavings
// ---------------------------------------------------------------------------------------------

fn create(sm: &mut IdStateMachine, max_id: u64) {
    let request = Request::CreateTag { tag: "t".into(), max_id, step: 10, description: String::new(), now_ms: 1 };
    assert!(matches!(sm.apply_request(&request), Response::Tag { .. }));
}

fn claim(sm: &mut IdStateMachine, step: u64) -> (u64, u64) {
    match sm.apply_request(&Request::ClaimSegment { tag: "t".into(), step }) {
        Response::Segment { start, end } => (start, end),
        other => panic!("claim failed: {other:?}"),
    }
}

fn release(sm: &mut IdStateMachine, from: u64, expected_max_id: u64) -> bool {
    match sm.apply_request(&Request::ReleaseSegment { tag: "t".into(), from, expected_max_id }) {
        Response::Released { applied } => applied,
        other => panic!("release answered {other:?}"),
    }
}

/// A claims, serves part, and proposes its release; B claims before that release commits. If A's
/// late release applied, `max_id` would drop to A's cursor and the next claim would hand out
/// B's IDs again. It must be refused because `max_id` is no longer A's claim end.
#[test]
fn late_release_after_another_claim_does_not_apply() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, 1);
    let a = claim(&mut sm, 10); // A: [1, 11), serves 1..=4
    let b = claim(&mut sm, 10); // B: [11, 21)
    assert_eq!((a, b), ((1, 11), (11, 21)));
    assert!(!release(&mut sm, 5, a.1), "A's late release must not apply");
    assert_eq!(sm.tags["t"].max_id, 21);
    assert_eq!(claim(&mut sm, 10), (21, 31), "the next claim continues after B");
}

/// A releases its tail; B re-claims exactly that range, serves part of it, and releases its own
/// tail. A's release was proposed once and is never re-delivered, so the next claim starts at B's
/// cursor: nothing A or B served comes back.
#[test]
fn released_range_is_reclaimed_then_released_again() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, 1);
    let a = claim(&mut sm, 10); // A: [1, 11), serves 1..=3
    assert!(release(&mut sm, 4, a.1));
    let b = claim(&mut sm, 7); // B: [4, 11), the released tail exactly; serves 4..=6
    assert_eq!(b, (4, 11));
    assert!(release(&mut sm, 7, b.1));
    assert_eq!(sm.tags["t"].max_id, 7);
    assert_eq!(claim(&mut sm, 10), (7, 17));
}

/// Why a release must never be retried (proposed at most once per claim): the state machine
/// cannot tell a duplicate from the original. A releases `[5, 11)`; B claims the same range and
/// serves all of it, which brings `max_id` back to 11, the value A's release expects. A second
/// copy of A's release would apply and the next claim would hand out B's served IDs 5..=10 again.
/// If this test ever fails, `apply` gained its own guard and the proposer's rule can be relaxed.
#[test]
fn a_redelivered_release_would_apply_which_is_why_it_is_proposed_once() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, 1);
    let a = claim(&mut sm, 10); // A: [1, 11), serves 1..=4
    assert!(release(&mut sm, 5, a.1));
    let b = claim(&mut sm, 6); // B: [5, 11), serves all of it
    assert_eq!(b, (5, 11));
    assert!(release(&mut sm, 5, a.1), "a duplicate is indistinguishable from the original");
    assert_eq!(claim(&mut sm, 10).0, 5, "so a retried release would hand out B's IDs again");
}

/// On shutdown a node holds two buffers, current `[1, 11)` (served up to 3) and next `[11, 21)`
/// (unused). Releasing next first lowers `max_id` to 11 = current's end, so current's tail can
/// go back too. In the other order the current's release is stale and only the next's applies:
/// still safe, just wasteful. The node should release newest first.
#[test]
fn double_buffer_tails_go_back_newest_first() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, 1);
    let current = claim(&mut sm, 10);
    let next = claim(&mut sm, 10);
    let mut other_order = sm.clone();

    assert!(release(&mut sm, next.0, next.1));
    assert!(release(&mut sm, 4, current.1));
    assert_eq!(sm.tags["t"].max_id, 4);

    assert!(!release(&mut other_order, 4, current.1));
    assert!(release(&mut other_order, next.0, next.1));
    assert_eq!(other_order.tags["t"].max_id, 11);
}

/// Raising `max_id` with an update while a release is in flight makes that release stale: the
/// update's new `max_id` is what the next claim must start at, and the released tail becomes a
/// gap. An update that keeps `max_id` is not a decrease and leaves the release valid.
#[test]
fn update_raising_max_id_makes_a_pending_release_stale() {
    let update = |max_id| Request::UpdateTag { tag: "t".into(), step: None, description: None, max_id, now_ms: 2 };
    let mut sm = IdStateMachine::default();
    create(&mut sm, 1);
    let a = claim(&mut sm, 10);
    let mut kept = sm.clone();

    assert!(matches!(sm.apply_request(&update(Some(100))), Response::Tag { .. }));
    assert!(!release(&mut sm, 5, a.1));
    assert_eq!(claim(&mut sm, 10), (100, 110));

    assert!(matches!(kept.apply_request(&update(Some(a.1))), Response::Tag { .. }));
    assert!(release(&mut kept, 5, a.1));
}

/// The last claim is short and then the tag answers TAG_EXHAUSTED. If the node that holds the
/// last segment gives back its never-served tail, the tag can hand out exactly that tail again:
/// no ID is repeated, but "exhausted" is not permanent while a release of the last claim is in
/// flight.
#[test]
fn release_of_the_last_segment_reopens_only_its_tail() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, LIMIT - 5);
    let last = claim(&mut sm, 10);
    assert_eq!(last, (LIMIT - 5, LIMIT));
    let exhausted = sm.apply_request(&Request::ClaimSegment { tag: "t".into(), step: 10 });
    assert_eq!(exhausted, Response::Rejected(Rejection::TagExhausted));
    // The holder served LIMIT-5 and LIMIT-4, and gives back the rest.
    assert!(release(&mut sm, LIMIT - 3, last.1));
    assert_eq!(claim(&mut sm, 10), (LIMIT - 3, LIMIT));
    let exhausted = sm.apply_request(&Request::ClaimSegment { tag: "t".into(), step: 1 });
    assert_eq!(exhausted, Response::Rejected(Rejection::TagExhausted));
}
