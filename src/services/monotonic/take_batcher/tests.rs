//! The batcher against a stand-in leader: one batch in flight, the next formed meanwhile, each
//! answer split back to the take it belongs to, per-take errors kept per take.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::*;
use crate::error::Error;
use crate::error::ErrorCode;

/// Cuts consecutive IDs for each take of a batch in its order, refuses the tag `missing`, and
/// lets through only as many batches as `gate` has permits.
struct StandInLeader {
    next: Mutex<u64>,
    batches: Mutex<Vec<Vec<MonotonicTake>>>,
    /// The range each take got, by tag (the tests give every take its own tag).
    cut: Mutex<HashMap<String, IdRange>>,
    gate: Semaphore,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    fail_batches: Mutex<Option<Error>>,
}

impl StandInLeader {
    fn new(permits: usize) -> Arc<StandInLeader> {
        Arc::new(StandInLeader {
            next: Mutex::new(100),
            batches: Mutex::new(Vec::new()),
            cut: Mutex::new(HashMap::new()),
            gate: Semaphore::new(permits),
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
            fail_batches: Mutex::new(None),
        })
    }

    fn batch_sizes(&self) -> Vec<usize> {
        self.batches.lock().unwrap().iter().map(Vec::len).collect()
    }

    fn answer(&self, takes: &[MonotonicTake]) -> BatchAnswer {
        if let Some(error) = self.fail_batches.lock().unwrap().clone() {
            return Err(error);
        }
        let mut next = self.next.lock().unwrap();
        let answers = takes
            .iter()
            .map(|take| {
                if take.tag == "missing" {
                    return Err(Error::tag_not_found(&take.tag));
                }
                let range = IdRange { start: *next, end: *next + take.count };
                *next += take.count;
                self.cut.lock().unwrap().insert(take.tag.clone(), range);
                Ok(vec![range])
            })
            .collect();
        Ok(answers)
    }
}

impl SendBatch for Arc<StandInLeader> {
    type Item = MonotonicTake;
    type Answer = Vec<IdRange>;

    fn send(&self, takes: Vec<MonotonicTake>) -> crate::services::batch_queue::BatchFuture<'_, Vec<IdRange>> {
        Box::pin(async move {
            let now = self.in_flight.fetch_add(1, SeqCst) + 1;
            self.most_in_flight.fetch_max(now, SeqCst);
            self.batches.lock().unwrap().push(takes.clone());
            let permit = self.gate.acquire().await;
            let answer = self.answer(&takes);
            drop(permit);
            self.in_flight.fetch_sub(1, SeqCst);
            answer
        })
    }
}

fn take(tag: &str, count: u64) -> MonotonicTake {
    MonotonicTake { tag: tag.to_string(), count, contiguous: false }
}

/// Waits (yielding, bounded) until `done` holds: the tests run on one thread, so every task that
/// counted itself has also queued its take, in the same poll.
async fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::task::yield_now().await;
    }
}

/// Starts `tags.len()` takes while the stand-in holds the batch in flight; answers them all.
async fn takes_queued_behind_a_held_batch(
    leader: &Arc<StandInLeader>,
    tags: Vec<String>,
) -> Vec<(String, Result<Vec<IdRange>, Error>)> {
    let batcher = Arc::new(start(leader.clone()));
    let first = tokio::spawn({
        let batcher = batcher.clone();
        async move { batcher.submit(take("first", 1)).await }
    });
    wait_for("the first batch to be in flight", || leader.in_flight.load(SeqCst) == 1).await;
    let queued = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = tags
        .into_iter()
        .enumerate()
        .map(|(i, tag)| {
            let (batcher, queued) = (batcher.clone(), queued.clone());
            tokio::spawn(async move {
                queued.fetch_add(1, SeqCst);
                let answer = batcher.submit(take(&tag, 1 + i as u64 % 7)).await;
                (tag, answer)
            })
        })
        .collect();
    let n = tasks.len();
    wait_for("every take to be queued", || queued.load(SeqCst) == n).await;
    leader.gate.add_permits(1_000);
    assert!(first.await.unwrap().is_ok());
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

#[tokio::test]
async fn takes_that_arrive_while_a_batch_is_in_flight_go_as_one_batch_split_back_in_order() {
    let leader = StandInLeader::new(0);
    let tags: Vec<String> = (0..50).map(|i| format!("t{i}")).collect();
    let answers = takes_queued_behind_a_held_batch(&leader, tags.clone()).await;
    assert_eq!(leader.batch_sizes(), vec![1, 50], "the first take alone, then every take that waited");
    assert_eq!(leader.most_in_flight.load(SeqCst), 1, "one batch in flight at a time");
    let sent: Vec<String> = leader.batches.lock().unwrap()[1].iter().map(|take| take.tag.clone()).collect();
    assert_eq!(sent, tags, "the batch holds the takes in arrival order");
    let cut = leader.cut.lock().unwrap().clone();
    for (i, (tag, answer)) in answers.into_iter().enumerate() {
        let ranges = answer.unwrap_or_else(|e| panic!("{tag}: {e}"));
        assert_eq!(ranges, vec![cut[&tag]], "{tag} gets the answer to its own take");
        assert_eq!(ranges[0].len(), 1 + i as u64 % 7);
    }
}

#[tokio::test]
async fn a_take_of_a_missing_tag_fails_alone() {
    let leader = StandInLeader::new(0);
    let tags = vec!["a".to_string(), "missing".to_string(), "b".to_string()];
    let answers = takes_queued_behind_a_held_batch(&leader, tags).await;
    assert_eq!(leader.batch_sizes(), vec![1, 3]);
    let by_tag: HashMap<String, Result<Vec<IdRange>, Error>> = answers.into_iter().collect();
    assert_eq!(by_tag["missing"].as_ref().map_err(|e| e.code), Err(ErrorCode::TagNotFound));
    assert!(by_tag["a"].is_ok() && by_tag["b"].is_ok(), "{by_tag:?}");
}

#[tokio::test]
async fn a_batch_without_an_answer_fails_every_take_of_it_and_the_next_batch_goes_on() {
    let leader = StandInLeader::new(100);
    *leader.fail_batches.lock().unwrap() = Some(Error::no_leader("no leader"));
    let batcher = start(leader.clone());
    let failed = batcher.submit(take("a", 1)).await;
    assert_eq!(failed.map_err(|e| e.code), Err(ErrorCode::NoLeader));
    *leader.fail_batches.lock().unwrap() = None;
    assert_eq!(batcher.submit(take("b", 2)).await.unwrap().iter().map(IdRange::len).sum::<u64>(), 2);
}

#[tokio::test]
async fn a_take_sent_after_another_was_answered_gets_larger_ids() {
    let leader = StandInLeader::new(1_000);
    let batcher = start(leader.clone());
    let mut last = 0;
    for i in 0..20 {
        let ranges = batcher.submit(take(&format!("t{i}"), 3)).await.unwrap();
        assert!(ranges[0].start >= last, "{ranges:?} after {last}");
        last = ranges[0].end;
    }
    assert_eq!(leader.batch_sizes(), vec![1; 20], "a take alone is sent at once, alone");
}

#[tokio::test]
async fn a_batch_stays_within_the_forward_limits() {
    let leader = StandInLeader::new(0);
    let long = "x".repeat(120);
    let tags: Vec<String> = (0..1500).map(|i| format!("{long}{i}")).collect();
    let answers = takes_queued_behind_a_held_batch(&leader, tags).await;
    assert!(answers.iter().all(|(_, answer)| answer.is_ok()));
    let batches = leader.batches.lock().unwrap().clone();
    assert!(batches.len() > 2, "{} batches", batches.len());
    for batch in &batches {
        assert!(batch.len() <= MAX_TAKES);
        assert!(batch.iter().map(wire_bytes).sum::<usize>() <= MAX_BATCH_BYTES);
        let encoded =
            leafraft_state::codec::encode(&crate::cluster::Forwarded::TakeMonotonicBatch { takes: batch.clone() });
        assert!(encoded.map(|bytes| bytes.len()).unwrap_or(usize::MAX) <= crate::cluster::forward::MAX_FORWARD_BYTES);
    }
}
