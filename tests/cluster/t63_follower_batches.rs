//! A follower batches the monotonic takes it forwards: many concurrent takes through
//! one follower, some of them `/ranges`' contiguous takes, others at the leader meanwhile, and
//! takes of a tag that does not exist in the same batches. Judged on the recorded history: real
//! time order (`leafraft_history::real_time_order`), no ID twice
//! (`leafraft_history::overlapping_ranges` and the oracle), fewer forwards than takes, and only
//! the missing tag's takes failing.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use leafraft::cluster::forward::Vouch;
use leafraft::cluster::Forwarded;
use leafraft::cluster::ForwardedReply;
use leafraft::cluster::MonotonicTake;
use leafraft::error::ErrorCode;
use leafraft_history::overlapping_ranges;
use leafraft_history::Handed;
use leafraft_state::Request;
use leafraft_state::Version;
use tokio::time::Instant;

use crate::fixtures;
use crate::fixtures::cluster::CATCH_UP_LIMIT;
use crate::fixtures::filter::Filter;
use crate::fixtures::filter::Kind;
use crate::fixtures::TestCluster;
use crate::t60_monotonic::create_monotonic;
use crate::t60_monotonic::cut_the_leader_off_under_load;
use crate::t60_monotonic::real_time_violations;
use crate::t60_monotonic::Op;

const TAG: &str = "ticks";
const CLIENTS: u64 = 64;
const TAKES_PER_CLIENT: u64 = 20;
/// Each client asks for a contiguous range every `RANGE_EVERY` takes.
const RANGE_EVERY: u64 = 3;
const RANGE_COUNT: u64 = 50;

/// Raises the replicated cluster version to the release that batches forwarded takes (if the
/// fixture has not already). The in-process nodes run no version upkeep (no `/raft/*` headers to
/// report releases), and they all run this build, so the test commits the raise itself. Below
/// it: `tests/e2e/monotonic.rs`, with `--hold-cluster-version`.
async fn enable_batches(cluster: &TestCluster, leader: u64) {
    let raise = Request::SetClusterVersion { version: Version::CLAIM_BATCHES };
    cluster.raft(leader).client_write(raise).await.expect("the cluster version is raised");
    for id in cluster.running_ids() {
        let node = cluster.cluster(id);
        fixtures::wait_until(CATCH_UP_LIMIT, "every node to apply the cluster version", || {
            (node.cluster_version() >= Version::CLAIM_BATCHES).then_some(())
        })
        .await;
    }
}

/// One client: `TAKES_PER_CLIENT` takes in a row through `node`'s services, every
/// `RANGE_EVERY`-th one a contiguous range; each answer recorded.
fn spawn_client(
    cluster: &TestCluster,
    node: u64,
    client: u64,
    history: Arc<Mutex<Vec<Op>>>,
) -> tokio::task::JoinHandle<()> {
    let running = cluster.running(node);
    let oracle = Arc::clone(&cluster.oracle);
    tokio::spawn(async move {
        for round in 0..TAKES_PER_CLIENT {
            let sent = Instant::now();
            let ids: Vec<(u64, u64)> = if (client + round).is_multiple_of(RANGE_EVERY) {
                let range = running.monotonic.take_range(TAG, RANGE_COUNT).await.expect("a range");
                assert_eq!(range.len(), RANGE_COUNT, "one range of the count asked for: {range:?}");
                vec![(range.start, range.end)]
            } else {
                let ranges = running.segments.next_ids(TAG, 3).await.expect("a take");
                ranges.iter().map(|r| (r.start, r.end)).collect()
            };
            oracle.record_served(TAG, &ids);
            history.lock().expect("history").push(Op { node, sent, answered: Instant::now(), ids });
        }
    })
}

/// Takes of a tag that does not exist, sent through the follower while the others' are: each
/// fails with `TAG_NOT_FOUND`, alone.
fn spawn_missing_tag_takes(
    cluster: &TestCluster,
    follower: u64,
    failed: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    let running = cluster.running(follower);
    tokio::spawn(async move {
        for _ in 0..TAKES_PER_CLIENT {
            let answer = running.monotonic.take("no-such-tag", 1).await;
            assert_eq!(answer.map_err(|e| e.code), Err(ErrorCode::TagNotFound));
            failed.fetch_add(1, SeqCst);
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_takes_through_a_follower_are_forwarded_in_batches_in_real_time_order() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        let leader = cluster.leader().await;
        let follower = cluster.running_ids().into_iter().find(|id| *id != leader).expect("a follower");
        create_monotonic(&cluster, TAG).await;

        enable_batches(&cluster, leader).await;

        // A forward takes a few milliseconds on the link, as between machines: takes that arrive
        // meanwhile must wait for the next batch (in process, a batch of one returns so fast that
        // how many join the next depends on the scheduler).
        let link = Filter::delay(Duration::from_millis(3)).from([follower]).kinds([Kind::Forward]);
        cluster.router.add_filter("forward link", link);
        tracing::info!(leader, follower, "--- {CLIENTS} clients through the follower, 4 at the leader");
        let history = Arc::new(Mutex::new(Vec::new()));
        let forwards_before = cluster.router.forwards_from(follower);
        let started = Instant::now();
        let mut clients: Vec<_> =
            (0..CLIENTS).map(|client| spawn_client(&cluster, follower, client, Arc::clone(&history))).collect();
        clients.extend((0..4).map(|client| spawn_client(&cluster, leader, client, Arc::clone(&history))));
        let failed = Arc::new(AtomicU64::new(0));
        clients.push(spawn_missing_tag_takes(&cluster, follower, Arc::clone(&failed)));
        for client in clients {
            client.await.expect("a client");
        }
        let forwards = cluster.router.forwards_from(follower) - forwards_before;

        let history = history.lock().expect("history").clone();
        let through_follower = history.iter().filter(|op| op.node == follower).count() as u64;
        let takes = through_follower + failed.load(SeqCst);
        tracing::info!(takes, forwards, elapsed = ?started.elapsed(), "history recorded");
        assert_eq!(through_follower, CLIENTS * TAKES_PER_CLIENT, "every take through the follower answered");
        assert!(forwards > 0 && forwards * 4 <= takes, "{takes} takes went to the leader in {forwards} forwards");
        let violations = real_time_violations(&history);
        assert!(violations.is_empty(), "{} violations, first: {:?}", violations.len(), violations.first());
        let mut handed: Vec<Handed> = history
            .iter()
            .enumerate()
            .flat_map(|(op, taken)| taken.ids.iter().map(move |&(start, end)| Handed { start, end, op }))
            .collect();
        let mut overlaps = 0;
        overlapping_ranges(&mut handed, |_, _| overlaps += 1);
        assert_eq!(overlaps, 0, "IDs handed out twice");
        cluster.assert_invariants();
    })
    .await;
}

/// t60's scenario with the takes forwarded in batches: a deposed leader answers nothing after a
/// newer leader has, and a batch caught in the change goes to the new leader whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_takes_keep_real_time_order_when_the_leader_is_cut_off() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        let leader = cluster.leader().await;
        create_monotonic(&cluster, TAG).await;
        enable_batches(&cluster, leader).await;
        cut_the_leader_off_under_load(&cluster).await;
    })
    .await;
}

/// The history this test records is judged by the same sweep as t60's, which sees a violation.
#[test]
fn a_take_answered_below_an_earlier_answer_is_a_violation() {
    let t0 = Instant::now();
    let at = |ms| t0 + Duration::from_millis(ms);
    let first = Op { node: 2, sent: at(0), answered: at(5), ids: vec![(300, 350)] };
    let later = Op { node: 2, sent: at(6), answered: at(9), ids: vec![(120, 123)] };
    assert_eq!(real_time_violations(&[first, later]).len(), 1);
}

/// A forwarded batch counts the follower's saved vote as that voter's answer (`Vouch`) only when
/// the vote is the leader's own. Here the leader is cut off, a new one leads and answers, and then
/// a batch reaches the old leader vouched for by the third node, whose saved vote is now the new
/// leader's: the old leader must not answer it. A leader that counts any vouch answers from its
/// old range, below what the new leader already answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vouch_for_another_leader_confirms_nothing() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        let old = cluster.leader().await;
        create_monotonic(&cluster, TAG).await;
        enable_batches(&cluster, old).await;
        cluster.running(old).monotonic.take(TAG, 1).await.expect("a take at the leader");
        let others: Vec<u64> = cluster.running_ids().into_iter().filter(|id| *id != old).collect();
        cluster.router.add_filter("cut", Filter::block().between(&[old], &others));
        let new = cluster.leader_other_than(old).await;
        let newer = cluster.running(new).monotonic.take(TAG, 1).await.expect("a take at the new leader");
        let third = others.iter().copied().find(|id| *id != new).expect("a third node");
        let vouch = Vouch { voter: third, saved: cluster.cluster(third).saved_vote() };
        let old_vote = cluster.cluster(old).saved_vote();
        assert_ne!(vouch.saved.map(|v| v.leader_id), old_vote.map(|v| v.leader_id), "the third node voted anew");
        let take = MonotonicTake { tag: TAG.to_string(), count: 1, contiguous: false };
        let op = Forwarded::TakeMonotonicVouched { takes: vec![take], vouch };
        let answer = tokio::time::timeout(Duration::from_secs(30), cluster.cluster(old).execute_forwarded(op))
            .await
            .expect("the old leader answers the forward within 30 s");
        if let Ok(ForwardedReply::TakenBatch(answers)) = &answer {
            let served: Vec<_> = answers.iter().filter_map(|answer| answer.as_ref().ok()).collect();
            assert!(served.is_empty(), "the old leader served {served:?} after the new one served {newer:?}");
        }
        cluster.router.remove_filter("cut");
    })
    .await;
}
