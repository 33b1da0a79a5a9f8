//! A monotonic tag and time sequences under a partition: clients take IDs
//! of a monotonic tag (each node's `Monotonic::take`) and time sequences (each node's
//! `Timeseq`) on every node while the leader is cut off in a minority, and after healing. The
//! histories they record are judged by `leafraft-history`, the checkers the chaos runner runs: no
//! ID twice, monotonic answers in real-time order, no time sequence twice.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use leafraft_history::duplicates;
use leafraft_history::overlapping_ranges;
use leafraft_history::Handed;
use leafraft_state::NodeId;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::fixtures;
use crate::fixtures::cluster::running;
use crate::fixtures::cluster::CATCH_UP_LIMIT;
use crate::fixtures::TestCluster;
use crate::t60_monotonic::create_monotonic;
use crate::t60_monotonic::real_time_violations;
use crate::t60_monotonic::Op;

const ALL: [u64; 3] = [1, 2, 3];
const TAG: &str = "ticks";
const NAMESPACE: &str = "orders";
/// How long one request may take before its client gives up on it (its outcome is unknown).
const REQUEST_LIMIT: Duration = Duration::from_secs(3);
/// How long a client pauses after a refused request before it asks the next node.
const RETRY_PAUSE: Duration = Duration::from_millis(5);
/// How long a time-sequence client pauses after an answer: served from held ranges without Raft,
/// an unpaced loop would take the test machine's cores from the nodes.
const TIMESEQ_PACE: Duration = Duration::from_millis(2);

/// One answered time-sequence request: the node asked, when it was sent, and its IDs as
/// (shard, second, sequence).
#[derive(Debug, Clone)]
struct Served {
    node: NodeId,
    sent: Instant,
    ids: Vec<(u64, u64, u64)>,
}

/// What the clients recorded, and the flag that stops them.
#[derive(Default)]
struct Histories {
    takes: Mutex<Vec<Op>>,
    timeseq: Mutex<Vec<Served>>,
    stop: AtomicBool,
}

impl Histories {
    /// Takes answered by a node of `nodes`, sent at or after `since`.
    fn takes(&self, nodes: &[NodeId], since: Instant) -> usize {
        let takes = self.takes.lock().expect("takes");
        takes.iter().filter(|op| nodes.contains(&op.node) && op.sent >= since).count()
    }

    /// Time-sequence requests answered by a node of `nodes`, sent at or after `since`.
    fn timeseq(&self, nodes: &[NodeId], since: Instant) -> usize {
        let served = self.timeseq.lock().expect("time sequences");
        served.iter().filter(|op| nodes.contains(&op.node) && op.sent >= since).count()
    }

    /// Waits until nodes of `nodes` answered `takes` takes and `timeseq` time-sequence requests
    /// sent at or after `since`.
    async fn wait_for(&self, nodes: &[NodeId], since: Instant, (takes, timeseq): (usize, usize), what: &str) {
        fixtures::wait_until(CATCH_UP_LIMIT, what, || {
            (self.takes(nodes, since) >= takes && self.timeseq(nodes, since) >= timeseq).then_some(())
        })
        .await;
    }
}

/// The running node a client asks next, in turn (`round` counts its requests), or `None` after a
/// short pause while no node runs.
async fn next_node(nodes: &fixtures::cluster::Nodes, round: &mut u64) -> Option<(NodeId, fixtures::cluster::Running)> {
    let running = running(nodes);
    let Some(picked) = running.get(*round as usize % running.len().max(1)) else {
        tokio::time::sleep(RETRY_PAUSE).await;
        return None;
    };
    *round += 1;
    Some(picked.clone())
}

/// `n_clients` clients taking 3 IDs of `TAG` through every running node's
/// `Monotonic::take` in turn, recording each answered take (also in the oracle).
fn spawn_takers(cluster: &TestCluster, n_clients: u64, histories: &Arc<Histories>) -> Vec<JoinHandle<()>> {
    (0..n_clients)
        .map(|client| {
            let (nodes, oracle, histories) = (cluster.nodes(), Arc::clone(&cluster.oracle), Arc::clone(histories));
            tokio::spawn(async move {
                let mut round = client;
                while !histories.stop.load(SeqCst) {
                    let Some((node, running)) = next_node(&nodes, &mut round).await else { continue };
                    let sent = Instant::now();
                    match tokio::time::timeout(REQUEST_LIMIT, running.monotonic.take(TAG, 3)).await {
                        Ok(Ok(ranges)) => {
                            let ids: Vec<(u64, u64)> = ranges.iter().map(|r| (r.start, r.end)).collect();
                            oracle.record_served(TAG, &ids);
                            let op = Op { node, sent, answered: Instant::now(), ids };
                            histories.takes.lock().expect("takes").push(op);
                        }
                        Ok(Err(_)) => tokio::time::sleep(RETRY_PAUSE).await,
                        Err(_) => {}
                    }
                }
            })
        })
        .collect()
}

/// `n_clients` clients asking every running node's `Timeseq` in turn for 20 time sequences of
/// `NAMESPACE` (shard 0 or 1, so nodes share shards), recording each answered request, paced.
fn spawn_timeseq_clients(cluster: &TestCluster, n_clients: u64, histories: &Arc<Histories>) -> Vec<JoinHandle<()>> {
    (0..n_clients)
        .map(|client| {
            let (nodes, histories) = (cluster.nodes(), Arc::clone(histories));
            tokio::spawn(async move {
                let mut round = client;
                while !histories.stop.load(SeqCst) {
                    let Some((node, running)) = next_node(&nodes, &mut round).await else { continue };
                    let sent = Instant::now();
                    let asked = running.timeseq.next_ids(NAMESPACE, client % 2, 20);
                    match tokio::time::timeout(REQUEST_LIMIT, asked).await {
                        Ok(Ok(parts)) => {
                            let ids = parts.iter().map(|p| (p.shard, p.second, p.sequence)).collect();
                            histories.timeseq.lock().expect("time sequences").push(Served { node, sent, ids });
                            tokio::time::sleep(TIMESEQ_PACE).await;
                        }
                        Ok(Err(_)) => tokio::time::sleep(RETRY_PAUSE).await,
                        Err(_) => {}
                    }
                }
            })
        })
        .collect()
}

/// Judges the histories with the shared checkers: monotonic takes in real-time order and no ID
/// of them twice, no time sequence twice.
fn check(takes: &[Op], timeseq: &[Served]) {
    let violations = real_time_violations(takes);
    assert!(violations.is_empty(), "{} violations, first: {:?}", violations.len(), violations.first());

    let mut ranges: Vec<Handed> = takes
        .iter()
        .enumerate()
        .flat_map(|(op, take)| take.ids.iter().map(move |&(start, end)| Handed { start, end, op }))
        .collect();
    let mut twice = Vec::new();
    overlapping_ranges(&mut ranges, |a, b| twice.push(format!("{a:?} and {b:?}")));
    assert!(twice.is_empty(), "{} monotonic ranges overlap, first: {:?}", twice.len(), twice.first());

    let mut ids: Vec<((u64, u64, u64), usize)> =
        timeseq.iter().enumerate().flat_map(|(op, served)| served.ids.iter().map(move |&id| (id, op))).collect();
    let mut twice = Vec::new();
    duplicates(&mut ids, |id, a, b| {
        twice.push(format!("{id:?} by node {} and node {}", timeseq[a].node, timeseq[b].node))
    });
    assert!(twice.is_empty(), "{} time sequences served twice, first: {:?}", twice.len(), twice.first());
}

/// The leader is cut off in a minority while clients take monotonic IDs and time sequences from
/// every node; the majority elects a leader that serves both; after healing every node serves
/// both again. No monotonic answer comes after a larger one in real time, and nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monotonic_tag_and_time_sequences_stay_correct_across_a_partition() {
    fixtures::run(async {
        let cluster = TestCluster::new(3).await;
        let leader = cluster.leader().await;
        create_monotonic(&cluster, TAG).await;
        cluster.create_namespace(NAMESPACE).await;
        let histories = Arc::new(Histories::default());
        let mut clients = spawn_takers(&cluster, 4, &histories);
        clients.extend(spawn_timeseq_clients(&cluster, 3, &histories));
        histories.wait_for(&ALL, Instant::now(), (30, 10), "answers before the cut").await;

        let others: Vec<NodeId> = ALL.into_iter().filter(|id| *id != leader).collect();
        tracing::info!(leader, "--- cut the leader off in a minority; clients keep asking every node");
        cluster.router.partition(&[leader], &others);
        let cut = Instant::now();
        let new = cluster.leader_other_than(leader).await;
        histories.wait_for(&others, Instant::now(), (30, 10), "the majority's answers during the cut").await;

        tracing::info!(new, "--- heal");
        cluster.router.heal();
        let healed = Instant::now();
        histories.wait_for(&[leader], healed, (1, 1), "the old leader's node to answer again").await;
        histories.wait_for(&ALL, healed, (30, 10), "answers after healing").await;

        histories.stop.store(true, SeqCst);
        for client in clients {
            client.await.expect("client task");
        }
        let takes = histories.takes.lock().expect("takes").clone();
        let timeseq = histories.timeseq.lock().expect("time sequences").clone();
        let (takes_in_cut, timeseq_in_cut) = (
            histories.takes(&[leader], cut) - histories.takes(&[leader], healed),
            histories.timeseq(&[leader], cut) - histories.timeseq(&[leader], healed),
        );
        tracing::info!(
            takes = takes.len(),
            timeseq = timeseq.len(),
            takes_in_cut,
            timeseq_in_cut,
            "histories recorded (the last two: answered by the cut-off leader's node)"
        );
        check(&takes, &timeseq);
        cluster.assert_invariants();
        cluster.shutdown().await;
    })
    .await;
}
