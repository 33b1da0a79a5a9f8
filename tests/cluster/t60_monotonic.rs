//! Monotonic tags: IDs in real-time order across the cluster, through leafraft's own `Segments`
//! (which send every take of a monotonic tag to the leader's sequencer), with clients on every
//! node while the leader is cut off and a new one is elected.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use leafraft_history::real_time_order;
use leafraft_history::Span;
use leafraft_state::Request;
use leafraft_state::Response;
use leafraft_state::TagMode;
use tokio::time::Instant;

use crate::fixtures;
use crate::fixtures::cluster::running;
use crate::fixtures::cluster::CATCH_UP_LIMIT;
use crate::fixtures::filter::Filter;
use crate::fixtures::filter::Kind;
use crate::fixtures::TestCluster;

const ALL: [u64; 3] = [1, 2, 3];

/// One answered take: when it was sent, when its answer came back, and its IDs.
#[derive(Debug, Clone)]
pub(crate) struct Op {
    pub(crate) node: u64,
    pub(crate) sent: Instant,
    pub(crate) answered: Instant,
    pub(crate) ids: Vec<(u64, u64)>,
}

/// Violations of real-time order: an operation that was answered before another was sent must
/// hold only smaller IDs (`leafraft_history::real_time_order`, the sweep the chaos checker runs).
pub(crate) fn real_time_violations(history: &[Op]) -> Vec<String> {
    let mut spans: Vec<Span<Instant>> = history
        .iter()
        .enumerate()
        .filter_map(|(index, op)| Span::of_ranges(index, op.sent, op.answered, &op.ids))
        .collect();
    let mut violations = Vec::new();
    real_time_order(&mut spans, |a, b| {
        let (earlier, op) = (&history[a.op], &history[b.op]);
        violations.push(format!(
            "node {} answered {} to a take sent {:?} after node {} had answered {} (answered {:?} after it was sent)",
            op.node,
            b.min,
            op.sent.duration_since(earlier.answered),
            earlier.node,
            a.max,
            op.answered.duration_since(op.sent)
        ));
    });
    violations
}

#[test]
fn the_real_time_check_sees_an_old_answer_after_a_new_one() {
    let t0 = Instant::now();
    let at = |ms| t0 + Duration::from_millis(ms);
    let newer = Op { node: 2, sent: at(0), answered: at(10), ids: vec![(200, 201)] };
    let older = Op { node: 1, sent: at(20), answered: at(30), ids: vec![(150, 151)] };
    assert_eq!(real_time_violations(&[newer.clone(), older.clone()]).len(), 1);
    // Concurrent operations may come in any order.
    let concurrent = Op { sent: at(5), ..older };
    assert!(real_time_violations(&[newer, concurrent]).is_empty());
}

/// Creates the monotonic tag `tag` through `cluster`'s leader, with a step large enough that a
/// deposed leader still holds IDs of its range while a newer one serves: only the confirmation
/// keeps it from answering with them.
pub(crate) async fn create_monotonic(cluster: &TestCluster, tag: &str) {
    let leader = cluster.leader().await;
    let create = Request::CreateTagInMode {
        tag: tag.into(),
        max_id: 1,
        step: 100_000,
        description: String::new(),
        now_ms: 1_700_000_000_000,
        mode: TagMode::Monotonic,
    };
    assert!(matches!(cluster.cluster(leader).write(create).await, Ok(Response::Tag { .. })));
    // A follower's `Segments` looks the tag up in its own replica: the tests take through
    // followers at once, so every running node must have applied the creation first.
    fixtures::wait_until(CATCH_UP_LIMIT, "every running node applied the tag's creation", || {
        cluster.running_ids().into_iter().all(|id| cluster.state(id, |sm| sm.tags.contains_key(tag))).then_some(())
    })
    .await;
}

/// Takes IDs of `tag` from every running node's `Segments` in turn, on `n_clients` tasks,
/// recording each answered take, until stopped.
pub(crate) fn spawn_clients(
    cluster: &TestCluster,
    tag: &'static str,
    n_clients: u64,
    history: Arc<Mutex<Vec<Op>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..n_clients)
        .map(|client| {
            let (nodes, oracle, history, stop) =
                (cluster.nodes(), Arc::clone(&cluster.oracle), Arc::clone(&history), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut round = client;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let nodes = running(&nodes);
                    let Some((node, running)) = nodes.get(round as usize % nodes.len().max(1)) else {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    };
                    round += 1;
                    let sent = Instant::now();
                    // Bounded: a take sent to a cut-off node must not hold this client forever.
                    let taken = tokio::time::timeout(Duration::from_secs(3), running.segments.next_ids(tag, 3)).await;
                    if let Ok(Ok(ranges)) = taken {
                        let ids: Vec<(u64, u64)> = ranges.iter().map(|r| (r.start, r.end)).collect();
                        oracle.record_served(tag, &ids);
                        history.lock().expect("history").push(Op { node: *node, sent, answered: Instant::now(), ids });
                    }
                }
            })
        })
        .collect()
}

/// The leader is cut off while clients take IDs from every node. It cannot confirm its
/// leadership, so it answers nothing more; the others elect a leader that claims above it.
/// Checked on the recorded history: no take sent after another was answered got a smaller ID
/// (which a deposed leader serving from its old range would give), and no ID twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_leader_never_answers_after_a_newer_leader_has() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        create_monotonic(&cluster, "ticks").await;
        cut_the_leader_off_under_load(&cluster).await;
    })
    .await;
}

/// As above, but the cut leaves one kind of message through: a leader's question for its peers'
/// saved votes. The deposed leader's confirmations then reach voters that hold the newer leader's
/// vote, and their answers must not count: a leader counting any answer (instead of its own vote
/// read back) answers below its successor here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_leader_whose_confirmations_get_through_answers_nothing_below_its_successor() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        create_monotonic(&cluster, "ticks").await;
        let all_but_confirm = [Kind::Append, Kind::Vote, Kind::Snapshot, Kind::Forward, Kind::Clock, Kind::Hello];
        cut_the_leader_off_under_load_with(&cluster, |leader, others| {
            Filter::block().between(&[leader], others).kinds(all_but_confirm)
        })
        .await;
    })
    .await;
}

/// Clients on every node take IDs of the monotonic tag `ticks` while the leader is cut off, a new
/// one is elected, and the cut heals; the recorded history must keep real-time order.
pub(crate) async fn cut_the_leader_off_under_load(cluster: &TestCluster) {
    cut_the_leader_off_under_load_with(cluster, |leader, others| Filter::block().between(&[leader], others)).await;
}

/// [`cut_the_leader_off_under_load`] with the cut `cut(leader, others)`.
async fn cut_the_leader_off_under_load_with(cluster: &TestCluster, cut: impl Fn(u64, &[u64]) -> Filter) {
    let leader = cluster.leader().await;
    let history = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients = spawn_clients(cluster, "ticks", 6, Arc::clone(&history), Arc::clone(&stop));
    let answered = |history: &Arc<Mutex<Vec<Op>>>| history.lock().expect("history").len();
    fixtures::wait_until(CATCH_UP_LIMIT, "takes answered before the cut", || (answered(&history) >= 50).then_some(()))
        .await;

    let others: Vec<u64> = ALL.into_iter().filter(|id| *id != leader).collect();
    tracing::info!(leader, "--- cut the leader off; clients keep asking every node");
    cluster.router.add_filter("cut", cut(leader, &others));
    let new = cluster.leader_other_than(leader).await;
    let before = answered(&history);
    fixtures::wait_until(CATCH_UP_LIMIT, "takes answered by the new leader", || {
        (answered(&history) >= before + 50).then_some(())
    })
    .await;

    tracing::info!(new, "--- heal");
    cluster.router.remove_filter("cut");
    let before = answered(&history);
    fixtures::wait_until(CATCH_UP_LIMIT, "takes answered after healing", || {
        (answered(&history) >= before + 50).then_some(())
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for client in clients {
        client.await.expect("client task");
    }
    let history = history.lock().expect("history").clone();
    let by_old_leader_during_cut = history.iter().filter(|op| op.node == leader).count();
    tracing::info!(ops = history.len(), by_old_leader_during_cut, "history recorded");
    let violations = real_time_violations(&history);
    assert!(violations.is_empty(), "{} violations, first: {:?}", violations.len(), violations.first());
    cluster.assert_invariants();
}
