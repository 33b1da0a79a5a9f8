//! A busy tag moved from segment to monotonic. From the moment the move is answered, every ID of
//! the tag is above every ID any client received before: no member may serve from its segment
//! buffers after that answer, so the move answers only once every member applied it.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;

use leafraft_state::NodeId;
use leafraft_state::Request;
use leafraft_state::TagMode;
use tokio::time::Instant;

use crate::fixtures;
use crate::fixtures::cluster::CATCH_UP_LIMIT;
use crate::fixtures::filter::Filter;
use crate::fixtures::TestCluster;
use crate::t60_monotonic::spawn_clients;
use crate::t60_monotonic::Op;

/// Waits until `history` holds `more` takes beyond what it holds now.
async fn wait_for_takes(history: &Arc<Mutex<Vec<Op>>>, more: usize, what: &str) {
    let count = || history.lock().expect("history").len();
    let target = count() + more;
    fixtures::wait_until(CATCH_UP_LIMIT, what, || (count() >= target).then_some(())).await;
}

/// Moves `tag` to monotonic through node `via`, as `PATCH /v1/tags/{tag}` does: the move, then
/// the wait until every member applied it.
async fn switch_to_monotonic(cluster: &TestCluster, via: NodeId, tag: &str) -> Result<(), leafraft::error::Error> {
    let request = Request::SetTagMode { tag: tag.into(), mode: TagMode::Monotonic, now_ms: 1_700_000_000_000 };
    cluster.cluster(via).write(request).await?;
    cluster.cluster(via).confirm_every_member_applied(&format!("the move of tag '{tag}' to monotonic")).await
}

/// The takes sent at or after `from` that got an ID not above every ID answered before they were
/// sent (segment IDs before the move are only trend-increasing across nodes, so only takes sent
/// after the answer are judged, against everything answered before them).
fn violations_from(history: &[Op], from: Instant) -> Vec<String> {
    let mut by_answer: Vec<&Op> = history.iter().collect();
    by_answer.sort_by_key(|op| op.answered);
    let mut highest = Vec::with_capacity(by_answer.len());
    let mut max = 0;
    for op in &by_answer {
        max = op.ids.iter().map(|&(_, end)| end - 1).fold(max, u64::max);
        highest.push(max);
    }
    let mut violations = Vec::new();
    for op in history.iter().filter(|op| op.sent >= from) {
        let before = by_answer.partition_point(|earlier| earlier.answered < op.sent);
        let lowest = op.ids.iter().map(|&(start, _)| start).min().unwrap_or(u64::MAX);
        if before > 0 && lowest <= highest[before - 1] {
            violations.push(format!(
                "node {} answered {lowest} to a take sent {:?} after the move, when {} had been answered",
                op.node,
                op.sent.duration_since(from),
                highest[before - 1]
            ));
        }
    }
    violations
}

/// A follower cut off from its peers (its clients still reach it) cannot apply the move: the move
/// is not answered as done while it is cut off, and once it is, no take sent after the answer
/// gets an ID below one answered before. dcd6af4 answered the move at once, and the cut-off
/// follower kept serving its segment buffers below the leader's monotonic IDs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_cut_off_follower_serves_no_segment_id_after_the_move_to_monotonic() {
    fixtures::run(move_under_load(true)).await;
}

/// The same move under load through every node with nothing cut off: answered once every member
/// applied it. (A black-box run of dcd6af4 saw 3 of 10 such moves give violations within 6 ms of
/// the answer; in process the cut-off case above is the one that reproduces it every time.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_no_member_serves_a_segment_id_after_the_move_to_monotonic_is_answered() {
    fixtures::run(move_under_load(false)).await;
}

/// Clients take IDs of a busy segment tag on every node while it moves to monotonic through the
/// leader (with one follower cut off first when `cut_one`); every take sent after the move was
/// answered must be above every take answered before it was sent.
async fn move_under_load(cut_one: bool) {
    let cluster = TestCluster::new(3).await;
    let leader = cluster.leader().await;
    let others: Vec<NodeId> = [1, 2, 3].into_iter().filter(|id| *id != leader).collect();
    let cut = others[0];
    cluster.create_tag("busy", 100_000).await;
    let history = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients = spawn_clients(&cluster, "busy", 6, Arc::clone(&history), Arc::clone(&stop));
    wait_for_takes(&history, 300, "segment takes on every node").await;

    tracing::info!(cut, cut_one, "--- move the tag to monotonic");
    let rest: Vec<NodeId> = [1, 2, 3].into_iter().filter(|id| *id != cut).collect();
    if cut_one {
        cluster.router.add_filter("cut", Filter::block().between(&[cut], &rest));
    }
    let mut healed = !cut_one;
    let answered_at = loop {
        match switch_to_monotonic(&cluster, leader, "busy").await {
            Ok(()) => break Instant::now(),
            Err(error) => {
                assert_eq!(error.code.as_str(), "MEMBERS_BEHIND", "{error:?}");
                assert!(error.message.contains(&format!("node {cut}")), "names the cut-off member: {error:?}");
                assert!(!healed, "the move is still refused after healing: {error:?}");
                tracing::info!(%error, "--- refused while cut off; heal and move again");
                cluster.router.remove_filter("cut");
                healed = true;
            }
        }
    };
    // Takes on every node after the answer: the cut-off follower's too.
    let taken_after = |node: NodeId| {
        history.lock().expect("history").iter().filter(|op| op.node == node && op.sent >= answered_at).count()
    };
    fixtures::wait_until(CATCH_UP_LIMIT, "takes on every node after the move", || {
        [1, 2, 3].into_iter().all(|node| taken_after(node) >= 50).then_some(())
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.await.expect("client task");
    }
    let history = history.lock().expect("history").clone();
    let violations = violations_from(&history, answered_at);
    assert!(violations.is_empty(), "{} violations, first: {:?}", violations.len(), violations.first());
    cluster.assert_invariants();
}
