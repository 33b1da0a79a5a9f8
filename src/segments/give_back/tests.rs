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

use proptest::prelude::*;
use raft::IdStateMachine;
use raft::Request;
use raft::Response;

use super::*;
use crate::engine::segment::Switch;
use crate::engine::IdRange;
use crate::engine::SegmentBuffer;
use crate::engine::Take;

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

/// A graceful stop with many buffers gives their tails back a bounded number at a time: all at
/// once, 100,000 buffers made each follower open about 33,000 connections to the leader, which
/// ran out of file descriptors and stopped its Raft. Every tail still gets its outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_releases_on_stop_are_bounded_and_all_answered() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let tails: Vec<Tail> = (0..2_000u64).map(|i| (format!("tag-{i}"), i * 10, i * 10 + 5)).collect();
    let outcomes = release_bounded(tails, MAX_RELEASES_IN_FLIGHT, |_tail| {
        let (in_flight, most) = (in_flight.clone(), most.clone());
        async move {
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            // A release that takes a round trip: the others start meanwhile if nothing bounds them.
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            in_flight.fetch_sub(1, Ordering::SeqCst);
            Outcome::Applied
        }
    })
    .await;
    assert_eq!(outcomes.len(), 2_000);
    assert!(outcomes.iter().all(|outcome| matches!(outcome, Outcome::Applied)));
    let most = most.load(Ordering::SeqCst);
    assert!(most <= MAX_RELEASES_IN_FLIGHT, "{most} releases in flight at once");
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
            .map(|(tag, from, expected_max_id)| raft::Release {
                tag: tag.clone(),
                from: *from,
                expected_max_id: *expected_max_id,
            })
            .collect();
        let encoded = raft::codec::encode(&raft::Request::ReleaseBatch { releases }).expect("encode");
        assert!(encoded.len() <= raft::codec::MAX_REQUEST_BYTES, "a batch of {} bytes", encoded.len());
    }
    for pair in batches.windows(2) {
        let bytes: usize = pair[0].iter().map(encoded_len).sum();
        assert!(bytes + encoded_len(&pair[1][0]) > MAX_BATCH_BYTES, "a batch closed before it was full");
    }
    assert_eq!(batches.concat(), tails, "every tail once, in order");
}
