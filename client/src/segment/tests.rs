//! The refill logic against a stand-in range source: order, waits, errors, sizing, close.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

use super::*;
use crate::ErrorCode;

/// Hands out consecutive ranges of exactly the asked size (or split in `pieces`), records them,
/// and can be made slow or failing.
pub(crate) struct FakeSource {
    next: AtomicU64,
    pub pieces: u64,
    pub delay: Mutex<Duration>,
    pub fail_with: Mutex<Option<ClientError>>,
    pub answered: Mutex<Vec<IdRange>>,
    pub asked: Mutex<Vec<u64>>,
    pub hold: AtomicBool,
    pub released: Notify,
}

impl FakeSource {
    pub fn new(first: u64) -> Arc<FakeSource> {
        Arc::new(FakeSource {
            next: AtomicU64::new(first),
            pieces: 1,
            delay: Mutex::new(Duration::ZERO),
            fail_with: Mutex::new(None),
            answered: Mutex::new(Vec::new()),
            asked: Mutex::new(Vec::new()),
            hold: AtomicBool::new(false),
            released: Notify::new(),
        })
    }

    pub fn answered(&self) -> Vec<IdRange> {
        self.answered.lock().unwrap().clone()
    }
}

impl RangeSource for FakeSource {
    fn fetch(
        &self,
        _tag: &str,
        count: u64,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<IdRange>, ClientError>> + Send + '_>> {
        Box::pin(async move {
            self.asked.lock().unwrap().push(count);
            let delay = *self.delay.lock().unwrap();
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            while self.hold.load(SeqCst) {
                let released = self.released.notified();
                if !self.hold.load(SeqCst) {
                    break;
                }
                released.await;
            }
            if let Some(error) = self.fail_with.lock().unwrap().clone() {
                return Err(error);
            }
            let start = self.next.fetch_add(count, SeqCst);
            let piece = count.div_ceil(self.pieces);
            let ranges: Vec<IdRange> = (0..self.pieces)
                .map(|i| IdRange { start: start + i * piece, end: (start + (i + 1) * piece).min(start + count) })
                .filter(|range| !range.is_empty())
                .collect();
            self.answered.lock().unwrap().extend(ranges.iter().copied());
            Ok(ranges)
        })
    }
}

pub(crate) fn fixed(size: u64) -> Sizing {
    Sizing { min: size, max: size, duration: Duration::from_secs(60) }
}

pub(crate) fn segment(source: &Arc<FakeSource>, sizing: Sizing, wait: Duration) -> Segment {
    Segment::new("order", source.clone(), None, sizing, wait)
}

/// Polls `check` until true, failing after five seconds (no fixed sleep).
async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn one_taker_uses_the_ranges_in_the_order_they_came() {
    let source = FakeSource::new(1000);
    let segment = segment(&source, fixed(10), Duration::from_secs(5));
    let mut ids = Vec::new();
    for _ in 0..95 {
        ids.push(segment.next_id().await.expect("an ID"));
    }
    let answered: Vec<u64> = source.answered().iter().flat_map(|r| r.start..r.end).collect();
    assert_eq!(ids, answered[..95], "IDs are the answered ranges, in order, none skipped while open");
}

#[tokio::test]
async fn the_next_range_is_fetched_once_a_tenth_of_the_current_is_used() {
    let source = FakeSource::new(1);
    let segment = segment(&source, fixed(100), Duration::from_secs(5));
    segment.next_id().await.expect("first ID");
    eventually("the first fetch to be recorded", || source.asked.lock().unwrap().len() == 1).await;
    for _ in 1..9 {
        segment.next_id().await.expect("an ID");
    }
    assert_eq!(source.asked.lock().unwrap().len(), 1, "no prefetch before 10 % is used");
    segment.next_id().await.expect("the tenth ID");
    eventually("the prefetch at 10 %", || segment.buffer_state().next.is_some()).await;
    assert_eq!(source.asked.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_range_answer_in_pieces_is_used_piece_by_piece_before_fetching_again() {
    let mut fake = FakeSource::new(1);
    Arc::get_mut(&mut fake).expect("unshared").pieces = 3;
    let segment = segment(&fake, fixed(30), Duration::from_secs(5));
    let ids = segment.next_ids(30).await.expect("thirty IDs");
    assert_eq!(ids, (1..31).collect::<Vec<_>>());
    assert_eq!(fake.asked.lock().unwrap().len(), 1, "the three pieces of one answer serve 30 IDs");
}

#[tokio::test]
async fn a_slow_server_costs_a_bounded_wait_and_a_typed_timeout() {
    let source = FakeSource::new(1);
    source.hold.store(true, SeqCst);
    let wait = Duration::from_millis(200);
    let segment = segment(&source, fixed(10), wait);
    let started = Instant::now();
    let error = segment.next_id().await.expect_err("nothing can be served");
    let waited = started.elapsed();
    assert!(matches!(error, ClientError::Timeout { .. }), "{error:?}");
    assert!(waited >= wait && waited < wait + Duration::from_secs(2), "waited {waited:?}");
    // Once the server answers, the same handle serves.
    source.hold.store(false, SeqCst);
    source.released.notify_waiters();
    assert_eq!(segment.next_id().await.expect("served after the server came back"), 1);
}

#[tokio::test]
async fn a_definite_error_reaches_every_waiting_taker_at_once() {
    let source = FakeSource::new(1);
    *source.fail_with.lock().unwrap() = Some(ClientError::Api {
        status: 404,
        code: ErrorCode::TagNotFound,
        message: "tag 'order' does not exist".into(),
    });
    let segment = segment(&source, fixed(10), Duration::from_secs(30));
    let started = Instant::now();
    let takers: Vec<_> = (0..4)
        .map(|_| {
            let segment = segment.clone();
            tokio::spawn(async move { segment.next_id().await })
        })
        .collect();
    for taker in takers {
        let error = taker.await.expect("taker").expect_err("no such tag");
        assert_eq!(error.code(), Some(ErrorCode::TagNotFound), "{error}");
    }
    assert!(started.elapsed() < Duration::from_secs(5), "the error came without waiting out the timeout");
}

#[tokio::test]
async fn after_close_nothing_more_is_handed_out() {
    let source = FakeSource::new(1);
    let segment = segment(&source, fixed(10), Duration::from_secs(5));
    assert_eq!(segment.next_id().await.expect("an ID"), 1);
    segment.close();
    assert!(matches!(segment.next_id().await, Err(ClientError::Closed)));
    assert_eq!(segment.try_next_id(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_takers_never_get_one_id_twice() {
    let source = FakeSource::new(1);
    let segment = segment(&source, fixed(50), Duration::from_secs(10));
    let takers: Vec<_> = (0..8)
        .map(|i| {
            let segment = segment.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for round in 0..500u64 {
                    if (round + i).is_multiple_of(7) {
                        ids.extend(segment.next_ids(1 + round % 13).await.expect("IDs"));
                    } else {
                        ids.push(segment.next_id().await.expect("an ID"));
                    }
                }
                ids
            })
        })
        .collect();
    let mut seen = BTreeSet::new();
    for taker in takers {
        let ids = taker.await.expect("taker");
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "one taker's IDs increase (ranges in order)");
        for id in ids {
            assert!(seen.insert(id), "ID {id} handed out twice");
        }
    }
    let answered = source.answered();
    assert!(seen.iter().all(|id| answered.iter().any(|r| r.start <= *id && *id < r.end)), "every ID was answered");
}

#[test]
fn the_range_size_follows_leafs_dynamic_step_within_bounds() {
    let source = FakeSource::new(1);
    let sizing = Sizing { min: 100, max: 800, duration: Duration::from_secs(10) };
    let segment = segment(&source, sizing, Duration::from_secs(1));
    let state = &segment.state;
    assert_eq!(state.next_count(), 100, "the first range has the smallest size");
    let set = |count: u64, ago: Duration| {
        *state.last_fetch.lock().unwrap() = Some((count, Instant::now().checked_sub(ago).expect("uptime")));
    };
    set(100, Duration::from_secs(1));
    assert_eq!(state.next_count(), 200, "used up fast: doubled");
    set(800, Duration::ZERO);
    assert_eq!(state.next_count(), 800, "never past the largest size");
    set(400, Duration::from_secs(15));
    assert_eq!(state.next_count(), 400, "between one and two durations: kept");
    set(400, Duration::from_secs(25));
    assert_eq!(state.next_count(), 200, "slow: halved");
    set(100, Duration::from_secs(25));
    assert_eq!(state.next_count(), 100, "never below the smallest size");
}
