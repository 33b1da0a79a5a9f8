//! The batcher against a stand-in writer that applies what it is sent to a real state machine.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use leafraft_state::IdStateMachine;
use tokio::sync::Semaphore;

use super::*;

/// Applies every write to one state machine; the first `held` writes wait for a permit.
struct StandIn {
    state: Mutex<IdStateMachine>,
    sent: Mutex<Vec<Request>>,
    allowed: AtomicBool,
    gate: Semaphore,
    fail_batches: AtomicBool,
}

impl StandIn {
    fn new(tags: &[&str], allowed: bool) -> Arc<StandIn> {
        let mut state = IdStateMachine::default();
        for tag in tags {
            let request =
                Request::CreateTag { tag: tag.to_string(), max_id: 1, step: 10, description: String::new(), now_ms: 1 };
            assert!(matches!(state.apply_request(&request), Response::Tag { .. }));
        }
        Arc::new(StandIn {
            state: Mutex::new(state),
            sent: Mutex::new(Vec::new()),
            allowed: AtomicBool::new(allowed),
            gate: Semaphore::new(0),
            fail_batches: AtomicBool::new(false),
        })
    }

    fn sent(&self) -> Vec<Request> {
        self.sent.lock().expect("lock").clone()
    }
}

impl ClaimWriter for StandIn {
    fn write(&self, request: Request) -> WriteFuture<'_> {
        Box::pin(async move {
            self.gate.acquire().await.expect("gate").forget();
            self.sent.lock().expect("lock").push(request.clone());
            if matches!(request, Request::ClaimBatch { .. }) && self.fail_batches.load(Ordering::Relaxed) {
                return Err(Error::no_leader("the leader went away"));
            }
            Ok(self.state.lock().expect("lock").apply_request(&request))
        })
    }

    fn batches_allowed(&self) -> bool {
        self.allowed.load(Ordering::Relaxed)
    }
}

fn segment(tag: &str, step: u64) -> Claim {
    Claim::Segment { tag: tag.to_string(), step }
}

type ClaimTask = tokio::task::JoinHandle<Result<Response, Error>>;

/// Starts `claims` at once on the batcher; answers their tasks in order.
fn claim_all(batcher: &Arc<ClaimBatcher>, claims: Vec<Claim>) -> Vec<ClaimTask> {
    claims
        .into_iter()
        .map(|claim| {
            let batcher = batcher.clone();
            tokio::spawn(async move { batcher.claim(claim).await })
        })
        .collect()
}

/// Waits until the driver has taken `n` claims (the first batch, held at the stand-in's gate).
async fn until_taken(batcher: &ClaimBatcher, n: u64) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while batcher.counters().claims.load(Ordering::Relaxed) < n {
        assert!(tokio::time::Instant::now() < deadline, "the batcher never took {n} claims");
        tokio::task::yield_now().await;
    }
}

/// Lets the spawned claim tasks run up to the queue. The tests run on tokio's current-thread
/// runtime, where spawned tasks run in order whenever the test task yields: a task spawned
/// before has queued its claim after a few yields, and the driver, held at the gate, takes none.
async fn let_the_queue_fill() {
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
}

/// No ID twice: the ranges answered per tag never overlap.
fn assert_disjoint(answers: &[(String, Response)]) {
    let mut by_tag: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for (tag, answer) in answers {
        if let Response::Segment { start, end } = answer {
            let ranges = by_tag.entry(tag).or_default();
            assert!(
                ranges.iter().all(|&(s, e)| *end <= s || e <= *start),
                "{tag}: [{start}, {end}) twice in {ranges:?}"
            );
            ranges.push((*start, *end));
        }
    }
}

/// One segment claim held at the stand-in's gate, then `n` more (over three tags) queued behind
/// it: every claim in the order submitted, and their tasks in the same order.
async fn queued_behind_one(batcher: &Arc<ClaimBatcher>, n: usize) -> (Vec<Claim>, Vec<ClaimTask>) {
    let mut tasks = claim_all(batcher, vec![segment("a", 10)]);
    until_taken(batcher, 1).await;
    let rest: Vec<Claim> = (0..n).map(|i| segment(["a", "b", "c"][i % 3], 5)).collect();
    tasks.extend(claim_all(batcher, rest.clone()));
    ([segment("a", 10)].into_iter().chain(rest).collect(), tasks)
}

/// Every claim is answered with a segment, and no range is handed out twice.
async fn assert_segments_answered_once(claims: Vec<Claim>, tasks: Vec<ClaimTask>) {
    let mut answers = Vec::new();
    for (claim, task) in claims.into_iter().zip(tasks) {
        let answer = task.await.expect("task").expect("claim");
        assert!(matches!(answer, Response::Segment { .. }), "{answer:?}");
        answers.push((claim.tag().expect("tagged").to_string(), answer));
    }
    assert_disjoint(&answers);
}

#[tokio::test]
async fn claims_queued_while_a_batch_commits_go_out_together_in_the_next_entry() {
    let stand_in = StandIn::new(&["a", "b", "c"], true);
    let batcher = Arc::new(ClaimBatcher::start(stand_in.clone()));
    let (claims, tasks) = queued_behind_one(&batcher, 30).await;
    let_the_queue_fill().await;
    stand_in.gate.add_permits(1000);
    assert_segments_answered_once(claims, tasks).await;
    let sent = stand_in.sent();
    assert!(matches!(sent[0], Request::ClaimSegment { .. }), "a claim alone goes as its own command: {:?}", sent[0]);
    assert!(sent.len() < 31, "30 claims queued behind one went out in {} entries", sent.len());
    assert!(sent[1..].iter().all(|r| matches!(r, Request::ClaimBatch { .. })), "{sent:?}");
    assert_eq!(batcher.counters().entries.load(Ordering::Relaxed), sent.len() as u64);
}

#[tokio::test]
async fn below_the_cluster_version_every_claim_is_its_own_command() {
    let stand_in = StandIn::new(&["a", "b"], false);
    stand_in.gate.add_permits(1000);
    let batcher = Arc::new(ClaimBatcher::start(stand_in.clone()));
    let claims: Vec<Claim> = (0..20).map(|i| segment(["a", "b"][i % 2], 3)).collect();
    let mut answers = Vec::new();
    for (claim, task) in claims.clone().into_iter().zip(claim_all(&batcher, claims)) {
        answers.push((claim.tag().expect("tagged").to_string(), task.await.expect("task").expect("claim")));
    }
    assert_disjoint(&answers);
    let sent = stand_in.sent();
    assert_eq!(sent.len(), 20);
    assert!(sent.iter().all(|r| matches!(r, Request::ClaimSegment { .. })), "no batch before 0.3.0: {sent:?}");
}

#[tokio::test]
async fn a_batch_that_fails_fails_each_of_its_claims_and_the_next_goes_out() {
    let stand_in = StandIn::new(&["a", "b"], true);
    let batcher = Arc::new(ClaimBatcher::start(stand_in.clone()));
    let held = claim_all(&batcher, vec![segment("a", 1)]);
    until_taken(&batcher, 1).await;
    let queued =
        claim_all(&batcher, vec![segment("a", 1), segment("b", 1), Claim::Segment { tag: "zz".into(), step: 1 }]);
    let_the_queue_fill().await;
    stand_in.fail_batches.store(true, Ordering::Relaxed);
    stand_in.gate.add_permits(1000);
    assert!(held.into_iter().next().expect("one").await.expect("task").is_ok());
    for task in queued {
        let answer = task.await.expect("task");
        assert!(answer.is_err(), "every claim of the failed batch fails: {answer:?}");
    }
    stand_in.fail_batches.store(false, Ordering::Relaxed);
    let after = claim_all(&batcher, vec![segment("b", 1)]);
    assert!(matches!(after.into_iter().next().expect("one").await.expect("task"), Ok(Response::Segment { .. })));
}

/// A refused claim (an unknown tag) refuses only itself inside a batch.
#[tokio::test]
async fn a_refused_claim_in_a_batch_refuses_only_itself() {
    let stand_in = StandIn::new(&["a"], true);
    let batcher = Arc::new(ClaimBatcher::start(stand_in.clone()));
    let held = claim_all(&batcher, vec![segment("a", 1)]);
    until_taken(&batcher, 1).await;
    let queued = claim_all(&batcher, vec![segment("missing", 1), segment("a", 4)]);
    let_the_queue_fill().await;
    stand_in.gate.add_permits(1000);
    held.into_iter().next().expect("one").await.expect("task").expect("claim");
    let mut queued = queued.into_iter();
    let missing = queued.next().expect("missing").await.expect("task").expect("answered");
    assert_eq!(missing, Response::Rejected(leafraft_state::Rejection::TagNotFound));
    assert_eq!(
        queued.next().expect("a").await.expect("task").expect("answered"),
        Response::Segment { start: 2, end: 6 }
    );
}

/// The batcher's size estimate is the encoded size, so a full batch stays under the request limit.
#[test]
fn a_full_batch_fits_in_one_request() {
    let long = "t".repeat(leafraft_state::tag::MAX_TAG_LEN);
    let claims = [
        Claim::Segment { tag: long.clone(), step: 1 },
        Claim::Monotonic { tag: "x".into(), step: u64::MAX },
        Claim::Timeseq { namespace: long.clone(), second: 1, count: 2, now_ms: 3 },
    ];
    let empty = leafraft_state::codec::encode(&Request::ClaimBatch { claims: vec![] }).expect("encode").len();
    for claim in &claims {
        let one =
            leafraft_state::codec::encode(&Request::ClaimBatch { claims: vec![claim.clone()] }).expect("encode").len();
        assert_eq!(one - empty, encoded_len(claim), "{claim:?}");
    }
    let mut full = Vec::new();
    let mut bytes = 0;
    while bytes + encoded_len(&claims[2]) <= MAX_BATCH_BYTES {
        bytes += encoded_len(&claims[2]);
        full.push(claims[2].clone());
    }
    let encoded = leafraft_state::codec::encode(&Request::ClaimBatch { claims: full }).expect("encode");
    assert!(encoded.len() <= leafraft_state::codec::MAX_REQUEST_BYTES, "{} bytes", encoded.len());
}

/// A wave of claims larger than one entry (a node's prefetch for thousands of namespaces) does
/// not go one entry per round trip: full batches go out beside the one in flight, while the
/// partial rest waits to gather more. Every claim is answered and no range is handed out twice.
#[tokio::test]
async fn full_batches_go_out_beside_the_one_in_flight_and_the_rest_waits() {
    let stand_in = StandIn::new(&["a", "b", "c"], true);
    let batcher = Arc::new(ClaimBatcher::start(stand_in.clone()));
    let (claims, tasks) = queued_behind_one(&batcher, 5_000).await;
    for _ in 0..10 {
        let_the_queue_fill().await;
    }
    let taken = batcher.counters().claims.load(Ordering::Relaxed);
    let full = MAX_BATCH_BYTES / encoded_len(&segment("a", 5));
    assert!(taken > 1, "no full batch went out beside the one in flight");
    assert!(
        taken <= 1 + (MAX_BATCHES_IN_FLIGHT as u64 - 1) * full as u64,
        "more than {MAX_BATCHES_IN_FLIGHT} in flight: {taken}"
    );
    assert!(taken < 5_001, "the partial rest went out while batches were in flight");
    stand_in.gate.add_permits(100_000);
    assert_segments_answered_once(claims, tasks).await;
    assert_eq!(batcher.counters().claims.load(Ordering::Relaxed), 5_001);
}
