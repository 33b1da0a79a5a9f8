//! The idle rule, and a property test of dropping a buffer under load: real threads take from the
//! engine's buffer, fed with claims the real state machine applies, while a dropper closes it,
//! gives its tail back through the same `ReleaseSegment` (racing the claims of the tag's next
//! buffer and of another node), and the takers move on to the next buffer as requests do. Whatever
//! the interleaving, no ID is handed out twice, and no ID in a tail that was given back was
//! handed out by the buffer that gave it back.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

use leafraft_state::IdStateMachine;
use leafraft_state::Request;
use leafraft_state::Response;
use proptest::prelude::*;

use super::*;
use leafraft_ids::segment::Switch;
use leafraft_ids::IdRange;
use leafraft_ids::SegmentBuffer;
use leafraft_ids::Take;

#[test]
fn a_buffer_is_idle_once_its_count_stood_still_for_the_idle_time() {
    let start = Instant::now();
    let at = |ms: u64| start + Duration::from_millis(ms);
    let idle = Duration::from_millis(100);
    let mut mark = IdleMark::new(start);
    assert!(!mark.went_idle(0, false, at(50), idle));
    assert!(mark.went_idle(0, false, at(100), idle), "a buffer nobody used goes idle too");
    assert!(!mark.went_idle(3, false, at(150), idle), "it served: idle from now on");
    assert!(!mark.went_idle(3, false, at(249), idle));
    assert!(!mark.went_idle(3, true, at(250), idle), "a claim in flight is not idle");
    assert!(!mark.went_idle(3, false, at(349), idle));
    assert!(mark.went_idle(3, false, at(350), idle));
    assert!(mark.went_idle(3, false, at(350), Duration::ZERO));
}

/// The claims and releases of one tag, applied by the real state machine, and every claim it
/// answered.
struct Replicated {
    sm: IdStateMachine,
    claims: Vec<IdRange>,
    /// Releases that applied, `[from, expected_max_id)`.
    released: Vec<IdRange>,
}

impl Replicated {
    fn new() -> Replicated {
        let mut sm = IdStateMachine::default();
        let create = Request::CreateTag { tag: "t".into(), max_id: 1, step: 1, description: String::new(), now_ms: 0 };
        assert!(matches!(sm.apply_request(&create), Response::Tag { .. }));
        Replicated { sm, claims: Vec::new(), released: Vec::new() }
    }

    fn claim(&mut self, step: u64) -> IdRange {
        match self.sm.apply_request(&Request::ClaimSegment { tag: "t".into(), step }) {
            Response::Segment { start, end } => {
                self.claims.push(IdRange { start, end });
                IdRange { start, end }
            }
            other => panic!("claim answered {other:?}"),
        }
    }

    fn release(&mut self, from: u64, expected_max_id: u64) {
        match self.sm.apply_request(&Request::ReleaseSegment { tag: "t".into(), from, expected_max_id }) {
            Response::Released { applied: true } => self.released.push(IdRange { start: from, end: expected_max_id }),
            Response::Released { applied: false } => {}
            other => panic!("release answered {other:?}"),
        }
    }
}

/// Loads the next segment of `buffer` as `Segments::load` does, if no load runs.
fn refill(buffer: &SegmentBuffer, replicated: &Mutex<Replicated>, step: u64) {
    if buffer.try_begin_load() {
        let range = replicated.lock().unwrap().claim(step);
        buffer.install_next(range);
    }
}

/// One node's view of the tag: its current buffer (`None` once dropped, until a request creates
/// the next), behind the lock that creates and drops buffers, as `Segments::buffers`.
struct Node {
    buffer: Mutex<Option<Arc<SegmentBuffer>>>,
    /// What each buffer this node had served, by buffer generation.
    served: Mutex<Vec<(usize, IdRange)>>,
    generation: AtomicUsize,
}

impl Node {
    /// The current buffer, created if there is none; and its generation.
    fn buffer(&self) -> (Arc<SegmentBuffer>, usize) {
        let mut slot = self.buffer.lock().unwrap();
        let buffer = slot.get_or_insert_with(|| {
            self.generation.fetch_add(1, Ordering::SeqCst);
            Arc::new(SegmentBuffer::new())
        });
        (buffer.clone(), self.generation.load(Ordering::SeqCst))
    }
}

/// Takes `batch` IDs at a time until `stop`, as a request does: refills at the 10 % mark and when
/// used up, and moves on to the node's next buffer when its own was closed.
fn take_until_stopped(
    node: &Node,
    replicated: &Mutex<Replicated>,
    step: u64,
    batch: u64,
    stop: &AtomicBool,
    takes: &AtomicUsize,
) {
    let (mut buffer, mut generation) = node.buffer();
    while !stop.load(Ordering::SeqCst) {
        match buffer.take(batch) {
            Take::Ids { range, load_due } => {
                node.served.lock().unwrap().push((generation, range));
                takes.fetch_add(1, Ordering::SeqCst);
                if load_due {
                    refill(&buffer, replicated, step);
                }
            }
            Take::UsedUp => match buffer.switch() {
                Switch::Switched => {}
                Switch::NotReady { .. } => {
                    refill(&buffer, replicated, step);
                    std::thread::yield_now();
                }
                Switch::Closed => (buffer, generation) = node.buffer(),
            },
        }
    }
}

/// Drops node A's buffer each time the takes reach one of `drop_at`: out of the map and closed
/// under the lock, then its tail given back outside it, racing the next buffer's claims.
fn drop_buffers(
    node: &Node,
    replicated: &Mutex<Replicated>,
    drop_at: &[usize],
    takes: &AtomicUsize,
) -> Vec<(usize, IdRange)> {
    let mut given_back = Vec::new();
    for &at in drop_at {
        while takes.load(Ordering::SeqCst) < at {
            std::thread::yield_now();
        }
        let (tail, generation) = {
            let mut slot = node.buffer.lock().unwrap();
            let Some(buffer) = slot.take() else { continue };
            (releasable_tail(&buffer.close()), node.generation.load(Ordering::SeqCst))
        };
        if let Some((from, expected_max_id)) = tail {
            given_back.push((generation, IdRange { start: from, end: expected_max_id }));
            replicated.lock().unwrap().release(from, expected_max_id);
        }
    }
    given_back
}

fn run(step: u64, n_takers: usize, batch: u64, drop_at: Vec<usize>, other_node: bool) -> Result<(), TestCaseError> {
    let replicated = Mutex::new(Replicated::new());
    let [a, b] =
        [(); 2].map(|_| Node { buffer: Mutex::new(None), served: Mutex::default(), generation: AtomicUsize::new(0) });
    let stop = AtomicBool::new(false);
    let (takes, b_takes) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let given_back = std::thread::scope(|s| {
        for _ in 0..n_takers {
            s.spawn(|| take_until_stopped(&a, &replicated, step, batch, &stop, &takes));
        }
        if other_node {
            s.spawn(|| take_until_stopped(&b, &replicated, step, batch, &stop, &b_takes));
        }
        let given_back = drop_buffers(&a, &replicated, &drop_at, &takes);
        let last = drop_at.iter().max().copied().unwrap_or(0);
        while takes.load(Ordering::SeqCst) < last + 50 {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::SeqCst);
        given_back
    });
    let replicated = replicated.into_inner().unwrap();
    let a_served = a.served.into_inner().unwrap();
    let mut seen = BTreeSet::new();
    for range in a_served.iter().map(|(_, r)| r).chain(b.served.into_inner().unwrap().iter().map(|(_, r)| r)) {
        for id in range.start..range.end {
            prop_assert!(replicated.claims.iter().any(|c| c.start <= id && id < c.end), "ID {id} was never claimed");
            prop_assert!(seen.insert(id), "ID {id} handed out twice; releases applied: {:?}", replicated.released);
        }
    }
    for (generation, tail) in &given_back {
        let served_inside = a_served.iter().find(|(g, r)| g == generation && r.start < tail.end && tail.start < r.end);
        prop_assert!(served_inside.is_none(), "buffer {generation} gave back {tail:?} but served {served_inside:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn dropping_a_buffer_under_load_never_hands_out_an_id_of_its_given_back_tail(
        step in 1u64..40,
        n_takers in 1usize..4,
        batch in 1u64..8,
        drop_at in proptest::collection::vec(0usize..400, 1..5),
        other_node in any::<bool>(),
    ) {
        let mut drop_at = drop_at;
        drop_at.sort_unstable();
        run(step, n_takers, batch, drop_at, other_node)?;
    }
}

/// Where a graceful stop's releases go: a stand-in for the node's `Cluster` that applies each
/// request to a real state machine once its write has taken `takes` (paused time; `None`: it never
/// answers), counting how many writes are in flight at once and what was sent.
struct StandIn {
    state: Mutex<IdStateMachine>,
    batches_allowed: bool,
    takes: Option<Duration>,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    /// Each request sent: whether it was a `ReleaseBatch`, and its encoded size.
    sent: Mutex<Vec<(bool, usize)>>,
}

impl StandIn {
    /// `tags` tags, each with one claim of 10 IDs, and a stop's tail of each: all but the first 2
    /// IDs of its claim, never served.
    fn with_tails(tags: usize, batches_allowed: bool, takes: Option<Duration>) -> (Arc<StandIn>, Vec<Tail>) {
        let mut state = IdStateMachine::default();
        let mut tails = Vec::with_capacity(tags);
        for i in 0..tags {
            let tag = format!("tag-{i:05}");
            let create =
                Request::CreateTag { tag: tag.clone(), max_id: 1, step: 10, description: String::new(), now_ms: 0 };
            assert!(matches!(state.apply_request(&create), Response::Tag { .. }));
            let Response::Segment { start, end } =
                state.apply_request(&Request::ClaimSegment { tag: tag.clone(), step: 10 })
            else {
                panic!("the claim of {tag} was refused");
            };
            tails.push((tag, start + 2, end));
        }
        let stand_in = StandIn {
            state: Mutex::new(state),
            batches_allowed,
            takes,
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
            sent: Mutex::new(Vec::new()),
        };
        (Arc::new(stand_in), tails)
    }

    /// The tags whose `max_id` went down to their tail's start: the tails given back.
    fn given_back(&self, tails: &[Tail]) -> usize {
        let state = self.state.lock().unwrap();
        tails.iter().filter(|(tag, from, _)| state.tags.get(tag).map(|record| record.max_id) == Some(*from)).count()
    }
}

impl crate::services::claims::ClaimWriter for StandIn {
    fn write(&self, request: Request) -> crate::services::claims::WriteFuture<'_> {
        Box::pin(async move {
            let size = leafraft_state::codec::encode(&request).expect("encode").len();
            self.sent.lock().unwrap().push((matches!(request, Request::ReleaseBatch { .. }), size));
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_in_flight.fetch_max(now, Ordering::SeqCst);
            match self.takes {
                Some(takes) => tokio::time::sleep(takes).await,
                None => std::future::pending().await,
            }
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            Ok(self.state.lock().unwrap().apply_request(&request))
        })
    }

    fn batches_allowed(&self) -> bool {
        self.batches_allowed
    }
}

/// At cluster version 0.3.0 a graceful stop gives its tails back in `ReleaseBatch` entries, each
/// within the request limit, [`MAX_BATCHES_IN_FLIGHT`] at a time, and every tail is applied: the
/// path `Segments::release_all` takes (`give_back_on_stop`), against a stand-in cluster.
#[tokio::test(start_paused = true)]
async fn a_graceful_stop_at_0_3_0_gives_every_tail_back_in_bounded_batches() {
    let (cluster, tails) = StandIn::with_tails(12_000, true, Some(Duration::from_millis(500)));
    let batches = in_batches(tails.clone()).len();
    assert!(batches > MAX_BATCHES_IN_FLIGHT, "{batches} batches: too few to show the bound");
    let started = Instant::now();

    let outcomes = give_back_on_stop(&cluster, tails.clone()).await.expect("within the stop's budget");

    assert_eq!(outcomes.len(), tails.len());
    assert!(outcomes.iter().all(|outcome| *outcome == Outcome::Applied), "every tail applied");
    assert_eq!(cluster.given_back(&tails), tails.len(), "every tag's max_id is back at its tail's start");
    let sent = cluster.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), batches, "one entry per batch");
    assert!(sent.iter().all(|(batch, _)| *batch), "only ReleaseBatch entries at 0.3.0");
    assert!(sent.iter().all(|(_, size)| *size <= leafraft_state::codec::MAX_REQUEST_BYTES), "{sent:?}");
    assert_eq!(cluster.most_in_flight.load(Ordering::SeqCst), MAX_BATCHES_IN_FLIGHT);
    let rounds = batches.div_ceil(MAX_BATCHES_IN_FLIGHT) as u32;
    assert_eq!(started.elapsed(), Duration::from_millis(500) * rounds, "{MAX_BATCHES_IN_FLIGHT} batches at a time");
}

/// A graceful stop whose batched releases take longer than [`RELEASES_ON_STOP_WITHIN`] (10 s)
/// ends at 10 s, whatever is still in flight: what committed by then is given back, the rest stay
/// gaps, and nothing applies after the stop is over. With batches of 4 s, 4 at a time, 8 commit by
/// 8 s, the next 4 would at 12 s and the rest would start then; a cluster that never answers gets
/// the same 10 s.
#[tokio::test(start_paused = true)]
async fn regression_a_batched_stop_that_outlasts_its_budget_ends_at_10_s() {
    let (cluster, tails) = StandIn::with_tails(20_000, true, Some(Duration::from_secs(4)));
    let batches = in_batches(tails.clone());
    assert!(
        batches.len() > 3 * MAX_BATCHES_IN_FLIGHT,
        "{} batches: too few to show none starts at 12 s",
        batches.len()
    );
    let started = Instant::now();

    let outcomes = give_back_on_stop(&cluster, tails.clone()).await;

    assert!(outcomes.is_none(), "the stop's releases took longer than its budget");
    assert_eq!(started.elapsed(), RELEASES_ON_STOP_WITHIN, "the stop ends at its budget, not later");
    let committed: usize = batches.iter().take(2 * MAX_BATCHES_IN_FLIGHT).map(Vec::len).sum();
    assert_eq!(cluster.given_back(&tails), committed, "the batches that committed by 8 s, and no more");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(cluster.given_back(&tails), committed, "nothing applies after the stop is over");
    assert_eq!(cluster.sent.lock().unwrap().len(), 3 * MAX_BATCHES_IN_FLIGHT, "no batch starts after 10 s");

    let (silent, tails) = StandIn::with_tails(100, true, None);
    let started = Instant::now();
    assert!(give_back_on_stop(&silent, tails.clone()).await.is_none());
    assert_eq!(started.elapsed(), RELEASES_ON_STOP_WITHIN, "a cluster that never answers holds the stop 10 s");
    assert_eq!(silent.given_back(&tails), 0);
}

/// Below cluster version 0.3.0 a graceful stop gives its tails back one `ReleaseSegment` each, a
/// bounded number at a time: all at once, 100,000 buffers made each follower open about 33,000
/// connections to the leader, which ran out of file descriptors and stopped its Raft. Every tail
/// still gets its outcome.
#[tokio::test(start_paused = true)]
async fn regression_releases_on_stop_are_bounded_and_all_answered() {
    let (cluster, tails) = StandIn::with_tails(2_000, false, Some(Duration::from_millis(20)));

    let outcomes = give_back_on_stop(&cluster, tails.clone()).await.expect("within the stop's budget");

    assert_eq!(outcomes.len(), 2_000);
    assert!(outcomes.iter().all(|outcome| *outcome == Outcome::Applied));
    assert_eq!(cluster.given_back(&tails), 2_000);
    let sent = cluster.sent.lock().unwrap().clone();
    assert!(sent.len() == 2_000 && sent.iter().all(|(batch, _)| !batch), "one ReleaseSegment per tail below 0.3.0");
    let most = cluster.most_in_flight.load(Ordering::SeqCst);
    assert_eq!(most, MAX_RELEASES_IN_FLIGHT, "{most} releases in flight at once");
}

/// Tails are cut into batches whose proposed request stays within the request limit (the
/// encoded size, not just the estimate), every tail in exactly one batch, in order.
#[test]
fn tails_are_cut_into_batches_within_the_request_limit() {
    let tails: Vec<Tail> = (0..5_000u64).map(|i| ("t".repeat(1 + (i % 128) as usize), i + 1, i + 2)).collect();
    let batches = in_batches(tails.clone());
    assert!(batches.len() > 1, "5,000 tails of up to 128 bytes need several batches");
    for batch in &batches {
        assert!(!batch.is_empty());
        let releases = batch
            .iter()
            .map(|(tag, from, expected_max_id)| leafraft_state::Release {
                tag: tag.clone(),
                from: *from,
                expected_max_id: *expected_max_id,
            })
            .collect();
        let encoded =
            leafraft_state::codec::encode(&leafraft_state::Request::ReleaseBatch { releases }).expect("encode");
        assert!(encoded.len() <= leafraft_state::codec::MAX_REQUEST_BYTES, "a batch of {} bytes", encoded.len());
    }
    for pair in batches.windows(2) {
        let bytes: usize = pair[0].iter().map(encoded_len).sum();
        assert!(bytes + encoded_len(&pair[1][0]) > MAX_BATCH_BYTES, "a batch closed before it was full");
    }
    assert_eq!(batches.concat(), tails, "every tail once, in order");
}
